"""What the device did: one record per compiled call, printable as a table and as JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .device.commands import PATHS, CommandResult

__all__ = ["CallRecord", "Report"]


@dataclass
class CallRecord:
    """One compiled call (or program load) and the device commands it ran.

    Attributes
    ----------
    function : str
        The compiled function's name.
    kind : str
        ``"call"``, or ``"load"`` for uploading a program's constants.
    commands : list of CommandResult
        Each command executed, with its bytes per path and cycles.
    conversions, relocations : int
        Convert and Bind commands this call needed for its TensorProxy inputs.
    cycles_kind : str
        ``"modeled"`` (functional model, analytic), ``"measured"`` (RTL) or ``"none"``.
    """

    function: str
    kind: str = "call"
    commands: list[CommandResult] = field(default_factory=list)
    conversions: int = 0
    relocations: int = 0
    cycles_kind: str = "none"

    @property
    def bytes(self) -> dict[str, int]:
        """Bytes moved per path: ``host``, ``compute``, ``converter``."""
        total = dict.fromkeys(PATHS, 0)
        for result in self.commands:
            for path, n in result.bytes.items():
                total[path] += n
        return total

    @property
    def cycles(self) -> int:
        return sum(r.cycles for r in self.commands)

    def to_dict(self) -> dict[str, Any]:
        return {"function": self.function, "kind": self.kind,
                "commands": [r.to_dict() for r in self.commands],
                "bytes": self.bytes, "conversions": self.conversions,
                "relocations": self.relocations, "cycles": self.cycles,
                "cycles_kind": self.cycles_kind}


class Report:
    """The records of a Context, oldest first."""

    def __init__(self, records: list[CallRecord], device: str):
        self.records = list(records)
        self.device = device

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index: int) -> CallRecord:
        return self.records[index]

    def __iter__(self):
        return iter(self.records)

    def calls(self, function: str | None = None) -> list[CallRecord]:
        """The ``call`` records, optionally of one function only."""
        return [r for r in self.records
                if r.kind == "call" and (function is None or r.function == function)]

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "records": [r.to_dict() for r in self.records]}

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    def table(self, commands: bool = False) -> str:
        """The records as an aligned text table; ``commands=True`` lists each command too."""
        head = ["#", "function", "kind", "host B", "compute B", "converter B", "conv",
                "reloc", "cycles", "cycles kind"]
        rows = []
        for i, r in enumerate(self.records):
            b = r.bytes
            rows.append([str(i), r.function, r.kind, str(b["host"]), str(b["compute"]),
                         str(b["converter"]), str(r.conversions), str(r.relocations),
                         str(r.cycles), r.cycles_kind])
        widths = [max(len(x) for x in col) for col in zip(head, *rows, strict=True)]
        lines = [f"device {self.device}",
                 "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)),
                 "  ".join("-" * w for w in widths)]
        for i, row in enumerate(rows):
            lines.append("  ".join(x.ljust(w) for x, w in zip(row, widths, strict=True)))
            if commands:
                for result in self.records[i].commands:
                    lines.append(f"      {result.command}  [{result.cycles} cycles]")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()
