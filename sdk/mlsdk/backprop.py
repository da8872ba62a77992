"""MLSDK's backprop compile path: a forward-only function, the optimizers to step, and the
learning rate, global step and gradient scale fed as inputs at each call.

``context.registry.register("optimizer0", optimizer)`` registers a ``torch.optim`` optimizer
(SGD, Adam or AdamW): its state lives on the device as that of its MNCore twin
(:class:`~mlsdk.optim.MNCoreSGD`, ...; same hyperparameters and update rule, state named
``optimizer0.<param>.<key>``). ``context.compile(f, sample, dir, optimizers=[optimizer],
options={"backprop": True})`` then compiles one training step of ``f``, whose output
``"loss"`` (or only output) is differentiated: the step zeroes the gradients, runs ``f``,
back-propagates ``loss * mncore_grad_scale_factor``, divides the gradients by that factor,
and steps each optimizer, param group ``i`` at learning rate
``<name>@<i>@mncore_learning_rate``. See ``docs/training.md``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from mncore_compiler.step_state import closure_objects

from .errors import MLSDKError
from .naming import RegistrationError
from .optim import (
    MNCoreAdam,
    MNCoreAdamW,
    MNCoreSGD,
    register_optimizer_buffers,
    set_buffer_name_in_optimizer,
)
from .registry import Registry

__all__ = ["GRAD_SCALE", "RegisteredOptimizers", "backprop_step", "device_twin",
           "global_step_input", "learning_rate_input"]

#: The input that scales the loss before backward (gradients are divided by it again).
GRAD_SCALE = "mncore_grad_scale_factor"


def learning_rate_input(name: str, group: int) -> str:
    """The input holding param group ``group``'s learning rate of optimizer ``name``."""
    return f"{name}@{group}@mncore_learning_rate"


def global_step_input(name: str, group: int) -> str:
    """The input holding the global step of param group ``group`` of optimizer ``name``."""
    return f"{name}@{group}@mncore_global_step"


_TWINS: tuple[tuple[type[torch.optim.Optimizer], Callable[[Any], torch.optim.Optimizer],
                    tuple[str, ...]], ...] = (
    (torch.optim.AdamW, MNCoreAdamW, ("lr", "betas", "eps", "weight_decay", "amsgrad",
                                      "maximize")),
    (torch.optim.Adam, MNCoreAdam, ("lr", "betas", "eps", "weight_decay", "amsgrad",
                                    "maximize")),
    (torch.optim.SGD, MNCoreSGD, ("lr", "momentum", "dampening", "weight_decay", "nesterov",
                                  "maximize")),
)


def device_twin(optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
    """The MNCore optimizer that steps ``optimizer``'s parameters by its rule on the device:
    ``optimizer`` itself when it is one, else a new MNCoreSGD / MNCoreAdam / MNCoreAdamW with
    its param groups, hyperparameters and (when it has stepped) state."""
    if isinstance(optimizer, (MNCoreSGD, MNCoreAdam)):
        return optimizer
    for torch_type, twin_type, keys in _TWINS:
        if type(optimizer) is torch_type:
            groups = [{"params": list(g["params"]), **{k: g[k] for k in keys if k in g}}
                      for g in optimizer.param_groups]
            for group in groups:
                if isinstance(group.get("lr"), torch.Tensor):
                    group["lr"] = float(group["lr"])
            twin = twin_type(groups)
            if optimizer.state:
                twin.load_state_dict(optimizer.state_dict())
            return twin
    raise TypeError(f"context.registry.register(name, optimizer) takes a torch.optim SGD, Adam "
                    f"or AdamW (or an MNCore one), not {type(optimizer).__name__}")


class RegisteredOptimizers:
    """The optimizers registered in one Context: each one's name and the optimizer whose
    state is on the device (its MNCore twin, :func:`device_twin`), held strongly as their
    state tensors are. The Context hands :meth:`register` to its
    :class:`~mlsdk.registry.Registry`, whose ``register(name, optimizer)`` calls it."""

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[str, torch.optim.Optimizer, torch.optim.Optimizer]] = {}

    def register(self, registry: Registry, name: str,
                 optimizer: torch.optim.Optimizer) -> list[str]:
        """Register ``optimizer``'s state in ``registry`` under ``name`` (its parameters must
        be registered); return the registered names. Registering it again under the same
        name does nothing; under another name is a RegistrationError."""
        known = self.lookup(optimizer)
        if known is not None:
            if known[0] != name:
                raise RegistrationError(f"This optimizer is already registered as "
                                        f"{known[0]!r}; it cannot be registered again as "
                                        f"{name!r}")
            return []
        twin = device_twin(optimizer)
        set_buffer_name_in_optimizer(twin, name)
        names = register_optimizer_buffers(registry, twin)
        self._by_id[id(optimizer)] = (name, optimizer, twin)
        return names

    def lookup(self, optimizer: object) -> tuple[str, torch.optim.Optimizer] | None:
        """(name, the optimizer whose state is on the device) of registered ``optimizer``,
        or None for one not registered here."""
        found = self._by_id.get(id(optimizer))
        if found is None or found[1] is not optimizer:
            return None
        return found[0], found[2]


