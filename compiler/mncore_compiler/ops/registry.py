"""The IR op table and its extension API: :func:`register` an :class:`OpDef`, look it up."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..types import TensorType

__all__ = [
    "OPS",
    "Attrs",
    "FlopRule",
    "InferRule",
    "Inline",
    "OpDef",
    "OpTypeError",
    "Reference",
    "get_op",
    "infer_type",
    "register",
]

Attrs = Mapping[str, Any]
InferRule = Callable[[Sequence[TensorType], Attrs], TensorType]
Reference = Callable[[Sequence[torch.Tensor], Attrs], torch.Tensor]
FlopRule = Callable[[Sequence[TensorType], Attrs, TensorType], int]
Inline = Callable[[Attrs, TensorType], "tuple[str, dict[str, Any]] | None"]


class OpTypeError(ValueError):
    """Operands or attributes an op's type rule rejects."""


@dataclass(frozen=True)
class OpDef:
    """Everything the compiler knows about one IR op.

    Parameters
    ----------
    name : str
        The op name used in :class:`~mncore_compiler.ir.Node`.
    kind : str
        Coarse class: ``"elementwise"``, ``"matmul"``, ``"reduction"``, ``"normalization"``,
        ``"layout"`` (data movement only) or ``"cast"``.
    arity : int or None
        Number of tensor operands; ``None`` for one or more.
    attrs : tuple of str
        The attribute names every node of this op carries (no more, no fewer).
    rule : callable
        ``rule(operand_types, attrs) -> TensorType``; raises :class:`OpTypeError`.
    reference : callable
        ``reference(tensors, attrs) -> torch.Tensor``: the executable specification.
    flop_rule : callable
        ``flop_rule(operand_types, attrs, result_type) -> int``: a rough FLOP count.
    inline : callable or None
        ``inline(attrs, result_type) -> (expression, bindings)`` or None: the reference of a
        node with these attributes and declared result type as one Python expression, for
        the interpreter's generated code (:mod:`mncore_compiler.interpreter_codegen`).
        ``{0}``, ``{1}``, ... stand for the operands (``{xs}`` for all of them,
        comma-separated) and ``{name}`` for the object ``bindings[name]``; the expression must
        call what the reference calls with the same arguments, or the same aten op through
        its public binding, so its result is the reference's bit for bit. None (the op's
        default, or for some attributes) runs the reference itself.
    """

    name: str
    kind: str
    arity: int | None
    attrs: tuple[str, ...]
    rule: InferRule
    reference: Reference
    flop_rule: FlopRule
    inline: Inline | None = None

    def infer(self, operand_types: Sequence[TensorType], attrs: Attrs) -> TensorType:
        """Check operand count and attribute names, then apply the type rule."""
        count = len(operand_types)
        if self.arity is None and count < 1:
            raise OpTypeError(f"{self.name} takes one or more operands, got none")
        if self.arity is not None and count != self.arity:
            raise OpTypeError(f"{self.name} takes {self.arity} operand(s), got {count}")
        if set(attrs) != set(self.attrs):
            raise OpTypeError(
                f"{self.name} takes attributes {sorted(self.attrs)}, got {sorted(attrs)}"
            )
        return self.rule(operand_types, attrs)

    def flops(self, operand_types: Sequence[TensorType], attrs: Attrs) -> int:
        """Return the rough FLOP count of one execution."""
        return self.flop_rule(operand_types, attrs, self.infer(operand_types, attrs))


OPS: dict[str, OpDef] = {}
"""Every IR op, by name."""


def get_op(name: str) -> OpDef:
    """Return the op definition; ``KeyError`` listing the known ops for an unknown name."""
    try:
        return OPS[name]
    except KeyError:
        raise KeyError(f"unknown IR op {name!r}; known ops: {', '.join(sorted(OPS))}") from None


def infer_type(op: str, operand_types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    """Return the result type of ``op`` applied to operands of these types."""
    return get_op(op).infer(operand_types, attrs)


def register(
    name: str,
    kind: str,
    arity: int | None,
    attrs: tuple[str, ...],
    rule: InferRule,
    reference: Reference,
    flop_rule: FlopRule,
    inline: Inline | None = None,
) -> OpDef:
    """Add an op to :data:`OPS` and return its definition: the one call an op file makes.

    Parameters
    ----------
    name, kind, arity, attrs, rule, reference, flop_rule, inline
        As the fields of :class:`OpDef`; without ``inline``, a reference made by
        :func:`~.rules.unary_reference` or :func:`~.rules.binary_reference` inlines as the call
        of its function.

    Raises
    ------
    ValueError
        When an op of that name is already registered (two files defining one op).
    """
    if name in OPS:
        raise ValueError(f"IR op {name!r} is already registered ({OPS[name].kind}); "
                         "give the new op another name")
    if inline is None:
        inline = getattr(reference, "inline", None)
    OPS[name] = opdef = OpDef(name, kind, arity, attrs, rule, reference, flop_rule, inline)
    return opdef
