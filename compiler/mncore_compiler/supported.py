"""The torch operations capture supports, read from the handler registry, and their docs page.

``python -m mncore_compiler.supported docs/ops.md`` writes ``docs/ops.md`` from the registry,
so the page cannot drift: ``tests/compiler/test_supported.py`` fails when it is stale.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from .aten import DECOMPOSED, HANDLERS

__all__ = ["ops_markdown", "supported_ops", "supported_torch_ops"]

#: The command that regenerates the page, as its header and the stale-page test say.
REGENERATE = "./exec_with_env.sh python -m mncore_compiler.supported docs/ops.md"


def supported_torch_ops() -> list[str]:
    """Return the aten overloads capture translates, e.g. ``"aten.add.Tensor"``, sorted."""
    return sorted({*HANDLERS, *DECOMPOSED})


def supported_ops() -> list[str]:
    """Return the torch (aten) operations a compiled function may use, sorted.

    Each entry is an aten overload as torch traces it (``"aten.convolution.default"``): what
    ``torch.nn`` modules and functions decompose into. The in-place (``add_``) and ``out=``
    forms of each are supported too. ``docs/ops.md`` lists the same set by role.

    Returns
    -------
    list of str
        The overload names, ``"aten.<op>.<overload>"``.
    """
    return supported_torch_ops()


def _by_role() -> dict[str, list[str]]:
    roles: dict[str, list[str]] = defaultdict(list)
    for key, handler in HANDLERS.items():
        roles[handler.__module__.rsplit(".", 1)[-1]].append(key)
    return {role: sorted(keys) for role, keys in sorted(roles.items())}


def _names(keys: Sequence[str]) -> str:
    return ", ".join(f"`{key.removeprefix('aten.')}`" for key in keys)


def ops_markdown() -> str:
    """Return ``docs/ops.md``: every supported aten overload, by the handler file that
    translates it, then those captured through torch's decompositions."""
    lines = [
        "# Supported torch operations",
        "",
        "<!-- Generated from the compiler's registries; do not edit. Regenerate with",
        f"     {REGENERATE} -->",
        "",
        f"A compiled function may use these {len(supported_torch_ops())} aten overloads (what "
        "torch's modules and functions trace to), and the in-place (`add_.Tensor`) and "
        "`out=` forms of each. `mlsdk.supported_ops()` returns the same list. A function that "
        "uses anything else fails to compile with one `UnsupportedOperationError` listing "
        "every unsupported op, each with the source line that produced it.",
        "",
        "## Translated by a handler",
        "",
        "| role (`mncore_compiler/aten/<role>.py`) | overloads |",
        "|---|---|",
    ]
    lines += [f"| `{role}` | {_names(keys)} |" for role, keys in _by_role().items()]
    lines += [
        "",
        "## Through torch's decompositions",
        "",
        "Captured through torch.export's default decomposition of each, into the ops above.",
        "",
        _names(sorted(DECOMPOSED)) if DECOMPOSED else "(none)",
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    """Write the page to ``argv[0]`` (or print it)."""
    text = ops_markdown()
    if argv:
        Path(argv[0]).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
