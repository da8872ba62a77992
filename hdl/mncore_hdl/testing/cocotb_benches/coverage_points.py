"""Functional coverpoints of the sim benches (cocotb-coverage), sampled by the passive monitors.

Coverage is on when ``MNCORE_COVERAGE=DIR`` is set (``run_cocotb`` passes it to the bench with
the test's name); then :func:`memctrl_monitor` and :func:`converter_monitor` return a sampler
that the agents call at events they already observe (a command on the DRAM bus, an accepted
request, refresh becoming due, a finished conversion), never once per cycle. Each test's
database goes to ``DIR/functional/<test>.yml``; ``bench/coverage.py`` merges them.

Every coverpoint of both blocks is declared here, so every test's file lists all of them and
the merge adds like to like.
"""

from __future__ import annotations

from cocotb_coverage.coverage import CoverCross, CoverPoint, coverage_db

from mncore_hdl.contracts.converter import MAX_LOOPS, ErrorCode, Reg
from mncore_hdl.contracts.memctrl import PORTS, Cmd
from mncore_hdl.settings import HDL
from mncore_hdl.tooling.coverage import functional_path

#: Bank state a column command found: row open (hit), bank closed (miss), another row open
#: (conflict: a precharge, then an activate, before the column command).
BANK_STATES = ("hit", "miss", "conflict")
#: Where a request lies against the simulated window.
WINDOW = ("inside", "straddling", "outside")
#: The command last on the bus when refresh fell due with traffic outstanding.
REFRESH_AFTER = ("ACT", "PRE", "RD", "WR")
DEPTHS = tuple(range(MAX_LOOPS + 1))
#: Bins no bench can reach, with the reason (``bench/coverage.py`` prints it beside the bin).
UNREACHABLE: dict[str, dict[str, str]] = {
    "converter.error": {
        "MEMORY": "the converter checks its source footprint against the window before it "
                  "reads (SRC_RANGE), so the memory controller never flags one of its beats",
    },
}
TABLES = ("outer", "read", "gather")


# -- memory controller ---------------------------------------------------------------------

@CoverPoint("memctrl.column.kind", xf=lambda kind, state, port: kind, bins=["RD", "WR"])
@CoverPoint("memctrl.column.bank_state", xf=lambda kind, state, port: state,
            bins=list(BANK_STATES))
@CoverPoint("memctrl.column.port", xf=lambda kind, state, port: port,
            bins=sorted(PORTS.values()))
@CoverCross("memctrl.column.kind_x_state_x_port",
            items=["memctrl.column.kind", "memctrl.column.bank_state", "memctrl.column.port"])
def _column(kind: str, state: str, port: int) -> None:
    pass


@CoverPoint("memctrl.refresh.after", bins=list(REFRESH_AFTER))
def _refresh_after(kind: str) -> None:
    pass


@CoverPoint("memctrl.request.dir", xf=lambda write, where: "write" if write else "read",
            bins=["read", "write"])
@CoverPoint("memctrl.request.window", xf=lambda write, where: where, bins=list(WINDOW))
@CoverCross("memctrl.request.dir_x_window", items=["memctrl.request.dir",
                                                    "memctrl.request.window"])
def _request(write: bool, where: str) -> None:
    pass


# -- layout converter ----------------------------------------------------------------------

def _depth_point(table: str):
    return CoverPoint(f"converter.depth.{table}", xf=lambda depths, bits: depths[table],
                      bins=list(DEPTHS))


@_depth_point("outer")
@_depth_point("read")
@_depth_point("gather")
@CoverPoint("converter.elem_bits", xf=lambda depths, bits: bits, bins=[16, 32])
def _conversion(depths: dict[str, int], bits: int) -> None:
    pass


@CoverPoint("converter.error", bins=[code.name for code in ErrorCode])
def _error(name: str) -> None:
    pass


class _Export:
    def __init__(self, folder: str, name: str):
        self.path = functional_path(folder, name)  # type: ignore[arg-type]

    def export(self) -> None:
        """Write this test's coverage database (called whenever the bench finishes a step)."""
        coverage_db.export_to_yaml(str(self.path))


class MemctrlCoverage(_Export):
    """Tracks each bank's state from the command stream the command monitor sees."""

    def __init__(self, folder: str, name: str, banks: int, window: int):
        super().__init__(folder, name)
        self.window = window
        self.state: list[str] = ["hit"] * banks   # what the next column command to a bank finds
        self.last_kind: int | None = None

    def command(self, kind: int, bank: int, port: int, refreshing: bool) -> None:
        """A command on the DRAM bus (``refreshing``: a refresh was pending)."""
        self.last_kind = kind
        if kind == Cmd.PRE and not refreshing:
            self.state[bank] = "conflict"
        elif kind == Cmd.ACT:
            self.state[bank] = "conflict" if self.state[bank] == "conflict" else "miss"
        elif kind in (Cmd.RD, Cmd.WR):
            _column(Cmd(kind).name, self.state[bank], port)
            self.state[bank] = "hit"

    def refresh_due(self, outstanding: bool) -> None:
        """Refresh just fell due; ``outstanding``: some port still had work."""
        if outstanding and self.last_kind is not None and Cmd(self.last_kind).name in REFRESH_AFTER:
            _refresh_after(Cmd(self.last_kind).name)

    def request(self, addr: int, length: int, write: bool) -> None:
        """A request the controller accepted."""
        end = addr + length
        where = "inside" if end <= self.window else ("outside" if addr >= self.window
                                                     else "straddling")
        _request(write, where)


class ConverterCoverage(_Export):
    """Samples each conversion's programmed loop depths and width, and its outcome."""

    def __init__(self, folder: str, name: str):
        super().__init__(folder, name)
        self.regs: dict[int, int] = {}

    def conversion(self, regs: dict[int, int], error_code: int) -> None:
        """A conversion finished (``regs``: what was written before its start)."""
        self.regs.update(regs)
        _error(ErrorCode(error_code).name)
        if error_code == ErrorCode.NONE:
            depths = {t: self.regs.get(getattr(Reg, f"N_{t.upper()}"), 0) for t in TABLES}
            _conversion(depths, self.regs.get(Reg.ELEM_BITS, 0))
        self.export()


def _enabled() -> tuple[str, str] | None:
    folder = HDL["MNCORE_COVERAGE"].raw()
    if not folder:
        return None
    return folder, HDL["MNCORE_COVERAGE_NAME"].get()


def memctrl_monitor(banks: int, window: int) -> MemctrlCoverage | None:
    """The memory controller bench's sampler, or None when coverage is off."""
    on = _enabled()
    return MemctrlCoverage(*on, banks, window) if on else None


def converter_monitor() -> ConverterCoverage | None:
    """The converter bench's sampler, or None when coverage is off."""
    on = _enabled()
    return ConverterCoverage(*on) if on else None
