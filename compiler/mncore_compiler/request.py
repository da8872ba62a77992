"""What a caller asks of one compile: :class:`CompileRequest`, built once and validated once.

``mlsdk.Context.compile`` builds one request from its arguments; the compile cache hashes it
(:meth:`CompileRequest.key_parts`), capture reads its ``float_dtype``, ``training`` and
``registered``, and every pass reads what it needs from :attr:`Compilation.request
<mncore_compiler.passes.Compilation.request>`. A compile option is one entry of
:data:`OPTIONS` (its default, what it means, its check) and is read where it acts, through
:meth:`CompileRequest.option` or a property here; nothing else lists it.

``io_spec_constraints`` are checked here and only here: their value types when the request is
built, the names, shapes and dtypes (and loop-carried outputs) against the captured graph in
:meth:`CompileRequest.constraint_layouts`, which the ``assign-layouts`` pass calls.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from mncore_hdl.arch import MNCORE2, ArchConfig
from mncore_hdl.layout import Layout, host_layout

from .capture import FLOAT_DTYPES
from .ir import Graph
from .layouts import ConstraintError
from .types import TensorType

__all__ = ["EXPORT_KWARGS", "OPTIONS", "CompileRequest", "Option"]


@dataclass(frozen=True)
class Option:
    """One compile option: its default, what it accepts and means, and its value check.

    ``check(value)`` returns None for a good value, else what was expected (the error
    message's "must be ..." part).
    """

    default: Any
    meaning: str
    check: Callable[[object], str | None]


def _float_dtype(value: object) -> str | None:
    if isinstance(value, str) and value in FLOAT_DTYPES:
        return None
    return f"one of {sorted(FLOAT_DTYPES)}"


def _bool(value: object) -> str | None:
    return None if isinstance(value, bool) else "a bool"


OPTIONS: dict[str, Option] = {
    "float_dtype": Option(
        "float32",
        "'float' / 'float32', 'half' / 'float16' or 'bfloat16': the compute precision;"
        " 'mixed': matmuls read float16 operands and accumulate in float32, the rest"
        " runs in float32 (docs/precision.md)", _float_dtype),
    "strict": Option(
        False, "bool: make a call that needs a DRAM-to-DRAM layout conversion an error", _bool),
    "backprop": Option(
        False, "bool: compile a training step of a forward-only function: its 'loss' output is"
        " differentiated and the optimizers=[...] passed to compile are stepped, at the"
        " learning rates fed as inputs (docs/training.md)", _bool),
}
"""Every compile option, by name (``mlsdk.COMPILE_OPTIONS`` lists these with ``option_json``)."""

EXPORT_KWARGS: dict[str, Option] = {
    "use_fx2onnx": Option(
        True, "bool: MLSDK's choice of ONNX exporter (True: FX2ONNX, which traces backward()"
        " and optimizer.step() inside the function; False: torch's legacy exporter). This kit"
        " has one capture, make_fx over aten ops, which traces all of that either way, so the"
        " value changes neither the program nor its cache key", _bool),
}
"""Every key ``Context.compile(..., export_kwargs={...})`` accepts (MLSDK's exporter
settings), with what it means here."""


def _frozen(mapping: Mapping[Any, Any]) -> Mapping[Any, Any]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class CompileRequest:
    """Everything that decides one compile, except the function and its sample inputs.

    Parameters
    ----------
    name : str
        The program name (``mncore_compiler.driver.function_name(fn)`` by default).
    config : ArchConfig
        The chip to compile for.
    options : dict of str to value
        Compile options (keys of :data:`OPTIONS`) as the caller gave them; the program records
        them. An option left out has its default (:meth:`option`).
    constraints : dict of str to Layout or str
        ``io_spec_constraints``: IO name -> the Layout it must have, or (a str) the name of an
        input whose layout the output takes (loop-carried state).
    training : bool or None
        See :func:`mncore_compiler.capture.capture_step`.
    registered : dict of int to str
        ``id`` of each registered tensor -> its registered name (capture makes them state).
        Not part of the cache key: which constants are state is, once captured.
    export_kwargs : dict of str to value
        MLSDK's exporter settings (keys of :data:`EXPORT_KWARGS`); checked, and recorded
        nowhere, since none changes the program.

    Raises
    ------
    TypeError, ValueError
        On building, for a value of the wrong type or outside its choices, naming it.
    ConstraintError
        For a constraint layout that spans more Groups than ``config`` has.
    """

    name: str = "function"
    config: ArchConfig = MNCORE2
    options: Mapping[str, Any] = field(default_factory=dict)
    constraints: Mapping[str, Layout | str] = field(default_factory=dict)
    training: bool | None = None
    registered: Mapping[int, str] = field(default_factory=dict, compare=False, repr=False)
    export_kwargs: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"The program name must be a non-empty str, not {self.name!r}")
        if not isinstance(self.config, ArchConfig):
            raise TypeError(f"config must be an ArchConfig, not {type(self.config).__name__}")
        if self.training not in (None, True, False):
            raise TypeError(f"training must be None, True or False, not {self.training!r}")
        object.__setattr__(self, "options", _frozen(self._checked_options()))
        object.__setattr__(self, "constraints", _frozen(self._checked_constraints()))
        if not isinstance(self.registered, Mapping):
            raise TypeError("registered must be a dict of tensor id -> registered name, not "
                            f"{type(self.registered).__name__}")
        object.__setattr__(self, "registered", _frozen(self.registered))
        object.__setattr__(self, "export_kwargs", _frozen(self._checked_export_kwargs()))

    def _checked_export_kwargs(self) -> Mapping[str, Any]:
        if not isinstance(self.export_kwargs, Mapping):
            raise TypeError("export_kwargs must be a dict of exporter setting -> value, not "
                            f"{type(self.export_kwargs).__name__}")
        for key, value in self.export_kwargs.items():
            option = EXPORT_KWARGS.get(key)
            if option is None:
                known = "; ".join(f"{k}: {o.meaning}" for k, o in EXPORT_KWARGS.items())
                raise ValueError(f"Unknown export_kwargs key {key!r}; this kit accepts {known}")
            wanted = option.check(value)
            if wanted is not None:
                raise TypeError(f"export_kwargs[{key!r}] must be {wanted}, not {value!r}")
        return self.export_kwargs

    def _checked_options(self) -> Mapping[str, Any]:
        if not isinstance(self.options, Mapping):
            raise TypeError("Compile options must be a dict of option name -> value, not "
                            f"{type(self.options).__name__}")
        unknown = sorted(str(key) for key in self.options if key not in OPTIONS)
        if unknown:
            raise ValueError(f"Unknown compile option(s) {unknown}; known options are "
                             f"{sorted(OPTIONS)}")
        for key, value in self.options.items():
            wanted = OPTIONS[key].check(value)
            if wanted is not None:
                kind = TypeError if wanted == "a bool" else ValueError
                raise kind(f"Compile option {key!r} must be {wanted}, not {value!r}")
        return self.options

    def _checked_constraints(self) -> Mapping[str, Layout | str]:
        if not isinstance(self.constraints, Mapping):
            raise TypeError("io_spec_constraints must be a dict of IO name -> IOSpec, not "
                            f"{type(self.constraints).__name__}")
        for name, value in self.constraints.items():
            if isinstance(value, Layout):
                if value.groups > self.config.groups:
                    raise ConstraintError(
                        f"Layout {value} of {name!r} spans {value.groups} Groups; the device "
                        f"has {self.config.groups}", key=name)
            elif not isinstance(value, str):
                raise TypeError(f"io_spec_constraints[{name!r}] must be an IOSpec (e.g. "
                                f"compiled.input_specs[...]), a Layout, or the name of an "
                                f"input of this function, not {type(value).__name__}")
        return self.constraints

    # -- options ---------------------------------------------------------------------------

    def option(self, name: str) -> Any:
        """The value of compile option ``name``: as given, else its default."""
        if name not in OPTIONS:
            raise KeyError(f"{name!r} is not a compile option; they are {sorted(OPTIONS)}")
        return self.options.get(name, OPTIONS[name].default)

    @property
    def float_dtype(self) -> str:
        """The ``float_dtype`` option: capture's precision, and the ``mixed-precision``
        pass's switch."""
        return str(self.option("float_dtype"))

    @property
    def strict(self) -> bool:
        """The ``strict`` option (read by the SDK when it loads the program)."""
        return bool(self.option("strict"))

    # -- constraints against the graph ------------------------------------------------------

    def constraint_layouts(self, graph: Graph) -> dict[str, Layout]:
        """The layout each constrained IO of ``graph`` must have, loop-carried outputs
        resolved (an output keyed to an input gets that input's layout, and the input is
        given it explicitly, so that both are the very same layout).

        Raises
        ------
        ConstraintError
            For a key that names no IO, a str value that names no input or sits on an input,
            or a layout that does not describe its IO's shape and dtype.
        """
        inputs, outputs = dict(graph.inputs), graph.output_types()
        layouts = {n: v for n, v in self.constraints.items() if isinstance(v, Layout)}
        carried = {n: v for n, v in self.constraints.items() if isinstance(v, str)}
        for output, source in carried.items():
            if output in inputs:
                raise ConstraintError(
                    f"io_spec_constraints[{output!r}] = {source!r}: a loop-carried constraint "
                    f"(a str value) goes on an output, but {output!r} is an input of the "
                    "function; key it by the output that feeds the input back", key=output)
            if source not in inputs:
                raise ConstraintError(
                    f"io_spec_constraints[{output!r}] = {source!r}: a str value must name an "
                    f"input of this function, whose layout the output then takes; the inputs "
                    f"are {list(inputs)}", key=output)
        valid = list(dict.fromkeys([*inputs, *outputs]))
        for name in self.constraints:
            if name not in valid:
                raise ConstraintError(
                    f"io_spec_constraints key {name!r} is not an input or output of the "
                    f"function; valid names are {valid}", key=name)
        for name, layout in layouts.items():
            for ttype in [t for t in (inputs.get(name), outputs.get(name)) if t]:
                _check_fits(name, layout, ttype)
        for output, source in carried.items():
            layout = layouts.get(source) or host_layout(inputs[source].shape,
                                                        inputs[source].dtype)
            try:
                _check_fits(output, layout, outputs[output])
            except ConstraintError as error:
                raise ConstraintError(
                    f"io_spec_constraints[{output!r}] = {source!r} asks output {output!r} to "
                    f"be produced in the layout of input {source!r}, which cannot hold it: "
                    f"{error}", key=output) from None
            layouts[source] = layouts[output] = layout
        return layouts

    # -- the cache key ----------------------------------------------------------------------

    def key_parts(self) -> dict[str, Any]:
        """What of the request decides the program, as plain JSON values (the compile cache
        hashes them; ``registered`` is left out, the captured state being hashed instead)."""
        return {
            "name": self.name,
            "arch": self.config.to_dict(),
            "options": dict(self.options),
            "constraints": {n: ([str(v), v.dtype] if isinstance(v, Layout) else ["input", v])
                            for n, v in self.constraints.items()},
            "training": self.training,
        }


def _check_fits(name: str, layout: Layout, ttype: TensorType) -> None:
    if layout.shape != ttype.shape or layout.dtype != ttype.dtype:
        raise ConstraintError(
            f"io_spec_constraints[{name!r}] describes a {layout.dtype} tensor of shape "
            f"{layout.shape}, but {name!r} is a {ttype.dtype} tensor of shape {ttype.shape}",
            key=name,
        )
