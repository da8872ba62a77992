"""The converter's control: its run state machine and counters, and the buffer halves' state."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..contracts.converter import ERROR_CODE_BITS, ErrorCode
from ..contracts.counters import COUNTER_BITS

__all__ = ["ConverterControl", "BufferHalves"]


class ConverterControl(wiring.Component):
    """IDLE -> CHECK -> RUN -> IDLE: start, check the program, run the engines, finish.

    The register file decides whether a program is legal, the engines when they are done; this
    block only sequences them and keeps the status and counters the register file reads back.

    Parameters
    ----------
    groups : int
        Group ports of the converter (read beats counted per cycle: up to one per Group and
        engine).
    engines : int
        Engines (write beats counted per cycle: up to one per engine).

    Attributes
    ----------
    start, clear : In(1)
        ``CTRL.start`` / ``CTRL.clear`` written this cycle.
    check : Out(1); checked : In(1); code : In(ERROR_CODE_BITS)
        Ask the register file to check the program; its verdict (0: legal).
    run : Out(1)
        One cycle: the program is legal, the engines start.
    engines_done, stall, mem_error : In(1)
        From the engines and the port router.
    beats_in : In(range(groups * engines + 1)); beat_written : In(range(engines + 1))
        Read beats taken and write beats handed over this cycle (each engine's Group read
        streams have their own buffer ports; each engine has its writer).
    busy, done, error, error_code : Out
        Status (``done`` and ``error`` sticky until the next start or ``CTRL.clear``).
    beats_read, beats_written, stall_cycles, busy_cycles : Out(COUNTER_BITS)
        Counters, cleared by start.
    """

    def __init__(self, groups: int = 4, engines: int = 1):
        super().__init__({
            "start": In(1), "clear": In(1),
            "check": Out(1), "checked": In(1), "code": In(ERROR_CODE_BITS),
            "run": Out(1),
            "engines_done": In(1), "stall": In(1), "beats_in": In(range(groups * engines + 1)),
            "beat_written": In(range(engines + 1)),
            "mem_error": In(1),
            "busy": Out(1), "done": Out(1), "error": Out(1), "error_code": Out(ERROR_CODE_BITS),
            "beats_read": Out(COUNTER_BITS), "beats_written": Out(COUNTER_BITS),
            "stall_cycles": Out(COUNTER_BITS), "busy_cycles": Out(COUNTER_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        running = Signal()
        m.d.comb += self.busy.eq(running)
        with m.FSM(name="control"):
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.comb += self.check.eq(1)
                    m.d.sync += [self.done.eq(0), self.error.eq(0), self.error_code.eq(0),
                                 self.beats_read.eq(0), self.beats_written.eq(0),
                                 self.stall_cycles.eq(0), self.busy_cycles.eq(0), running.eq(1)]
                    m.next = "CHECK"
                with m.Elif(self.clear):
                    m.d.sync += [self.done.eq(0), self.error.eq(0), self.error_code.eq(0)]
            with m.State("CHECK"):
                with m.If(self.checked):
                    with m.If(self.code != 0):
                        m.d.sync += [self.error.eq(1), self.error_code.eq(self.code),
                                     self.done.eq(1), running.eq(0)]
                        m.next = "IDLE"
                    with m.Else():
                        m.d.comb += self.run.eq(1)
                        m.next = "RUN"
            with m.State("RUN"):
                m.d.sync += self.busy_cycles.eq(self.busy_cycles + 1)
                m.d.sync += self.stall_cycles.eq(self.stall_cycles + self.stall)
                with m.If(self.engines_done):
                    m.d.sync += [self.done.eq(1), running.eq(0)]
                    m.next = "IDLE"
        with m.If(self.beats_in != 0):
            m.d.sync += self.beats_read.eq(self.beats_read + self.beats_in)
        with m.If(self.beat_written != 0):
            m.d.sync += self.beats_written.eq(self.beats_written + self.beat_written)
        with m.If(self.mem_error & ~self.error):
            m.d.sync += [self.error.eq(1), self.error_code.eq(ErrorCode.MEMORY)]
        return m


class BufferHalves(wiring.Component):
    """Which buffer halves the read engine has claimed and filled, until the gather releases
    them (bit ``h``: half ``h``); both cleared when a run starts.

    Attributes
    ----------
    run : In(1)
        A run starts.
    claim, filled, release : In(2)
        The read engine claims / has filled a half; the gather engine is done with one.
    claimed, full : Out(2)
        The halves' state as the engines see it.
    """

    def __init__(self):
        super().__init__({"run": In(1), "claim": In(2), "filled": In(2), "release": In(2),
                          "claimed": Out(2), "full": Out(2)})

    def elaborate(self, platform):
        m = Module()
        m.d.sync += [
            self.claimed.eq((self.claimed | self.claim) & ~self.release),
            self.full.eq((self.full | self.filled) & ~self.release),
        ]
        with m.If(self.run):
            m.d.sync += [self.claimed.eq(0), self.full.eq(0)]
        return m
