"""The GTKWave save file of a co-simulation wave file, and its translate filters, from contracts.

Every group, field and enum name comes from :mod:`mncore_hdl.contracts`: the command track
(``mark_*``, :class:`~mncore_hdl.contracts.testbench.CommandKind` as text), each requester
port with its payload decoded (``addr``/``write``/``length``, ``data``/``strb``,
``data``/``error``), the converter (its state and error code as text, ``reg_addr`` as register
names), each controller's DRAM commands (``ACT`` .. ``REF``, the port by name), the counters,
the descriptor table and the testbench controls. Enums become GTKWave translate filter files
(one ``value text`` line per member, decimal). Only signals the dump declares are listed, so
the save file never names a missing one.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from ..arch import ArchConfig
from ..contracts import testbench as tb
from ..contracts.converter import (
    CONVERTER_STATE,
    COUNTERS,
    ERROR_CODE,
    REG_ADDR,
    REGISTER_BUS,
    STATUS_PORTS,
    ConverterState,
    ErrorCode,
    Reg,
    register_fields,
)
from ..contracts.cosim import (
    CONTROLLER_INSTANCE,
    CYCLE,
    DESC_PORTS,
    MC_ERROR,
    MC_IDLE,
    OBSERVATION,
    PAYLOAD,
    READY,
    STREAMS,
    TOP_PATHS,
    VALID,
    csr_addr_port,
    csr_rdata_port,
    field_port,
    payload_fields,
    stream_port,
)
from ..contracts.memctrl import PORTS, Cmd, register_map

__all__ = ["Variable", "filter_tables", "write_filters", "top_scope", "save_groups",
           "write_save_file", "zoom_for", "MAX_MARKERS"]

#: ``(scope, name, width)`` of one variable of a wave file.
Variable = tuple[str, str, int]
#: The window GTKWave opens, its signal-name column, and its zoom for a dump in picoseconds
#: (GTKWave's scale, log2 of the time units a pixel spans: -21 shows about 10 us of Icarus's
#: 1 ps unit across the window's wave pane; see :func:`zoom_for`).
WINDOW = (1500, 950)
SIGNALS_WIDTH = 260
ZOOM = -21.0
#: GTKWave's markers are named ``a`` .. ``z``.
MAX_MARKERS = 26
_MARKERS = "abcdefghijklmnopqrstuvwxyz"
#: One trace: (full name, width, data format, filter name or None).
_Trace = tuple[str, int, str, "str | None"]


def _enum_table(members: type[enum.IntEnum]) -> dict[int, str]:
    return {int(m): m.name for m in members}


def filter_tables() -> dict[str, dict[int, str]]:
    """Every translate filter: name -> {value: text}, each from one contract declaration (the
    same for every chip)."""
    registers = {int(r): r.name for r in Reg}
    registers.update({f.address: f.name for f in register_fields()})
    csr = {address: name for name, address in register_map(len(PORTS)).items()}
    for path, port in PORTS.items():  # port1.read_beats -> compute.read_beats
        csr = {a: n.replace(f"port{port}.", f"{path}.") for a, n in csr.items()}
    return {
        "command": _enum_table(tb.CommandKind),
        "dram_cmd": _enum_table(Cmd),
        "port": {index: path for path, index in PORTS.items()},
        "converter_state": _enum_table(ConverterState),
        "error_code": _enum_table(ErrorCode),
        "converter_reg": registers,
        "mc_csr": csr,
    }


def write_filters(folder: Path) -> dict[str, Path]:
    """Write each translate filter file into ``folder``; return name -> file."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, table in filter_tables().items():
        path = out[name] = folder / f"{name}.txt"
        path.write_text("".join(f"{value} {text}\n" for value, text in sorted(table.items())))
    return out


def top_scope(variables: Iterable[Variable]) -> str:
    """The testbench top's scope: the shallowest one with the converter's busy-cycle count."""
    marker = next(name for name, reg in COUNTERS.items() if reg == Reg.BUSY_CYCLES)
    tops = [scope for scope, name, _ in variables if name == marker]
    if not tops:
        raise ValueError(f"the wave file has no scope with {marker!r}: not a co-simulation top")
    return min(tops, key=lambda s: s.count("."))


def _port_traces(top: str, path: str, g: int, config: ArchConfig,
                 widths: Mapping[str, int]) -> list[_Trace]:
    """One requester port: per stream valid, ready and the decoded fields, as the design sees
    them (the testbench's ``_m`` muxes, where its DMA engines can drive the port). A dump
    without the testbench (a bare ``cosim_top``) shows the port's own signals and the packed
    payload instead."""
    def first(*names: str) -> list[_Trace]:
        for name in names:
            full = f"{top}.{name}"
            if full in widths:
                width = widths[full]
                return [(full, width, "bin" if width == 1 else "hex", None)]
        return []

    out: list[_Trace] = []
    for stream, fields in payload_fields(config).items():
        valid, ready = stream_port(path, g, stream, VALID), stream_port(path, g, stream, READY)
        driven = STREAMS[stream]
        out += first(valid + "_m", valid) if driven else first(valid)
        out += first(ready) if driven else first(ready + "_m", ready)
        decoded = [(f"{top}.{field_port(path, g, stream, name)}", width,
                    "bin" if width == 1 else "dec" if name == "length" else "hex", None)
                   for name, width in fields.items()]
        present = [trace for trace in decoded if trace[0] in widths]
        out += present or first(stream_port(path, g, stream, PAYLOAD))
    return out


