"""``float_dtype`` at capture: a float32 graph's arithmetic retargeted to 16-bit precision."""

from __future__ import annotations

import torch

from .ir import Graph, GraphBuilder
from .types import dtype_to_torch

__all__ = ["retarget"]


def retarget(graph: Graph, compute: str) -> Graph:
    """Run the graph's float32 arithmetic in ``compute`` precision, keeping its IO dtypes.

    Nodes keep their names; the casts this adds get fresh ones.
    """
    out = Graph(inputs=dict(graph.inputs))
    for name, tensor in graph.constants.items():
        wide = tensor.dtype == torch.float32
        out.constants[name] = tensor.to(dtype_to_torch(compute)) if wide else tensor
    b = GraphBuilder(out, reserved=graph.value_types())
    rename: dict[str, str] = {}

    def cast(value: str, dtype: str, base: str) -> str:
        return b.emit("cast", [value], b.fresh(f"{base}_{dtype}"), dtype=dtype)

    for name, ttype in graph.inputs.items():
        if ttype.dtype == "float32":
            rename[name] = cast(name, compute, name)
    for node in graph.nodes:
        attrs = dict(node.attrs)
        if node.op == "cast" and attrs["dtype"] == "float32":
            attrs["dtype"] = compute
        operands = [rename.get(o, o) for o in node.operands]
        if node.op == "cast" and b.type(operands[0]).dtype == attrs["dtype"]:
            rename[node.name] = operands[0]
            continue
        result = b.emit(node.op, operands, node.name, **attrs)
        if b.type(result).dtype == "float32":  # e.g. float16 + bfloat16 promotes
            result = cast(result, compute, node.name)
        rename[node.name] = result
    for out_name, value in graph.outputs.items():
        new = value if value in graph.inputs else rename.get(value, value)
        wanted = graph.type_of(value).dtype
        if b.type(new).dtype != wanted:
            new = cast(new, wanted, out_name)
        out.outputs[out_name] = new
    return out
