"""The compiler's import discipline, read from the source: every import on top.

The layering itself is import-linter's job (``lint-imports``, contracts in ``pyproject.toml``)
and private names are ``tests/test_layering.py``'s; this checks what neither does: that nothing
in the compiler imports inside a function or at the bottom of a file (the ways a cycle used to
be dodged).
"""

from __future__ import annotations

import ast
from pathlib import Path

import mncore_compiler
import pytest

PACKAGE = Path(mncore_compiler.__file__).parent
SOURCES = sorted(PACKAGE.rglob("*.py"))


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
