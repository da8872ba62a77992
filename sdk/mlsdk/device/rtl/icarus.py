"""``mncore2:icarus``: the co-simulation top as Verilog, under cocotb on Icarus, in a child process.

On first use the top is exported to Verilog and compiled (:func:`.builds.build_icarus`, cached
under ``build/cosim``). Each session is a :class:`~.cocotb_session.CocotbSession` whose
simulator is cocotb's Icarus runner, started through :mod:`.simulator.launch_icarus`, with
cocotb's GPI clock driving ``clk`` (the server starts it).

:class:`IcarusDevice` is the device; :class:`IcarusSession` the simulator process it drives.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from mncore_hdl.arch import ArchConfig
from mncore_hdl.top.cosim_tb import TB_MODULE

from ...errors import DeviceNotAvailableError
from .builds import build_icarus
from .cocotb_session import SERVER_MODULE, CocotbSession
from .device import RtlDevice

__all__ = ["IcarusDevice", "IcarusSession", "LAUNCHER"]

#: The script that runs the cocotb server on a built Icarus design.
LAUNCHER = Path(__file__).parent / "simulator" / "launch_icarus.py"


class IcarusSession(CocotbSession):
    """One Icarus simulator process serving operations over a private Unix socket.

    Takes the parameters of :class:`~.cocotb_session.CocotbSession`.
    """

    kind = "icarus"
    label = "Icarus"
    #: The script that runs the cocotb server (a subclass may start another).
    launcher: str | Path = LAUNCHER

    def _build(self, say: Callable[[str], None]) -> Path:
        """The cocotb build folder of the testbench top (built on first use)."""
        return build_icarus(self.config, say)

    def _command(self, build_dir: Path, vcd: Path | None) -> tuple[list[str], dict[str, str]]:
        """The launcher script, which runs the cocotb server through cocotb's runner."""
        return [sys.executable, str(self.launcher)], {
            "MNCORE_COSIM_LAUNCH": json.dumps({
                "toplevel": TB_MODULE, "module": SERVER_MODULE, "build_dir": str(build_dir),
                "test_dir": str(self.test_dir), "vcd": str(vcd) if vcd else None})}


class IcarusDevice(RtlDevice):
    """``mncore2:icarus``: the memory system's RTL as Verilog, under cocotb on Icarus.

    Takes the parameters of :class:`~mlsdk.device.rtl.device.RtlDevice`. Raises
    DeviceNotAvailableError when Icarus (``vvp``) is not on PATH.
    """

    simulator = "icarus"

    def __init__(self, config: ArchConfig, name: str,
                 waves: str | os.PathLike[str] | None = None, calls: str | None = None,
                 wave_format: str | None = None):
        if shutil.which("vvp") is None:
            raise DeviceNotAvailableError(
                f"Device {name!r} needs Icarus Verilog (vvp), which is not on PATH; "
                "install it (apt-get install iverilog) or use mncore2:rtl")
        super().__init__(config, name, waves, calls, wave_format)

    def _open_session(self) -> IcarusSession:
        return IcarusSession(self.config, self.vcd_path, self._progress, self._say)