class _BackpropStep:
    """The training step ``backprop_step`` compiles: a bound method, so that capture finds
    the optimizers and modules among its owner's attributes."""

    def __init__(self, fn: Callable[..., Any], loss: str | None,
                 optimizers: Sequence[tuple[str, torch.optim.Optimizer]]):
        self._fn = fn
        self._loss = loss
        self._names = [name for name, _ in optimizers]
        for index, (_, twin) in enumerate(optimizers):
            setattr(self, f"optimizer{index}", twin)
        self._twins = [twin for _, twin in optimizers]
        # The user's modules and tensors, for capture's constant names (self.<variable>).
        for var, obj in closure_objects(inspect.unwrap(fn)).items():
            if (isinstance(obj, (torch.nn.Module, torch.Tensor)) and var.isidentifier()
                    and not hasattr(self, var)):
                setattr(self, var, obj)

    def __call__(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        extra = self.extra_inputs()
        user = {k: v for k, v in inputs.items() if k not in extra}
        for twin in self._twins:
            twin.zero_grad(set_to_none=True)
        outputs = self._fn(user)
        if not isinstance(outputs, Mapping):
            raise MLSDKError(f"A backprop function must return a dict of tensors, not "
                             f"{type(outputs).__name__}")
        loss = outputs[self._loss_name(outputs)]
        scale = inputs[GRAD_SCALE].to(loss.dtype)
        (loss * scale).backward()
        for name, twin in zip(self._names, self._twins, strict=True):
            with torch.no_grad():
                for group in twin.param_groups:
                    for p in group["params"]:
                        if p.grad is not None:
                            p.grad = p.grad / scale
            saved = list(twin.lr_tensors)  # type: ignore[attr-defined]
            try:
                for index in range(len(twin.param_groups)):
                    lr = inputs[learning_rate_input(name, index)]
                    twin.lr_tensors[index] = lr.to(torch.float32)  # type: ignore[attr-defined]
                twin.step()
            finally:
                twin.lr_tensors[:] = saved  # type: ignore[attr-defined]
        return dict(outputs)

    def _loss_name(self, outputs: Mapping[str, Any]) -> str:
        if self._loss is not None:
            return self._loss
        if "loss" in outputs:
            return "loss"
        if len(outputs) == 1:
            return next(iter(outputs))
        raise MLSDKError(f"options={{'backprop': True}} differentiates the output 'loss' (or "
                         f"the only output); this function returns {sorted(outputs)}")

    def extra_inputs(self) -> dict[str, torch.Tensor]:
        """The inputs the step adds to the function's own, with sample values."""
        found: dict[str, torch.Tensor] = {}
        for name, twin in zip(self._names, self._twins, strict=True):
            for index, group in enumerate(twin.param_groups):
                found[learning_rate_input(name, index)] = torch.tensor(float(group["lr"]))
                found[global_step_input(name, index)] = torch.tensor(0)
        found[GRAD_SCALE] = torch.tensor(1)
        return found


def backprop_step(fn: Callable[..., Any], sample_inputs: Mapping[str, torch.Tensor],
                  optimizers: object, registered: RegisteredOptimizers,
                  ) -> tuple[Callable[..., Any], dict[str, torch.Tensor]]:
    """The training step of forward-only ``fn`` for ``optimizers`` (each in ``registered``,
    by ``registry.register(name, optimizer)``), and its sample inputs (``sample_inputs`` and the
    learning-rate, global-step and grad-scale inputs).

    Raises
    ------
    TypeError
        When ``optimizers`` is not a non-empty list of optimizers.
    MLSDKError
        For an optimizer not in ``registered``, or a sample input that takes one of
        the step's own input names.
    """
    if (not isinstance(optimizers, Sequence) or isinstance(optimizers, str) or not optimizers
            or not all(isinstance(o, torch.optim.Optimizer) for o in optimizers)):
        raise TypeError("options={'backprop': True} needs optimizers=[...], a non-empty list "
                        f"of torch.optim optimizers, not {optimizers!r}")
    found = []
    for optimizer in optimizers:
        entry = registered.lookup(optimizer)
        if entry is None:
            raise MLSDKError(
                f"optimizers=[...] holds a {type(optimizer).__name__} that is not registered "
                "in this Context; register it first: context.registry.register('optimizer0', "
                "optimizer) (after its model)")
        found.append(entry)
    step = _BackpropStep(fn, None, found)
    extra = step.extra_inputs()
    clash = sorted(set(extra) & set(sample_inputs))
    if clash:
        raise MLSDKError(f"Sample inputs {clash} take names the backprop step feeds itself")
    return step.__call__, {**dict(sample_inputs), **extra}
