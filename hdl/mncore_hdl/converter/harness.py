"""The converter with one behavioural memory per Group: the design its unit benches run."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from ..memctrl.port import RequesterSignature
from .behavioural import BehaviouralMemory
from .converter import LayoutConverter
from .program import DEFAULT_BUFFER_LW
from .regmap import REG_ADDR_BITS, REG_BITS

__all__ = ["ConverterHarness"]


class ConverterHarness(wiring.Component):
    """``LayoutConverter`` + ``config.groups`` :class:`BehaviouralMemory` s, each with a host port.

    Parameters
    ----------
    config : ArchConfig
    latency : int
        Read latency of the behavioural memories.
    buffer_lw, write_burst : int
        Passed to :class:`LayoutConverter`.
    init : sequence of sequences of int
        Initial contents per Group (for the Amaranth simulator; cocotb loads by back door).

    Attributes
    ----------
    host : In(RequesterSignature(config)).array(config.groups)
        A host port into each Group's memory (served before the converter).
    reg_* , busy, done, error, error_code, counters : as on :class:`LayoutConverter`.
    """

    def __init__(self, config: ArchConfig, latency: int = 8, buffer_lw: int = DEFAULT_BUFFER_LW,
                 write_burst: int = 32, init=()):
        self.config = config
        self.conv = LayoutConverter(config, buffer_lw, write_burst)
        init = list(init) + [()] * (config.groups - len(init))
        self.mems = [BehaviouralMemory(config, ports=2, latency=latency, init=init[g])
                     for g in range(config.groups)]
        super().__init__({
            "host": In(RequesterSignature(config)).array(config.groups),
            "reg_addr": In(REG_ADDR_BITS),
            "reg_wdata": In(REG_BITS),
            "reg_we": In(1),
            "reg_rdata": Out(REG_BITS),
            "busy": Out(1),
            "done": Out(1),
            "error": Out(1),
            "error_code": Out(4),
            "beats_read": Out(32),
            "beats_written": Out(32),
            "stall_cycles": Out(32),
            "busy_cycles": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.conv = conv = self.conv
        for g, mem in enumerate(self.mems):
            m.submodules[f"mem{g}"] = mem
            wiring.connect(m, wiring.flipped(self.host[g]), mem.ports[0])
            wiring.connect(m, conv.ports[g], mem.ports[1])
        m.d.comb += [conv.reg_addr.eq(self.reg_addr), conv.reg_wdata.eq(self.reg_wdata),
                     conv.reg_we.eq(self.reg_we), self.reg_rdata.eq(conv.reg_rdata)]
        for name in ("busy", "done", "error", "error_code", "beats_read", "beats_written",
                     "stall_cycles", "busy_cycles"):
            m.d.comb += getattr(self, name).eq(getattr(conv, name))
        return m
