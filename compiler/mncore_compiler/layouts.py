"""Layout assignment: a DRAM layout for every input, output and constant, honouring constraints."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from mncore_hdl.arch import MNCORE2, ArchConfig
from mncore_hdl.layout import Layout, host_layout, native_layout

from .errors import CaptureError, CompilerError
from .ir import Graph
from .types import TensorType

__all__ = ["LayoutPlan", "assign_layouts", "ConstraintError"]


class ConstraintError(CompilerError, ValueError):
    """An ``io_spec_constraints`` entry that names no IO, or cannot describe it.

    Attributes
    ----------
    key : str or None
        The ``io_spec_constraints`` key at fault, when one is.
    """

    def __init__(self, message: str, key: str | None = None):
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class LayoutPlan:
    """The layout of every name a program binds to a DRAM buffer."""

    inputs: dict[str, Layout] = field(default_factory=dict)
    outputs: dict[str, Layout] = field(default_factory=dict)
    constants: dict[str, Layout] = field(default_factory=dict)

    def values(self) -> dict[str, Layout]:
        """Layouts of the values a program reads: inputs and constants."""
        return {**self.constants, **self.inputs}


def assign_layouts(graph: Graph, constraints: Mapping[str, Layout] | None = None,
                   config: ArchConfig = MNCORE2) -> LayoutPlan:
    """Choose layouts: host-friendly rows for inputs, compute-native tiles for outputs and
    constants, except where ``constraints`` (IO name -> Layout) says otherwise.

    ``constraints`` are taken as checked: they come from
    :meth:`mncore_compiler.request.CompileRequest.constraint_layouts`, the one place that
    validates ``io_spec_constraints`` against the graph.
    """
    constraints = dict(constraints or {})
    plan = LayoutPlan()
    for name, ttype in graph.inputs.items():
        plan.inputs[name] = constraints.get(name) or host_layout(ttype.shape, ttype.dtype)
    for name, ttype in graph.output_types().items():
        plan.outputs[name] = (constraints.get(name)
                              or native_layout(ttype.shape, ttype.dtype, config))
    for name, tensor in graph.constants.items():
        ttype = TensorType.of(tensor)
        if tensor.numel() == 0:
            raise CaptureError(
                f"constant {name!r} has zero elements (shape {tuple(ttype.shape)}) and the "
                "program reads it; zero-size tensors are not supported: give every tensor the "
                "function reads at least one element")
        plan.constants[name] = native_layout(ttype.shape, ttype.dtype, config)
    return plan
