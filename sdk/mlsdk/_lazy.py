"""Package attributes that load their module on first use (PEP 562), for the package inits."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: Mapping[str, str], names: Sequence[str],
                 namespace: MutableMapping[str, Any]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``exports`` maps a public name to the module
    (relative to the package) that defines it, or to the submodule of that name itself
    (``"storage": ".storage"``). A loaded name is kept in ``namespace`` (the package's
    globals), so it is looked up once.
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        loaded = importlib.import_module(module, package)
        if module == f".{name}":
            return loaded
        value = getattr(loaded, name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *names})

    return __getattr__, __dir__
