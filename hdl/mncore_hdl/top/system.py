"""The memory-system top: one controller per Group, the layout converter, host and compute ports.

One Amaranth design that both Amaranth's simulator and Icarus (through
:func:`mncore_hdl.tooling.verilog.export_verilog`) run.
"""

from __future__ import annotations

import os
from pathlib import Path

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from ..contracts.cosim import CONTROLLER_INSTANCE
from ..contracts.counters import COUNTER_BITS
from ..contracts.memctrl import (
    COMPUTE_PORT,
    CONVERTER_PORT,
    CSR_ADDR_BITS,
    HOST_PORT,
    PORTS,
)
from ..converter.converter import CONTROL_MEMBERS, LayoutConverter, forward_control
from ..converter.program import DEFAULT_BUFFER_LW
from ..memctrl.controller import MemoryController
from ..memctrl.port import RequesterSignature
from ..tooling.verilog import export_verilog

__all__ = ["MemorySystem", "HOST_PORT", "COMPUTE_PORT", "CONVERTER_PORT", "export_memory_system"]


class MemorySystem(wiring.Component):
    """``config.groups`` memory controllers, the layout converter and the requester ports.

    A host (the RTL devices' driver) drives it like this (every port index, register, port
    name and back-door path below is declared in :mod:`mncore_hdl.contracts`):

    1. write and read DRAM of Group ``g`` through ``host[g]`` (a :class:`RequesterSignature`
       port: ``req`` = address/write/length, ``wdata`` beats, ``rdata`` beats). In simulation
       the backing store of Group ``g`` is also reachable by back door
       (``contracts.cosim.backing_store("system", g)``);
    2. program the converter through ``reg_addr``/``reg_wdata``/``reg_we`` with the values of
       :func:`mncore_hdl.converter.regmap.registers` (from
       :func:`mncore_hdl.converter.program.compile_program` of a ``ConversionDescriptor``), then
       write ``CTRL_START`` to register ``CTRL``;
    3. wait for ``done``; ``error``/``error_code`` say whether it ran, the converter counters how
       much it moved and how long it took (``busy_cycles``).

    ``compute[g]`` is the compute engine's port into Group ``g``. The converter has a port into
    every controller (port ``CONVERTER_PORT``), so it reads one Group and writes another
    with no crossbar. Every controller's own counters are readable through ``mc_csr_addr[g]``
    / ``mc_csr_rdata[g]`` (see :mod:`mncore_hdl.contracts.memctrl`), its out-of-window flag on
    ``mc_error[g]``.

    Parameters
    ----------
    config : ArchConfig
        The only source of geometry and timing (``MNCORE2_SIM`` for the RTL).
    buffer_lw, write_burst : int
        Converter buffer and write burst (see :class:`LayoutConverter`).
    """

    def __init__(self, config: ArchConfig, buffer_lw: int = DEFAULT_BUFFER_LW,
                 write_burst: int = 32):
        if not isinstance(config, ArchConfig):
            raise TypeError(f"Config must be an ArchConfig, not {config!r}")
        self.config = config
        self.converter = LayoutConverter(config, buffer_lw, write_burst)
        self.controllers = [MemoryController(config, ports=len(PORTS))
                            for _ in range(config.groups)]
        groups = config.groups
        super().__init__({
            "host": In(RequesterSignature(config)).array(groups),
            "compute": In(RequesterSignature(config)).array(groups),
            **CONTROL_MEMBERS,
            "mc_csr_addr": In(CSR_ADDR_BITS).array(groups),
            "mc_csr_rdata": Out(COUNTER_BITS).array(groups),
            "mc_error": Out(groups),
            "mc_idle": Out(groups),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.conv = conv = self.converter
        for g, mc in enumerate(self.controllers):
            m.submodules[CONTROLLER_INSTANCE.format(g=g)] = mc
            wiring.connect(m, wiring.flipped(self.host[g]), mc.ports[HOST_PORT])
            wiring.connect(m, wiring.flipped(self.compute[g]), mc.ports[COMPUTE_PORT])
            wiring.connect(m, conv.ports[g], mc.ports[CONVERTER_PORT])
            m.d.comb += [
                mc.csr_addr.eq(self.mc_csr_addr[g]),
                self.mc_csr_rdata[g].eq(mc.csr_rdata),
                self.mc_error[g].eq(mc.error),
                self.mc_idle[g].eq(mc.idle),
            ]
        forward_control(m, self, conv)
        return m


def export_memory_system(config: ArchConfig,
                         build_dir: str | os.PathLike[str] = "build/verilog") -> Path:
    """Verilog of :class:`MemorySystem` for ``config`` (module ``mem_system``; about 15 s on a
    cache miss), cached by the sources the design imports."""
    meta = {"component": "MemorySystem", "config": config.to_dict()}
    return export_verilog(lambda: MemorySystem(config), "mem_system", meta, build_dir,
                          design=MemorySystem)
