"""What the device did: one record per compiled call, printable as a table and as JSON.

A Context keeps its records in a :class:`History`: the last ``limit`` records, plus the totals
of every record since the Context opened (or since ``report(clear=True)``), so a long session
holds a bounded amount of memory. Records keep figures (bytes, cycles), never data.
"""

from __future__ import annotations

import collections
import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from .device.commands import PATHS, CommandResult

__all__ = ["Advice", "CallRecord", "Report", "History", "DEFAULT_HISTORY"]

#: Records a Context keeps by default (older ones survive only in the totals).
DEFAULT_HISTORY = 10_000


@dataclass(frozen=True)
class Advice:
    """The constraint that would turn one conversion into a relocation, and what it saves.

    Attributes
    ----------
    producer : str or None
        The function whose output was converted (None when the TensorProxy came from no
        compiled call).
    output : str
        That function's output.
    consumer, input : str
        The function and input the output was converted for.
    spec : str
        The consumer's input spec (``str`` of its IOSpec): the layout to produce.
    cycles : int
        Modeled cycles saved, net: the conversion's cycles, less the Bind that replaces it,
        less what the producer's Launch costs more when it writes that layout (summed over
        ``count`` conversions).
    converter_bytes : int
        Bytes the layout converter no longer moves (summed over ``count``).
    conversion_cycles : int
        Modeled cycles of the conversion(s) removed.
    launch_cycles : int
        The change of the producer's Launch cycles (positive: it costs more).
    loop : bool
        The producer is the consumer itself (loop-carried state): the constraint is the
        input's name.
    count : int
        Conversions this advice stands for (:meth:`Report.advice` sums equal ones).
    """

    producer: str | None
    output: str
    consumer: str
    input: str
    spec: str
    cycles: int
    converter_bytes: int
    conversion_cycles: int
    launch_cycles: int
    loop: bool = False
    count: int = 1

    @property
    def constraint(self) -> str:
        """The ``io_spec_constraints`` entry to compile the producer with."""
        if self.loop:
            return f"io_spec_constraints={{{self.output!r}: {self.input!r}}}"
        return (f"io_spec_constraints={{{self.output!r}: "
                f"{self.consumer}.input_specs[{self.input!r}]}}")

    @property
    def key(self) -> tuple[str | None, str, str, str, str]:
        """What two equal pieces of advice share: the IOs and the spec."""
        return (self.producer, self.output, self.consumer, self.input, self.spec)

    def __str__(self) -> str:
        who = self.producer or "the producer"
        times = f" over {self.count} conversions" if self.count != 1 else ""
        return (f"compile {who} with {self.constraint}: saves {self.cycles} modeled cycles "
                f"and {self.converter_bytes} converter bytes{times} (conversion "
                f"{self.conversion_cycles} cycles, {who}'s Launch {self.launch_cycles:+d})")

    def to_dict(self) -> dict[str, Any]:
        return {"producer": self.producer, "output": self.output, "consumer": self.consumer,
                "input": self.input, "spec": self.spec, "constraint": self.constraint,
                "cycles": self.cycles, "converter_bytes": self.converter_bytes,
                "conversion_cycles": self.conversion_cycles,
                "launch_cycles": self.launch_cycles, "loop": self.loop, "count": self.count}

    def merged(self, other: Advice) -> Advice:
        """This advice and ``other`` (of the same :attr:`key`) as one, their savings summed."""
        return dataclasses.replace(
            self, cycles=self.cycles + other.cycles,
            converter_bytes=self.converter_bytes + other.converter_bytes,
            conversion_cycles=self.conversion_cycles + other.conversion_cycles,
            launch_cycles=self.launch_cycles + other.launch_cycles,
            count=self.count + other.count)


