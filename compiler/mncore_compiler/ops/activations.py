"""The activations of mobile and vision models (timm's families), and their backwards.

``hardswish``, ``hardsigmoid``, ``mish``, ``leaky_relu`` (``negative_slope``) and ``elu``
(``alpha``, ``scale``, ``input_scale``) are each the aten kernel of the same name; ``hardtanh``
and ``relu6`` need no op of their own (they are ``clamp``). Each backward takes the incoming
gradient and the forward's input (``leaky_relu_backward`` and ``elu_backward`` may take the
forward's result instead, as autograd does for the in-place forms: ``self_is_result`` /
``is_result``), and is torch's backward kernel, so the device's gradient is torch's.

The type rules ask torch's meta kernels after checking the attributes; the operands must be
floating point (torch refuses these activations on integers).

FLOPs: a rough count per element, as the other elementwise ops: 4 for the piecewise-linear
ones and their gradients, 8 for those with an exponential (``elu``), 12 for ``mish``
(softplus, tanh and a product) and 16 for its gradient.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from ..types import TensorType
from .conv import meta_rule
from .registry import Attrs, OpTypeError, Reference, register
from .rules import is_scalar, per_output

__all__ = ["ACTIVATIONS"]

aten = torch.ops.aten

_Fn = Callable[[Sequence[torch.Tensor], Attrs], torch.Tensor]


def _check_attrs(what: str, attrs: Attrs) -> None:
    for key, value in attrs.items():
        if key in ("self_is_result", "is_result"):
            if not isinstance(value, bool):
                raise OpTypeError(f"{what}'s {key} must be a bool, not {value!r}")
        elif not is_scalar(value):
            raise OpTypeError(f"{what}'s {key} must be a number, not {value!r}")
    if attrs.get("is_result") and attrs["alpha"] < 0:
        # torch's own check: the input cannot be recovered from the result then.
        raise OpTypeError(f"{what} from the result (is_result) needs alpha >= 0, not "
                          f"{attrs['alpha']!r}")


def _rule(what: str, fn: _Fn, arity: int) -> Callable[[Sequence[TensorType], Attrs], TensorType]:
    def rule(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
        _check_attrs(what, attrs)
        if arity == 2 and types[0].shape != types[1].shape:
            raise OpTypeError(f"{what} takes a gradient and an input of one shape, not "
                              f"{types[0]} and {types[1]}")
        return meta_rule(what, fn, types, attrs)

    return rule


def _op(name: str, arity: int, attrs: tuple[str, ...], fn: _Fn, cost: int) -> None:
    reference: Reference = fn
    register(name, "elementwise", arity, attrs, _rule(name, fn, arity), reference,
             per_output(cost))


_ELU = ("alpha", "scale", "input_scale")

ACTIVATIONS: dict[str, tuple[tuple[str, ...], _Fn, int]] = {
    "hardswish": ((), lambda x, a: F.hardswish(x[0]), 4),
    "hardsigmoid": ((), lambda x, a: F.hardsigmoid(x[0]), 4),
    "mish": ((), lambda x, a: F.mish(x[0]), 12),
    "leaky_relu": (("negative_slope",), lambda x, a: F.leaky_relu(x[0], a["negative_slope"]), 4),
    "elu": (_ELU, lambda x, a: aten.elu(x[0], a["alpha"], a["scale"], a["input_scale"]), 8),
}
"""The forward ops: name -> (attributes, torch reference, FLOPs per element)."""

_BACKWARDS: dict[str, tuple[tuple[str, ...], _Fn, int]] = {
    "hardswish_backward": ((), lambda x, a: aten.hardswish_backward(x[0], x[1]), 4),
    "hardsigmoid_backward": ((), lambda x, a: aten.hardsigmoid_backward(x[0], x[1]), 4),
    "mish_backward": ((), lambda x, a: aten.mish_backward(x[0], x[1]), 16),
    "hardtanh_backward": (("max", "min"), lambda x, a: aten.hardtanh_backward(
        x[0], x[1], a["min"], a["max"]), 4),
    "leaky_relu_backward": (("negative_slope", "self_is_result"), lambda x, a: (
        aten.leaky_relu_backward(x[0], x[1], a["negative_slope"], a["self_is_result"])), 4),
    "elu_backward": (_ELU + ("is_result",), lambda x, a: aten.elu_backward(
        x[0], a["alpha"], a["scale"], a["input_scale"], a["is_result"], x[1]), 8),
}

for _name, (_attrs, _fn, _cost) in ACTIVATIONS.items():
    _op(_name, 1, _attrs, _fn, _cost)

for _name, (_attrs, _fn, _cost) in _BACKWARDS.items():
    _op(_name, 2, _attrs, _fn, _cost)
