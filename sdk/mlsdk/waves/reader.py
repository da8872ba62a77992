"""A reader of the RTL devices' wave files (FST or VCD, through pywellen): commands, cycles, beats.

Everything is read from the file alone: the command track the driver writes
(``contracts.testbench.MARK_*``) says where each host command starts; a cycle is a rising
edge of the testbench clock, and a signal's value in a cycle is the one that edge samples (its
last change before the edge). Port and signal names come from :mod:`mncore_hdl.contracts`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from mncore_hdl.arch import MNCORE2_SIM, ArchConfig
from mncore_hdl.contracts import testbench as tb
from mncore_hdl.contracts.converter import BUSY, CONVERTER_STATE, ConverterState
from mncore_hdl.contracts.cosim import (
    RDATA,
    READY,
    REQ,
    STREAMS,
    TOP_PATHS,
    VALID,
    WDATA,
    stream_port,
)
from mncore_hdl.tooling.gtkw import top_scope

__all__ = ["Waves", "WaveCommand", "Span", "MAX_WAVE_BYTES"]

#: The largest wave file read (pywellen holds its signals in memory); a longer run records a
#: window of its calls (``?calls=``).
MAX_WAVE_BYTES = 4 << 30


@dataclass(frozen=True)
class Span:
    """Times ``[start, end)`` in the wave file's unit."""

    start: int
    end: int


@dataclass(frozen=True)
class WaveCommand:
    """One host command as the command track shows it.

    ``buffer`` is None for a command that moves none; ``span`` runs from its mark to the next
    command's (or to the end of what was recorded).
    """

    seq: int
    kind: str
    call: int
    buffer: int | None
    span: Span
    beats: dict[str, list[int]] = field(default_factory=dict, compare=False)


