"""Where compiled programs live: ``storage.path(...)`` names a codegen directory.

A :class:`StoragePath` is an ordinary path-like: ``open``, ``os.fspath``, ``pathlib.Path`` and
``torch.save`` accept it, and ``/`` joins a name to it and gives another StoragePath::

    outdir = storage.path("/tmp/run")
    context.compile(train_step, sample, outdir / "train_step")
    torch.save(state, outdir / "state.pt")
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["StoragePath", "path"]


@dataclass(frozen=True)
class StoragePath:
    """A codegen directory (or a file beside one): ``Context.compile`` writes the device
    program there and ``Context.load_codegen_dir`` reads it back.

    Attributes
    ----------
    path : pathlib.Path
        The location, with ``~`` expanded.

    Examples
    --------
    >>> out = storage.path("/tmp/run")
    >>> out / "train_step"
    StoragePath('/tmp/run/train_step')
    >>> open(out / "notes.txt", "w")  # doctest: +SKIP
    """

    path: Path

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"StoragePath({str(self.path)!r})"

    def __truediv__(self, other: str | os.PathLike[str]) -> StoragePath:
        """``storage.path(outdir) / "train_step"``: the same location joined with ``other``."""
        return StoragePath(_checked(self.path / _part(other)))

    def joinpath(self, *others: str | os.PathLike[str]) -> StoragePath:
        """This location joined with every one of ``others``, in order."""
        return StoragePath(_checked(self.path.joinpath(*(_part(o) for o in others))))

    @property
    def name(self) -> str:
        """The last component, e.g. ``"train_step"``."""
        return self.path.name

    @property
    def parent(self) -> StoragePath:
        """The enclosing location."""
        return StoragePath(self.path.parent)

    def exists(self) -> bool:
        """Whether anything exists at this location."""
        return self.path.exists()


def _part(other: object) -> str | os.PathLike[str]:
    if isinstance(other, StoragePath):
        return other.path
    if not isinstance(other, (str, os.PathLike)):
        raise TypeError(f"A storage path joins with a str or path-like name, not "
                        f"{type(other).__name__} ({other!r})")
    return other


def path(location: str | os.PathLike[str]) -> StoragePath:
    """Name a codegen directory (created by the first compile into it).

    Parameters
    ----------
    location : str or path-like
        Where the directory is (or will be); ``~`` is expanded. A StoragePath is returned as is.

    Raises
    ------
    TypeError
        When ``location`` is not a non-empty str or path-like.
    ValueError
        When it holds a NUL byte, or starts with ``~user`` for a user this machine lacks.
    """
    if isinstance(location, StoragePath):
        return location
    if not isinstance(location, (str, os.PathLike)) or not os.fspath(location):
        raise TypeError(f"storage.path() takes a non-empty path string, not {location!r}")
    try:
        return StoragePath(_checked(Path(location).expanduser()))
    except RuntimeError as exc:  # pathlib's "Could not determine home directory"
        raise ValueError(f"storage.path({os.fspath(location)!r}): {exc} (is the user after "
                         "'~' known here?)") from None


def _checked(location: Path) -> Path:
    if "\0" in str(location):
        raise ValueError(f"A storage path cannot hold a NUL byte, as {str(location)!r} does")
    return location
