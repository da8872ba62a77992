"""The seed documents' sample program: where the documents are, and the program's text.

The folder is ``$MNCORE_SHARED_DIR/seeds`` (by default ``shared/seeds`` beside the checkout).
"""

from __future__ import annotations

from pathlib import Path

from ..paths import CHECKOUT
from ..settings import SDK

__all__ = ["SHARED", "SUCCESS", "extract_sample_program", "seed_documents"]

#: The folder holding ``seeds/``.
SHARED = SDK["MNCORE_SHARED_DIR"].get() or (CHECKOUT or Path.cwd()).parent / "shared"
#: The last line the sample program prints when it succeeds.
SUCCESS = "producer -> consumer direct-use succeeded"


def extract_sample_program(text: str) -> str:
    """The Python listing of a seed document: everything after its 'Listing ...' line."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Listing "):
            return "\n".join(lines[i + 1:]).strip() + "\n"
    raise ValueError("the seed document has no 'Listing' line before its sample program")


def seed_documents(marker: str = "io_spec_constraints") -> list[Path]:
    """The seed documents (``SHARED/seeds/*.txt``, sorted) whose text contains ``marker``."""
    folder = SHARED / "seeds"
    if not folder.is_dir():
        return []
    return [p for p in sorted(folder.glob("*.txt")) if marker in p.read_text()]
