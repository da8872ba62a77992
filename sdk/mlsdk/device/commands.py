"""The device command stream: what every backend executes, and what it reports back."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from mncore_hdl.arch import LW_BYTES
from mncore_hdl.layout import ConversionDescriptor

__all__ = [
    "Buffer", "HostWrite", "HostRead", "Convert", "Launch", "Bind", "Command",
    "CommandResult", "PATHS", "command_from_dict",
]

#: The datapaths whose bytes the report counts.
PATHS = ("host", "compute", "converter")


@dataclass(frozen=True)
class Buffer:
    """A device buffer: the same LW range ``[address, address + lw_per_group)`` in ``groups``
    consecutive Groups starting at ``group``."""

    id: int
    group: int
    groups: int
    address: int
    lw_per_group: int

    #: Bytes in all its Groups (worked out once: a Launch counts the bytes of every buffer
    #: it reads).
    nbytes: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "nbytes", self.groups * self.lw_per_group * LW_BYTES)

    @property
    def lw_count(self) -> int:
        return self.groups * self.lw_per_group

    def __str__(self) -> str:
        # Made once per buffer (every command's summary names its buffers), kept in the
        # instance's dict: a frozen dataclass's own cache, without cached_property's lock.
        label = self.__dict__.get("_label")
        if label is None:
            last = self.group + self.groups - 1
            groups = f"G{self.group}" if self.groups == 1 else f"G{self.group}-G{last}"
            label = f"buf#{self.id}@{groups}:0x{self.address:x}+{self.lw_per_group}LW"
            self.__dict__["_label"] = label
        return label

    def to_dict(self) -> dict[str, int]:
        return {"id": self.id, "group": self.group, "groups": self.groups,
                "address": self.address, "lw_per_group": self.lw_per_group}


@dataclass(frozen=True)
class HostWrite:
    """Host -> DRAM: ``data`` is the buffer's image, ``(groups, lw_per_group)`` uint64 LWs.

    ``source`` and ``layout`` (host-side, like :class:`HostRead`'s ``layout``: never sent to
    the device nor serialized) may name the host tensor whose own bytes ``data`` is, laid out
    in ``layout`` (a row-major layout in one Group). A backend may then keep the tensor for
    the buffer instead of copying ``data`` (the functional model keeps a copy-on-write clone
    of it); every other backend writes ``data``.
    """

    kind: ClassVar[str] = "HostWrite"
    buffer: Buffer
    data: np.ndarray = field(repr=False, compare=False)
    source: Any = field(default=None, repr=False, compare=False)
    layout: Any = field(default=None, repr=False, compare=False)

    def summary(self) -> str:
        return f"HostWrite {self.buffer}"

    def to_dict(self) -> dict[str, Any]:
        raw = np.ascontiguousarray(self.data, dtype="<u8").tobytes()
        return {"kind": self.kind, "buffer": self.buffer.to_dict(),
                "data": base64.b64encode(raw).decode("ascii")}


@dataclass(frozen=True)
class HostRead:
    """DRAM -> host: the result is the buffer's image; with ``layout`` (a host-side request,
    not sent to the device), the result's ``tensor`` is the data decoded from it instead."""

    kind: ClassVar[str] = "HostRead"
    buffer: Buffer
    layout: Any = field(default=None, repr=False, compare=False)

    def summary(self) -> str:
        return f"HostRead {self.buffer}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "buffer": self.buffer.to_dict()}


