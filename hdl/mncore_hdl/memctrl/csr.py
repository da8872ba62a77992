"""Performance counters of the controller and the small register read port that exposes them.

The register map is declared in :mod:`mncore_hdl.contracts.memctrl` (``register_map``).
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..contracts.counters import COUNTER_BITS
from ..contracts.memctrl import CSR_ADDR_BITS, register_map

__all__ = ["StatsRegisters"]


class StatsRegisters(wiring.Component):
    """Controller counters (32-bit, wrapping) and a read-only register port.

    ``csr_rdata`` shows the register at ``csr_addr`` one cycle later; unknown addresses read 0.

    Parameters
    ----------
    ports : int
        Number of requester ports whose counters are mapped.
    error_bits : int
        Width of the offending-address register.
    """

    def __init__(self, ports: int, error_bits: int):
        self.ports = ports
        self.regs = register_map(ports)
        super().__init__({
            "hit": In(1),
            "miss": In(1),
            "conflict": In(1),
            "refresh": In(1),
            "refresh_cycle": In(1),
            "busy": In(1),
            "error": In(1),
            "error_addr": In(error_bits),
            "read_beats": In(COUNTER_BITS).array(ports),
            "write_beats": In(COUNTER_BITS).array(ports),
            "stall_cycles": In(COUNTER_BITS).array(ports),
            "csr_addr": In(CSR_ADDR_BITS),
            "csr_rdata": Out(COUNTER_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        counters = {}
        strobes = {
            "cycles": 1,
            "busy_cycles": self.busy,
            "row_hits": self.hit,
            "row_misses": self.miss,
            "row_conflicts": self.conflict,
            "refreshes": self.refresh,
            "refresh_cycles": self.refresh_cycle,
        }
        for name, strobe in strobes.items():
            cnt = Signal(COUNTER_BITS, name=name)
            m.d.sync += cnt.eq(cnt + strobe)
            counters[name] = cnt
        counters["error"] = self.error
        counters["error_addr"] = self.error_addr
        for p in range(self.ports):
            counters[f"port{p}.read_beats"] = self.read_beats[p]
            counters[f"port{p}.write_beats"] = self.write_beats[p]
            counters[f"port{p}.stall_cycles"] = self.stall_cycles[p]

        with m.Switch(self.csr_addr):
            for name, addr in self.regs.items():
                with m.Case(addr):
                    m.d.sync += self.csr_rdata.eq(counters[name])
            with m.Default():
                m.d.sync += self.csr_rdata.eq(0)
        return m
