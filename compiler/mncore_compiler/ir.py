"""The MN-Core compiler's graph IR: a small, explicit SSA graph with a verifier and JSON form."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from .errors import IRVerificationError
from .ops import OpTypeError, get_op, infer_type
from .types import DTYPES, FLOAT_IR_DTYPES, TensorType, dtype_from_torch, dtype_to_torch

__all__ = [
    "DTYPES",
    "FLOAT_IR_DTYPES",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "Graph",
    "GraphBuilder",
    "Node",
    "TensorType",
    "dtype_from_torch",
    "dtype_to_torch",
    "freeze_attrs",
    "fresh_name",
]

FORMAT_NAME = "mncore-ir"
FORMAT_VERSION = 1


def _freeze(value: Any) -> Any:
    """Turn JSON-able attribute values into hashable, comparable ones (lists become tuples)."""
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(
        f"IR attribute values must be None, bool, int, float, str or lists of them, "
        f"not {type(value).__name__} ({value!r})"
    )


def _thaw(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


@dataclass(frozen=True)
class Node:
    """One SSA operation: ``name = op(*operands, **attrs) : type``.

    Parameters
    ----------
    name : str
        The value this node defines; unique in its graph.
    op : str
        Name of an op in :data:`mncore_compiler.ops.OPS`.
    operands : tuple of str
        Names of the values it reads (inputs, constants or earlier nodes).
    attrs : dict
        Static attributes, JSON-able (lists are stored as tuples).
    type : TensorType
        The result type.
    """

    name: str
    op: str
    operands: tuple[str, ...]
    attrs: Mapping[str, Any]
    type: TensorType

    def __post_init__(self) -> None:
        object.__setattr__(self, "operands", tuple(self.operands))
        object.__setattr__(self, "attrs", freeze_attrs(self.attrs))

    def to_json(self) -> dict[str, Any]:
        """Return the node as a JSON-able dict."""
        return {
            "name": self.name,
            "op": self.op,
            "operands": list(self.operands),
            "attrs": {k: _thaw(v) for k, v in self.attrs.items()},
            "type": self.type.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Node:
        """Inverse of :meth:`to_json`."""
        return cls(
            name=data["name"],
            op=data["op"],
            operands=tuple(data["operands"]),
            attrs=dict(data.get("attrs", {})),
            type=TensorType.from_json(data["type"]),
        )

    def __str__(self) -> str:
        args = [f"%{o}" for o in self.operands] + [f"{k}={v!r}" for k, v in self.attrs.items()]
        return f"%{self.name}: {self.type} = {self.op}({', '.join(args)})"


@dataclass
class Graph:
    """A function as an ordered SSA graph.

    Parameters
    ----------
    inputs : dict of str to TensorType
        The function's inputs, in calling order.
    constants : dict of str to torch.Tensor
        Parameters, buffers and captured tensors; read-only values of the graph.
    nodes : list of Node
        Operations in execution order; each reads only values defined before it.
    outputs : dict of str to str
        Output name -> the value returned under that name (a node, input or constant).
    """

    inputs: dict[str, TensorType] = field(default_factory=dict)
    constants: dict[str, torch.Tensor] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)

    # -- queries -------------------------------------------------------------------------------

    def value_types(self) -> dict[str, TensorType]:
        """Return the type of every value (inputs, constants, then nodes), by name."""
        types = dict(self.inputs)
        for name, tensor in self.constants.items():
            types[name] = TensorType.of(tensor)
        for node in self.nodes:
            types[node.name] = node.type
        return types

    def type_of(self, name: str) -> TensorType:
        """Return the type of one value; ``KeyError`` naming the value when it is unknown."""
        if name in self.inputs:
            return self.inputs[name]
        if name in self.constants:
            return TensorType.of(self.constants[name])
        for node in self.nodes:
            if node.name == name:
                return node.type
        raise KeyError(f"graph has no value named {name!r}")

    def output_types(self) -> dict[str, TensorType]:
        """Return the type of every output, by output name."""
        types = self.value_types()
        return {out: types[value] for out, value in self.outputs.items()}

    def users(self) -> dict[str, list[str]]:
        """Return, for each value, the names of the nodes reading it (outputs not included)."""
        result: dict[str, list[str]] = {name: [] for name in self.value_types()}
        for node in self.nodes:
            for operand in node.operands:
                result.setdefault(operand, []).append(node.name)
        return result

    def constant_tensors(self) -> dict[str, torch.Tensor]:
        """Return the constants (a new dict; the tensors are shared) to store beside the JSON."""
        return dict(self.constants)

    def copy(self) -> Graph:
        """Return a graph with its own containers (nodes and constant tensors are shared)."""
        return Graph(dict(self.inputs), dict(self.constants), list(self.nodes), dict(self.outputs))

    # -- verification --------------------------------------------------------------------------

    def verify(self) -> None:
        """Check every IR invariant.

        Raises
        ------
        IRVerificationError
            On an undefined operand, a redefined name, an unknown op, a result type that differs
            from the op's shape rule, bad attributes, a non-float constant, or an output naming
            an unknown value.
        """
        types: dict[str, TensorType] = {}
        for name, ttype in self.inputs.items():
            _check_name(name, "input")
            if not isinstance(ttype, TensorType):
                raise IRVerificationError(f"input {name!r} must have a TensorType, not {ttype!r}")
            types[name] = ttype
        for name, tensor in self.constants.items():
            _check_name(name, "constant")
            _define(types, name, "constant", _constant_type(name, tensor))
        for index, node in enumerate(self.nodes):
            where = f"node #{index} %{node.name} ({node.op})"
            _check_name(node.name, where)
            try:
                opdef = get_op(node.op)
            except KeyError as exc:
                raise IRVerificationError(f"{where}: {exc.args[0]}") from None
            missing = [o for o in node.operands if o not in types]
            if missing:
                raise IRVerificationError(
                    f"{where}: operand(s) {missing} are not defined before this node "
                    "(define inputs, constants or earlier nodes first)"
                )
            try:
                expected = opdef.infer([types[o] for o in node.operands], node.attrs)
            except OpTypeError as exc:
                raise IRVerificationError(f"{where}: {exc}") from None
            if expected != node.type:
                raise IRVerificationError(
                    f"{where}: result type is {node.type} but the {node.op} shape rule "
                    f"gives {expected}"
                )
            _define(types, node.name, where, node.type)
        if not self.outputs:
            raise IRVerificationError("graph has no outputs")
        for out, value in self.outputs.items():
            _check_name(out, "output")
            if value not in types:
                raise IRVerificationError(
                    f"output {out!r} names {value!r}, which is not an input, constant or node"
                )

    # -- serialization -------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """Return the graph as a JSON-able dict; constants appear by name, shape and dtype only.

        Store :meth:`constant_tensors` beside it (e.g. with ``torch.save``) to rebuild the graph
        with :meth:`from_json`. The same graph always gives the same dict.
        """
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "inputs": [{"name": n, **t.to_json()} for n, t in self.inputs.items()],
            "constants": [
                {"name": n, **TensorType.of(t).to_json()} for n, t in self.constants.items()
            ],
            "nodes": [node.to_json() for node in self.nodes],
            "outputs": [{"name": n, "value": v} for n, v in self.outputs.items()],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], constants: Mapping[str, torch.Tensor]) -> Graph:
        """Rebuild a graph from :meth:`to_json` output and its constant tensors, then verify it.

        Raises
        ------
        IRVerificationError
            When the data is not this format/version, a constant is missing, extra or of the
            wrong type, or the graph does not verify.
        """
        if not isinstance(data, Mapping) or data.get("format") != FORMAT_NAME:
            raise IRVerificationError(f"not a {FORMAT_NAME} graph (missing 'format' field)")
        if data.get("version") != FORMAT_VERSION:
            raise IRVerificationError(
                f"{FORMAT_NAME} version {data.get('version')!r} is not supported; "
                f"this compiler reads version {FORMAT_VERSION}"
            )
        try:
            graph = cls._from_fields(data, constants)
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, IRVerificationError):
                raise
            raise IRVerificationError(f"malformed {FORMAT_NAME} graph: {exc!r}") from exc
        graph.verify()
        return graph

    @classmethod
    def _from_fields(cls, data: Mapping[str, Any], constants: Mapping[str, torch.Tensor]) -> Graph:
        declared = {c["name"]: TensorType.from_json(c) for c in data["constants"]}
        if set(declared) != set(constants):
            raise IRVerificationError(
                f"constants given {sorted(constants)} do not match the graph's {sorted(declared)}"
            )
        for name, ttype in declared.items():
            actual = _constant_type(name, constants[name])
            if actual != ttype:
                raise IRVerificationError(
                    f"constant {name!r} is {actual} but the graph declares {ttype}"
                )
        return cls(
            inputs={i["name"]: TensorType.from_json(i) for i in data["inputs"]},
            constants={name: constants[name] for name in declared},
            nodes=[Node.from_json(n) for n in data["nodes"]],
            outputs={o["name"]: o["value"] for o in data["outputs"]},
        )

    def __str__(self) -> str:
        lines = [f"graph({', '.join(f'%{n}: {t}' for n, t in self.inputs.items())}) {{"]
        for name, tensor in self.constants.items():
            lines.append(f"  %{name}: {TensorType.of(tensor)} = constant")
        lines.extend(f"  {node}" for node in self.nodes)
        outs = ", ".join(f"{n}=%{v}" for n, v in self.outputs.items())
        lines.append(f"  return {{{outs}}}")
        lines.append("}")
        return "\n".join(lines)


class GraphBuilder:
    """Appends type-checked nodes to a graph: the one way capture and the passes emit IR.

    Each emitted node's type comes from its op's type rule over the operands' types, and its
    name is the one asked for or a fresh one (never a name in use or reserved).

    Parameters
    ----------
    graph : Graph, optional
        The graph to extend (a new empty one by default). Its inputs, constants and nodes so far
        are known values; values added later go through :meth:`add_input`,
        :meth:`add_constant`, :meth:`emit` or :meth:`append`.
    reserved : iterable of str
        Names no fresh name may take, beyond the graph's own values (e.g. the values of the
        graph being rewritten, so that a new name never shadows an old one).
    """

    def __init__(self, graph: Graph | None = None, reserved: Iterable[str] = ()):
        self.graph = Graph() if graph is None else graph
        self.types: dict[str, TensorType] = self.graph.value_types()
        self.taken: set[str] = set(self.types) | set(reserved)

    def fresh(self, base: str) -> str:
        """Return an unused value name starting with ``base``, and reserve it."""
        return fresh_name(base, self.taken)

    def type(self, name: str) -> TensorType:
        """Return the type of a value of the graph; ``KeyError`` naming an unknown value."""
        try:
            return self.types[name]
        except KeyError:
            raise KeyError(f"graph has no value named {name!r}") from None

    def add_input(self, name: str, ttype: TensorType) -> str:
        """Declare the next input of the graph (its name reserved) and return its name."""
        self.graph.inputs[name] = self.types[name] = ttype
        self.taken.add(name)
        return name

    def add_constant(self, name: str, tensor: torch.Tensor) -> str:
        """Add a constant under ``name`` (its name reserved) and return the name."""
        self.graph.constants[name] = tensor
        self.types[name] = TensorType.of(tensor)
        self.taken.add(name)
        return name

    def emit(self, op: str, operands: Iterable[str], name: str | None = None,
             **attrs: Any) -> str:
        """Append ``op(operands, attrs)``, named ``name`` or a fresh name after ``op``.

        Raises
        ------
        OpTypeError
            When the op's type rule rejects the operands or attributes.
        KeyError
            For an unknown op or operand.
        """
        operands = tuple(operands)
        frozen = freeze_attrs(attrs)
        result = infer_type(op, [self.type(o) for o in operands], frozen)
        node = Node(name or self.fresh(op), op, operands, frozen, result)
        return self.append(node)

    def append(self, node: Node) -> str:
        """Append an already typed node as it is and return its name."""
        self.graph.nodes.append(node)
        self.types[node.name] = node.type
        self.taken.add(node.name)
        return node.name


def freeze_attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Return node attributes as a :class:`Node` stores them: sorted, lists made tuples.

    Raises
    ------
    TypeError
        For a value that is not None, bool, int, float, str or a list of them.
    """
    return {str(k): _freeze(v) for k, v in sorted(dict(attrs).items())}


def fresh_name(base: str, taken: set[str]) -> str:
    """Return the first of ``base``, ``base_1``, ``base_2``, ... not in ``taken``; add it there."""
    name, index = base, 0
    while name in taken:
        index += 1
        name = f"{base}_{index}"
    taken.add(name)
    return name


def _check_name(name: object, what: str) -> None:
    if not isinstance(name, str) or not name:
        raise IRVerificationError(f"{what} name must be a non-empty str, not {name!r}")


def _define(types: dict[str, TensorType], name: str, where: str, ttype: TensorType) -> None:
    if name in types:
        raise IRVerificationError(f"{where}: value {name!r} is already defined (SSA redefinition)")
    types[name] = ttype


def _constant_type(name: str, tensor: object) -> TensorType:
    if not isinstance(tensor, torch.Tensor):
        raise IRVerificationError(
            f"constant {name!r} must be a torch.Tensor, not {type(tensor).__name__}"
        )
    try:
        return TensorType.of(tensor)
    except TypeError as exc:
        raise IRVerificationError(f"constant {name!r}: {exc}") from None
