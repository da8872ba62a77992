"""Where the hardware package finds its files and puts what it builds: the one module of
``mncore_hdl`` that knows the source tree's shape (``mlsdk.paths`` is the SDK's).

- :data:`PACKAGE_DIR`: this package's folder (its Python sources, ``verilator_main.cpp``);
- :data:`SOURCE_ROOT`: the folder that holds the package (``hdl/`` in a checkout,
  ``site-packages`` in an installed wheel);
- :data:`CHECKOUT`: the source checkout (``sim/``, ``bench/``, ``examples/`` beside the
  packages), or None when the package runs from an installed wheel;
- :func:`repo_root`: :data:`CHECKOUT`, or an error saying that a checkout is needed (tests,
  ``bench/`` and ``scripts/`` use it);
- :data:`BUILD_ROOT`: every build product goes below it: ``$MNCORE_BUILD_DIR``, else ``build/``
  in the checkout, else ``mncore-cosim/build`` in the user's cache folder.
"""

from __future__ import annotations

from pathlib import Path

from .settings import HDL

__all__ = ["BUILD_ROOT", "CHECKOUT", "PACKAGE_DIR", "SOURCE_ROOT", "build_root", "checkout",
           "repo_root"]

PACKAGE_DIR = Path(__file__).resolve().parent
SOURCE_ROOT = PACKAGE_DIR.parent


def checkout(source_root: Path = SOURCE_ROOT) -> Path | None:
    """The checkout a source root sits in (the folder with ``pyproject.toml`` and ``sim/``
    one above it), or None for an installed package."""
    top = source_root.parent
    if (top / "pyproject.toml").is_file() and (top / "sim").is_dir():
        return top
    return None


CHECKOUT = checkout()


def repo_root() -> Path:
    """The source checkout, for what only a checkout has (``bench/``, ``docs/``, ``examples/``,
    the tests); RuntimeError for an installed package, which ships none of them."""
    if CHECKOUT is None:
        raise RuntimeError("this needs a source checkout of the kit (bench/, docs/, examples/, "
                           f"tests/); {SOURCE_ROOT} holds an installed package")
    return CHECKOUT


def build_root() -> Path:
    """Where build products go (read when called, so a test may point it elsewhere)."""
    chosen = HDL["MNCORE_BUILD_DIR"].get()
    if chosen is not None:
        return Path(chosen).resolve()
    if CHECKOUT is not None:
        return CHECKOUT / "build"
    cache = HDL["XDG_CACHE_HOME"].get() or Path.home() / ".cache"
    return cache / "mncore-cosim" / "build"


BUILD_ROOT = build_root()
