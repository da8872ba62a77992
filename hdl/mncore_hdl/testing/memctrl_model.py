"""Pure-Python reference for the memory controller benches: sparse memory, chunking, timing rules.

No simulator import here, so pytest can use it directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mncore_hdl.arch import LW_BITS, LW_BYTES, ArchConfig
from mncore_hdl.contracts.memctrl import FULL_STROBE, Cmd

__all__ = ["Chunk", "SparseMemory", "TimingChecker", "split_chunks"]

#: Name of each DRAM command kind on the observation port (NONE excluded).
_NAMES = {int(c): c.name for c in Cmd if c is not Cmd.NONE}


class SparseMemory:
    """LW-addressed memory storing only touched pages (unwritten words read as zero)."""

    PAGE = 1024

    def __init__(self) -> None:
        self.pages: dict[int, list[int]] = {}

    def read(self, addr: int) -> int:
        page = self.pages.get(addr // self.PAGE)
        return 0 if page is None else page[addr % self.PAGE]

    def write(self, addr: int, data: int, strb: int = FULL_STROBE) -> None:
        page = self.pages.setdefault(addr // self.PAGE, [0] * self.PAGE)
        mask = 0
        for i in range(LW_BYTES):
            if strb >> i & 1:
                mask |= 0xFF << (LW_BITS // LW_BYTES * i)
        old = page[addr % self.PAGE]
        page[addr % self.PAGE] = (old & ~mask) | (data & mask)


@dataclass
class Chunk:
    """One column command's worth of a request: at most a burst, never across a burst block."""

    port: int
    addr: int
    length: int
    write: bool
    in_window: bool
    data: list[int] = field(default_factory=list)   # write beats
    strb: list[int] = field(default_factory=list)


def split_chunks(config: ArchConfig, port: int, addr: int, length: int, write: bool,
                 data: list[int] | None = None, strb: list[int] | None = None) -> list[Chunk]:
    """Cut a request the way the controller does (``requester.PortFrontend``)."""
    bl = config.timing.burst_length
    chunks = []
    done = 0
    while done < length:
        a = addr + done
        n = min(length - done, bl - a % bl)
        chunks.append(Chunk(port, a, n, write, a < config.sim_window_lw,
                            list(data[done:done + n]) if data else [],
                            list(strb[done:done + n]) if strb else []))
        done += n
    return chunks


class TimingChecker:
    """Passive checker of the DRAM command stream against the config's timing rules.

    Feed it every command with :meth:`command`; each violated rule appends a message (with the
    cycle, the rule, and the required versus the actual distance) to :attr:`errors`.
    A column burst of ``n`` beats issued at cycle ``c`` moves data in cycles ``c+1 .. c+n``.
    """

    def __init__(self, config: ArchConfig):
        self.config = config
        t = config.timing
        self.t = t
        far = -10 ** 9
        nb = config.banks
        self.open_row: list[int | None] = [None] * nb
        self.last_act = [far] * nb
        self.last_pre = [far] * nb
        self.wr_end = [far] * nb      # last write beat cycle
        self.rd_end = [far] * nb      # last read beat cycle
        self.bus_free = far           # first cycle a new column may issue
        self.acts: list[int] = [far] * 4   # the last four ACTs, any bank (tRRD, tFAW)
        self.last_rd = [far] * nb     # last RD command per bank (tRTP)
        self.last_col = far           # last column command, any bank (tCCD)
        self.wr_end_any = far         # last write beat, any bank (tWTR)
        self.rd_end_any = far         # last read beat, any bank (read-to-write turnaround)
        self.last_ref = far
        self.refreshes: list[int] = []
        self.errors: list[str] = []
        self.counts = dict.fromkeys(_NAMES.values(), 0)
        self.transcript: list[tuple] = []

    def _need(self, cycle: int, rule: str, since: int, minimum: int, what: str) -> None:
        if cycle - since < minimum:
            self.errors.append(f"cycle {cycle}: {what} violates {rule}: expected >= {minimum} "
                               f"cycles, actual {cycle - since}")

    def command(self, cycle: int, kind: int, bank: int, row: int, port: int = 0,
                length: int = 0) -> None:
        name = _NAMES.get(kind)
        if name is None:
            self.errors.append(f"cycle {cycle}: unknown command kind {kind}")
            return
        self.counts[name] += 1
        self.transcript.append((cycle, name, bank, row) if name != "REF" else (cycle, name))
        t = self.t
        if name == "REF":
            for b in range(self.config.banks):
                if self.open_row[b] is not None:
                    self.errors.append(f"cycle {cycle}: REF with bank {b} open")
                self._need(cycle, "tRP", self.last_pre[b], t.trp, f"REF after PRE bank {b}")
            self._need(cycle, "tRFC", self.last_ref, t.trfc, "REF after REF")
            self.last_ref = cycle
            self.refreshes.append(cycle)
            return
        self._need(cycle, "tRFC", self.last_ref, t.trfc, f"{name} after REF")
        if name == "ACT":
            if self.open_row[bank] is not None:
                self.errors.append(f"cycle {cycle}: ACT bank {bank} while row "
                                   f"{self.open_row[bank]:#x} is open")
            self._need(cycle, "tRP", self.last_pre[bank], t.trp, f"ACT bank {bank}")
            self._need(cycle, "tRRD", self.acts[-1], t.trrd, f"ACT bank {bank}")
            self._need(cycle, "tFAW", self.acts[0], t.tfaw, f"ACT bank {bank}")
            self.acts = self.acts[1:] + [cycle]
            self.open_row[bank] = row
            self.last_act[bank] = cycle
        elif name == "PRE":
            if self.open_row[bank] is None:
                self.errors.append(f"cycle {cycle}: PRE bank {bank} which is closed")
            self._need(cycle, "tRAS", self.last_act[bank], t.tras, f"PRE bank {bank}")
            self._need(cycle, "tWR", self.wr_end[bank], t.twr, f"PRE bank {bank}")
            self._need(cycle, "read burst end", self.rd_end[bank], 1, f"PRE bank {bank}")
            self._need(cycle, "tRTP", self.last_rd[bank], t.trtp, f"PRE bank {bank}")
            self.open_row[bank] = None
            self.last_pre[bank] = cycle
        else:
            self._column(cycle, name, bank, row, length)

    def _column(self, cycle: int, name: str, bank: int, row: int, length: int) -> None:
        """Check a RD or WR against the row state and the data-bus rules; record its burst."""
        t = self.t
        if self.open_row[bank] != row:
            self.errors.append(f"cycle {cycle}: {name} bank {bank} row {row:#x}, but the "
                               f"open row is {self.open_row[bank]!r}")
        self._need(cycle, "tRCD", self.last_act[bank], t.trcd, f"{name} bank {bank}")
        self._need(cycle, "data bus", self.bus_free, 0, f"{name} bank {bank}")
        self._need(cycle, "tCCD", self.last_col, t.tccd, f"{name} bank {bank}")
        if name == "RD":
            self._need(cycle, "tWTR", self.wr_end_any, t.twtr, f"RD bank {bank}")
        else:
            self._need(cycle, "tRTW", self.rd_end_any, t.trtw, f"WR bank {bank}")
        self.last_col = cycle
        if not 1 <= length <= t.burst_length:
            self.errors.append(f"cycle {cycle}: {name} length {length} not in "
                               f"1..{t.burst_length}")
        end = cycle + length
        if name == "WR":
            self.wr_end[bank] = end
            self.wr_end_any = end
        else:
            self.rd_end[bank] = end
            self.rd_end_any = end
            self.last_rd[bank] = cycle
        self.bus_free = end
