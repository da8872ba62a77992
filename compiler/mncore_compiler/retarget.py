"""``float_dtype`` at capture: a float32 graph's arithmetic retargeted to 16-bit precision."""

from __future__ import annotations

from typing import Any

import torch

from .ir import Graph, Node, TensorType
from .ops import infer_type

__all__ = ["retarget"]


def retarget(graph: Graph, compute: str) -> Graph:
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
