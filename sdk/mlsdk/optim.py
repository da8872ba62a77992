"""Optimizers whose ``step()`` can run inside a compiled training step.

:class:`MNCoreSGD`, :class:`MNCoreAdam` and :class:`MNCoreAdamW` are subclasses of
``torch.optim.SGD`` / ``Adam`` / ``AdamW`` with the same constructors, ``param_groups`` and
``state_dict()``, and the same update rules, rewritten so that a traced device program can
hold them (see ``docs/optim.md``):

- every piece of per-parameter state exists from construction on (zeros; Adam's ``step`` a
  0-d float32 tensor), so it can be named and registered before the step is compiled;
- ``step()`` uses tensor operations only: nothing read back from a tensor into Python
  (which tracing would freeze into the program). Adam's bias corrections come from the step
  tensor; SGD's first step (``buf = grad``) is chosen by ``torch.where`` on a per-parameter
  flag;
- the learning rate is read from a 0-d float32 tensor per group (:attr:`lr_tensors`), kept
  equal to ``param_groups[i]["lr"]`` by :meth:`_mncore_refresh`, which the Context runs
  before each compiled call: a scheduler's change takes effect without a recompile.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import torch
from mncore_hdl.layout import dtype_name

from .naming import RegistrationError, get_tensor_name, set_tensor_name

if TYPE_CHECKING:
    from .registry import Registry

__all__ = ["MNCoreSGD", "MNCoreAdam", "MNCoreAdamW", "set_buffer_name_in_optimizer",
           "register_optimizer_buffers", "optimizer_buffers", "one_minus_pow"]

_FLOAT = torch.float32


class _MNCoreOptimizer(torch.optim.Optimizer):
    """What the three optimizers share: eager state, lr tensors, the state_dict filter."""

    #: One 0-d float32 tensor per parameter group: the learning rate ``step()`` reads.
    lr_tensors: list[torch.Tensor]
    # Per-parameter tensors kept outside ``state`` (so that state_dict() stays torch's).
    _mncore_extra: dict[torch.Tensor, dict[str, torch.Tensor]]

    def _mncore_setup(self) -> None:
        self.lr_tensors = []
        self._mncore_extra = {}

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """As ``torch.optim.Optimizer.add_param_group``; also creates the group's lr tensor
        and every new parameter's state (zeros)."""
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        lr = group["lr"]
        if isinstance(lr, torch.Tensor) or isinstance(lr, bool) or not isinstance(
                lr, (int, float)):
            raise TypeError(f"{type(self).__name__} takes the learning rate as a Python float "
                            f"(schedulers write it there), not {type(lr).__name__}")
        self.lr_tensors.append(torch.tensor(float(lr), dtype=_FLOAT))
        for p in group["params"]:
            self._mncore_init_state(p, group)

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        """One step over every parameter with a gradient (tensor operations only)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for index, group in enumerate(self.param_groups):
            lr = self._mncore_lr(index)
            for p in group["params"]:
                if p.grad is not None:
                    self._update(p, group, lr)
        return loss

    def _update(self, p: torch.Tensor, group: dict[str, Any], lr: torch.Tensor) -> None:
        """Update ``p`` and its state in place from ``p.grad`` at learning rate ``lr``."""
        raise NotImplementedError

    def _mncore_init_state(self, p: torch.Tensor, group: dict[str, Any]) -> None:
        raise NotImplementedError

    def _mncore_started(self, p: torch.Tensor) -> bool:
        """Has ``p`` taken a step (host-side; what torch's state_dict shows)?"""
        raise NotImplementedError

    # -- learning rate --------------------------------------------------------------------

    def _mncore_refresh(self) -> list[torch.Tensor]:
        """Copy each group's ``lr`` float into its lr tensor; return the tensors that changed.

        The Context calls it before each compiled call (:meth:`mlsdk.Registry.before_call`)
        and re-uploads the changed ones; eager ``step()`` calls it itself.
        """
        changed = []
        for group, tensor in zip(self.param_groups, self.lr_tensors, strict=True):
            want = torch.tensor(float(group["lr"]), dtype=tensor.dtype)
            if not torch.equal(want, tensor):
                tensor.copy_(want)
                changed.append(tensor)
        return changed

    def _mncore_lr(self, index: int) -> torch.Tensor:
        if not _tracing():
            self._mncore_refresh()
        return self.lr_tensors[index]

    # -- state_dict -----------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """torch's state_dict: a parameter's state appears once it has taken a step.

        Read it after ``Context.synchronize()`` when the steps ran on the device.
        """
        result = super().state_dict()
        index = 0
        for group in self.param_groups:
            for p in group["params"]:
                if index in result["state"] and not self._mncore_started(p):
                    del result["state"][index]
                index += 1
        return result

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """torch's load_state_dict, keeping this optimizer's own state tensors.

        The loaded values are copied into the existing tensors (so their names and
        registrations stay valid); a parameter without loaded state restarts from zeros.
        After loading into an optimizer whose buffers are registered, call
        ``context.invalidate()`` so that the device copies are uploaded again.
        """
        kept = {p: dict(s) for p, s in self.state.items()}
        super().load_state_dict(state_dict)
        loaded = self.state
        self.state = defaultdict(dict)
        for group in self.param_groups:
            for p in group["params"]:
                self._mncore_adopt(p, group, kept.get(p, {}), loaded.get(p, {}))
        self._mncore_refresh()

    def _mncore_adopt(self, p: torch.Tensor, group: dict[str, Any],
                      old: dict[str, Any], new: dict[str, Any]) -> None:
        self._mncore_init_state(p, group)  # fresh zeros where there was nothing
        state = self.state[p]
        for key in list(state):
            if key in old and isinstance(old[key], torch.Tensor):
                state[key] = old[key]
        with torch.no_grad():
            for key, tensor in state.items():
                value = new.get(key)
                if value is None:
                    tensor.zero_()
                elif tuple(value.shape) != tuple(tensor.shape):
                    raise ValueError(f"Loaded state {key!r} has shape {tuple(value.shape)}; "
                                     f"its parameter needs {tuple(tensor.shape)}")
                else:
                    tensor.copy_(value)
        for key, value in new.items():
            state.setdefault(key, value)
        self._mncore_mark_started(p, bool(new))

    def _mncore_mark_started(self, p: torch.Tensor, started: bool) -> None:
        pass

    def _mncore_hidden(self) -> Iterator[tuple[int | torch.Tensor, torch.Tensor, str]]:
        """(group index or parameter, tensor, key) of the tensors kept outside ``state``."""
        for i, tensor in enumerate(self.lr_tensors):
            yield i, tensor, "lr"


def _tracing() -> bool:
    """True while make_fx (or another tracer) runs ``step()``: no host-side refresh then."""
    from torch.fx.experimental.proxy_tensor import get_proxy_mode

    return get_proxy_mode() is not None


def _grad(p: torch.Tensor, maximize: bool) -> torch.Tensor:
    assert p.grad is not None
    return torch.neg(p.grad) if maximize else p.grad


def _check_supported(name: str, kwargs: dict[str, Any]) -> None:
    for flag in ("differentiable", "fused"):
        if kwargs.get(flag):
            raise ValueError(f"{name} does not support {flag}=True: its step() is already one "
                             "device program")


# -- SGD ----------------------------------------------------------------------------------------


class MNCoreSGD(_MNCoreOptimizer, torch.optim.SGD):
    """``torch.optim.SGD`` whose step can be compiled; see the module docstring.

    Parameters
    ----------
    params, lr, momentum, dampening, weight_decay, nesterov, **kwargs
        As ``torch.optim.SGD`` (``maximize``; ``foreach`` is accepted and ignored;
        ``fused`` and ``differentiable`` are refused). ``lr`` must be a float.

    Notes
    -----
    With momentum, each parameter has ``state["momentum_buffer"]`` (zeros) from the start,
    and a hidden 0-d ``momentum_started`` flag: torch's first step sets ``buf = grad``, later
    ones ``buf = momentum * buf + (1 - dampening) * grad``; ``torch.where`` on the flag
    picks one (with ``dampening == 0`` both give the same bits, and the where is left out).
    """

    def __init__(self, params: Any, lr: float = 1e-3, momentum: float = 0,
                 dampening: float = 0, weight_decay: float = 0, nesterov: bool = False,
                 **kwargs: Any):
        _check_supported("MNCoreSGD", kwargs)
        self._mncore_setup()
        super().__init__(params, lr, momentum, dampening, weight_decay, nesterov, **kwargs)

    def _mncore_init_state(self, p: torch.Tensor, group: dict[str, Any]) -> None:
        if group["momentum"] == 0:
            return
        state = self.state[p]
        if "momentum_buffer" not in state or state["momentum_buffer"] is None:
            state["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        extra = self._mncore_extra.setdefault(p, {})
        extra.setdefault("momentum_started", torch.zeros((), dtype=_FLOAT))

    def _mncore_started(self, p: torch.Tensor) -> bool:
        flag = self._mncore_extra.get(p, {}).get("momentum_started")
        return flag is not None and bool(flag.item() != 0)

    def _mncore_mark_started(self, p: torch.Tensor, started: bool) -> None:
        flag = self._mncore_extra.get(p, {}).get("momentum_started")
        if flag is not None:
            flag.fill_(1.0 if started else 0.0)

    def _mncore_hidden(self) -> Iterator[tuple[int | torch.Tensor, torch.Tensor, str]]:
        yield from super()._mncore_hidden()
        for p, extra in self._mncore_extra.items():
            for key, tensor in extra.items():
                yield p, tensor, key

    def _update(self, p: torch.Tensor, group: dict[str, Any], lr: torch.Tensor) -> None:
        grad = _grad(p, group["maximize"])
        momentum, dampening = group["momentum"], group["dampening"]
        if group["weight_decay"] != 0:
            grad = grad.add(p, alpha=group["weight_decay"])
        if momentum != 0:
            self._mncore_init_state(p, group)  # a group whose momentum was 0 at construction
            buf = self.state[p]["momentum_buffer"]
            started = self._mncore_extra[p]["momentum_started"]
            new = buf.mul(momentum).add(grad, alpha=1 - dampening)
            if dampening != 0:
                new = torch.where(started > 0, new, grad)
            buf.copy_(new)
            started.copy_(torch.ones((), dtype=started.dtype))
            grad = grad.add(new, alpha=momentum) if group["nesterov"] else new
        p.copy_(p - grad * lr)


# -- Adam and AdamW -----------------------------------------------------------------------------


def one_minus_pow(beta: float, step: torch.Tensor) -> torch.Tensor:
    """``1 - beta ** step`` with tensor ops, accurate to a few float32 ulps at every step.

    ``1 - e**(2y) = -expm1(2y) = 2 tanh(y) / (tanh(y) - 1)`` with ``y = step * ln(beta) / 2``
    avoids the cancellation of ``1 - pow(beta, step)`` in float32 (a 1e-5 relative error at
    step 1 for beta = 0.999) and needs no ``pow``.
    """
    if beta == 0:
        return torch.ones(step.shape, dtype=step.dtype)  # aten.ones: a traceable constant
    th = torch.tanh(step * (0.5 * math.log(beta)))
    return (th * 2) / (th - 1)


class MNCoreAdam(_MNCoreOptimizer, torch.optim.Adam):
    """``torch.optim.Adam`` whose step can be compiled; see the module docstring.

    Parameters
    ----------
    params, lr, betas, eps, weight_decay, amsgrad, **kwargs
        As ``torch.optim.Adam`` (``maximize``, ``decoupled_weight_decay``; ``foreach`` and
        ``capturable`` are accepted and ignored: this step is always capturable; ``fused``
        and ``differentiable`` are refused). ``lr`` and ``betas`` must be floats.

    Notes
    -----
    Each parameter has ``step`` (a 0-d float32 tensor, as torch keeps it), ``exp_avg``,
    ``exp_avg_sq`` and, with amsgrad, ``max_exp_avg_sq`` from the start.
    """

    def __init__(self, params: Any, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, **kwargs: Any):
        _check_supported(type(self).__name__, kwargs)
        if any(isinstance(b, torch.Tensor) for b in betas):
            raise TypeError(f"{type(self).__name__} takes betas as Python floats, not tensors")
        self._mncore_setup()
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, **kwargs)

    def _mncore_init_state(self, p: torch.Tensor, group: dict[str, Any]) -> None:
        state = self.state[p]
        state.setdefault("step", torch.zeros((), dtype=_FLOAT))
        for key in ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if group["amsgrad"]
                                                else ()):
            state.setdefault(key, torch.zeros_like(p, memory_format=torch.preserve_format))

    def _mncore_started(self, p: torch.Tensor) -> bool:
        step = self.state.get(p, {}).get("step")
        return isinstance(step, torch.Tensor) and bool(step.item() != 0)

    def _update(self, p: torch.Tensor, group: dict[str, Any], lr: torch.Tensor) -> None:
        self._mncore_init_state(p, group)  # zeros for state not there yet (setdefault)
        grad = _grad(p, group["maximize"])
        beta1, beta2 = group["betas"]
        weight_decay = group["weight_decay"]
        state = self.state[p]
        step = state["step"] + 1
        state["step"].copy_(step)
        param = p
        if weight_decay != 0:
            if group["decoupled_weight_decay"]:
                param = p * (1 - lr * weight_decay)
            else:
                grad = grad.add(p, alpha=weight_decay)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        # torch's exp_avg.lerp_(grad, 1 - beta1), in lerp's own two branches
        if 1 - beta1 < 0.5:
            new_avg = exp_avg + (grad - exp_avg) * (1 - beta1)
        else:
            new_avg = grad - (grad - exp_avg) * beta1
        new_sq = exp_avg_sq * beta2 + (grad * (1 - beta2)) * grad
        exp_avg.copy_(new_avg)
        exp_avg_sq.copy_(new_sq)
        if group["amsgrad"]:
            most = state["max_exp_avg_sq"]
            new_sq = torch.where(new_sq > most, new_sq, most)
            most.copy_(new_sq)
        step_size = lr / one_minus_pow(beta1, step)
        denom = new_sq.sqrt() / one_minus_pow(beta2, step).sqrt() + group["eps"]
        p.copy_(param + (step_size.neg() * new_avg) / denom)


class MNCoreAdamW(MNCoreAdam, torch.optim.AdamW):
    """``torch.optim.AdamW`` (Adam with decoupled weight decay, default 1e-2) whose step can
    be compiled; see :class:`MNCoreAdam`."""

    def __init__(self, params: Any, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, **kwargs: Any):
        if "decoupled_weight_decay" in kwargs:
            raise TypeError("MNCoreAdamW always decouples its weight decay; use MNCoreAdam "
                            "with decoupled_weight_decay=False for coupled decay")
        _check_supported("MNCoreAdamW", kwargs)
        self._mncore_setup()
        torch.optim.Adam.__init__(self, params, lr, betas, eps, weight_decay, amsgrad,
                                  decoupled_weight_decay=True, **kwargs)


# -- naming and registering an optimizer's state ------------------------------------------------


def optimizer_buffers(optimizer: torch.optim.Optimizer) -> list[tuple[str, torch.Tensor]]:
    """(name suffix, tensor) of every state tensor of ``optimizer``.

    The suffix is ``<param>.<key>`` for per-parameter state, ``<param>`` being the
    parameter's tensor name when it has one and ``param<i>`` (its index in the optimizer, as
    in ``state_dict()``) otherwise, and ``group<i>.lr`` for the lr tensors of the MNCore
    optimizers. For a ``torch.optim`` optimizer, only the state that exists is listed (torch
    creates it at the first ``step()``).
    """
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"Expected a torch.optim.Optimizer, not {type(optimizer).__name__}")
    keys: dict[int, str] = {}
    for index, p in enumerate(_params(optimizer)):
        keys.setdefault(id(p), get_tensor_name(p) or f"param{index}")
    found: list[tuple[str, torch.Tensor]] = []
    for p in _params(optimizer):
        for key, value in optimizer.state.get(p, {}).items():
            if isinstance(value, torch.Tensor):
                found.append((f"{keys[id(p)]}.{key}", value))
    if isinstance(optimizer, _MNCoreOptimizer):
        for owner, tensor, key in optimizer._mncore_hidden():
            where = f"group{owner}" if isinstance(owner, int) else keys[id(owner)]
            found.append((f"{where}.{key}", tensor))
    return found


def _params(optimizer: torch.optim.Optimizer) -> Iterable[torch.Tensor]:
    for group in optimizer.param_groups:
        yield from group["params"]


def set_buffer_name_in_optimizer(optimizer: torch.optim.Optimizer, name: str) -> None:
    """Name every state tensor of ``optimizer`` ``name.<suffix>`` (see
    :func:`optimizer_buffers`), e.g. ``opt.model.fc.weight.exp_avg`` and ``opt.group0.lr``.

    Name (or register) the model first, so that the suffixes carry the parameters' names.

    Examples
    --------
    >>> model = torch.nn.Linear(4, 2)
    >>> set_tensor_name_in_module(model, "model")
    >>> optimizer = MNCoreSGD(model.parameters(), 0.1, momentum=0.9)
    >>> set_buffer_name_in_optimizer(optimizer, "opt")
    >>> get_tensor_name(optimizer.state[model.weight]["momentum_buffer"])
    'opt.model.weight.momentum_buffer'
    """
    if not isinstance(name, str) or not name or name != name.strip():
        raise ValueError(f"An optimizer's name prefix must be a non-empty str without "
                         f"surrounding spaces, not {name!r}")
    for suffix, tensor in optimizer_buffers(optimizer):
        set_tensor_name(tensor, f"{name}.{suffix}")


def register_optimizer_buffers(registry: Registry,
                               optimizer: torch.optim.Optimizer) -> list[str]:
    """Register every state tensor of ``optimizer`` in ``registry`` (a Context's
    ``context.registry``); return their names.

    Its parameters must be registered there already, and its buffers named by
    :func:`set_buffer_name_in_optimizer`; otherwise RegistrationError, and nothing is
    registered. The lr tensors of an MNCore optimizer are refreshed from ``param_groups``
    and re-uploaded when changed before each compiled call (``Registry.before_call``).
    """
    buffers = optimizer_buffers(optimizer)
    for index, p in enumerate(_params(optimizer)):
        if registry.name_of(p) is None:
            named = get_tensor_name(p)
            what = f"{named!r}" if named is not None else f"#{index}"
            raise RegistrationError(
                f"The optimizer's parameter {what} (a {dtype_name(p.dtype)} "
                f"tensor of shape {tuple(p.shape)}) is not registered in this Context; "
                "register its model first (context.registry.register('model', model)), then "
                "the optimizer's buffers")
    unnamed = [suffix for suffix, tensor in buffers if get_tensor_name(tensor) is None]
    if unnamed:
        raise RegistrationError(
            f"{len(unnamed)} buffer(s) of the optimizer have no name (the first: the state "
            f"{unnamed[0]!r}); call set_buffer_name_in_optimizer(optimizer, 'opt') before "
            "context.register_optimizer_buffers(optimizer)")
    items = [(get_tensor_name(tensor) or "", tensor, "optimizer state") for _, tensor in buffers]
    names = registry.register_named(items)
    if isinstance(optimizer, _MNCoreOptimizer):
        registry.add_refresh(optimizer._mncore_refresh)
    return names
