"""Design-space sweeps of the memory system: a spec of parameters, run in-process or on Ray."""

from .execute import SweepResult, ray_available, run_point, run_sweep
from .spec import BACKENDS, FIGURES, Point, SweepSpec, known_fields, load_spec, resolve
from .store import ResultStore, point_key
from .workload import Workload

__all__ = ["BACKENDS", "FIGURES", "Point", "ResultStore", "SweepResult", "SweepSpec",
           "Workload", "known_fields", "load_spec", "point_key", "ray_available", "resolve",
           "run_point", "run_sweep"]
