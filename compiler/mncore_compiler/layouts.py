"""Layout assignment: a DRAM layout for every input, output and constant, honouring constraints."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from mncore_hdl.arch import MNCORE2, ArchConfig
from mncore_hdl.layout import Layout, host_layout, native_layout

from .errors import CompilerError
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

    A constraint key may name an input or an output (or both, when a name is both). It must
    describe that IO's exact shape and dtype.
    """
    constraints = dict(constraints or {})
    out_types = graph.output_types()
    valid = list(dict.fromkeys([*graph.inputs, *out_types]))
    for name, layout in constraints.items():
        if name not in valid:
            raise ConstraintError(
                f"io_spec_constraints key {name!r} is not an input or output of the function; "
                f"valid names are {valid}", key=name
            )
        if not isinstance(layout, Layout):
            raise ConstraintError(
                f"io_spec_constraints[{name!r}] must be an IOSpec or a Layout, not "
                f"{type(layout).__name__}", key=name
            )
        for ttype in [t for t in (graph.inputs.get(name), out_types.get(name)) if t]:
            _check_fits(name, layout, ttype)
    plan = LayoutPlan()
    for name, ttype in graph.inputs.items():
        plan.inputs[name] = constraints.get(name) or host_layout(ttype.shape, ttype.dtype)
    for name, ttype in out_types.items():
        plan.outputs[name] = (constraints.get(name)
                              or native_layout(ttype.shape, ttype.dtype, config))
    for name, tensor in graph.constants.items():
        ttype = TensorType.of(tensor)
        plan.constants[name] = native_layout(ttype.shape, ttype.dtype, config)
    for name, layout in [*plan.values().items(), *plan.outputs.items()]:
        if layout.groups > config.groups:
            raise ConstraintError(
                f"Layout {layout} of {name!r} spans {layout.groups} Groups; the device has "
                f"{config.groups}"
            )
    return plan


def _check_fits(name: str, layout: Layout, ttype: TensorType) -> None:
    if layout.shape != ttype.shape or layout.dtype != ttype.dtype:
        raise ConstraintError(
            f"io_spec_constraints[{name!r}] describes a {layout.dtype} tensor of shape "
            f"{layout.shape}, but {name!r} is a {ttype.dtype} tensor of shape {ttype.shape}",
            key=name,
        )
