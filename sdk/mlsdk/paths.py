"""Where the SDK finds its files and puts what it builds: the one module of ``mlsdk`` that
knows the source tree's shape (it leans on ``mncore_hdl.paths`` for the checkout and the build
folder, so both packages agree on them).

- :data:`CHECKOUT`: the source checkout, or None when the packages run from a wheel;
- :func:`repo_root`: the checkout, or an error saying that one is needed;
- :data:`BUILD_ROOT`: ``$MNCORE_BUILD_DIR``, else ``build/`` in the checkout, else the user's
  cache folder (``mncore_hdl.paths``);
- :func:`source_roots`: the folders holding ``mlsdk``, ``mncore_compiler`` and ``mncore_hdl``,
  put first on the ``PYTHONPATH`` of a process the kit starts, so that it imports these very
  packages (a checkout's, or the wheel's site-packages) and not another copy.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from mncore_hdl.paths import BUILD_ROOT, CHECKOUT, repo_root

__all__ = ["BUILD_ROOT", "CHECKOUT", "PACKAGE_DIR", "repo_root", "source_roots"]

PACKAGE_DIR = Path(__file__).resolve().parent


def source_roots() -> list[Path]:
    """The folders the three packages are imported from (without importing them), each once,
    in the order mlsdk, mncore_compiler, mncore_hdl."""
    roots: list[Path] = []
    for name in ("mlsdk", "mncore_compiler", "mncore_hdl"):
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        root = Path(spec.origin).resolve().parent.parent
        if root not in roots:
            roots.append(root)
    return roots
