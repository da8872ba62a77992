"""FR-FCFS choice of the port for the next column command: ready row hits first, then oldest."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from .signatures import BankStateSignature, HeadSignature, check_config_and_ports

__all__ = ["FrFcfs", "WAIT_BITS"]

#: Width of each port's waiting-time counter (it saturates; ties go to the lower port).
WAIT_BITS = 8


class FrFcfs(wiring.Component):
    """First-ready, first-come first-served arbiter over the ports' head chunks.

    Each cycle ``grant`` names the eligible port with the highest key, compared as
    ``(starving, ready, same direction, waited)``:

    * *starving*: at least ``config.scheduler_starvation_cap`` column commands of other ports
      issued while this port's head was eligible; such a port goes before any row hit, so no
      head waits for more than ``cap + ports - 1`` younger issues;
    * *ready*: its column command could issue this cycle (row open, tRCD met, data bus free,
      the rank rules allow its direction); an out-of-window head is ready when the bus is;
    * *same direction*: a ready head of the direction of the last column command, so reads
      and writes come in groups and pay the bus turnarounds less often;
    * *waited*: cycles its head has been eligible (first come, first served).

    Each port's own chunks stay in order (its queue feeds one head), so read data returns in
    request order and read-after-write / write-after-write hold per port; across ports every
    access takes effect in column-command order, as with the in-order scheduler.

    Parameters
    ----------
    config : ArchConfig
        Geometry and ``scheduler_starvation_cap``.
    ports : int
        Number of requester ports.
    ahead : int
        Queued requests beyond the look-ahead in each port's ``HeadSignature``.

    Attributes
    ----------
    heads : In(HeadSignature).array(ports); banks : In(BankStateSignature).array(banks)
        The scheduler's views, read here to tell ready heads.
    requests : Signal(ports), in
        Port ``i``'s head chunk is eligible.
    bus_free, rd_allowed, wr_allowed : Signal, in
        As the scheduler's.
    advance : Signal, in
        The granted port's head issues this cycle (column command or out-of-window retire).
    grant, valid : Signal, out
        The chosen port, and whether any port is eligible.
    """

    def __init__(self, config: ArchConfig, ports: int, ahead: int = 0):
        check_config_and_ports(config, ports)
        self.config = config
        self.port_count = ports
        super().__init__({
            "heads": In(HeadSignature(config, ahead)).array(ports),
            "banks": In(BankStateSignature(config)).array(config.banks),
            "requests": In(ports),
            "bus_free": In(1),
            "rd_allowed": In(1),
            "wr_allowed": In(1),
            "advance": In(1),
            "grant": Out(range(ports)),
            "valid": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        n = self.port_count
        cb, bb = cfg.col_bits, cfg.bank_bits
        cap = cfg.scheduler_starvation_cap
        is_open = Array(bs.is_open for bs in self.banks)
        open_row = Array(bs.open_row for bs in self.banks)
        col_ready = Array(bs.col_ready for bs in self.banks)
        last_write = Signal()
        m.d.comb += self.valid.eq(self.requests.any())

        keys = []
        for i, h in enumerate(self.heads):
            bank = h.head_addr[cb:cb + bb] if bb else 0
            row = h.head_addr[cb + bb:]
            dir_ok = Mux(h.head_write, self.wr_allowed, self.rd_allowed)
            hit = is_open[bank] & (open_row[bank] == row) & col_ready[bank] & dir_ok
            ready = self.bus_free & (h.head_oow | hit)
            waited = Signal(WAIT_BITS, name=f"waited{i}")
            passed = Signal(range(cap + 1), name=f"passed{i}")
            served = self.advance & (self.grant == i)
            with m.If(~self.requests[i] | served):
                m.d.sync += [waited.eq(0), passed.eq(0)]
            with m.Else():
                with m.If(~waited.all()):
                    m.d.sync += waited.eq(waited + 1)
                with m.If(self.advance & (passed != cap)):
                    m.d.sync += passed.eq(passed + 1)
            same = ready & (h.head_write == last_write)
            key = Signal(WAIT_BITS + 3, name=f"key{i}")
            m.d.comb += key.eq(Cat(waited, same, ready, passed == cap))
            keys.append(key)

        # the highest key among eligible ports; ties go to the lower port
        best = Signal(range(n), name="best")
        best_key = Signal(WAIT_BITS + 3, name="best_key")
        chain_port, chain_key, chain_any = 0, keys[0], self.requests[0]
        for i in range(1, n):
            better = self.requests[i] & (~chain_any | (keys[i] > chain_key))
            chain_port = Mux(better, i, chain_port)
            chain_key = Mux(better, keys[i], chain_key)
            chain_any = chain_any | self.requests[i]
        m.d.comb += [best.eq(chain_port), best_key.eq(chain_key), self.grant.eq(best)]
        with m.If(self.advance):
            m.d.sync += last_write.eq(Array(h.head_write for h in self.heads)[self.grant])
        return m
