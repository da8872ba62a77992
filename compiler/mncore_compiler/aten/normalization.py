"""Handlers of normalisations: softmax, log-softmax and batch normalisation (train and eval
mode), its backward, and the running statistics it updates on the device.

``make_fx`` traces an ``nn.BatchNorm1d`` / ``BatchNorm2d`` as ``aten.native_batch_norm`` in
both modes. In train mode (``training=True``) it normalises with the batch statistics and
updates ``running_mean`` and ``running_var`` in place, a write its schema does not declare;
the handler does that write itself (through the functionaliser), so a registered buffer's new
value becomes a state write like an optimizer's. ``num_batches_tracked += 1`` is an ordinary
traced ``add_``. A BatchNorm with ``momentum=None`` (a cumulative average) is traced through
:func:`cumulative_batch_norms` instead, whose update factor is a tensor.

Each handler follows torch's CPU kernel (``batch_norm_cpu`` / ``batch_norm_backward_cpu``):

- statistics: ``mean = sum(x) / n``, ``var_sum = sum((x - mean)^2)``,
  ``invstd = 1 / sqrt(var_sum / n + eps)`` over every dim but the channel dim 1;
- running statistics: ``momentum * mean + (1 - momentum) * running_mean`` and the same with the
  *unbiased* variance ``var_sum / (n - 1)``;
- output: ``x * alpha + beta`` with ``alpha = invstd * weight``, ``beta = bias - mean * alpha``;
- backward: ``dotp = sum(dy * (x - mean))``, ``grad_weight = dotp * invstd``,
  ``grad_bias = sum(dy)``, and in train mode
  ``dx = (dy - sum(dy) / n - (x - mean) * dotp * invstd^2 / n) * invstd * weight``.

torch accumulates some per-channel scalars in double; the device computes in float32, which
differs by an ulp or so.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Mapping
from typing import Any, cast

import torch
from torch import fx

from .args import cast_to, norm_dim, tensor_arg, unsupported
from .registry import Builder, Handler, Unavailable, on

__all__ = ["cumulative_batch_norms"]


def _softmax(op: str) -> Handler:
    def handler(b: Builder, a: dict[str, Any], n: fx.Node) -> str:
        if a.get("half_to_float"):
            raise unsupported(n, "half_to_float=True")
        x = cast_to(b, n, tensor_arg(n, a["self"]), a.get("dtype"))
        return b.emit(op, [x], dim=norm_dim(a["dim"], b.type(x).rank))

    return handler


on("_softmax.default", "softmax.int")(_softmax("softmax"))


on("_log_softmax.default", "log_softmax.int")(_softmax("log_softmax"))


@contextlib.contextmanager
def cumulative_batch_norms(objects: Mapping[str, object]) -> Iterator[None]:
    """While tracing, run every BatchNorm in train mode with ``momentum=None`` (a cumulative
    moving average) through :func:`_cumulative_forward`, whose update factor is a tensor.

    torch computes that factor, ``1 / num_batches_tracked``, as a Python number at every call:
    traced as it is, the compiled step would keep the factor of the step it traced. Each
    module's own ``forward`` is back in place when this exits.
    """
    patched: list[tuple[torch.nn.Module, object]] = []
    try:
        for module in _batch_norms(objects):
            if (module.training and module.track_running_stats and module.momentum is None
                    and module.num_batches_tracked is not None):
                patched.append((module, module.__dict__.get("forward", _NO_FORWARD)))
                module.forward = functools.partial(_cumulative_forward, module)
        yield
    finally:
        for module, forward in patched:
            if forward is _NO_FORWARD:
                del module.forward
            else:
                setattr(module, "forward", forward)  # noqa: B010 (an object, not a method)


_NO_FORWARD = object()


def _batch_norms(objects: Mapping[str, object]) -> Iterator[Any]:
    """Every BatchNorm module reachable from ``objects``, once each."""
    seen: set[int] = set()
    for obj in objects.values():
        if not isinstance(obj, torch.nn.Module):
            continue
        for module in obj.modules():
            if id(module) not in seen and isinstance(module,
                                                      torch.nn.modules.batchnorm._BatchNorm):
                seen.add(id(module))
                yield module


def _cumulative_forward(module: Any, input: torch.Tensor) -> torch.Tensor:
    """``module(input)`` for a BatchNorm in train mode with ``momentum=None``, with the running
    statistics' update factor ``1 / num_batches_tracked`` computed as a tensor (torch's own
    forward computes it as a Python number).

    The output is ``F.batch_norm`` with the batch statistics and no running statistics; the
    running statistics are then updated as torch's kernel does:
    ``factor * batch + (1 - factor) * running``, the variance unbiased.
    """
    module._check_input_dim(input)
    module.num_batches_tracked.add_(1)
    factor = torch.reciprocal(module.num_batches_tracked.to(torch.float32))
    out = torch.nn.functional.batch_norm(input, None, None, module.weight, module.bias,
                                         True, 0.0, module.eps)
    with torch.no_grad():
        x = input.detach()
        dims = [0, *range(2, x.dim())]
        count = x.numel() // x.shape[1]
        mean = x.mean(dims)
        centered = x - mean.reshape((1, -1) + (1,) * (x.dim() - 2))
        unbiased = (centered * centered).sum(dims) / (count - 1)
        keep = 1.0 - factor
        module.running_mean.copy_(factor * mean + keep * module.running_mean)
        module.running_var.copy_(factor * unbiased + keep * module.running_var)
    return out


def _optional(n: fx.Node, value: Any) -> str | None:
    return None if value is None else tensor_arg(n, value)


def _channel_view(b: Builder, v: str, rank: int) -> str:
    """A per-channel vector [C] as [1, C, 1, ...], to broadcast against an [N, C, ...] input."""
    c = b.type(v).shape[0]
    shape = (1, c) + (1,) * (rank - 2)
    return v if rank == 1 else b.emit("reshape", [v], shape=shape)


def _stat_dims(b: Builder, n: fx.Node, x: str) -> tuple[tuple[int, ...], int]:
    """The dims batch norm reduces over (all but dim 1) and how many values each channel has."""
    shape = b.type(x).shape
    if len(shape) < 2:
        raise unsupported(n, f"an input of shape {list(shape)} (give [N, C] or [N, C, ...])")
    dims = (0,) + tuple(range(2, len(shape)))
    count = 1
    for d in dims:
        count *= shape[d]
    return dims, count


def _inv_std(b: Builder, var: str, eps: float) -> str:
    # 1 / sqrt(var + eps), as torch's kernel computes it (not rsqrt).
    return b.emit("reciprocal", [b.emit("sqrt", [b.emit("add_scalar", [var], scalar=eps)])])


def _normalise(b: Builder, x: str, mean: str, invstd: str, weight: str | None,
               bias: str | None) -> str:
    rank = b.type(x).rank
    alpha = invstd if weight is None else b.emit("mul", [invstd, weight])
    shifted = b.emit("mul", [mean, alpha])
    beta = (b.emit("neg", [shifted]) if bias is None else b.emit("sub", [bias, shifted]))
    scaled = b.emit("mul", [x, _channel_view(b, alpha, rank)])
    return b.emit("add", [scaled, _channel_view(b, beta, rank)])


def _running(b: Builder, old: str, batch: str, momentum: float) -> str:
    # momentum * batch + (1 - momentum) * old
    new = b.emit("mul_scalar", [batch], scalar=momentum)
    return b.emit("add", [new, b.emit("mul_scalar", [old], scalar=1.0 - momentum)])


def _write(b: Builder, n: fx.Node, arg: str, current: str, value: str) -> None:
    """Store ``value`` into the tensor ``n`` received as argument ``arg`` (now ``current``)."""
    raw = n.args[_ARG_INDEX[arg]] if len(n.args) > _ARG_INDEX[arg] else n.kwargs[arg]
    b.write_state(n, raw, current, value)


_ARG_INDEX = {"running_mean": 3, "running_var": 4}


@on("native_batch_norm.default")
def _native_batch_norm(b: Builder, a: dict[str, Any], n: fx.Node) -> tuple[str, str, str]:
    x = tensor_arg(n, a["input"])
    weight, bias = _optional(n, a["weight"]), _optional(n, a["bias"])
    running_mean, running_var = _optional(n, a["running_mean"]), _optional(n, a["running_var"])
    eps, momentum = float(a["eps"]), float(a["momentum"])
    dims, count = _stat_dims(b, n, x)
    rank = b.type(x).rank
    if not a["training"]:
        if running_mean is None or running_var is None:
            raise unsupported(n, "training=False and no running statistics")
        invstd = _inv_std(b, running_var, eps)
        out = _normalise(b, x, running_mean, invstd, weight, bias)
        # torch returns empty tensors for these in eval mode; the backward reads the running
        # statistics instead.
        return out, running_mean, invstd
    total = b.emit("sum", [x], dims=dims, keepdim=False)
    mean = b.emit("div_scalar", [total], scalar=float(count), reverse=False)
    centered = b.emit("sub", [x, _channel_view(b, mean, rank)])
    var_sum = b.emit("sum", [b.emit("mul", [centered, centered])], dims=dims, keepdim=False)
    variance = b.emit("div_scalar", [var_sum], scalar=float(count), reverse=False)
    invstd = _inv_std(b, variance, eps)
    out = _normalise(b, x, mean, invstd, weight, bias)
    if running_mean is not None and running_var is not None:
        unbiased = b.emit("div_scalar", [var_sum], scalar=float(count - 1), reverse=False)
        _write(b, n, "running_mean", running_mean, _running(b, running_mean, mean, momentum))
        _write(b, n, "running_var", running_var, _running(b, running_var, unbiased, momentum))
    return out, mean, invstd


@on("_native_batch_norm_legit_no_training.default")
def _batch_norm_no_training(b: Builder, a: dict[str, Any], n: fx.Node) -> tuple[str, str, str]:
    return cast(tuple[str, str, str], _native_batch_norm(b, {**a, "training": False}, n))


@on("native_batch_norm_backward.default")
def _native_batch_norm_backward(b: Builder, a: dict[str, Any], n: fx.Node) -> tuple[Any, ...]:
    dy, x = tensor_arg(n, a["grad_out"]), tensor_arg(n, a["input"])
    weight = _optional(n, a["weight"])
    dims, count = _stat_dims(b, n, x)
    rank = b.type(x).rank
    if a["train"]:
        mean, invstd = tensor_arg(n, a["save_mean"]), tensor_arg(n, a["save_invstd"])
    else:
        mean = tensor_arg(n, a["running_mean"])
        invstd = _inv_std(b, tensor_arg(n, a["running_var"]), float(a["eps"]))
    mask = [bool(m) for m in a["output_mask"]]
    grad_sum = b.emit("sum", [dy], dims=dims, keepdim=False)
    centered = b.emit("sub", [x, _channel_view(b, mean, rank)])
    dotp = b.emit("sum", [b.emit("mul", [centered, dy])], dims=dims, keepdim=False)
    missing = Unavailable(f"{n.name}: a gradient native_batch_norm_backward was not asked for")
    grad_input: Any = missing
    if mask[0]:
        scale = invstd if weight is None else b.emit("mul", [invstd, weight])
        if a["train"]:
            k = b.emit("mul", [b.emit("mul", [dotp, invstd]), invstd])
            k = b.emit("div_scalar", [k], scalar=float(count), reverse=False)
            grad_mean = b.emit("div_scalar", [grad_sum], scalar=float(count), reverse=False)
            dx = b.emit("mul", [centered, _channel_view(b, k, rank)])
            dy_c = b.emit("sub", [dy, _channel_view(b, grad_mean, rank)])
            grad_input = b.emit("mul", [b.emit("sub", [dy_c, dx]), _channel_view(b, scale, rank)])
        else:
            grad_input = b.emit("mul", [dy, _channel_view(b, scale, rank)])
    grad_weight: Any = b.emit("mul", [dotp, invstd]) if mask[1] else missing
    grad_bias: Any = grad_sum if mask[2] else missing
    return grad_input, grad_weight, grad_bias
