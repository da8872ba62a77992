"""The supported-op set is public (``mlsdk.supported_ops()``) and ``docs/ops.md`` is current."""

from __future__ import annotations

import mlsdk
from mncore_compiler.aten import DECOMPOSED, HANDLERS
from mncore_compiler.capture import supported_torch_ops
from mncore_compiler.supported import REGENERATE, ops_markdown
from mncore_hdl.paths import repo_root

DOC = repo_root() / "docs" / "ops.md"


def test_supported_ops_is_public_and_is_the_registry() -> None:
    ops = mlsdk.supported_ops()
    assert "supported_ops" in mlsdk.__all__
    assert ops == sorted(ops) == supported_torch_ops() == sorted({*HANDLERS, *DECOMPOSED})
    assert "aten.addmm.default" in ops and "aten.mv.default" in ops


def test_docs_page_is_generated_from_the_registry() -> None:
    assert DOC.read_text(encoding="utf-8") == ops_markdown(), (
        f"docs/ops.md is stale: regenerate it with {REGENERATE}")


def test_docs_page_lists_every_op() -> None:
    text = ops_markdown()
    for key in supported_torch_ops():
        assert f"`{key.removeprefix('aten.')}`" in text, key