@dataclass(frozen=True)
class Convert:
    """DRAM -> DRAM layout conversion by the layout converter, programmed with
    ``descriptor`` (:func:`mncore_hdl.layout.conversion` of the two layouts)."""

    kind: ClassVar[str] = "Convert"
    src: Buffer
    src_layout: str
    dst: Buffer
    dst_layout: str
    descriptor: ConversionDescriptor = field(repr=False, compare=False)
    dtype: str = "float32"

    def __post_init__(self) -> None:
        if not isinstance(self.descriptor, ConversionDescriptor):
            raise TypeError("Convert's descriptor must be a ConversionDescriptor (from "
                            "mncore_hdl.layout.conversion), not "
                            f"{type(self.descriptor).__name__}")

    def summary(self) -> str:
        return f"Convert {self.src} {self.src_layout} -> {self.dst} {self.dst_layout}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "src": self.src.to_dict(), "src_layout": self.src_layout,
                "dst": self.dst.to_dict(), "dst_layout": self.dst_layout,
                "descriptor": self.descriptor.to_dict(), "dtype": self.dtype}


@dataclass(frozen=True)
class Launch:
    """Run a loaded program.

    ``bindings`` maps each input and constant name to the buffer it is read from, ``outputs``
    each output name to the buffer it is stored to (outputs are a namespace of their own: an
    output may share an input's name).
    """

    kind: ClassVar[str] = "Launch"
    program: str
    bindings: dict[str, Buffer] = field(compare=False)
    outputs: dict[str, Buffer] = field(default_factory=dict, compare=False)

    def summary(self) -> str:
        return (f"Launch {self.program} ({len(self.bindings)} in, "
                f"{len(self.outputs)} out)")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "program": self.program,
                "bindings": {k: b.to_dict() for k, b in self.bindings.items()},
                "outputs": {k: b.to_dict() for k, b in self.outputs.items()}}


@dataclass(frozen=True)
class Bind:
    """Relocation: re-point input ``io`` of ``function`` at ``buffer`` (a register write)."""

    kind: ClassVar[str] = "Bind"
    function: str
    io: str
    buffer: Buffer

    def summary(self) -> str:
        return f"Bind {self.function}.{self.io} -> {self.buffer}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "function": self.function, "io": self.io,
                "buffer": self.buffer.to_dict()}


Command = HostWrite | HostRead | Convert | Launch | Bind


def command_from_dict(data: dict[str, Any]) -> Command:
    """Rebuild a command from its ``to_dict`` form (how an out-of-process backend reads it)."""
    kind = data.get("kind")
    if kind == "HostWrite":
        buf = Buffer(**data["buffer"])
        raw = np.frombuffer(base64.b64decode(data["data"]), dtype="<u8").astype(np.uint64)
        return HostWrite(buf, raw.reshape(buf.groups, buf.lw_per_group))
    if kind == "HostRead":
        return HostRead(Buffer(**data["buffer"]))
    if kind == "Convert":
        return Convert(Buffer(**data["src"]), data["src_layout"], Buffer(**data["dst"]),
                       data["dst_layout"], ConversionDescriptor.from_dict(data["descriptor"]),
                       data.get("dtype", "float32"))
    if kind == "Launch":
        bindings = {k: Buffer(**b) for k, b in data["bindings"].items()}
        outputs = {k: Buffer(**b) for k, b in data.get("outputs", {}).items()}
        return Launch(data["program"], bindings, outputs)
    if kind == "Bind":
        return Bind(data["function"], data["io"], Buffer(**data["buffer"]))
    raise ValueError(f"Unknown device command kind {kind!r}; expected one of "
                     "HostWrite, HostRead, Convert, Launch, Bind")


@dataclass
class CommandResult:
    """What executing one command did: bytes per path, cycles, and for reads the data.

    ``data`` is handed to the caller only: a report keeps :meth:`figures`, never the data.
    """

    command: str
    bytes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PATHS, 0))
    cycles: int = 0
    data: np.ndarray | None = field(default=None, repr=False)
    #: A HostRead given a layout: the data decoded (a tensor the caller owns).
    tensor: Any = field(default=None, repr=False)

    def figures(self) -> CommandResult:
        """This result without its data (what a report records)."""
        if self.data is None and self.tensor is None:
            return self
        return CommandResult(self.command, self.bytes, self.cycles)

    def to_dict(self) -> dict[str, Any]:
        return {"command": self.command, "bytes": dict(self.bytes), "cycles": self.cycles}
