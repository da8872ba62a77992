"""Load a script of ``bench/`` as a module, for tests that run a short share of a bench."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from .examples import ROOT

__all__ = ["load_bench"]


def load_bench(name: str) -> ModuleType:
    """``bench/<name>.py`` as the module ``name`` (the bench folder is not a package).

    The module is registered in ``sys.modules`` under ``name`` before it runs (dataclasses
    look their module up there); a second call returns the same module.
    """
    if name in sys.modules:
        return sys.modules[name]
    if ROOT is None:
        raise FileNotFoundError(f"No bench script {name}.py: bench/ lives in a source "
                                "checkout of the kit, and these packages are installed")
    path = ROOT / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"No bench script {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
