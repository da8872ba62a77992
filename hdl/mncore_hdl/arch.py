"""The architecture description: the one source of MN-Core 2 geometry and DRAM timing numbers."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DramTiming", "ArchConfig", "MNCORE2", "MNCORE2_SIM", "SCHEDULERS", "TIMING_PRESETS"]

LW_BITS = 64
LW_BYTES = LW_BITS // 8


def _check_positive_int(owner: str, name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{owner}.{name} must be an integer, not {value!r}")
    if value <= 0:
        raise ValueError(f"{owner}.{name} must be a positive integer, not {value}")


def _check_non_negative_int(owner: str, name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{owner}.{name} must be an integer, not {value!r}")
    if value < 0:
        raise ValueError(f"{owner}.{name} must be a non-negative integer, not {value}")


#: DramTiming fields where 0 means "no such rule" (turnarounds).
_MAY_BE_ZERO = ("twtr", "trtw")

#: The command schedulers the memory controller implements (``ArchConfig.scheduler``).
SCHEDULERS = ("in_order", "fr_fcfs")


def _check_power_of_two(owner: str, name: str, value: int) -> None:
    _check_positive_int(owner, name, value)
    if value & (value - 1):
        raise ValueError(f"{owner}.{name} must be a power of two, not {value}")


@dataclass(frozen=True)
class DramTiming:
    """GDDR6-like DRAM timing rules, in controller clock cycles.

    Parameters
    ----------
    cl : int
        CAS latency: read command to first data beat.
    trcd : int
        Activate to read/write on the same bank.
    trp : int
        Precharge to activate on the same bank.
    tras : int
        Activate to precharge on the same bank (minimum row-open time).
    twr : int
        Last write data beat to precharge (write recovery).
    trefi : int
        Average interval between refresh commands.
    trfc : int
        Duration of one refresh (all banks busy).
    burst_length : int
        Beats (one LW each) per column command.
    trrd : int
        Activate to activate, different banks (tRRD_S).
    tfaw : int
        Four-activate window: at most four ACTs in any ``tfaw`` consecutive cycles.
    twtr : int
        Last write data beat to a read command, any bank (tWTR_S); 0: no rule.
    trtp : int
        Read command to precharge on the same bank.
    trtw : int
        Idle data-bus cycles between the last read beat and a write command's first beat
        (read-to-write turnaround); 0: no rule.
    tccd : int
        Column command to column command, any bank (tCCD_S); matters only for chunks
        shorter than ``tccd`` beats, since a burst holds the bus for its beats anyway.

    Notes
    -----
    The defaults are nanosecond figures converted at the 750 MHz controller clock (1.333 ns a
    cycle) and rounded up. CL, tRCD, tRP, tRAS, tWR, tREFI and tRFC are the kit's GDDR6-like
    figures (16, 16, 16, 37, 16 ns, 3.9 us, 120 ns). The rules between banks and on the data
    bus come from JEDEC DDR4-3200 (JESD79-4, 2 KB page): tRRD_S 5.3 ns -> 4, tFAW 30 ns -> 23,
    tWTR_S 2.5 ns -> 2, tRTP 7.5 ns -> 6, read-to-write bus gap 2 tCK (1.25 ns) -> 1,
    tCCD_S 4 tCK (2.5 ns) -> 2. The ``_S`` (other bank group) values apply because the address
    map puts consecutive rows in consecutive banks, which alternate bank groups; bank groups
    themselves are not modeled. :data:`TIMING_PRESETS` holds this set and others.
    """

    cl: int = 12
    trcd: int = 12
    trp: int = 12
    tras: int = 28
    twr: int = 12
    trefi: int = 2925
    trfc: int = 90
    burst_length: int = 8
    trrd: int = 4
    tfaw: int = 23
    twtr: int = 2
    trtp: int = 6
    trtw: int = 1
    tccd: int = 2

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            if f.name in _MAY_BE_ZERO:
                _check_non_negative_int("DramTiming", f.name, getattr(self, f.name))
            else:
                _check_positive_int("DramTiming", f.name, getattr(self, f.name))
        _check_power_of_two("DramTiming", "burst_length", self.burst_length)
        if self.trfc >= self.trefi:
            raise ValueError(
                f"DramTiming.trfc ({self.trfc}) must be shorter than trefi ({self.trefi}), "
                "or refresh would take all the time"
            )

    @property
    def row_miss_penalty(self) -> int:
        """Extra cycles of a row conflict over a row hit: precharge then activate."""
        return self.trp + self.trcd


@dataclass(frozen=True)
class ArchConfig:
    """The modeled chip: geometry, DRAM organisation, port widths, clock.

    Every consumer (hardware constructors, compiler, functional model, tests, benches) takes
    this object; nothing re-declares its numbers.

    Parameters
    ----------
    groups : int
        Groups on the chip, each with its own DRAM and memory controller.
    l2b_per_group, l1b_per_l2b, mab_per_l1b, pe_per_mab : int
        The PE hierarchy below a Group.
    pe_flops_per_cycle : int
        Floating-point operations one PE completes per cycle (a fused multiply-add is two).
    lw_bits : int
        Bits in a long word (LW), the DRAM word. MN-Core 2 uses 64.
    dram_bytes_per_group : int
        Modeled DRAM capacity of one Group (the functional model's address space).
    sim_window_lw : int
        LWs of DRAM per Group that the RTL backing store holds (the simulated window).
    banks : int
        DRAM banks per Group.
    row_lw : int
        LWs in one DRAM row (one page).
    port_lw_per_cycle : int
        Data-path width of each memory-controller port, in LW per cycle.
    clock_mhz : float
        Controller clock, used to turn cycles into time.
    timing : DramTiming
        The DRAM timing rules.
    scheduler : str
        The memory controller's command scheduler, one of :data:`SCHEDULERS`: ``"in_order"``
        (each port's chunks in order, round-robin between ports) or ``"fr_fcfs"`` (a window of
        queued chunks, ready row hits first, then oldest).
    scheduler_window : int
        With ``fr_fcfs``: the chunks each port's window holds and the scheduler chooses among
        (4 to 32).
    scheduler_starvation_cap : int
        With ``fr_fcfs``: the most younger chunks (of other ports, and of its own port's
        window) that may issue ahead of a waiting one.
    """

    groups: int = 4
    l2b_per_group: int = 2
    l1b_per_l2b: int = 8
    mab_per_l1b: int = 16
    pe_per_mab: int = 4
    pe_flops_per_cycle: int = 2
    lw_bits: int = LW_BITS
    dram_bytes_per_group: int = 4 << 30
    sim_window_lw: int = 1 << 19
    banks: int = 16
    row_lw: int = 256
    port_lw_per_cycle: int = 1
    clock_mhz: float = 750.0
    timing: DramTiming = field(default_factory=DramTiming)
    scheduler: str = "in_order"
    scheduler_window: int = 8
    scheduler_starvation_cap: int = 16

    def __post_init__(self) -> None:
        for name in ("groups", "l2b_per_group", "l1b_per_l2b", "mab_per_l1b", "pe_per_mab",
                     "pe_flops_per_cycle",
                     "dram_bytes_per_group", "sim_window_lw", "port_lw_per_cycle"):
            _check_positive_int("ArchConfig", name, getattr(self, name))
        for name in ("banks", "row_lw"):
            _check_power_of_two("ArchConfig", name, getattr(self, name))
        if self.lw_bits != LW_BITS:
            raise ValueError(
                f"ArchConfig.lw_bits must be {LW_BITS} (MN-Core's LW), not {self.lw_bits}"
            )
        if self.dram_bytes_per_group % LW_BYTES:
            raise ValueError(
                "ArchConfig.dram_bytes_per_group must be a multiple of the LW size "
                f"({LW_BYTES} bytes), not {self.dram_bytes_per_group}"
            )
        if self.sim_window_lw > self.dram_lw_per_group:
            raise ValueError(
                f"ArchConfig.sim_window_lw ({self.sim_window_lw}) cannot exceed the DRAM size "
                f"of a Group ({self.dram_lw_per_group} LW)"
            )
        if self.row_lw % self.timing.burst_length:
            raise ValueError(
                f"ArchConfig.row_lw ({self.row_lw}) must be a multiple of the burst length "
                f"({self.timing.burst_length})"
            )
        if not isinstance(self.timing, DramTiming):
            raise TypeError(f"ArchConfig.timing must be a DramTiming, not {self.timing!r}")
        self._check_scheduler()

    def _check_scheduler(self) -> None:
        if self.scheduler not in SCHEDULERS:
            raise ValueError(f"ArchConfig.scheduler must be one of {', '.join(SCHEDULERS)}, "
                             f"not {self.scheduler!r}")
        _check_positive_int("ArchConfig", "scheduler_window", self.scheduler_window)
        if not 4 <= self.scheduler_window <= 32:
            raise ValueError("ArchConfig.scheduler_window must be between 4 and 32, "
                             f"not {self.scheduler_window}")
        _check_positive_int("ArchConfig", "scheduler_starvation_cap",
                            self.scheduler_starvation_cap)

    # -- derived geometry -------------------------------------------------------------------

    @property
    def lw_bytes(self) -> int:
        """Bytes in one LW."""
        return self.lw_bits // 8

    @property
    def dram_lw_per_group(self) -> int:
        """LW addresses in one Group's DRAM."""
        return self.dram_bytes_per_group // self.lw_bytes

    @property
    def pes(self) -> int:
        """PEs on the whole chip."""
        return (self.groups * self.l2b_per_group * self.l1b_per_l2b * self.mab_per_l1b
                * self.pe_per_mab)

    @property
    def port_bytes_per_cycle(self) -> int:
        """Peak bytes one port moves per cycle."""
        return self.port_lw_per_cycle * self.lw_bytes

    @property
    def col_bits(self) -> int:
        """Address bits selecting the LW inside a row."""
        return self.row_lw.bit_length() - 1

    @property
    def bank_bits(self) -> int:
        """Address bits selecting the bank."""
        return self.banks.bit_length() - 1

    def split_address(self, lw_address: int) -> tuple[int, int, int]:
        """Map an LW address to ``(bank, row, column)``.

        The column takes the low bits, then the bank, then the row, so that a sequential
        stream walks a whole row before it moves to the next bank (row hits), and consecutive
        rows fall in different banks (their activation overlaps).
        """
        col = lw_address & (self.row_lw - 1)
        bank = (lw_address >> self.col_bits) & (self.banks - 1)
        row = lw_address >> (self.col_bits + self.bank_bits)
        return bank, row, col

    def cycles_to_seconds(self, cycles: float) -> float:
        """Wall-clock time of ``cycles`` controller cycles on the modeled chip."""
        return cycles / (self.clock_mhz * 1e6)

    # -- serialization ----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (timing nested)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ArchConfig:
        """Rebuild a config from :meth:`to_dict` output."""
        data = dict(data)
        timing = DramTiming(**data.pop("timing", {}))
        return cls(timing=timing, **data)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def replace(self, **changes: Any) -> ArchConfig:
        """A copy with some fields changed (the config itself is frozen)."""
        return dataclasses.replace(self, **changes)


#: The modeled MN-Core 2 as the functional model sees it (4 GiB of DRAM per Group).
MNCORE2 = ArchConfig()

#: The same chip with DRAM shrunk to the RTL's simulated window, for RTL-backed devices.
MNCORE2_SIM = ArchConfig(dram_bytes_per_group=MNCORE2.sim_window_lw * LW_BYTES)

#: Named DRAM timing sets, in controller cycles at 750 MHz (ns figures rounded up):
#:
#: - ``"mncore2"``: the default :class:`DramTiming` (see its notes for the sources);
#: - ``"ddr4_3200"``: every rule from JEDEC DDR4-3200AA (22-22-22, 8 Gb, 2 KB page), with the
#:   same-bank-group (``_L``) values for tRRD, tWTR and tCCD: CL/tRCD/tRP 13.75 ns -> 11,
#:   tRAS 32 ns -> 24, tWR 15 ns -> 12, tREFI 7.8 us -> 5850, tRFC 350 ns -> 263,
#:   tRRD_L 6.4 ns -> 5, tFAW 30 ns -> 23, tWTR_L 7.5 ns -> 6, tRTP 7.5 ns -> 6,
#:   tCCD_L 5 ns -> 4, read-to-write gap 1;
#: - ``"ddr4_3200_bus"``: DDR4-3200AA scaled to its own data bus instead (one cycle per
#:   transfer, 0.3125 ns; x8 parts, 1 KB page): CL/tRCD/tRP 22 tCK -> 44, tRAS 32 ns -> 103,
#:   tWR 15 ns -> 48, tREFI 7.8 us -> 24960, tRFC 350 ns -> 1120, tRRD_S 4 tCK -> 8,
#:   tFAW 21 ns -> 68, tWTR_S 4 tCK -> 8, tRTP 7.5 ns -> 24, read-to-write gap 2 tCK -> 4,
#:   tCCD_S 4 tCK -> 8. Here the activate rules bound random bursts, as on the real part
#:   (LiteDRAM measures 47.6% of the bus when every read opens a row);
#: - ``"basic"``: the per-bank rules, refresh and CL of ``"mncore2"`` with no rule between
#:   banks or on the bus turnaround (tRRD, tFAW, tRTP, tCCD 1; tWTR, tRTW 0).
TIMING_PRESETS: dict[str, DramTiming] = {
    "mncore2": DramTiming(),
    "ddr4_3200": DramTiming(cl=11, trcd=11, trp=11, tras=24, twr=12, trefi=5850, trfc=263,
                            burst_length=8, trrd=5, tfaw=23, twtr=6, trtp=6, trtw=1, tccd=4),
    "ddr4_3200_bus": DramTiming(cl=44, trcd=44, trp=44, tras=103, twr=48, trefi=24960,
                                trfc=1120, burst_length=8, trrd=8, tfaw=68, twtr=8, trtp=24,
                                trtw=4, tccd=8),
    "basic": DramTiming(trrd=1, tfaw=1, twtr=0, trtp=1, trtw=0, tccd=1),
}
