"""The compiler's import discipline, read from the source: public names only, imports on top.

The layering itself is import-linter's job (``lint-imports``, contracts in ``pyproject.toml``);
these check what it does not: that no module imports another's ``_private`` names, and that
nothing imports inside a function (the way a cycle used to be dodged).
"""

from __future__ import annotations

import ast
from pathlib import Path

import mncore_compiler
import pytest

PACKAGE = Path(mncore_compiler.__file__).parent
TESTS = Path(__file__).parent
SOURCES = sorted(PACKAGE.rglob("*.py"))


def _private_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            module = "." * node.level + (node.module or "")
            names = [alias.name for alias in node.names]
            parts = [*module.split("."), *names]
        elif isinstance(node, ast.Import):
            parts = [part for alias in node.names for part in alias.name.split(".")]
            module = ""
        else:
            continue
        bad = [p for p in parts if p.startswith("_") and not p.startswith("__")]
        if bad:
            found.append(f"{path.name}:{node.lineno} imports {', '.join(bad)} from {module!r}")
    return found


@pytest.mark.parametrize("path", [*SOURCES, *sorted(TESTS.glob("*.py"))],
                         ids=lambda p: str(p.relative_to(p.parents[1])))
def test_no_private_names_are_imported(path: Path) -> None:
    assert _private_imports(path) == []


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_are_at_the_top_of_the_module(path: Path) -> None:
    tree = ast.parse(path.read_text(), str(path))
    top = {id(node) for node in tree.body}
    nested = [f"{path.name}:{node.lineno}" for node in ast.walk(tree)
              if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in top]
    assert nested == []
    code = [i for i, node in enumerate(tree.body)
            if not isinstance(node, (ast.Import, ast.ImportFrom, ast.Expr))]
    first_code = code[0] if code else len(tree.body)
    late = [f"{path.name}:{node.lineno}" for node in tree.body[first_code:]
            if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert late == []  # no bottom-of-file imports


def test_the_check_sees_a_private_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("from .ops.rules import _hidden\nimport mncore_compiler._aten\n")
    assert len(_private_imports(probe)) == 2
