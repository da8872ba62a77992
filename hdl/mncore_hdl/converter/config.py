"""The converter's programmed state as one structured signal, generated from the register table.

Every entry of :func:`mncore_hdl.contracts.converter.register_fields` is one field of
:func:`config_layout`, at its ``path`` (``cfg.outer[2].carry[3]``), with its width and sign.
"""

from __future__ import annotations

from collections.abc import Sequence

from amaranth.hdl import ShapeCastable, signed, unsigned
from amaranth.lib import data

from ..arch import ArchConfig
from ..contracts.converter import RegisterField, register_fields

__all__ = ["config_layout", "field_view"]


def _layout(entries: Sequence[tuple[tuple[str | int, ...], RegisterField]]) -> ShapeCastable:
    """The layout holding ``entries`` (each a path below this level and its field)."""
    if len(entries) == 1 and not entries[0][0]:
        reg = entries[0][1]
        return signed(reg.bits) if reg.signed else unsigned(reg.bits)
    children: dict[str | int, list[tuple[tuple[str | int, ...], RegisterField]]] = {}
    for path, reg in entries:
        children.setdefault(path[0], []).append((path[1:], reg))
    keys = list(children)
    if all(isinstance(k, int) for k in keys):
        if keys != list(range(len(keys))):
            raise ValueError(f"Register table array indices must be 0..{len(keys) - 1}, "
                             f"not {keys}")
        element = _layout(children[0])
        if any(_layout(children[k]) != element for k in keys):
            raise ValueError(f"Register table array elements differ: {keys}")
        return data.ArrayLayout(element, len(keys))
    return data.StructLayout({str(k): _layout(v) for k, v in children.items()})


def config_layout(config: ArchConfig | None = None) -> data.StructLayout:
    """Every register the runtime writes, as one struct (member order: address order)."""
    layout = _layout([(reg.path, reg) for reg in register_fields()])
    assert isinstance(layout, data.StructLayout)
    return layout


def field_view(cfg: data.View, reg: RegisterField):
    """The member of ``cfg`` (a view of :func:`config_layout`) that register ``reg`` holds."""
    view = cfg
    for part in reg.path:
        view = view[part] if isinstance(part, int) else getattr(view, part)
    return view
