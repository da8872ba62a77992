"""The converter with one behavioural memory per Group: the design its unit benches run."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from ..arch import ArchConfig
from ..memctrl.port import RequesterSignature
from .behavioural import BehaviouralMemory
from .converter import CONTROL_MEMBERS, LayoutConverter, forward_control
from .program import DEFAULT_BUFFER_LW

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
            **CONTROL_MEMBERS,
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.conv = conv = self.conv
        for g, mem in enumerate(self.mems):
            m.submodules[f"mem{g}"] = mem
            wiring.connect(m, wiring.flipped(self.host[g]), mem.ports[0])
            wiring.connect(m, conv.ports[g], mem.ports[1])
        forward_control(m, self, conv)
        return m