class Waves:
    """A co-simulation wave file: its command track, and cycles and beats inside any span.

    Parameters
    ----------
    path : path-like
        An ``.fst`` or ``.vcd`` file an RTL device wrote (``?waves=DIR``).
    config : ArchConfig
        The chip the design was built for (its Groups and payload fields).

    Examples
    --------
    >>> waves = Waves("build/waves/mncore2_icarus-1234-5678.fst")
    >>> [str(c.kind) for c in waves.commands()][:3]
    ['Bind', 'Bind', 'HostWrite']
    >>> waves.converter_busy_cycles(waves.call(2))
    2201
    """

    def __init__(self, path: str | os.PathLike[str], config: ArchConfig = MNCORE2_SIM):
        import pywellen

        self.path = Path(path)
        self.config = config
        if not self.path.is_file():
            raise FileNotFoundError(f"No wave file {self.path}")
        size = self.path.stat().st_size
        if size > MAX_WAVE_BYTES:
            raise ValueError(f"{self.path} holds {size} bytes, more than {MAX_WAVE_BYTES} "
                             "(MAX_WAVE_BYTES); record a window of calls (?calls=) instead")
        try:
            self._wave = pywellen.Waveform(str(self.path))
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # pywellen panics (a BaseException) on a broken file
            raise ValueError(f"{self.path} is not a readable FST or VCD file: {exc}") from None
        self._vars = {v.full_name: v for v in self._wave.all_vars()}
        variables = [(name[:-len(v.name) - 1], v.name, v.bitwidth or 1)
                     for name, v in self._vars.items() if name.endswith("." + v.name)]
        self.top = top_scope(variables)
        self._changes: dict[str, tuple[np.ndarray, list[int | None]]] = {}
        self.edges = self._rising_edges()
        #: Time of the last recorded change (the end of the last command's span).
        self.end = int(self.edges[-1]) + 1 if len(self.edges) else 0

    # -- signals ----------------------------------------------------------------------------

    def has(self, name: str) -> bool:
        """Whether the file declares ``name`` (a top port, or a dotted path below the top)."""
        return self._full(name) in self._vars

    def _full(self, name: str) -> str:
        return name if name.startswith(self.top + ".") else f"{self.top}.{name}"

    def changes(self, name: str) -> tuple[np.ndarray, list[int | None]]:
        """``(times, values)`` of every change of ``name``; an x or z value is None."""
        full = self._full(name)
        if full not in self._changes:
            var = self._vars.get(full)
            if var is None:
                raise KeyError(f"{self.path} has no signal {full!r}")
            signal = var.signal
            pairs = [signal[i] for i in range(len(signal))]
            times = np.array([t for t, _ in pairs], dtype=np.int64)
            values = [v if isinstance(v, int) else None for _, v in pairs]
            self._changes[full] = (times, values)
        return self._changes[full]

    def _rising_edges(self) -> np.ndarray:
        """Changes of the clock from 0 to 1 (not from x: a dump resumed with the clock high
        is no edge)."""
        if not self.has(tb.CLOCK):  # a dump without the testbench's clock: no cycles
            return np.zeros(0, dtype=np.int64)
        times, values = self.changes(tb.CLOCK)
        rising = [v == 1 and k > 0 and values[k - 1] == 0 for k, v in enumerate(values)]
        return times[np.array(rising, dtype=bool)] if len(times) else times

    def sampled(self, name: str, span: Span | None = None) -> list[int | None]:
        """The value of ``name`` each rising clock edge in ``span`` samples (its last change
        before the edge; None before its first change or while unknown)."""
        edges = self._edges_in(span)
        times, values = self.changes(name)
        index = np.searchsorted(times, edges, side="left") - 1
        return [values[i] if i >= 0 else None for i in index]

    def _edges_in(self, span: Span | None) -> np.ndarray:
        if span is None:
            return self.edges
        lo, hi = np.searchsorted(self.edges, [span.start, span.end], side="left")
        return self.edges[lo:hi]

    def cycles(self, span: Span | None = None) -> int:
        """Rising clock edges in ``span`` (the whole recording when None)."""
        return len(self._edges_in(span))

    def cycles_where(self, name: str, value: int, span: Span | None = None) -> int:
        """Cycles in ``span`` whose edge samples ``name == value``."""
        return sum(1 for v in self.sampled(name, span) if v == value)

    # -- the command track ------------------------------------------------------------------

    def commands(self) -> list[WaveCommand]:
        """Every recorded host command, in order (from the ``mark_*`` registers)."""
        times, seqs = self.changes(tb.MARK_SEQ)
        final = dict(zip(times.tolist(), seqs, strict=True))  # the last change at each time
        # a command outside the window paused the dump as it was marked: Icarus still
        # writes that time step's changes, waves_off 1 among them
        starts = [(t, s) for t, s in final.items()
                  if s and not (self.has(tb.WAVES_OFF) and self._at(tb.WAVES_OFF, t))]
        out = []
        for start, seq in starts:
            later = times[times > start]
            end = int(later[0]) if len(later) else self.end
            kind, call, buffer = (self._at(n, start)
                                  for n in (tb.MARK_KIND, tb.MARK_CALL, tb.MARK_BUFFER))
            out.append(WaveCommand(
                seq, tb.CommandKind(kind or 0).name, call or 0,
                None if buffer in (None, tb.NO_BUFFER) else buffer, Span(start, end)))
        return out

    def _at(self, name: str, time: int) -> int | None:
        """The value of ``name`` at ``time`` (after the changes at that time)."""
        times, values = self.changes(name)
        i = int(np.searchsorted(times, time, side="right")) - 1
        return values[i] if i >= 0 else None

    def call(self, index: int) -> Span:
        """From the first recorded command of call ``index`` to the end of its last."""
        spans = [c.span for c in self.commands() if c.call == index]
        if not spans:
            calls = sorted({c.call for c in self.commands()})
            raise KeyError(f"{self.path} recorded no command of call {index}; it has calls "
                           f"{calls}")
        return Span(spans[0].start, spans[-1].end)

    def between(self, first: int, last: int) -> Span:
        """From the mark of command ``first`` (its ``seq``) to the end of command ``last``."""
        by_seq = {c.seq: c.span for c in self.commands()}
        missing = [s for s in (first, last) if s not in by_seq]
        if missing:
            raise KeyError(f"{self.path} recorded no command with seq {missing}")
        return Span(by_seq[first].start, by_seq[last].end)

    # -- what moved -------------------------------------------------------------------------

    def _fire(self, valid: str, ready: str, span: Span | None) -> int:
        if not (self.has(valid) and self.has(ready)):  # a stream this dump does not hold
            return 0
        both = zip(self.sampled(valid, span), self.sampled(ready, span), strict=True)
        return sum(1 for v, r in both if v and r)

    def _handshake(self, path: str, group: int, stream: str) -> tuple[str, str]:
        """The valid and ready the design sees (the testbench's ``_m`` mux where it has one)."""
        valid, ready = (stream_port(path, group, stream, s) for s in (VALID, READY))
        muxed = valid + "_m" if STREAMS[stream] else ready + "_m"
        if self.has(muxed):
            return (muxed, ready) if STREAMS[stream] else (valid, muxed)
        return valid, ready

    def requests(self, path: str, group: int, span: Span | None = None) -> int:
        """Requests port ``path`` of Group ``group`` handed over in ``span``."""
        return self._fire(*self._handshake(path, group, REQ), span)

    def beats(self, path: str, group: int, span: Span | None = None) -> int:
        """Data beats (written plus read) on port ``path`` of Group ``group`` in ``span``."""
        return sum(self._fire(*self._handshake(path, group, s), span) for s in (WDATA, RDATA))

    def port_beats(self, span: Span | None = None) -> dict[str, list[int]]:
        """:meth:`beats` of every top path, per Group."""
        return {path: [self.beats(path, g, span) for g in range(self.config.groups)]
                for path in TOP_PATHS}

    def converter_busy_cycles(self, span: Span | None = None) -> int:
        """Cycles the converter ran in ``span``: its state RUN where the file has its state
        machine (what its ``busy_cycles`` counter counts), else ``busy`` high."""
        state = self._state_signal()
        if state is not None:
            return self.cycles_where(state, ConverterState.RUN, span)
        return self.cycles_where(BUSY, 1, span)

    def converter_busy(self, span: Span | None = None) -> bool:
        """Whether the converter's ``busy`` is high in any cycle of ``span``."""
        return any(v == 1 for v in self.sampled(BUSY, span))

    def _state_signal(self) -> str | None:
        found = [n for n, v in self._vars.items() if v.name == CONVERTER_STATE]
        return min(found, key=lambda n: n.count(".")) if found else None

    def summary(self) -> list[dict[str, object]]:
        """One row per recorded command: seq, call, kind, buffer, start, cycles, beats per
        path and Group, converter busy cycles."""
        rows: list[dict[str, object]] = []
        for c in self.commands():
            rows.append({"seq": c.seq, "call": c.call, "command": c.kind,
                         "buffer": c.buffer, "start": c.span.start,
                         "cycles": self.cycles(c.span), **self.port_beats(c.span),
                         "converter_busy": self.converter_busy_cycles(c.span)})
        return rows

    def time_unit_s(self) -> float:
        """Seconds per unit of the file's times."""
        scale = self._wave.timescale
        return float(scale.factor) * 10.0 ** scale.unit.to_exponent()

