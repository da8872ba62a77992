"""Capture a dict-to-dict torch function into the MN-Core IR, through make_fx and aten ops."""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable, Mapping
from typing import Any, cast

import torch
from mncore_hdl.layout import ElementRangeError, check_representable
from torch import fx
from torch.fx.experimental.proxy_tensor import make_fx

from ._aten import HANDLERS as _HANDLERS
from ._aten import Unavailable
from .errors import CaptureError, CompilerError, UnsupportedOperationError
from .ir import DTYPES, Graph, Node, TensorType, dtype_to_torch, fresh_name
from .ops import OpTypeError, infer_type

__all__ = ["FLOAT_DTYPES", "capture", "capture_with_state", "supported_torch_ops"]

FLOAT_DTYPES: dict[str, str] = {
    "float": "float32",
    "float32": "float32",
    "half": "float16",
    "float16": "float16",
    "bfloat16": "bfloat16",
    # Captured in float32; the pipeline's mixed-precision pass then gives the matmuls 16-bit
    # operands (mncore_compiler.passes.precision).
    "mixed": "float32",
}
"""Accepted ``float_dtype`` spellings and the IR dtype capture computes in."""

TensorDict = dict[str, torch.Tensor]
_IR_TORCH_DTYPES = tuple(dtype_to_torch(d) for d in DTYPES)


def capture(
    fn: Callable[[TensorDict], Mapping[str, torch.Tensor]],
    sample_inputs: Mapping[str, torch.Tensor],
    *,
    float_dtype: str = "float32",
) -> Graph:
    """Trace ``fn`` on ``sample_inputs`` and return its verified IR graph.

    Parameters
    ----------
    fn : callable
        Takes a dict of tensors and returns a dict of tensors. It may close over
        ``torch.nn.Module`` objects and tensors; those become graph constants, named after
        the closed-over variable (e.g. ``"lin.weight"``) where they can be found.
    sample_inputs : dict of str to torch.Tensor
        Example inputs; they fix the graph's input names, order, shapes and dtypes.
    float_dtype : str
        Dtype in which the function's float32 arithmetic runs: ``"float"``/``"float32"``
        (as written), ``"half"``/``"float16"`` or ``"bfloat16"``. In a reduced precision,
        float32 inputs are cast on entry, float32 constants are stored converted, and
        outputs are cast back, so the graph's input and output dtypes stay those of torch.
        ``"mixed"`` captures in float32: its matmuls get 16-bit operands later, in the
        ``mixed-precision`` pass.

    Returns
    -------
    Graph
        Inputs in ``sample_inputs`` order, outputs in the order ``fn`` returned them.

    Raises
    ------
    CaptureError
        (a ``TypeError``) when ``sample_inputs`` or the value ``fn`` returns is not a dict of
        str to tensors of a dtype in :data:`~mncore_compiler.ir.DTYPES` (floats, int32,
        int64, bool).
    UnsupportedOperationError
        When ``fn`` uses a torch operation the compiler cannot express, naming it.
    ValueError
        For an unknown ``float_dtype``.
    """
    return capture_with_state(fn, sample_inputs, float_dtype=float_dtype)[0]


def capture_with_state(
    fn: Callable[[TensorDict], Mapping[str, torch.Tensor]],
    sample_inputs: Mapping[str, torch.Tensor],
    *,
    float_dtype: str = "float32",
    registered: Mapping[int, str] | None = None,
) -> tuple[Graph, dict[str, str]]:
    """:func:`capture`, also telling which constants are registered module state.

    Parameters
    ----------
    fn, sample_inputs, float_dtype
        As for :func:`capture`.
    registered : dict of int to str, optional
        ``id`` of each registered tensor -> its registered name (what
        ``mlsdk.Context.registry`` holds). A closed-over tensor found here is still a graph
        constant (the graph stays self-contained), but the runtime reads it from the
        Context's device copy instead of uploading the program's own.

    Returns
    -------
    graph : Graph
        As :func:`capture` returns it.
    state : dict of str to str
        Constant name -> registered name, for each constant that is a registered tensor.
    """
    if float_dtype not in FLOAT_DTYPES:
        raise ValueError(f"float_dtype must be one of {sorted(FLOAT_DTYPES)}, not {float_dtype!r}")
    if not callable(fn):
        raise CaptureError(f"fn must be callable, not {type(fn).__name__}")
    names, tensors = _check_sample_inputs(sample_inputs)
    module, out_names = _trace(fn, names, tensors)
    # A wrapper (functools.wraps, mlsdk's pytree adapter) names constants after what it wraps.
    converter = _Converter(module, names, _closure_tensor_names(inspect.unwrap(fn)), registered)
    graph = converter.run(out_names)
    compute = FLOAT_DTYPES[float_dtype]
    if compute != "float32":
        graph = _retarget(graph, compute)
    graph.verify()
    return graph, dict(converter.state)


