"""cocotb agents for the memory controller benches: port driver/monitor, model hookup, checker."""

from __future__ import annotations

import json
import random
from collections import deque
from typing import Any

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge

from mncore_hdl.arch import LW_BITS, ArchConfig
from mncore_hdl.contracts.cosim import backing_store
from mncore_hdl.contracts.memctrl import (
    FULL_STROBE,
    Cmd,
    RequestFormat,
    pack_wdata,
    register_map,
    unpack_rdata,
)
from mncore_hdl.settings import HDL
from mncore_hdl.testing.memctrl_model import Chunk, SparseMemory, TimingChecker, split_chunks

from .coverage_points import memctrl_monitor

CLOCK_NS = 1.334  # ~750 MHz, an even number of picoseconds per half period


def load_meta() -> tuple[ArchConfig, int]:
    with open(HDL["MC_META"].required()) as f:
        meta = json.load(f)
    return ArchConfig.from_dict(meta["config"]), int(meta["ports"])


class ReadSlot:
    """One expected read beat; its data is known once its column command is seen."""

    __slots__ = ("data", "error", "filled")

    def __init__(self, data: int = 0, error: int = 0, filled: bool = False):
        self.data, self.error, self.filled = data, error, filled


class PortAgent:
    """Driver and monitor of one requester port, with idle and back-pressure generators."""

    def __init__(self, tb: TB, index: int, idle: float, backpressure: float):
        self.tb, self.i = tb, index
        dut = tb.dut
        pre = f"ports__{index}__"
        self.req_valid = getattr(dut, pre + "req__valid")
        self.req_ready = getattr(dut, pre + "req__ready")
        self.req_payload = getattr(dut, pre + "req__payload")
        self.wd_valid = getattr(dut, pre + "wdata__valid")
        self.wd_ready = getattr(dut, pre + "wdata__ready")
        self.wd_payload = getattr(dut, pre + "wdata__payload")
        self.rd_valid = getattr(dut, pre + "rdata__valid")
        self.rd_ready = getattr(dut, pre + "rdata__ready")
        self.rd_payload = getattr(dut, pre + "rdata__payload")
        self.idle, self.backpressure = idle, backpressure
        self.requests: deque = deque()     # (addr, length, write) waiting to be presented
        self.wbeats: deque = deque()       # (data, strb) waiting to be presented
        self.columns: deque = deque()      # in-window chunks, awaiting their column command
        self.expected: deque = deque()     # ReadSlot per read beat, in order
        self.req_on = self.wd_on = False
        self.accepted: list[tuple[int, int, int, int]] = []  # (cycle, addr, length, write)
        self.read_log: list[tuple[int, int, int]] = []       # (cycle, data, error)
        self.read_beats = self.write_beats = self.stalls = 0

    def submit(self, addr: int, length: int, write: bool, data=None, strb=None) -> None:
        """Queue a request (and its write beats); the model learns its chunks now."""
        cfg = self.tb.config
        if write:
            data = data or [self.tb.rng.getrandbits(LW_BITS) for _ in range(length)]
            strb = strb or [FULL_STROBE] * length
            self.wbeats.extend(zip(data, strb, strict=True))
        for ch in split_chunks(cfg, self.i, addr, length, write, data, strb):
            if not write:
                slots = [ReadSlot() if ch.in_window else ReadSlot(0, 1, True)
                         for _ in range(ch.length)]
                self.expected.extend(slots)
                ch.data = slots  # type: ignore[assignment]  # filled at the column command
            if ch.in_window:
                self.columns.append(ch)
        self.requests.append((addr, length, write))

    def sample(self, cycle: int) -> None:
        if self.req_on and self.req_ready.value:
            self.req_on = False
            a, n, w = self.requests.popleft()
            self.accepted.append((cycle, a, n, w))
            if self.tb.cov:
                self.tb.cov.request(a, n, w)
        elif self.req_on:
            self.stalls += 1
        if self.wd_on and self.wd_ready.value:
            self.wd_on = False
            self.wbeats.popleft()
            self.write_beats += 1
        if self.rd_ready.value and self.rd_valid.value:
            data, error = unpack_rdata(int(self.rd_payload.value))
            err = int(error)
            self.read_log.append((cycle, data, err))
            self.read_beats += 1
            self.tb.check_read(self, data, err)

    def drive(self) -> None:
        rng = self.tb.rng
        if not self.req_on and self.requests and rng.random() >= self.idle:
            a, n, w = self.requests[0]
            self.req_payload.value = self.tb.request.pack(a, n, w)
            self.req_on = True
        self.req_valid.value = int(self.req_on)
        if not self.wd_on and self.wbeats and rng.random() >= self.idle:
            d, s = self.wbeats[0]
            self.wd_payload.value = pack_wdata(d, s)
            self.wd_on = True
        self.wd_valid.value = int(self.wd_on)
        self.rd_ready.value = int(rng.random() >= self.backpressure)

    def done(self) -> bool:
        """Everything submitted was accepted, issued to the DRAM and answered."""
        return not (self.requests or self.wbeats or self.expected or self.req_on
                    or self.columns)


