"""FR-FCFS choice of the port for the next column command: ready row hits first, then oldest."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from .signatures import BankStateSignature, HeadSignature, check_config_and_ports

__all__ = ["FrFcfs"]


class FrFcfs(wiring.Component):
    """First-ready, first-come first-served arbiter over the ports' head chunks.

    Each cycle ``grant`` names the eligible port of the best class, and the oldest within it
    (first come, first served: an age matrix, ``ages``, keeps the order in which the ports'
    heads became eligible, exactly and for ever; heads that did in the same cycle go by port
    number). The classes, best first:

    * *starving*: at least ``config.scheduler_starvation_cap`` column commands of other ports
      issued while this port's head was eligible; such a port goes before any row hit, ready
      or not, and the starving ports go oldest first, so no head waits for more than
      :func:`~mncore_hdl.formal.arbiter.passes_allowed` issues of other ports (proved for all
      time in ``formal/arbiter.py``). Two earlier orders let a head wait for ever, each found
      by that proof: ready ports first among the starving too (two ready ports re-starving in
      turn pass a third, with a cap of ``ports - 2`` or less), and the age kept as a
      saturating 8-bit count of cycles (after 255 cycles with no issue, saturated ports tied
      and went by port number; found with the counter narrowed to 2 bits);
    * *ready* and of the *same direction* as the last column command, so reads and writes
      come in groups and pay the bus turnarounds less often;
    * *ready*: its column command could issue this cycle (row open, tRCD met, data bus free,
      the rank rules allow its direction); an out-of-window head is ready when the bus is;
    * the rest.

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
        # state, exposed for the proofs' invariants (formal/arbiter.py): each port's issues
        # of others while it waits (saturating at the cap), and the age matrix: for i < j,
        # ``ages[i, j]`` is high when port i's request is older than port j's (or as old)
        self.passed = [Signal(range(config.scheduler_starvation_cap + 1), name=f"passed{i}")
                       for i in range(ports)]
        self.ages = {(i, j): Signal(name=f"older{i}_{j}", init=1)
                     for i in range(ports) for j in range(i + 1, ports)}
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

        classes = []
        for i, h in enumerate(self.heads):
            bank = h.head_addr[cb:cb + bb] if bb else 0
            row = h.head_addr[cb + bb:]
            dir_ok = Mux(h.head_write, self.wr_allowed, self.rd_allowed)
            hit = is_open[bank] & (open_row[bank] == row) & col_ready[bank] & dir_ok
            ready = self.bus_free & (h.head_oow | hit)
            passed = self.passed[i]
            with m.If(self._restarts(i)):
                m.d.sync += passed.eq(0)
            with m.Elif(self.advance & (passed != cap)):
                m.d.sync += passed.eq(passed + 1)
            same = ready & (h.head_write == last_write)
            cls = Signal(3, name=f"class{i}")
            # a starving port's class is the top one whatever its readiness: were ready ports
            # first among the starving, ready ones re-starving in turn could pass one that
            # is not for ever
            m.d.comb += cls.eq(Mux(passed == cap, 0b100, Cat(same, ready, 0)))
            classes.append(cls)
        self._age_matrix(m)

        # the best class among eligible ports, the oldest within it
        best = Signal(range(n), name="best")
        chain_port, chain_cls, chain_any = Const(0, range(n)), classes[0], self.requests[0]
        for i in range(1, n):
            older = Cat(self.older(i, j) for j in range(n)).bit_select(chain_port, 1)
            better = Signal(name=f"better{i}")
            m.d.comb += better.eq(self.requests[i] & (
                ~chain_any | (classes[i] > chain_cls) | ((classes[i] == chain_cls) & older)))
            port = Signal(range(n), name=f"chain_port{i}")
            cls = Signal(3, name=f"chain_class{i}")
            m.d.comb += [port.eq(Mux(better, i, chain_port)),
                         cls.eq(Mux(better, classes[i], chain_cls))]
            chain_port, chain_cls, chain_any = port, cls, chain_any | self.requests[i]
        m.d.comb += [best.eq(chain_port), self.grant.eq(best)]
        with m.If(self.advance):
            m.d.sync += last_write.eq(Array(h.head_write for h in self.heads)[self.grant])
        return m

    def _restarts(self, i):
        """Port ``i``'s wait ends this cycle: it does not request, or it is served."""
        return ~self.requests[i] | (self.advance & (self.grant == i))

    def older(self, i, j):
        """Port ``i``'s request is older than port ``j``'s (``i == j``: 0)."""
        if i == j:
            return Const(0, 1)
        return self.ages[i, j] if i < j else ~self.ages[j, i]

    def _age_matrix(self, m):
        """First come, first served, exactly: a pair keeps its order while both wait; one
        whose wait ends becomes the younger; two whose waits both end are ordered by port."""
        for (i, j), age in self.ages.items():
            end_i, end_j = self._restarts(i), self._restarts(j)
            with m.If(end_i & end_j):
                m.d.sync += age.eq(1)
            with m.Elif(end_i):
                m.d.sync += age.eq(0)
            with m.Elif(end_j):
                m.d.sync += age.eq(1)