def supported_torch_ops() -> list[str]:
    """Return the aten overloads capture translates, e.g. ``"aten.add.Tensor"``, sorted."""
    return sorted(_HANDLERS)


# -- calling convention -------------------------------------------------------------------------


def _check_sample_inputs(samples: object) -> tuple[list[str], list[torch.Tensor]]:
    checked = _check_tensor_dict(samples, "sample_inputs must be", "input", "sample input")
    for name, value in checked.items():
        if value.dtype not in _IR_TORCH_DTYPES:
            raise CaptureError(
                f"sample input {name!r} has dtype {str(value.dtype).replace('torch.', '')}; "
                f"the MN-Core compiler takes inputs of dtype {', '.join(DTYPES)}"
            )
    # Traced from private copies: a function that works in place (or that the compiler then
    # rejects) can never touch the caller's tensors.
    return list(checked), [t.detach().clone() for t in checked.values()]


def _check_result(result: object) -> list[str]:
    checked = _check_tensor_dict(result, "the function must return", "output", "output")
    if not checked:
        raise CaptureError("the function returned an empty dict; return at least one output")
    return list(checked)


def _check_tensor_dict(value: object, must: str, kind: str, item: str) -> dict[str, torch.Tensor]:
    # must: "sample_inputs must be" / "the function must return"; kind and item name the entries.
    if not isinstance(value, Mapping):
        raise CaptureError(f"{must} a dict of str to torch.Tensor, not {type(value).__name__}")
    for name, tensor in value.items():
        if not isinstance(name, str):
            raise CaptureError(f"{kind} names must be str, not {type(name).__name__} ({name!r})")
        if not isinstance(tensor, torch.Tensor):
            raise CaptureError(
                f"{item} {name!r} must be a torch.Tensor, not {type(tensor).__name__}"
            )
        if tensor.numel() == 0:
            raise CaptureError(
                f"{item} {name!r} has zero elements (shape {tuple(tensor.shape)}); zero-size "
                "tensors are not supported: give every input and output at least one element"
            )
    return dict(value)


def _trace(
    fn: Callable[[TensorDict], Mapping[str, torch.Tensor]],
    names: list[str],
    tensors: list[torch.Tensor],
) -> tuple[fx.GraphModule, list[str]]:
    out_names: list[str] = []

    def flat(*args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        result = fn(dict(zip(names, args, strict=True)))
        out_names[:] = _check_result(result)
        return tuple(result.values())

    with torch.no_grad():
        module = make_fx(flat, tracing_mode="real")(*tensors)
    return module, out_names


def _closure_tensor_names(fn: Callable[..., Any]) -> dict[int, str]:
    """Map ``id`` of every tensor reachable from ``fn``'s free variables to a readable name."""
    found: dict[str, object] = {}
    code = getattr(fn, "__code__", None)
    if code is not None and fn.__closure__ is not None:
        for var, cell in zip(code.co_freevars, fn.__closure__, strict=True):
            try:
                found[var] = cell.cell_contents
            except ValueError:  # an empty cell: the variable is assigned later
                continue
    if code is not None:
        globals_ = getattr(fn, "__globals__", {})
        found.update({n: globals_[n] for n in code.co_names if n in globals_})
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, torch.nn.Module):
        found["self"] = owner
    names: dict[int, str] = {}
    for var, obj in found.items():
        if isinstance(obj, torch.nn.Module):
            for sub, tensor in obj.state_dict(keep_vars=True).items():
                names.setdefault(id(tensor), f"{var}.{sub}")
        elif isinstance(obj, torch.Tensor):
            names.setdefault(id(obj), var)
    return names


# -- fx graph -> IR -----------------------------------------------------------------------------