class TB:
    """Clock, reset, port agents, reference model, command monitor and timing checker."""

    def __init__(self, dut, idle: float = 0.0, backpressure: float = 0.0):
        self.dut = dut
        self.config, self.nports = load_meta()
        self.request = RequestFormat.of(self.config)
        self.rng = random.Random(cocotb.RANDOM_SEED)
        self.log = dut._log
        self.log.info("seed=%d", cocotb.RANDOM_SEED)
        self.model = SparseMemory()
        self.checker = TimingChecker(self.config)
        self.ports = [PortAgent(self, i, idle, backpressure) for i in range(self.nports)]
        self.errors: list[str] = []
        self.cycle = 0
        self.commands: list[tuple[int, int, int, int, int, int]] = []
        self.conflicts = 0
        self.misses = 0
        self.fresh = [False] * self.config.banks
        #: fr_fcfs may serve a port's queued chunks out of request order
        self.reorders = self.config.scheduler == "fr_fcfs"
        self._refresh_pending = 0
        self.cov = memctrl_monitor(self.config.banks, self.config.sim_window_lw)
        Clock(dut.clk, CLOCK_NS, unit="ns", impl="gpi").start()

    async def reset(self) -> None:
        self.dut.rst.value = 1
        self.dut.csr_addr.value = 0
        self.dut.error_clear.value = 0
        for p in self.ports:
            p.req_payload.value = 0
            p.wd_payload.value = 0
            p.drive()
            p.req_valid.value = p.wd_valid.value = 0
        for _ in range(3):
            await RisingEdge(self.dut.clk)
        self.dut.rst.value = 0
        self.cycle = 0

    def error(self, msg: str) -> None:
        if len(self.errors) < 20:
            self.log.error(msg)
        self.errors.append(msg)

    def check_read(self, port: PortAgent, data: int, err: int) -> None:
        if not port.expected:
            self.error(f"port {port.i}: unexpected read beat {data:#x} (error={err})")
            return
        slot = port.expected.popleft()
        if not slot.filled:
            self.error(f"port {port.i}: read beat before its column command")
        elif (slot.data, slot.error) != (data, err):
            self.error(f"port {port.i} cycle {self.cycle}: read expected "
                       f"{slot.data:#018x} error={slot.error}, actual {data:#018x} error={err}")

    def on_command(self, kind: int, bank: int, row: int, port: int, length: int,
                   col: int = 0) -> None:
        cyc = self.cycle - 1  # the command was on the bus during the previous cycle
        self.commands.append((cyc, kind, bank, row, port, length))
        self.checker.command(cyc, kind, bank, row, port, length)
        if self.cov:
            self.cov.command(kind, bank, port, bool(self._refresh_pending))
        if kind == Cmd.ACT:
            self.fresh[bank] = True
        if kind == Cmd.PRE and not self._refresh_pending:
            self.conflicts += 1
        if kind not in (Cmd.RD, Cmd.WR):
            return
        if self.fresh[bank]:
            self.misses += 1
        self.fresh[bank] = False
        agent = self.ports[port]
        if not agent.columns:
            self.error(f"cycle {cyc}: column command for port {port} with nothing queued")
            return
        got = (kind == Cmd.WR, bank, row, col, length)
        ch = self._take_column(agent, got)
        if ch is None:
            want = (agent.columns[0].write, *self.config.split_address(agent.columns[0].addr),
                    agent.columns[0].length)
            self.error(f"cycle {cyc}: port {port} column (write, bank, row, col, len) "
                       f"expected {want}" + (" or a later queued chunk" if self.reorders
                                             else "") + f", actual {got}")
            return
        for k in range(ch.length):
            if ch.write:
                self.model.write(ch.addr + k, ch.data[k], ch.strb[k])
            else:
                slot: Any = ch.data[k]  # a ReadSlot (above)
                slot.data, slot.filled = self.model.read(ch.addr + k), True

    def _take_column(self, agent: PortAgent, got: tuple) -> Chunk | None:
        """The chunk a RD/WR served: in order, the port's next one; with ``fr_fcfs``, the
        first queued one at that address (a port's chunks to one burst block keep order)."""
        for i, ch in enumerate(agent.columns):
            if (ch.write, *self.config.split_address(ch.addr), ch.length) == got:
                if i and not self.reorders:
                    return None
                del agent.columns[i]
                return ch
            if not self.reorders:
                return None
        return None

    async def step(self) -> None:
        dut = self.dut
        await RisingEdge(dut.clk)
        self.cycle += 1
        pending = int(dut.refresh_pending.value)
        if self.cov and pending and not self._refresh_pending:
            self.cov.refresh_due(not all(p.done() for p in self.ports))
        self._refresh_pending = pending
        if dut.cmd_valid.value:
            self.on_command(int(dut.cmd_kind.value), int(dut.cmd_bank.value),
                            int(dut.cmd_row.value), int(dut.cmd_port.value),
                            int(dut.cmd_len.value), int(dut.cmd_col.value))
        for p in self.ports:
            p.sample(self.cycle)
        for p in self.ports:
            p.drive()

    async def run_until_done(self, limit: int = 200_000) -> int:
        start = self.cycle
        while not all(p.done() for p in self.ports):
            await self.step()
            if self.cycle - start > limit:
                self.error(f"traffic did not finish within {limit} cycles")
                break
        while not int(self.dut.idle.value):  # the last write burst may still be landing
            await self.step()
        for _ in range(4):
            await self.step()
        return self.cycle - start

    async def idle_cycles(self, n: int) -> None:
        for _ in range(n):
            await self.step()

    async def read_csr(self, name: str) -> int:
        self.dut.csr_addr.value = register_map(self.nports)[name]
        await self.step()
        await self.step()
        return int(self.dut.csr_rdata.value)

    # -- backdoor -------------------------------------------------------------------------------
    def _store(self):
        handle = self.dut
        for part in backing_store("controller").split("."):
            handle = getattr(handle, part)
        return handle

    def mem_write(self, addr: int, data: int) -> None:
        self._store()[addr].value = data
        self.model.write(addr, data)

    def mem_read(self, addr: int) -> int:
        return int(self._store()[addr].value)

    def finish(self) -> None:
        if self.cov:
            self.cov.export()
        errs = self.errors + self.checker.errors
        for msg in self.checker.errors[:20]:
            self.log.error(msg)
        assert not errs, (f"{len(errs)} errors (seed={cocotb.RANDOM_SEED}); first: {errs[0]}")
