"""The per-command table ``python -m mlsdk.waves FILE`` prints."""

from __future__ import annotations

from mncore_hdl.contracts.cosim import TOP_PATHS

from .reader import Waves

__all__ = ["format_summary"]


def _beats(per_group: list[int]) -> str:
    """``1024 (G1)``: the total and the Groups that moved any; ``-`` when none did."""
    total = sum(per_group)
    if not total:
        return "-"
    groups = ",".join(f"G{g}" for g, n in enumerate(per_group) if n)
    return f"{total} ({groups})"


def format_summary(waves: Waves) -> str:
    """One line per recorded command (seq, call, kind, buffer, start in ns, cycles, beats per
    port path, converter busy cycles), then the totals."""
    rows = waves.summary()
    unit_ns = waves.time_unit_s() * 1e9
    head = ["seq", "call", "command", "buffer", "start_ns", "cycles",
            *(f"{p}_beats" for p in TOP_PATHS), "converter_busy"]
    table = [head]
    for row in rows:
        buffer = row["buffer"]
        table.append([str(row["seq"]), str(row["call"]), str(row["command"]),
                      "-" if buffer is None else f"buf#{buffer}",
                      f"{int(row['start']) * unit_ns:.0f}",  # type: ignore[call-overload]
                      str(row["cycles"]),
                      *(_beats(row[p]) for p in TOP_PATHS),  # type: ignore[arg-type]
                      str(row["converter_busy"])])
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
             for r in table]
    total = sum(int(str(r["cycles"])) for r in rows)
    busy = sum(int(str(r["converter_busy"])) for r in rows)
    lines.append(f"{len(rows)} commands recorded in {waves.path.name}: {total} cycles, "
                 f"converter busy {busy} cycles")
    return "\n".join(lines)