class _Converter:
    """Walks a make_fx graph and emits IR nodes through the handlers below."""

    def __init__(self, module: fx.GraphModule, input_names: list[str], hints: dict[int, str],
                 registered: Mapping[int, str] | None = None):
        self.module = module
        self.graph = Graph()
        self.hints = hints
        self.registered = dict(registered or {})
        #: Constant name -> registered name, for constants that are registered tensors.
        self.state: dict[str, str] = {}
        self.used: set[str] = set(input_names)
        self.values: dict[fx.Node, Any] = {}
        self.constant_ids: dict[int, tuple[torch.Tensor, str]] = {}
        self.types: dict[str, TensorType] = {}
        self.input_names = input_names

    def run(self, out_names: list[str]) -> Graph:
        placeholders = iter(self.input_names)
        for node in self.module.graph.nodes:
            if node.op == "placeholder":
                name = next(placeholders)
                self.graph.inputs[name] = self.types[name] = TensorType.of(node.meta["val"])
                self.values[node] = name
            elif node.op == "get_attr":
                self.values[node] = self.constant(getattr(self.module, node.target), node.target)
            elif node.op == "call_function":
                self.values[node] = self.call(node)
            elif node.op == "output":
                results = [self.resolve(v) for v in node.args[0]]
                self.graph.outputs = dict(zip(out_names, results, strict=True))
        return self.graph

    def fresh(self, base: str) -> str:
        return fresh_name(base, self.used)

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
        self.graph.constants[name] = tensor.detach().clone()
        self.types[name] = TensorType.of(tensor)
        if id(tensor) in self.registered:
            self.state[name] = self.registered[id(tensor)]
        # Holding the tensor keeps its id from being reused by a later temporary (a factory).
        self.constant_ids[id(tensor)] = (tensor, name)
        return name

    def emit(self, op: str, operands: list[str], **attrs: Any) -> str:
        types = [self.types[o] for o in operands]
        frozen = Node("", op, (), attrs, TensorType((), "float32")).attrs  # lists -> tuples
        try:
            result = infer_type(op, types, frozen)
        except OpTypeError as exc:
            raise CompilerError(f"internal error building {op}: {exc}") from exc
        name = self.fresh(op)
        self.graph.nodes.append(Node(name, op, tuple(operands), frozen, result))
        self.types[name] = result
        return name

    def type(self, name: str) -> TensorType:
        return self.types[name]

    def resolve(self, arg: Any) -> Any:
        if isinstance(arg, fx.Node):
            value = self.values[arg]
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
            return source[index]
        key = str(node.target)
        handler = _HANDLERS.get(key)
        if handler is None:
            raise UnsupportedOperationError(
                f"{key} is not supported by the MN-Core compiler; "
                f"supported ops: {', '.join(supported_torch_ops())}"
            )
        args = _bind(node.target, self.resolve(node.args), self.resolve(node.kwargs))
        result = handler(self, args, node)
        if isinstance(result, str):
            self.check_against_torch(node, result)
        return result

    def check_against_torch(self, node: fx.Node, name: str) -> None:
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            expected = (tuple(val.shape), val.dtype)
            got = self.type(name)
            if (got.shape, got.torch_dtype) != expected:
                raise CompilerError(
                    f"internal error: {node.target} captured as {got}, torch computed "
                    f"{list(expected[0])} {expected[1]}"
                )


def _bind(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
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


# -- float_dtype --------------------------------------------------------------------------------


def _retarget(graph: Graph, compute: str) -> Graph:
    """Run the graph's float32 arithmetic in ``compute`` precision, keeping its IO dtypes.

    Nodes keep their names; the casts this adds get fresh ones.
    """
    out = Graph(inputs=dict(graph.inputs))
    taken = set(graph.value_types())
    rename: dict[str, str] = {}

    def emit(op: str, operands: list[str], attrs: dict[str, Any], name: str) -> str:
        types = [out.type_of(o) for o in operands]
        out.nodes.append(Node(name, op, tuple(operands), attrs, infer_type(op, types, attrs)))
        return name

    def cast(value: str, dtype: str, base: str) -> str:
        name, index = f"{base}_{dtype}", 0
        while name in taken:
            index += 1
            name = f"{base}_{dtype}_{index}"
        taken.add(name)
        return emit("cast", [value], {"dtype": dtype}, name)

    for name, tensor in graph.constants.items():
        wide = tensor.dtype == torch.float32
        out.constants[name] = tensor.to(TensorType((), compute).torch_dtype) if wide else tensor
    for name, ttype in graph.inputs.items():
        if ttype.dtype == "float32":
            rename[name] = cast(name, compute, name)
    for node in graph.nodes:
        attrs = dict(node.attrs)
        if node.op == "cast" and attrs["dtype"] == "float32":
            attrs["dtype"] = compute
        operands = [rename.get(o, o) for o in node.operands]
        if node.op == "cast" and out.type_of(operands[0]).dtype == attrs["dtype"]:
            rename[node.name] = operands[0]
            continue
        result = emit(node.op, operands, attrs, node.name)
        if out.type_of(result).dtype == "float32":  # e.g. float16 + bfloat16 promotes
            result = cast(result, compute, node.name)
        rename[node.name] = result
    for out_name, value in graph.outputs.items():
        new = value if value in graph.inputs else rename.get(value, value)
        wanted = graph.type_of(value).dtype
        if out.type_of(new).dtype != wanted:
            new = cast(new, wanted, out_name)
        out.outputs[out_name] = new
    return out
