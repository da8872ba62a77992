"""Host tensors the functional model keeps: copy-on-write clones of a caller's tensor, what a
read hands out, and layouts as small-int cache keys (shared by the device and its planned calls,
:mod:`.planned`)."""

from __future__ import annotations

import itertools
from typing import Any

import torch
from mncore_hdl.layout import Layout

__all__ = ["LAYOUT_NUMBERS", "LayoutNumbers", "handed_out", "lazy_clone", "layout_key",
           "torch_type", "whole_memory"]

#: ``torch._lazy_clone``: a copy-on-write clone (shares the memory until either side is
#: written through); None on a torch without it, where the model copies instead.
_LAZY_CLONE = getattr(torch, "_lazy_clone", None)


def lazy_clone(tensor: Any) -> Any:
    """A copy-on-write clone of ``tensor`` (a CPU tensor that is all of its memory), or None
    where torch cannot make one: no ``torch._lazy_clone``, or memory torch did not allocate
    (a tensor made from a numpy array, whose memory torch cannot take over)."""
    if _LAZY_CLONE is None:
        return None
    try:
        return _LAZY_CLONE(tensor)
    except RuntimeError:
        return None


def handed_out(value: Any) -> Any:
    """What the host gets of a kept tensor: its own tensor, contiguous as a decode gives it,
    which the caller may change while the buffer keeps its value. A lazy clone when ``value``
    is all of its memory (the caller's writes then land in a private copy, and the kept
    tensor is never written through: programs only read it); a copy otherwise."""
    if whole_memory(value):
        clone = lazy_clone(value)
        if clone is not None:
            return clone
    dense = value.contiguous()
    return dense if dense is not value else value.clone()


def whole_memory(tensor: Any) -> bool:
    """Whether ``tensor`` is all of its memory, contiguous from its start, and not an inference
    tensor: what a lazy clone may share (a view of part of a larger tensor would keep the
    whole of it alive)."""
    return (tensor.is_contiguous() and not tensor.storage_offset() and not tensor.is_inference()
            and tensor.untyped_storage().nbytes() == tensor.element_size() * tensor.nelement())


def torch_type(layout: Layout) -> tuple[tuple[int, ...], Any]:
    """The shape and torch dtype of the tensors ``layout`` holds (None: no torch dtype by that
    name, so no tensor matches)."""
    dtype = getattr(torch, layout.dtype, None)
    return tuple(layout.shape), dtype if isinstance(dtype, torch.dtype) else None


class LayoutNumbers:
    """Layouts as cache keys: a small int per layout, equal for equal layouts, kept on the
    (frozen) layout itself. A Layout hashes its nested sub-axes on every lookup, and a key
    object with a Python ``__hash__`` costs a call per lookup; an int costs neither.

    Parameters
    ----------
    limit : int
        How many layouts the table holds before it starts again. Numbers are never reused, so a
        layout numbered again after that gets a fresh number: a cache miss at worst, never
        another layout's entry.
    """

    def __init__(self, limit: int = 1 << 16) -> None:
        if not isinstance(limit, int) or limit < 1:
            raise ValueError(f"The limit must be a positive int, not {limit!r}")
        self.limit = limit
        self._numbers: dict[Layout, int] = {}
        self._next = itertools.count()
        # Marks a number this table gave: a layout copied or unpickled carries a copy of the
        # mark (a plain object, so copying a layout never copies the table), not the mark.
        self._mark = object()

    def __len__(self) -> int:
        return len(self._numbers)

    def key(self, layout: Layout) -> int:
        """The number of ``layout``. A number kept on a layout by another table, or by another
        process (a layout copied or unpickled), is not trusted: it is looked up again."""
        kept = layout.memo("layout_number", _number_cell)
        if kept[0] is not None and kept[0][1] is self._mark:
            return kept[0][0]
        if len(self._numbers) >= self.limit:
            self._numbers.clear()  # bounded for long sessions
        number = self._numbers.setdefault(layout, next(self._next))
        kept[0] = (number, self._mark)
        return number


def _number_cell(_: Layout) -> list[tuple[int, object] | None]:
    """The cell a layout keeps its number in: ``[(number, mark)]`` once a table gave one."""
    return [None]


#: The table every device of this process keys its decoded values by.
LAYOUT_NUMBERS = LayoutNumbers()
layout_key = LAYOUT_NUMBERS.key
