"""Where compiled programs live: ``storage.path(...)`` names a codegen directory."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["StoragePath", "path"]


@dataclass(frozen=True)
class StoragePath:
    """A codegen directory: ``Context.compile`` writes the device program there and
    ``Context.load`` reads it back."""

    path: Path

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)


def path(location: str | os.PathLike[str]) -> StoragePath:
    """Name a codegen directory (created by the first compile into it)."""
    if isinstance(location, StoragePath):
        return location
    if not isinstance(location, (str, os.PathLike)) or not str(location):
        raise TypeError(f"storage.path() takes a non-empty path string, not {location!r}")
    return StoragePath(Path(location).expanduser())