@dataclass
class CallRecord:
    """One compiled call (or program load) and the device commands it ran.

    Attributes
    ----------
    function : str
        The compiled function's name.
    kind : str
        ``"call"``, ``"load"`` for uploading a program's constants (or registered state),
        ``"read"`` for a ``.cpu()`` (or ``Context.synchronize()``), ``"write"`` for a
        ``TensorProxy.load_from``, or ``"compile"`` for a compile with cache options (see
        ``cache``).
    commands : list of CommandResult
        Each command executed, with its bytes per path and cycles (no data: see :meth:`add`).
    conversions, relocations : int
        Convert and Bind commands this call needed for its TensorProxy inputs.
    cycles_kind : str
        ``"modeled"`` (functional model, analytic), ``"measured"`` (RTL) or ``"none"``.
    state_bytes : int
        The part of the ``host`` bytes that moved registered module state (uploads of the
        Context's device copies, and their read-back by ``Context.synchronize()``), apart
        from inputs and outputs. Zero on a call whose registered state is already on the
        device.
    cache : str or None
        For a ``"compile"`` record (a compile with cache options): ``"hit"``, ``"miss"`` or
        ``"off"``; None for other records.
    advice : list of Advice
        For each conversion of the call, the constraint that would remove it and what that
        would save.
    """

    function: str
    kind: str = "call"
    commands: list[CommandResult] = field(default_factory=list)
    conversions: int = 0
    relocations: int = 0
    cycles_kind: str = "none"
    state_bytes: int = 0
    cache: str | None = None
    advice: list[Advice] = field(default_factory=list)

    def add(self, result: CommandResult) -> None:
        """Record ``result``'s figures (a read's data is dropped, never kept)."""
        self.commands.append(result.figures())

    def add_state(self, result: CommandResult, name: str) -> None:
        """Count ``result``, the command just :meth:`add`-ed, as moving registered state
        ``name``: its host bytes go to :attr:`state_bytes`, and its listing says so."""
        self.state_bytes += result.bytes["host"]
        last = self.commands[-1]
        self.commands[-1] = CommandResult(f"{last.command} [state {name}]", dict(last.bytes),
                                          last.cycles)

    @property
    def bytes(self) -> dict[str, int]:
        """Bytes moved per path: ``host``, ``compute``, ``converter``."""
        return self.sums()[0]

    @property
    def cycles(self) -> int:
        return sum(r.cycles for r in self.commands)

    def sums(self) -> tuple[dict[str, int], int]:
        """:attr:`bytes` and :attr:`cycles` in one pass over the commands."""
        total = dict.fromkeys(PATHS, 0)
        cycles = 0
        for result in self.commands:
            cycles += result.cycles
            for path, n in result.bytes.items():
                total[path] += n
        return total, cycles

    def to_dict(self) -> dict[str, Any]:
        return {"function": self.function, "kind": self.kind,
                "commands": [r.to_dict() for r in self.commands],
                "bytes": self.bytes, "conversions": self.conversions,
                "relocations": self.relocations, "cycles": self.cycles,
                "cycles_kind": self.cycles_kind, "state_bytes": self.state_bytes,
                **({"cache": self.cache} if self.cache is not None else {}),
                **({"advice": [a.to_dict() for a in self.advice]} if self.advice else {})}


def _empty_totals() -> dict[str, Any]:
    return {"records": 0, "call": 0, "load": 0, "read": 0, "write": 0,
            "commands": 0,
            "bytes": dict.fromkeys(PATHS, 0), "cycles": 0, "conversions": 0,
            "relocations": 0, "state_bytes": 0}


def _fold(totals: dict[str, Any], record: CallRecord) -> None:
    totals["records"] += 1
    totals[record.kind] = totals.get(record.kind, 0) + 1
    totals["commands"] += len(record.commands)
    # One pass over the commands: a full History folds a record on every call.
    nbytes, cycles = record.sums()
    for path, n in nbytes.items():
        totals["bytes"][path] += n
    totals["cycles"] += cycles
    totals["conversions"] += record.conversions
    totals["relocations"] += record.relocations
    totals["state_bytes"] = totals.get("state_bytes", 0) + record.state_bytes


class History:
    """A Context's records: the last ``limit`` (all when None), and totals over all of them.

    Parameters
    ----------
    limit : int or None
        Records kept; an older record is folded into the totals when a new one arrives.
    """

    def __init__(self, limit: int | None = DEFAULT_HISTORY):
        if limit is not None and (not isinstance(limit, int) or limit < 1):
            raise ValueError(f"history must be a positive int or None, not {limit!r}")
        self.limit = limit
        self.records: collections.deque[CallRecord] = collections.deque()
        self._dropped_totals = _empty_totals()
        self.dropped = 0

    def append(self, record: CallRecord) -> None:
        if self.limit is not None and len(self.records) >= self.limit:
            _fold(self._dropped_totals, self.records.popleft())
            self.dropped += 1
        self.records.append(record)

    def totals(self) -> dict[str, Any]:
        totals = json.loads(json.dumps(self._dropped_totals))
        for record in self.records:
            _fold(totals, record)
        return totals

    def clear(self) -> None:
        self.records.clear()
        self._dropped_totals = _empty_totals()
        self.dropped = 0


