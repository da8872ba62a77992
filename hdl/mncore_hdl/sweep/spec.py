"""A sweep's specification: parameters by field name, a backend, figures; points from its grid."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..arch import ArchConfig, DramTiming
from . import adapter
from .workload import WORKLOAD_FIELDS, Workload

__all__ = ["BACKENDS", "FIGURES", "SweepSpec", "Point", "load_spec", "resolve", "known_fields",
           "MAX_POINTS", "MAX_SPEC_BYTES"]

#: The most points one spec may ask for (the grid's product); split a larger sweep.
MAX_POINTS = 100_000
#: The largest spec file read.
MAX_SPEC_BYTES = 1 << 20
#: A spec's name names its results folder: one path component, no hidden or parent names.
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")

#: Where a point runs: the analytic timing models, or the RTL bench on a simulator.
BACKENDS = ("model", "icarus", "verilator")
#: Figures a point records (a spec's ``figures`` chooses the columns of the table).
FIGURES = ("efficiency", "bound_ratio", "cycles", "converter_bytes", "area_bits", "wall_s")
#: The parameter that selects a named DRAM timing preset (``mncore_hdl.arch.TIMING_PRESETS``).
PRESET = "timing_preset"

_ARCH_FIELDS = tuple(f.name for f in dataclasses.fields(ArchConfig) if f.name != "timing")
_TIMING_FIELDS = tuple(f.name for f in dataclasses.fields(DramTiming))


def known_fields() -> dict[str, tuple[str, ...]]:
    """Every parameter name a spec may use, by where it goes."""
    return {"arch": _ARCH_FIELDS, "timing": _TIMING_FIELDS, "workload": WORKLOAD_FIELDS,
            "preset": (PRESET,)}


def _unknown(names: list[str]) -> ValueError:
    known = "; ".join(f"{where}: {', '.join(names)}" for where, names in known_fields().items())
    return ValueError(f"Unknown sweep parameter(s) {', '.join(map(repr, names))}; "
                      f"expected field names of ArchConfig, DramTiming or Workload ({known})")


def check_names(names: list[str]) -> None:
    """Raise a ValueError naming the known fields when any of ``names`` is none of them."""
    allowed = {n for group in known_fields().values() for n in group}
    bad = [n for n in names if n not in allowed]
    if bad:
        raise _unknown(bad)


def resolve(base: ArchConfig, params: dict[str, Any]) -> tuple[ArchConfig, Workload]:
    """The config and workload of one point: ``base`` with ``params`` applied by field name.

    A timing preset applies first, then DramTiming fields, then ArchConfig fields (so a point
    may set ``row_lw`` and ``burst_length`` together); the dataclasses validate the result.
    """
    check_names(list(params))
    timing = base.timing
    if PRESET in params:
        timing = adapter.preset_timing(params[PRESET])
    timing_changes = {k: v for k, v in params.items() if k in _TIMING_FIELDS}
    arch_changes = {k: v for k, v in params.items() if k in _ARCH_FIELDS}
    work = {k: v for k, v in params.items() if k in WORKLOAD_FIELDS}
    if "shape" in work:
        work["shape"] = tuple(work["shape"])
    if timing_changes:
        timing = dataclasses.replace(timing, **timing_changes)
    config = dataclasses.replace(base, timing=timing, **arch_changes)
    return config, Workload(**work)


@dataclass(frozen=True)
class Point:
    """One point of a sweep: its parameters (the grid's values merged over the spec's fixed
    ones), the resolved config and workload, and the backend."""

    params: dict[str, Any]
    config: ArchConfig
    workload: Workload
    backend: str

    def label(self, names: tuple[str, ...]) -> str:
        """``name=value`` for the parameters in ``names`` (the swept ones)."""
        return " ".join(f"{n}={self.params[n]}" for n in names if n in self.params)


@dataclass(frozen=True)
class SweepSpec:
    """What to sweep.

    Parameters
    ----------
    name : str
        Names the results folder (``build/sweeps/<name>``).
    grid : dict
        Parameter name -> list of values; the points are their Cartesian product. Names are
        fields of :class:`~mncore_hdl.arch.ArchConfig`, :class:`~mncore_hdl.arch.DramTiming`
        or :class:`~mncore_hdl.sweep.workload.Workload`, or ``timing_preset``.
    fixed : dict
        Parameters every point shares (same names).
    backend : str
        One of :data:`BACKENDS`.
    figures : tuple of str
        Columns of the printed table (every figure is recorded anyway).
    base_config : str
        The configuration parameters apply to: a name of ``adapter.BASE_CONFIGS``.
    timeout_s : float or None
        Wall-clock limit of one point; a point over it is recorded as a timeout.
    """

    name: str
    grid: dict[str, list[Any]]
    fixed: dict[str, Any] = field(default_factory=dict)
    backend: str = "model"
    figures: tuple[str, ...] = ("efficiency", "cycles", "wall_s")
    base_config: str = "MNCORE2_SIM"
    timeout_s: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ValueError(f"Sweep name must be 1 to 128 letters, digits, '_', '.' or '-' "
                             f"(not starting with '.' or '-': it names a folder), not "
                             f"{self.name!r}")
        if self.backend not in BACKENDS:
            raise ValueError(f"Sweep backend must be one of {', '.join(BACKENDS)}, "
                             f"not {self.backend!r}")
        if self.base_config not in adapter.BASE_CONFIGS:
            raise ValueError(f"base_config must be one of {', '.join(adapter.BASE_CONFIGS)}, "
                             f"not {self.base_config!r}")
        if not isinstance(self.grid, dict) or not isinstance(self.fixed, dict):
            raise ValueError("Sweep grid and fixed must be objects of parameter values, not "
                             f"{type(self.grid).__name__} and {type(self.fixed).__name__}")
        for name, values in self.grid.items():
            if not isinstance(values, list | tuple) or not values:
                raise ValueError(f"Grid parameter {name!r} must list at least one value, "
                                 f"not {values!r}")
        count = math.prod(len(v) for v in self.grid.values())
        if count > MAX_POINTS:
            raise ValueError(f"The sweep's grid has {count} points "
                             f"({' x '.join(str(len(v)) for v in self.grid.values())}); at most "
                             f"{MAX_POINTS} (MAX_POINTS) are run by one spec. Split it")
        timeout = self.timeout_s
        if timeout is not None and (not isinstance(timeout, int | float)
                                    or isinstance(timeout, bool)
                                    or not 0 < timeout <= 86400):
            raise ValueError(f"timeout_s must be None or a number of seconds in (0, 86400], "
                             f"not {timeout!r}")
        if isinstance(self.figures, str) or not isinstance(self.figures, list | tuple):
            raise ValueError(f"figures must be a list of names among {', '.join(FIGURES)}, "
                             f"not {self.figures!r}")
        check_names([*self.grid, *self.fixed])
        bad = [f for f in self.figures if f not in FIGURES]
        if bad:
            raise ValueError(f"Figures must be among {', '.join(FIGURES)}, not {bad}")
        object.__setattr__(self, "figures", tuple(self.figures))

    @property
    def swept(self) -> tuple[str, ...]:
        """The grid's parameter names, in spec order."""
        return tuple(self.grid)

    def points(self) -> list[Point]:
        """Every point of the grid, in row-major order of :attr:`grid` (errors name the point)."""
        base = adapter.BASE_CONFIGS[self.base_config]
        out = []
        for values in itertools.product(*self.grid.values()):
            params = {**self.fixed, **dict(zip(self.grid, values, strict=True))}
            try:
                config, workload = resolve(base, params)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"Sweep point {params} is invalid: {exc}") from exc
            out.append(Point(params, config, workload, self.backend))
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepSpec:
        """A spec from its JSON/TOML form (the dataclass fields as keys)."""
        allowed = {f.name for f in dataclasses.fields(cls)}
        bad = sorted(set(data) - allowed)
        if bad:
            raise ValueError(f"Unknown sweep spec key(s) {bad}; expected {sorted(allowed)}")
        if not isinstance(data, dict):
            raise ValueError(f"A sweep spec must be an object, not {type(data).__name__}")
        data = dict(data)
        grid = data.get("grid", {})
        if not isinstance(grid, dict):
            raise ValueError(f"Sweep grid must be an object, not {type(grid).__name__}")
        data["grid"] = {k: list(v) if isinstance(v, list | tuple) else v
                        for k, v in grid.items()}
        return cls(**data)


def load_spec(path: str | Path) -> SweepSpec:
    """Read a spec from a ``.json`` or ``.toml`` file."""
    path = Path(path)
    if path.is_file() and path.stat().st_size > MAX_SPEC_BYTES:
        raise ValueError(f"Sweep spec {path} holds {path.stat().st_size} bytes, more than "
                         f"{MAX_SPEC_BYTES} (MAX_SPEC_BYTES)")
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
            raise ValueError(f"Sweep spec {path} is not valid JSON ({exc})") from None
    elif path.suffix == ".toml":
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10
            raise ValueError(f"Reading {path} needs Python 3.11's tomllib; "
                             "write the spec as JSON instead") from None
        try:
            data = tomllib.loads(path.read_text())
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"Sweep spec {path} is not valid TOML ({exc})") from None
    else:
        raise ValueError(f"Sweep spec must be a .json or .toml file, not {path.name!r}")
    return SweepSpec.from_dict(data)