def save_groups(variables: Sequence[Variable], config: ArchConfig
                ) -> list[tuple[str, bool, list[_Trace]]]:
    """The save file's groups: (title, closed, traces), only of signals the dump declares."""
    top = top_scope(variables)
    widths = {f"{s}.{n}": w for s, n, w in variables}
    dut = _scope_of(variables, CONVERTER_STATE, top)

    def here(names: Mapping[str, str | None], scope: str = top, fmt: str = "dec") -> list[_Trace]:
        # a filtered trace is decimal: its filter file's values are
        return [(f"{scope}.{n}", widths[f"{scope}.{n}"], "bin" if widths[f"{scope}.{n}"] == 1
                 else "dec" if flt else fmt, flt)
                for n, flt in names.items() if f"{scope}.{n}" in widths]

    track = {tb.MARK_KIND: "command", tb.MARK_CALL: None, tb.MARK_BUFFER: None,
             tb.MARK_SEQ: None, tb.WAVES_OFF: None}
    converter = {**dict.fromkeys(STATUS_PORTS), ERROR_CODE: "error_code"}
    groups: list[tuple[str, bool, list[_Trace]]] = [
        ("command track", False, here(track)),
        ("layout converter", False, here(converter)
         + (here({CONVERTER_STATE: "converter_state"}, dut) if dut else [])
         + here({n: "converter_reg" if n == REG_ADDR else None
                 for n, (d, _) in REGISTER_BUS.items() if d == "in"}, fmt="hex")),
    ]
    for path in TOP_PATHS:
        for g in range(config.groups):
            groups.append((f"{path} ports: Group {g}", path != TOP_PATHS[0],
                           _port_traces(top, path, g, config, widths)))
    dram = []
    for g in range(config.groups):
        scope = _controller_scope(variables, g)
        if scope is not None:
            dram += here({n: {"cmd_kind": "dram_cmd", "cmd_port": "port"}.get(n)
                          for n in OBSERVATION}, scope)
    groups.append(("DRAM commands", False, dram))
    groups.append(("counters", True, here(dict.fromkeys([*COUNTERS, CYCLE, MC_IDLE, MC_ERROR]))
                   + here({csr_addr_port(g): "mc_csr" for g in range(config.groups)})
                   + here(dict.fromkeys(csr_rdata_port(g) for g in range(config.groups)))))
    groups.append(("input descriptors", True, here(dict.fromkeys(DESC_PORTS), fmt="hex")))
    controls = [n for n in tb.CONTROL if n not in track]
    groups.append(("host DMA and back door", True, here(dict.fromkeys(controls), fmt="hex")))
    return [(title, closed, traces) for title, closed, traces in groups if traces]


def _scope_of(variables: Sequence[Variable], name: str, below: str) -> str | None:
    """The shallowest scope under ``below`` declaring ``name`` (None when there is none)."""
    scopes = [s for s, n, _ in variables if n == name and s.startswith(below + ".")]
    return min(scopes, key=lambda s: s.count(".")) if scopes else None


def _controller_scope(variables: Sequence[Variable], g: int) -> str | None:
    """Group ``g``'s controller's scope: the one named ``mc<g>`` that has ``cmd_kind``."""
    leaf = CONTROLLER_INSTANCE.format(g=g)
    scopes = [s for s, n, _ in variables if n == OBSERVATION[1]
              and re.split(r"[.]", s)[-1] == leaf]
    return min(scopes, key=lambda s: s.count(".")) if scopes else None


def zoom_for(time_unit_s: float) -> float:
    """GTKWave's zoom showing a dump whose time unit is ``time_unit_s`` seconds as :data:`ZOOM`
    shows a picosecond dump (Verilator writes nanoseconds: the same span in a thousandth of
    the units needs a zoom about 10 steps nearer)."""
    if not time_unit_s > 0:
        raise ValueError(f"Time unit must be a positive number of seconds, not {time_unit_s!r}")
    return ZOOM + math.log2(time_unit_s / 1e-12)


def write_save_file(out: TextIO, dumpfile: Path, variables: Sequence[Variable],
                    config: ArchConfig, filters: Mapping[str, Path],
                    markers: Sequence[int] = (), time_unit_s: float = 1e-12) -> None:
    """Write the save file of ``dumpfile`` to ``out``: :func:`save_groups` with their filters,
    and GTKWave's markers ``a`` .. ``z`` at the first :data:`MAX_MARKERS` ``markers`` (times
    in the dump's unit, ``time_unit_s`` seconds: it sets the zoom, :func:`zoom_for`)."""
    from vcd.gtkw import GTKWSave

    save = GTKWSave(out)
    save.dumpfile(str(dumpfile.resolve()))
    save.size(*WINDOW)
    save.pos(0, 0)
    named = dict(zip(_MARKERS, markers[:MAX_MARKERS], strict=False))
    # pyvcd annotates **kwargs as Dict[str, int] (meaning each value): the values are ints
    save.zoom_markers(zoom_for(time_unit_s), **named)  # type: ignore[arg-type]
    save.signals_width(SIGNALS_WIDTH)
    for title, closed, traces in save_groups(variables, config):
        with save.group(title, closed=closed):
            for name, width, fmt, flt in traces:
                suffix = f"[{width - 1}:0]" if width > 1 else ""
                kwargs: dict[str, Any] = {}
                if flt is not None:
                    kwargs["translate_filter_file"] = str(filters[flt].resolve())
                save.trace(name + suffix, datafmt=fmt, **kwargs)
