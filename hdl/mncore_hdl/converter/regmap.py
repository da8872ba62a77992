"""Program -> register values, generated from the register table (pure Python).

The register map itself (addresses, fields, widths) is declared once in
:mod:`mncore_hdl.contracts.converter`; :func:`registers` fills it from a
:class:`~.program.ConverterProgram`. See ``docs/layout_converter.md``.
"""

from __future__ import annotations

from typing import Any

from ..contracts.converter import REG_BITS, ErrorCode, Reg, register_fields
from .program import ConverterProgram

__all__ = ["Reg", "ErrorCode", "registers", "program_state"]


def program_state(prog: ConverterProgram, src_group: int, src_addr: int, dst_group: int,
                  dst_addr: int) -> dict[str, Any]:
    """The converter's programmed state as nested dicts and lists, keyed like the table's paths.

    Loops and lanes ``prog`` does not use are absent (their registers are left alone).
    """
    def table(loops):
        return [{"extent": loop.extent, "carry": list(loop.carries)} for loop in loops]

    return {
        "elem_bits": prog.elem_bits,
        "src_group": src_group, "src_addr": src_addr,
        "src_groups": prog.src_groups, "src_lwpg": prog.src_lw_per_group,
        "dst_group": dst_group, "dst_addr": dst_addr,
        "dst_groups": prog.dst_groups, "dst_lwpg": prog.dst_lw_per_group,
        "n_outer": len(prog.outer), "n_read": len(prog.read), "n_gather": len(prog.gather),
        "burst": prog.burst,
        "dims": list(prog.dims),
        "outer": table(prog.outer), "read": table(prog.read), "gather": table(prog.gather),
        "split": {"extent": prog.split.extent, "stride": list(prog.split.carries)},
        "lanes": [{"valid": e.valid, "elem": e.elem, "log": list(e.log)} for e in prog.lanes],
    }


def registers(prog: ConverterProgram, src_group: int, src_addr: int, dst_group: int,
              dst_addr: int) -> dict[int, int]:
    """Register address -> 32-bit value programming ``prog`` (CTRL excluded), in address order."""
    state = program_state(prog, src_group, src_addr, dst_group, dst_addr)
    mask = (1 << REG_BITS) - 1
    regs: dict[int, int] = {}
    for reg in register_fields():
        value: Any = state
        for part in reg.path:
            if isinstance(part, int):
                if part >= len(value):
                    break
                value = value[part]
            else:
                value = value[part]
        else:
            regs[reg.address] = int(value) & mask if reg.signed else int(value)
    return regs
