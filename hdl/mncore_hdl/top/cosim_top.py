"""The co-simulation top: the memory system, the input-descriptor table and a cycle counter.

This is the design ``mncore2:rtl`` (Amaranth's simulator) and ``mncore2:icarus`` (its Verilog
under cocotb) run. It adds to :class:`~mncore_hdl.top.system.MemorySystem` only what the runtime
needs to execute the command stream: the descriptor registers ``Bind`` writes (one register
write per relocation) and ``Launch`` reads its input addresses from, and a free-running cycle
counter that both simulators read to measure cycles.
"""

from __future__ import annotations

import os
from pathlib import Path

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from ..contracts.cosim import CYCLE, CYCLE_BITS, DESC_PORTS, SYSTEM_INSTANCE
from ..converter.converter import forward_control
from ..descriptors import DESCRIPTOR_BITS, DESCRIPTOR_SLOTS
from ..tooling.verilog import export_verilog
from .system import MemorySystem

__all__ = ["CosimTop", "CYCLE_BITS", "export_cosim_top"]


class CosimTop(wiring.Component):
    """:class:`MemorySystem` plus the input-descriptor register table and a cycle counter.

    Every port of the memory system is passed through under the same name (``host[g]``,
    ``compute[g]``, ``reg_*``, ``busy``, converter counters, ``mc_csr_*``, ``mc_idle``, ...).

    Parameters
    ----------
    config : ArchConfig
        The chip (``MNCORE2_SIM`` for the RTL backends).

    Attributes
    ----------
    desc_index, desc_wdata, desc_we : Signal, in
        Write port of the table: at a clock edge with ``desc_we``, slot ``desc_index`` takes
        ``desc_wdata`` (see :mod:`mncore_hdl.descriptors` for the word's fields).
    desc_rdata : Signal, out
        Slot ``desc_index`` (combinational).
    cycle : Signal(48), out
        Clock cycles since reset.
    """

    def __init__(self, config: ArchConfig):
        if not isinstance(config, ArchConfig):
            raise TypeError(f"Config must be an ArchConfig, not {config!r}")
        self.config = config
        self.system = MemorySystem(config)
        members = dict(self.system.signature.members)
        members.update({name: In(bits) if direction == "in" else Out(bits)
                        for name, (direction, bits) in DESC_PORTS.items()})
        members[CYCLE] = Out(CYCLE_BITS)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules[SYSTEM_INSTANCE] = system = self.system
        groups = self.config.groups
        for g in range(groups):
            wiring.connect(m, wiring.flipped(self.host[g]), system.host[g])
            wiring.connect(m, wiring.flipped(self.compute[g]), system.compute[g])
            m.d.comb += [system.mc_csr_addr[g].eq(self.mc_csr_addr[g]),
                         self.mc_csr_rdata[g].eq(system.mc_csr_rdata[g])]
        forward_control(m, self, system)
        m.d.comb += [self.mc_error.eq(system.mc_error), self.mc_idle.eq(system.mc_idle)]

        # -- input-descriptor table --------------------------------------------------------
        # a memory, not 64 registers: a simulator then stores one slot per write and reads
        # one, where the registers' next values were all computed at every clock edge
        m.submodules.desc = table = Memory(shape=DESCRIPTOR_BITS, depth=DESCRIPTOR_SLOTS,
                                           init=[])
        write, read = table.write_port(), table.read_port(domain="comb")
        m.d.comb += [write.addr.eq(self.desc_index), write.data.eq(self.desc_wdata),
                     write.en.eq(self.desc_we), read.addr.eq(self.desc_index),
                     self.desc_rdata.eq(read.data)]

        # -- cycle counter -----------------------------------------------------------------
        m.d.sync += self.cycle.eq(self.cycle + 1)
        return m


def export_cosim_top(config: ArchConfig, build_dir: str | os.PathLike[str] = "build/verilog"
                     ) -> Path:
    """Verilog of :class:`CosimTop` for ``config`` (module ``cosim_top``), cached by the
    sources the design imports."""
    meta = {"component": "CosimTop", "config": config.to_dict()}
    return export_verilog(lambda: CosimTop(config), "cosim_top", meta, build_dir,
                          design=CosimTop)