class Report:
    """The records of a Context, oldest first, and the totals of its whole history.

    Attributes
    ----------
    records : list of CallRecord
        The records kept (the last ``history`` of the Context).
    totals : dict
        Over every record since the Context opened (or was last cleared), kept or not:
        ``records``, per kind (``call``, ``load``, ``read``), ``commands``, ``bytes`` per
        path, ``cycles``, ``conversions``, ``relocations``, ``state_bytes`` (the host bytes
        that moved registered state).
    dropped : int
        Records folded into the totals and no longer kept.
    """

    def __init__(self, records: list[CallRecord] | collections.deque[CallRecord], device: str,
                 totals: dict[str, Any] | None = None, dropped: int = 0):
        self.records = list(records)
        self.device = device
        if totals is None:
            totals = _empty_totals()
            for record in self.records:
                _fold(totals, record)
        self.totals = totals
        self.dropped = dropped

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

    def advice(self, top: int | None = 10) -> list[Advice]:
        """The session's top savings: the advice of every kept record, equal pieces merged
        (their savings and counts summed), largest net cycle saving first.

        Each piece assumes the rest of the session stays as it ran (a producer feeding two
        consumers in different layouts can remove one conversion, not both).

        Parameters
        ----------
        top : int or None
            How many to return; None returns all.
        """
        merged: dict[tuple[str | None, str, str, str, str], Advice] = {}
        for record in self.records:
            for piece in record.advice:
                known = merged.get(piece.key)
                merged[piece.key] = piece if known is None else known.merged(piece)
        ranked = sorted(merged.values(), key=lambda a: (-a.cycles, -a.converter_bytes))
        return ranked if top is None else ranked[:top]

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "records": [r.to_dict() for r in self.records],
                "totals": self.totals, "dropped": self.dropped,
                "advice": [a.to_dict() for a in self.advice(None)]}

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    def table(self, commands: bool = False) -> str:
        """The records as an aligned text table; ``commands=True`` lists each command too.

        ``state B`` is the part of ``host B`` that moved registered module state (see
        :attr:`CallRecord.state_bytes`); the rest of ``host B`` is inputs and read-backs.
        """
        head = ["#", "function", "kind", "host B", "state B", "compute B", "converter B",
                "conv", "reloc", "cycles", "cycles kind"]
        rows = []
        for i, r in enumerate(self.records, start=self.dropped):
            b = r.bytes
            kind = r.kind if r.cache is None else f"{r.kind} ({r.cache})"
            rows.append([str(i), r.function, kind, str(b["host"]), str(r.state_bytes),
                         str(b["compute"]), str(b["converter"]), str(r.conversions),
                         str(r.relocations), str(r.cycles), r.cycles_kind])
        widths = [max(len(x) for x in col) for col in zip(head, *rows, strict=True)]
        lines = [f"device {self.device}",
                 "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)),
                 "  ".join("-" * w for w in widths)]
        for i, row in enumerate(rows):
            lines.append("  ".join(x.ljust(w) for x, w in zip(row, widths, strict=True)))
            if commands:
                for result in self.records[i].commands:
                    lines.append(f"      {result.command}  [{result.cycles} cycles]")
            for piece in self.records[i].advice:
                lines.append(f"      advice: {piece}")
        t = self.totals
        if self.dropped:
            lines.append(f"({self.dropped} older record(s) kept only in the totals)")
        lines.append(f"total: {t['records']} records ({t['call']} calls), host "
                     f"{t['bytes']['host']} B (registered state {t.get('state_bytes', 0)} B), "
                     f"compute {t['bytes']['compute']} B, converter "
                     f"{t['bytes']['converter']} B, {t['cycles']} cycles")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()
