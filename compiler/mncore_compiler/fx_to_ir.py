"""The fx graph that make_fx traced, converted to the MN-Core IR: one handler per aten call,
in-place updates through the functionaliser, and every problem collected with its line."""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any, cast

import torch
from mncore_hdl.layout import ElementRangeError, check_representable
from torch import fx

from .aten import HANDLERS, Deferred, Handler, Unavailable, write_into_strided, write_into_view
from .capture_checks import Problems, unsupported_op
from .errors import CompilerError, UnsupportedOperationError
from .functionalize import (
    Functionalizer,
    functional_name,
    mutated_args,
    reshapes_in_place,
    returns_alias,
    undo_view,
)
from .ir import Graph, GraphBuilder
from .ops import OpTypeError
from .types import DTYPES, TensorType, dtype_to_torch

__all__ = ["FxToIR", "bind_arguments"]

_IR_TORCH_DTYPES = tuple(dtype_to_torch(d) for d in DTYPES)



class FxToIR:
    """Walks a make_fx graph and emits IR nodes through the aten handlers (it is their
    :class:`~mncore_compiler.aten.Builder`); in-place updates are functionalised on the way
    (:class:`~mncore_compiler.functionalize.Functionalizer`)."""

    def __init__(self, module: fx.GraphModule, input_names: list[str], hints: dict[int, str],
                 registered: Mapping[int, str] | None = None):
        self.module = module
        self.builder = GraphBuilder(reserved=input_names)
        self.graph = self.builder.graph
        self.hints = hints
        self.registered = dict(registered or {})
        #: Constant name -> registered name, for constants that are registered tensors.
        self.state: dict[str, str] = {}
        self.values: dict[fx.Node, Any] = {}
        self.constant_ids: dict[int, tuple[torch.Tensor, str]] = {}
        self.input_names = input_names
        self.fz = Functionalizer(self.undo_view)
        self.problems = Problems()
        #: Nodes with no value (an unsupported op the IR cannot stand in for, and what is
        #: computed from it) and the storages they wrote.
        self.poisoned: set[fx.Node] = set()
        self.poisoned_storage: set[object] = set()

    def run(self, out_names: list[str]) -> Graph:
        placeholders = iter(self.input_names)
        for node in self.module.graph.nodes:
            if node.op == "placeholder":
                name = next(placeholders)
                self.builder.add_input(name, TensorType.of(node.meta["val"]))
                self.values[node] = name
                self.fz.define(node, name)
                self.fz.inputs[node] = name
            elif node.op in ("get_attr", "call_function"):
                self.convert(node)
            elif node.op == "output":
                if self.problems.any:
                    return self.graph  # incomplete: capture_step reports the problems
                results = [self.resolve(v) for v in node.args[0]]
                self.graph.outputs = dict(zip(out_names, results, strict=True))
        return self.graph

    def convert(self, node: fx.Node) -> None:
        """Translate one node. An unsupported one is recorded and replaced by a stand-in of
        its type, so that the conversion goes on to find the function's other problems."""
        if self.depends_on_problem(node):
            # Computed from a value the IR could not stand in for: only whether the op
            # exists can be told.
            if str(node.target).startswith("aten.") and self.handler(node) is None:
                self.problems.add(unsupported_op(str(node.target)), node)
            self.stand_in(node)
            return
        try:
            if node.op == "get_attr":
                target = str(node.target)
                tensor = getattr(self.module, target)
                name = self.constant(tensor, target)
                self.values[node] = name
                key = ("constant", id(tensor))
                self.fz.define(node, name, key)
                self.fz.constants[key] = name
            else:
                self.values[node] = self.call(node)
        except UnsupportedOperationError as exc:
            self.problems.add(str(exc), node)
            self.stand_in(node)
        except CompilerError as exc:
            if type(exc) is not CompilerError:  # a user error (CaptureError): as it is
                raise
            # A compiler bug (a handler's result disagreeing with torch's): recorded, and the
            # conversion goes on, so that the unsupported ops are listed whatever else fails.
            self.problems.bug(str(exc), node)
            self.stand_in(node)

    def depends_on_problem(self, node: fx.Node) -> bool:
        if node.op != "call_function":
            return False
        for arg in node.all_input_nodes:
            base = self.fz.base(arg)
            if arg in self.poisoned or (base is not None and base[0] in self.poisoned_storage):
                return True
        return False

    def stand_in(self, node: fx.Node) -> None:
        """Give ``node`` zeros of the type torch traced, so that what is computed from it
        is converted (and checked) as usual; the graph is never used, capture raises once
        every problem is found. A node that writes in place, or whose value the IR cannot
        hold, leaves its dependants (and the storages it writes) without a value instead."""
        self.poisoned.add(node)
        mutated = mutated_args(node.target) if node.op == "call_function" else []
        if not mutated:
            try:
                value = self._zeros_like(node.meta.get("val"))
            except UnsupportedOperationError:
                value = None
            if value is not None:
                self.poisoned.discard(node)
                self.values[node] = value
                self.fz.define(node, value)
                return
        raw = bind_arguments(node.target, node.args, node.kwargs) if mutated else {}
        for name in mutated:
            base = self.fz.base(raw[name]) if isinstance(raw.get(name), fx.Node) else None
            if base is not None:
                self.poisoned_storage.add(base[0])

    def _zeros_like(self, val: Any) -> Any:
        if isinstance(val, torch.Tensor):
            return self.constant(torch.zeros(val.shape, dtype=val.dtype), "unsupported")
        if isinstance(val, (tuple, list)) and val:
            return tuple(None if v is None else self._zeros_like(v) for v in val)
        return None

    def handler(self, node: fx.Node) -> Handler | None:
        """The handler that translates ``node``'s op (an in-place op's is its functional
        form's), or None when there is none."""
        key = str(node.target)
        handler = HANDLERS.get(key)
        if handler is None and mutated_args(node.target) and key.startswith("aten."):
            handler = HANDLERS.get(functional_name(key))
        return handler

    def fresh(self, base: str) -> str:
        return self.builder.fresh(base)

    def constant_tensors(self) -> dict[str, torch.Tensor]:
        """Constant name -> the user's tensor it was captured from (not the graph's copy)."""
        return {name: tensor for tensor, name in self.constant_ids.values()}

    def constant(self, tensor: torch.Tensor, fallback: str) -> str:
        # make_fx emits one get_attr per use of a parameter; keep one constant per tensor.
        if id(tensor) in self.constant_ids:
            return self.constant_ids[id(tensor)][1]
        if tensor.dtype not in _IR_TORCH_DTYPES:
            raise UnsupportedOperationError(
                f"constant {fallback!r} has dtype {str(tensor.dtype).replace('torch.', '')}; "
                f"the MN-Core compiler only holds {', '.join(DTYPES)} tensors"
            )
        name = self.fresh(self.hints.get(id(tensor), fallback.lstrip("_")))
        try:  # an int64 constant is held in DRAM as int32: every value must fit
            check_representable(tensor)
        except ElementRangeError as exc:
            raise UnsupportedOperationError(f"constant {name!r}: {exc}") from None
        self.builder.add_constant(name, tensor.detach().clone())
        if id(tensor) in self.registered:
            self.state[name] = self.registered[id(tensor)]
        # Holding the tensor keeps its id from being reused by a later temporary (a factory).
        self.constant_ids[id(tensor)] = (tensor, name)
        return name

    def emit(self, op: str, operands: list[str], **attrs: Any) -> str:
        try:
            return self.builder.emit(op, operands, **attrs)
        except OpTypeError as exc:
            raise CompilerError(f"internal error building {op}: {exc}") from exc

    def undo_view(self, view: fx.Node, value: str) -> str | None:
        """``value``, a new value of ``view``, as a new value of the tensor it views."""
        undo = undo_view(view)
        if undo is None:
            # Part of the tensor (a slice, a select): written into its current value.
            source = view.args[0]
            if not isinstance(source, fx.Node):
                return None
            if str(view.target) == "aten.as_strided.default":
                return write_into_strided(self, view, self.resolve(source), value)
            return write_into_view(self, view, self.resolve(source), value)
        op, attrs = undo
        if op == "reshape" and self.type(value).shape == attrs["shape"]:
            return value
        if op == "permute" and attrs["dims"] == tuple(range(len(attrs["dims"]))):
            return value
        return self.emit(op, [value], **attrs)

    def type(self, name: str) -> TensorType:
        return self.builder.type(name)

    def write_state(self, node: fx.Node, target: Any, current: str, value: str) -> None:
        self.fz.write(node, target, self.coerce(node, value, current), same_storage=False)

    def resolve(self, arg: Any) -> Any:
        if isinstance(arg, fx.Node):
            value = self.fz.read(arg, self.values)
            if isinstance(value, Deferred):
                value = self.values[arg] = value.value()
                self.check_against_torch(arg, value)
            if isinstance(value, Unavailable):
                raise UnsupportedOperationError(value.reason)
            return value
        if isinstance(arg, (list, tuple)):
            return type(arg)(self.resolve(a) for a in arg)
        if isinstance(arg, dict):
            return {k: self.resolve(v) for k, v in arg.items()}
        return arg

    def call(self, node: fx.Node) -> Any:
        if node.target is operator.getitem:
            source, index = self.values[cast(fx.Node, node.args[0])], node.args[1]
            self.fz.define(node, source[index])
            return source[index]
        key = str(node.target)
        if key.startswith("profiler."):  # record_function markers of optimizer.step()
            return None
        mutated = mutated_args(node.target)
        handler = self.handler(node)
        if handler is None:
            raise UnsupportedOperationError(unsupported_op(key))
        args = bind_arguments(node.target, self.resolve(node.args), self.resolve(node.kwargs))
        result = handler(self, args, node)
        raw = bind_arguments(node.target, node.args, node.kwargs)
        if mutated and isinstance(result, tuple) and isinstance(raw[mutated[0]], list):
            # A foreach op (clip_grad_norm_'s _foreach_mul_) writes each tensor of a list.
            for target, value in zip(raw[mutated[0]], result, strict=True):
                new = self.coerce(node, value, self.resolve(target))
                self.fz.write(node, target, new)
                if target in self.fz.views:
                    # Written through: later reads of that view (the op returns no tensor
                    # to read instead) see the new value.
                    self.fz.views[target] = self.fz.views[node]
                    self.values[target] = new
            return None
        if mutated:
            if len(mutated) != 1 or not isinstance(result, str):
                raise UnsupportedOperationError(unsupported_op(key))
            target = raw[mutated[0]]
            new = (result if reshapes_in_place(key)
                   else self.coerce(node, result, self.resolve(target)))
            self.check_against_torch(node, new)
            self.fz.write(node, target, new)
            return new
        self.check_against_torch(node, result)
        schema = getattr(node.target, "_schema", None)
        first = schema.arguments[0].name if raw and schema is not None else None
        if returns_alias(node.target) and first is not None:
            self.fz.alias(node, raw[first], result, args.get(first))
        else:
            self.fz.define(node, result)
        return result

    def coerce(self, node: fx.Node, value: str, target: str) -> str:
        """``value`` as what an in-place op leaves in ``target``: its shape and dtype."""
        want, got = self.type(target), self.type(value)
        if got.dtype != want.dtype:
            value = self.emit("cast", [value], dtype=want.dtype)
        if got.shape != want.shape:
            try:
                value = self.emit("expand", [value], shape=want.shape)
            except CompilerError:
                raise UnsupportedOperationError(
                    f"{node.target} writes a {list(got.shape)} value into a "
                    f"{list(want.shape)} tensor") from None
        return value

    def check_against_torch(self, node: fx.Node, result: Any) -> None:
        """A CompilerError (a compiler bug) unless each tensor ``result`` holds (an IR value
        name, or a tuple of them for an op of several results) has the shape and dtype torch
        computed for it; a result the IR leaves out (None, a Deferred, an Unavailable) is
        checked when it is read."""
        val = node.meta.get("val")
        if isinstance(result, str) and isinstance(val, torch.Tensor):
            self._check_one(node, result, val, "")
        elif isinstance(result, tuple) and isinstance(val, (tuple, list)):
            for index, (name, want) in enumerate(zip(result, val, strict=False)):
                # A result torch leaves empty (batch norm's saved statistics in eval mode)
                # is one nothing reads; the IR holds no zero-size tensor.
                if isinstance(name, str) and isinstance(want, torch.Tensor) and want.numel():
                    self._check_one(node, name, want, f" (result {index})")

    def _check_one(self, node: fx.Node, name: str, val: torch.Tensor, which: str) -> None:
        expected = (tuple(val.shape), val.dtype)
        got = self.type(name)
        if (got.shape, got.torch_dtype) != expected:
            raise CompilerError(
                f"internal error: {node.target}{which} captured as {got}, torch computed "
                f"{list(expected[0])} {str(expected[1]).removeprefix('torch.')}"
            )


def bind_arguments(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Name every argument of an aten call after its schema, with defaults filled in."""
    bound: dict[str, Any] = {}
    for index, arg in enumerate(target._schema.arguments):
        if index < len(args) and not arg.kwarg_only:
            bound[arg.name] = args[index]
        elif arg.name in kwargs:
            bound[arg.name] = kwargs[arg.name]
        elif arg.has_default_value():
            bound[arg.name] = arg.default_value
    return bound
