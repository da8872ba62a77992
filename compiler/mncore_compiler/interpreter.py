"""The IR interpreter: the executable specification every other execution path is tested against."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from .interpreter_codegen import drops, generate
from .interpreter_forms import forms
from .ir import Graph
from .ops import get_op

__all__ = ["PreparedGraph", "check_inputs", "interpret"]

_grad_enabled = torch.is_grad_enabled
_set_grad_enabled = torch._C._set_grad_enabled


def check_inputs(graph: Graph, inputs: Mapping[str, object],
                 optional: frozenset[str] = frozenset()) -> None:
    """Check that ``inputs`` match the graph's inputs by name, kind, shape and dtype; the
    inputs named in ``optional`` may be left out.

    Raises
    ------
    TypeError
        When ``inputs`` is not a mapping, a value is not a tensor, or a dtype differs.
    ValueError
        When names are missing or extra, or a shape differs.
    """
    if not isinstance(inputs, Mapping):
        raise TypeError(
            f"inputs must be a dict of str to torch.Tensor, not {type(inputs).__name__}"
        )
    expected, given = list(graph.inputs), list(inputs)
    missing = [n for n in expected if n not in inputs and n not in optional]
    extra = [n for n in given if n not in graph.inputs]
    if missing or extra:
        raise ValueError(f"inputs must be named {expected}; missing {missing}, unexpected {extra}")
    for name, ttype in graph.inputs.items():
        if name not in inputs:
            continue  # optional
        value = inputs[name]
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"input {name!r} must be a torch.Tensor, not {type(value).__name__}")
        shape = tuple(value.shape)
        if shape != ttype.shape:
            raise ValueError(
                f"input {name!r} must have shape {list(ttype.shape)}, not {list(shape)}"
            )
        if value.dtype != ttype.torch_dtype:
            given_dtype = str(value.dtype).replace("torch.", "")
            raise TypeError(f"input {name!r} must have dtype {ttype.dtype}, not {given_dtype}")


def interpret(graph: Graph, inputs: Mapping[str, torch.Tensor], *,
              copy_outputs: bool = True,
              constants: Mapping[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
    """Run ``graph`` on ``inputs`` by evaluating each node's torch reference, in order.

    Parameters
    ----------
    graph : Graph
        A verified graph.
    inputs : dict of str to torch.Tensor
        One tensor per graph input, of exactly its shape and dtype.
    copy_outputs : bool
        False returns the outputs as computed, possibly views of the inputs or constants (for
        a caller that copies them anyway, like the device storing them to DRAM).
    constants : dict of str to torch.Tensor, optional
        Values for the graph's constants in place of ``graph.constants`` (the device passes
        the tensors it read back from DRAM), of the same names, shapes and dtypes.

    Returns
    -------
    dict of str to torch.Tensor
        One new contiguous tensor per graph output, in output order; writing to it never
        changes the caller's inputs or the graph's constants.

    Raises
    ------
    TypeError, ValueError
        When the inputs do not match the graph (see :func:`check_inputs`).
    RuntimeError
        When a reference implementation disagrees with its node's declared type (a bug in
        the op table, not in the caller's data).

    A caller that runs one graph many times prepares it once (:class:`PreparedGraph`) instead.
    """
    return PreparedGraph(graph)(inputs, copy_outputs=copy_outputs, constants=constants)


class PreparedGraph:
    """A graph resolved for repeated runs: what :func:`interpret` does, with the per-call work
    done once.

    Preparing looks every node's op up in the op table, gives every value a slot in a flat
    list, and writes the steps out as straight-line Python (:mod:`.interpreter_codegen`): each
    value a local, each step the torch call of its op's inline form with its attributes bound
    (``v7 = b7_fn(v3, v5)``), or its reference where the op has none; so a call runs with no
    lookup, no name resolution, no type conversion and no per-step dispatch. More things are
    settled at preparation, none of which changes a result:

    - a node equal to an earlier one (same op, same operands, equal attributes) reuses the
      earlier one's value instead of computing it again: every reference is a deterministic
      function of its operands and attributes (common subexpressions: an optimizer's update
      reads the learning rate the same way for every parameter);
    - each value is dropped from the slot list after its last use (unless it is an output), so
      the memory of a large graph's intermediates is reused while it runs, as in eager torch;
    - the results are checked against their nodes' declared shapes and dtypes on the first run
      only: both are functions of the input types, which every call checks;
    - with ``unused_optional``, the inputs and constants no node reads and no output is
      (:attr:`unused`: a label a function takes but its inference never reads, say) may be
      left out of a call: a caller that produces its inputs at a cost (the device decoding
      them from DRAM) skips them;
    - the nodes that read only constants (a transposed weight, an inference BatchNorm's scale)
      run first, and their values are kept for the next call, which reuses them when it is
      given the very same constant tensors, unchanged since (same objects, same version
      counters): a caller whose constants change must pass new tensors or bump their version
      (the functional model bumps a DRAM view's version when its range is written). A graph
      whose constant-only values are computed afresh two calls in a row (a training step's,
      whose state changes every call) stops keeping them and runs in graph order.

    The graph must not change after it is prepared (prepare it again). Ops registered after
    preparing are not seen, which is no loss: a prepared graph's ops all exist.

    Parameters
    ----------
    graph : Graph
        A verified graph.
    unused_optional : bool
        Let a call leave out the inputs and constants in :attr:`unused` (by default every
        input is required, as :func:`interpret` requires it).

    Raises
    ------
    KeyError
        When a node's op is not in the op table.
    """

    def __init__(self, graph: Graph, *, unused_optional: bool = False):
        self.graph = graph
        slots: dict[str, int] = {}
        for name in (*graph.inputs, *graph.constants):
            slots.setdefault(name, len(slots))
        steps: list[tuple] = []
        seen: dict[tuple, int] = {}
        for node in graph.nodes:
            operands = tuple(slots[name] for name in node.operands)
            key = _node_key(node.op, operands, node.attrs)
            if key is not None and key in seen:
                slots[node.name] = seen[key]  # the value of an equal earlier node
                continue
            slots[node.name] = len(slots)
            if key is not None:
                seen[key] = slots[node.name]
            steps.append((get_op(node.op).reference, operands, node.attrs, slots[node.name],
                          node))
        self._size = len(slots)
        self._outputs = tuple((out, slots[value]) for out, value in graph.outputs.items())
        # Cheaper calls with the same bits (interpreter_forms), as each step's 6th item.
        types = {slots[name]: t for name, t in graph.value_types().items()}
        cheaper = forms(steps, types, {slot for _, slot in self._outputs})
        steps = [(*step, cheaper.get(index)) for index, step in enumerate(steps)]
        read = {slot for step in steps for slot in step[1]} | {s for _, s in self._outputs}
        #: The inputs and constants no node reads and no output is: a call may leave them out.
        self.unused = frozenset(n for n in (*graph.inputs, *graph.constants)
                                if slots[n] not in read)
        skipped = self.unused if unused_optional else frozenset()
        self._inputs = tuple((slots[n], n, t.shape, t.torch_dtype, t.dtype)
                             for n, t in graph.inputs.items() if n not in skipped)
        self._optional = skipped & set(graph.inputs)
        self._constants = tuple((slots[n], n) for n in graph.constants if n not in skipped)
        early, late, self._roots, self._kept = _split_constant_steps(
            steps, {slot for slot, _ in self._constants}, {slot for _, slot in self._outputs})
        self._checked_steps = tuple(early + late)
        # Each list of steps as one generated function (interpreter_codegen): the first run
        # checks; from the second on, the early steps give the kept values and the others the
        # outputs (generated then: a graph run once, as interpret() runs it, needs neither).
        # A graph whose constants change on every call runs its steps in graph order instead.
        self._exports = tuple(sorted({slot for _, slot in self._outputs}))
        self._run_first = generate(early + late, (*self._kept, *self._exports), checked=True)
        self._split: tuple[list, list] = (early, late)
        self._in_order_steps = steps
        self._run_early: Callable[[list], None] | None = None
        self._run_late: Callable[[list], None] | None = None
        # The constant-only values of the last call and what they were computed from: the
        # root tensors and their version counters; and the calls in a row that recomputed them.
        self._memo: tuple[tuple, tuple[int, ...], tuple] | None = None
        self._misses = 0
        #: Whether a run has checked every result against its node's declared type.
        self.checked = False

    @property
    def source(self) -> str:
        """The Python of the first (checked) run, as generated (:mod:`.interpreter_codegen`):
        what a traceback's ``<prepared graph N>`` lines point at."""
        return self._run_first.source  # type: ignore[attr-defined]

    @property
    def computed_nodes(self) -> tuple[str, ...]:
        """The names of the nodes a call computes, in the order of the first (checked) run: a
        node equal to an earlier one is not among them (it reuses that one's value)."""
        return tuple(step[4].name for step in self._checked_steps)

    @property
    def frees(self) -> dict[str, tuple[str, ...]]:
        """For each computed node (by name), the values (by name) dropped after its step on
        the calls after the first; a merged node's value goes by the name of the node that
        computes it."""
        names = self._slot_names()
        early, late = self._split
        return {names[step[3]]: tuple(names[i] for i in dropped)
                for steps, keep in ((early, self._kept), (late, self._exports))
                for step, dropped in zip(steps, drops(steps, keep), strict=True)}

    @property
    def keeps_constant_values(self) -> bool:
        """Whether calls keep the constant-only values for the next call: False when the
        graph has none, or once they were computed afresh two calls in a row."""
        return bool(self._split[0])

    @property
    def kept(self) -> tuple[str, ...]:
        """The names of the constant-only values held now for the next call (empty when
        nothing is held)."""
        names = self._slot_names()
        return () if self._memo is None else tuple(names[slot] for slot in self._kept)

    def _slot_names(self) -> dict[int, str]:
        """Each slot's name: the input, constant or computing node's."""
        return {**{slot: name for slot, name, *_ in self._inputs},
                **dict(self._constants),
                **{step[3]: step[4].name for step in self._checked_steps}}

    def __call__(self, inputs: Mapping[str, torch.Tensor], *, copy_outputs: bool = True,
                 constants: Mapping[str, torch.Tensor] | None = None
                 ) -> dict[str, torch.Tensor]:
        """:func:`interpret` of the prepared graph (same parameters, result and errors)."""
        env: list = [None] * self._size
        if not isinstance(inputs, Mapping) or len(inputs) != len(self._inputs):
            # Unused inputs given too (checked, not used), or something wrong (says what).
            check_inputs(self.graph, inputs, self._optional)
        try:
            self._place_inputs(env, inputs)
        except (KeyError, TypeError, AttributeError):
            check_inputs(self.graph, inputs, self._optional)  # says what is wrong
            for slot, name, *_ in self._inputs:
                env[slot] = inputs[name]
        given = self.graph.constants if constants is None else constants
        for slot, name in self._constants:
            env[slot] = given[name]
        return self._execute(env, copy_outputs)

    def run_loaded(self, values: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """:meth:`__call__` of one mapping holding the inputs and the constants by name (what
        a device's loads give it), the outputs as computed (``copy_outputs=False``): no
        mapping of each is built per call. Same checks and errors as :meth:`__call__`."""
        env: list = [None] * self._size
        try:
            self._place_inputs(env, values)
        except (KeyError, TypeError, AttributeError):
            given = {n: values[n] for n in self.graph.inputs if n in values}
            check_inputs(self.graph, given, self._optional)  # says what is wrong
            raise  # check_inputs found nothing wrong with the inputs: a bad mapping
        for slot, name in self._constants:
            env[slot] = values[name]
        return self._execute(env, False)

    def _place_inputs(self, env: list, values: Mapping[str, torch.Tensor]) -> None:
        """Put each input of ``values`` into its slot of ``env``; a missing one, or one of
        another shape or dtype, raises KeyError, TypeError or AttributeError (the caller's
        :func:`check_inputs` then says what is wrong)."""
        for slot, name, shape, dtype, _ in self._inputs:
            value = values[name]
            if value.shape != shape or value.dtype != dtype:
                raise TypeError
            env[slot] = value

    def _execute(self, env: list, copy_outputs: bool) -> dict[str, torch.Tensor]:
        """Run the steps over ``env`` (inputs and constants placed) and return the outputs."""
        # No grad for the whole graph, as torch.no_grad() sets it (without the context
        # manager's object and calls: this runs on every device call).
        enabled = _grad_enabled()
        _set_grad_enabled(False)
        try:
            if not self.checked:
                self._run_first(env)
                self.checked = True
                self._remember(env, tuple(env[slot] for slot in self._roots))
            else:
                self._run_steps(env)
        finally:
            _set_grad_enabled(enabled)
        return self._outputs_of(env, copy_outputs)

    def _run_steps(self, env: list) -> None:
        """A run after the first: the kept constant-only values or the steps that give them,
        then the rest."""
        early, late = self._split
        if self._run_late is None:
            self._run_early = generate(early, self._kept)
            self._run_late = generate(late, self._exports)
        if not early:
            self._run_late(env)
            return
        if self._recall(env):
            self._misses = 0
        else:
            roots = tuple(env[slot] for slot in self._roots)  # before any is freed
            self._run_early(env)  # type: ignore[misc]
            self._remember(env, roots)
            self._misses += 1
        self._run_late(env)
        if self._misses >= 2:
            # The constants change on every call (a training step's state): what is kept is
            # never reused, and running those steps first holds their values longer. From now
            # on: graph order, nothing kept.
            self._split, self._memo = ([], self._in_order_steps), None
            self._run_late = generate(self._in_order_steps, self._exports)

    def _outputs_of(self, env: list, copy_outputs: bool) -> dict[str, torch.Tensor]:
        """The outputs from ``env``, copied with ``copy_outputs``."""
        if not copy_outputs:
            return {out: env[slot] for out, slot in self._outputs}
        # Copies: an output may be a view of an input or a constant (e.g. a permute of one).
        return {out: env[slot].clone(memory_format=torch.contiguous_format)
                for out, slot in self._outputs}

    def _recall(self, env: list) -> bool:
        """Put the kept constant-only values into ``env`` if the roots are those they were
        computed from; say whether they were."""
        memo = self._memo
        if memo is None:
            return False
        tensors, versions, values = memo
        for slot, tensor, version in zip(self._roots, tensors, versions, strict=True):
            given = env[slot]
            if given is not tensor or given._version != version:
                return False
        for slot, value in zip(self._kept, values, strict=True):
            env[slot] = value
        return True

    def _remember(self, env: list, tensors: tuple) -> None:
        """Keep the constant-only values of this run, with what they were computed from: the
        root tensors ``tensors``."""
        if not self._split[0]:
            return
        try:
            versions = tuple(t._version for t in tensors)
        except RuntimeError:  # an inference tensor has no version counter: nothing is kept
            self._memo = None
            return
        self._memo = (tensors, versions, tuple(env[slot] for slot in self._kept))


def _split_constant_steps(steps: list[tuple], constants: set[int], outputs: set[int]
                          ) -> tuple[list[tuple], list[tuple], tuple[int, ...], tuple[int, ...]]:
    """``steps`` as the steps that read only constants (directly or through each other) and
    the rest, each in graph order; the constant slots the first read (the roots), and the
    values of the first that the rest or the outputs use (what a call keeps)."""
    derived = set(constants)
    early, late = [], []
    for step in steps:
        if all(slot in derived for slot in step[1]):
            derived.add(step[3])
            early.append(step)
        else:
            late.append(step)
    roots = sorted({slot for step in early for slot in step[1] if slot in constants})
    made = {step[3] for step in early}
    used = {slot for step in late for slot in step[1]} | outputs
    return early, late, tuple(roots), tuple(sorted(made & used))


def _node_key(op: str, operands: tuple[int, ...], attrs: Mapping[str, Any]) -> tuple | None:
    """What makes two nodes compute the same value, or None when their attributes hold
    anything but plain values (a tensor attribute, say: never merged)."""
    key = _plain(dict(attrs))
    return None if key is None else (op, operands, key)


def _plain(value: Any) -> Any:
    """A hashable key equal for equal plain values (numbers by type and repr, so 0.0 and
    -0.0, or 1 and 1.0, stay apart), or None for anything else."""
    if value is None or isinstance(value, (bool, int, float, str, torch.dtype)):
        return (type(value).__name__, repr(value))
    if isinstance(value, (tuple, list)):
        items = [_plain(v) for v in value]
        return None if any(i is None for i in items) else (type(value).__name__, *items)
    if isinstance(value, dict):
        items = [(k, _plain(v)) for k, v in sorted(value.items()) if isinstance(k, str)]
        if len(items) != len(value) or any(i[1] is None for i in items):
            return None
        return ("dict", *items)
    return None
