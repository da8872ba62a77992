"""How a DRAM image crosses between the runtime and the simulator: in the request line, or in files.

Inline (:class:`InlineImages`), an image is base64 of its little-endian words inside the JSON
line, both ways: the Amaranth simulator (in-process) and a simulator without the bulk back door
take it so. A cocotb simulator on ``cosim_tb`` announces in its ready line that it takes files
(:class:`FileImages`): the runtime then writes each Group's row into the session's private run
folder in the back door's own format (:func:`~.dma.write_word_file`), the request names the
files, and the simulator moves them into place with a rename; a read is dumped by the back door
into files the answer names, which the runtime reads (:func:`~.dma.read_word_file`) and removes.
A 1 MiB image then crosses no socket, no JSON and no base64 on either side, and no Python
copy in the simulator.

Nothing from the simulator is trusted: the names an answer gives are checked
(:func:`.protocol.check_answer`), and a file of the wrong size is an error.
"""

from __future__ import annotations

from itertools import count
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from .dma import read_word_file, write_word_file
from .driver import pack_words, unpack_words

__all__ = ["Images", "InlineImages", "FileImages", "images_for"]


class Images(Protocol):
    """How a session's requests carry images and its answers return them."""

    def outgoing(self, rows: np.ndarray) -> dict[str, Any]:
        """The request fields that carry ``rows`` (one row per Group, or one row)."""
        ...

    def asking(self) -> dict[str, Any]:
        """The request fields asking for an image in the answer."""
        ...

    def incoming(self, answer: dict[str, Any], shape: tuple[int, ...]) -> np.ndarray:
        """The image an answer returns, as ``shape`` (RuntimeError when it is not that)."""
        ...

    def discard(self, answer: dict[str, Any]) -> None:
        """Drop the image of an answer nobody takes (an interrupted request's)."""
        ...


class InlineImages:
    """Images as base64 in the JSON lines."""

    def outgoing(self, rows: np.ndarray) -> dict[str, Any]:
        return {"data": pack_words(rows)}

    def asking(self) -> dict[str, Any]:
        return {}

    def incoming(self, answer: dict[str, Any], shape: tuple[int, ...]) -> np.ndarray:
        return unpack_words(answer["data"], shape)

    def discard(self, answer: dict[str, Any]) -> None:
        pass


class FileImages:
    """Images as files of the back door's format in the session's run folder.

    Parameters
    ----------
    folder : Path
        The run folder (the simulator's working folder; mode 0700).
    binary : bool
        The back door's format (``cosim_tb``'s ``mem_binary``): raw words, or hex lines.
    """

    def __init__(self, folder: Path, binary: bool):
        self.folder = folder
        self.binary = binary
        self._numbers = count(1)

    def outgoing(self, rows: np.ndarray) -> dict[str, Any]:
        names = []
        for row in np.atleast_2d(rows):
            name = f"in-{next(self._numbers)}.dat"
            write_word_file(self.folder / name, row, self.binary)
            names.append(name)
        return {"files": names}

    def asking(self) -> dict[str, Any]:
        return {"to_files": True}

    def incoming(self, answer: dict[str, Any], shape: tuple[int, ...]) -> np.ndarray:
        if "files" not in answer:  # an empty image comes inline
            return unpack_words(answer["data"], shape)
        names = answer["files"]
        per_file = shape[-1]
        rows = []
        try:
            for name in names:
                rows.append(read_word_file(self.folder / name, per_file, self.binary))
        except OSError as exc:
            raise RuntimeError(f"the simulator's answer names {name!r}, which cannot be read "
                               f"({exc})") from None
        finally:
            for name in names:
                (self.folder / name).unlink(missing_ok=True)
        return np.stack(rows).reshape(shape)

    def discard(self, answer: dict[str, Any]) -> None:
        for name in answer.get("files", []):  # names checked with the answer (check_answer)
            (self.folder / name).unlink(missing_ok=True)


def images_for(ready: dict[str, Any], folder: Path) -> Images:
    """How a session whose simulator sent the ready line ``ready`` (in ``folder``) moves images."""
    files = ready.get("files")
    if isinstance(files, dict) and isinstance(files.get("binary"), bool):
        return FileImages(folder, files["binary"])
    return InlineImages()
