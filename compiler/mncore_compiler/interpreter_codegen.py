"""Straight-line Python for a prepared graph's steps, generated once at preparation.

:class:`~mncore_compiler.interpreter.PreparedGraph` runs its steps through a function written
for them, as torch.fx's ``GraphModule`` does: one statement per step, each value a local
variable, deleted after its last use. A step whose op has an inline form
(:attr:`~mncore_compiler.ops.OpDef.inline`) is the expression of that form, the torch call its
reference makes with the node's attributes bound as constants (``v7 = b7_fn(v3, v5)``, not a
reference called with a tuple of operands and a mapping of attributes); any other step calls
its reference as the interpreter always did (``v8 = r8((v7,), a8)``). Either way each step
calls what its reference calls, with the same arguments: the results are the references',
bit for bit.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .ops import get_op

__all__ = ["drops", "generate"]

#: A prepared step: ``(reference, operand slots, attributes, result slot, node, form)``; the
#: form, when not None, is the expression written in place of the op's inline form
#: (:mod:`.interpreter_forms`).
Step = tuple

_serial = itertools.count()


def generate(steps: Sequence[Step], exports: Sequence[int], *, checked: bool = False
             ) -> Callable[[list], None]:
    """A function ``run(env)`` that runs ``steps`` over the slot list ``env``.

    It reads from ``env`` the slots the steps read and do not compute, computes each step
    into a local, drops each local after its last use, and stores the slots in ``exports``
    back into ``env`` (the values a later function or the caller reads). With ``checked``,
    each result is checked against its node's declared shape and dtype (``RuntimeError``
    naming the node when it differs). The function's source is its ``source`` attribute.
    """
    namespace: dict[str, Any] = {"_check": _check}
    body: list[str] = []
    made: set[int] = set()
    given: list[int] = []
    dropped = drops(steps, exports)
    for index, (reference, operands, attrs, slot, node, *extra) in enumerate(steps):
        for operand in operands:
            if operand not in made and operand not in given:
                given.append(operand)
        form = extra[0] if extra else None
        expression = _expression(index, reference, operands, attrs, node, namespace, form)
        body.append(f"v{slot} = {expression}")
        if checked and (form is None or form[2]):
            namespace[f"n{index}"] = node
            body.append(f"_check(v{slot}, n{index})")
        made.add(slot)
        if dropped[index]:
            body.append("del " + ", ".join(f"v{s}" for s in dropped[index]))
    given += [slot for slot in exports if slot not in made and slot not in given]
    head = [f"v{slot} = env[{slot}]" for slot in given]
    tail = [f"env[{slot}] = v{slot}" for slot in dict.fromkeys(exports)]
    lines = head + body + tail or ["pass"]
    name = f"<prepared graph {next(_serial)}>"
    source = "def run(env):\n" + "".join(f"    {line}\n" for line in lines)
    exec(compile(source, name, "exec"), namespace)  # noqa: S102 - our own generated code
    run: Callable[[list], None] = namespace["run"]
    # Kept with the function (not in linecache, which would keep every graph's source for
    # the life of the process): what a traceback's "<prepared graph N>", line L points at.
    run.source = source  # type: ignore[attr-defined]
    return run


def _expression(index: int, reference: Callable, operands: tuple[int, ...], attrs: Any,
                node: Any, namespace: dict[str, Any], form: Any = None) -> str:
    """The right-hand side of step ``index`` (``form`` when given, else its op's inline form
    or its reference), its constants bound into ``namespace``."""
    names = [f"v{slot}" for slot in operands]
    if form is None:
        inline = get_op(node.op).inline
        form = None if inline is None else inline(attrs, node.type)
    if form is None:
        namespace[f"r{index}"], namespace[f"a{index}"] = reference, attrs
        operand_tuple = "(" + "".join(f"{n}, " for n in names) + ")"
        return f"r{index}({operand_tuple}, a{index})"
    template, bindings = form[:2]
    bound = {}
    for key, value in bindings.items():
        bound[key] = f"b{index}_{key}"
        namespace[bound[key]] = value
    return template.format(*names, xs=", ".join(names), **bound)


def drops(steps: Sequence[Step], keep: Sequence[int]) -> list[tuple[int, ...]]:
    """For each of ``steps``, the slots whose last use it is (each once, in operand order),
    but none of ``keep``: the locals :func:`generate`'s code deletes after that step."""
    last: dict[int, int] = {}
    for index, step in enumerate(steps):
        for slot in step[1]:
            last[slot] = index
    kept = set(keep)
    return [tuple(s for s in dict.fromkeys(step[1]) if last[s] == index and s not in kept)
            for index, step in enumerate(steps)]


def _check(result: torch.Tensor, node: Any) -> None:
    declared = node.type
    if result.shape != declared.shape or result.dtype != declared.torch_dtype:
        raise RuntimeError(
            f"reference of %{node.name} ({node.op}) gave {tuple(result.shape)} "
            f"{result.dtype}, but the node declares {node.type}"
        )
