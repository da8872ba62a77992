"""The hardware/software contracts (``mncore_hdl.contracts``) against the elaborated design.

Each test reads a declaration and the RTL (its signature, its elaborated hierarchy, or a short
Amaranth-simulator run) and fails if the two disagree: CSR addresses, converter register
fields, requester port indices and payloads, top-level port names, back-door paths, and the
port names the RTL driver uses.
"""

from __future__ import annotations

import asyncio
import gc
import random
import re
import warnings
from collections.abc import Callable

import numpy as np
import pytest
from amaranth.hdl import Fragment, UnusedElaboratable, Value
from amaranth.lib import wiring
from amaranth.sim import Simulator
from mncore_hdl.arch import MNCORE2_SIM
from mncore_hdl.contracts import converter as cc
from mncore_hdl.contracts import cosim, memctrl
from mncore_hdl.contracts import testbench as tb
from mncore_hdl.contracts.counters import COUNTER_BITS
from mncore_hdl.converter import compile_program, registers
from mncore_hdl.layout import conversion, host_layout, native_layout
from mncore_hdl.testing.hdl_checks import imports_without_amaranth

SMALL = MNCORE2_SIM.replace(sim_window_lw=4096, dram_bytes_per_group=4096 * 8)


def _run(dut, bench) -> None:
    sim = Simulator(dut)
    sim.add_clock(1e-9)
    sim.add_testbench(bench)
    sim.run()


def _ports(factory: Callable[[], wiring.Component]) -> dict[str, tuple[str, int]]:
    """The ports of ``factory()`` as the Verilog sees them: name -> (direction, width)."""
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)  # built to read its signature
        component = factory()
        for path, member, value in component.signature.flatten(component):
            name = "__".join(str(p) for p in path)
            out[name] = ("in" if member.flow == wiring.In else "out",
                         Value.cast(value).shape().width)
        del component, value
        gc.collect()
    return out


def _memories(component: wiring.Component) -> set[str]:
    """Dotted hierarchical names of every memory in the elaborated design."""
    from amaranth.hdl._mem import MemoryInstance

    design = Fragment.get(component, None).prepare()
    return {".".join(info.name[1:]) for fragment, info in design.fragments.items()
            if isinstance(fragment, MemoryInstance)}


def test_contracts_import_without_amaranth():
    imports_without_amaranth("mncore_hdl.contracts", "mncore_hdl.converter.regmap")


# -- memory controller --------------------------------------------------------------------------

def test_csr_addresses_read_the_named_counters():
    """Each event counter is pulsed a distinct number of times, each port counter driven with a
    distinct value; every address of the map must read its own."""
    from mncore_hdl.memctrl.csr import StatsRegisters

    nports = len(memctrl.PORTS)
    dut = StatsRegisters(nports, 16)
    pulses = {"busy_cycles": "busy", "row_hits": "hit", "row_misses": "miss",
              "row_conflicts": "conflict", "refreshes": "refresh",
              "refresh_cycles": "refresh_cycle"}
    expect = {name: 3 + 2 * i for i, name in enumerate(pulses)}
    expect.update({"error": 1, "error_addr": 0xABC})
    for p in range(nports):
        for k, name in enumerate(memctrl.PORT_REGISTERS):
            expect[f"port{p}.{name}"] = 100 + 10 * p + k
    regs = memctrl.register_map(nports)
    assert set(regs) == set(expect) | {"cycles"}
    got = {}

    async def bench(ctx):
        ctx.set(dut.error, 1)
        ctx.set(dut.error_addr, 0xABC)
        for p in range(nports):
            for name in memctrl.PORT_REGISTERS:
                ctx.set(getattr(dut, name)[p], expect[f"port{p}.{name}"])
        for cycle in range(max(expect[n] for n in pulses)):
            for name, strobe in pulses.items():
                ctx.set(getattr(dut, strobe), cycle < expect[name])
            await ctx.tick()
        for name in pulses.values():
            ctx.set(getattr(dut, name), 0)
        for name, address in regs.items():
            ctx.set(dut.csr_addr, address)
            await ctx.tick()
            got[name] = ctx.get(dut.csr_rdata)
        ctx.set(dut.csr_addr, max(regs.values()) + 1)
        await ctx.tick()
        got["unmapped"] = ctx.get(dut.csr_rdata)

    _run(dut, bench)
    assert 0 < got.pop("cycles") <= max(expect.values()) + len(regs) + 1
    assert got == {**expect, "unmapped": 0}


def test_port_indices_and_request_payloads_match_the_wiring():
    """A read on ``host[1]`` and one on ``compute[2]`` (payloads packed by ``RequestFormat``),
    and a conversion reading Group 3, each reach its controller as the port the contract names
    (the controller's ``cmd_port`` of the first RD)."""
    from mncore_hdl.top.system import MemorySystem

    dut = MemorySystem(SMALL)
    fmt = memctrl.RequestFormat.of(SMALL)
    src, dst = host_layout((16, 16), "float32"), native_layout((16, 16), "float32", SMALL)
    program = registers(compile_program(conversion(src, dst), SMALL), 3, 0x40, 0, 0x800)
    seen = {}

    async def first_read(ctx, group: int) -> tuple[int, int]:
        mc = dut.controllers[group]
        for _ in range(500):
            await ctx.tick()
            if ctx.get(mc.cmd_valid) and ctx.get(mc.cmd_kind) == memctrl.Cmd.RD:
                return ctx.get(mc.cmd_port), ctx.get(mc.cmd_row)
        raise AssertionError(f"no RD on Group {group} within 500 cycles")

    async def bench(ctx):
        for path, group, addr in (("host", 1, 0x123), ("compute", 2, 0x456)):
            port = getattr(dut, path)[group]
            ctx.set(Value.cast(port.req.payload), fmt.pack(addr, 1, False))
            ctx.set(port.req.valid, 1)
            ctx.set(port.rdata.ready, 1)
            inner = dut.controllers[group].ports[memctrl.PORTS[path]]
            await ctx.delay(1e-12)
            assert ctx.get(inner.req.payload.addr) == addr
            assert ctx.get(inner.req.payload.length) == 1
            seen[path] = (await first_read(ctx, group))[0]
            ctx.set(port.req.valid, 0)
        for address, value in program.items():
            ctx.set(dut.reg_addr, address)
            ctx.set(dut.reg_wdata, value)
            ctx.set(dut.reg_we, 1)
            await ctx.tick()
        ctx.set(dut.reg_addr, cc.Reg.CTRL)
        ctx.set(dut.reg_wdata, cc.CTRL_START)
        await ctx.tick()
        ctx.set(dut.reg_we, 0)
        seen["converter"] = (await first_read(ctx, 3))[0]

    _run(dut, bench)
    assert seen == memctrl.PORTS


def test_controller_ports_and_command_kinds():
    from mncore_hdl.memctrl.controller import MemoryController

    ports = _ports(lambda: MemoryController(SMALL, len(memctrl.PORTS)))
    assert ports["cmd_kind"] == ("out", memctrl.CMD_KIND_BITS)
    assert ports["csr_addr"] == ("in", memctrl.CSR_ADDR_BITS)
    assert ports["csr_rdata"] == ("out", COUNTER_BITS)
    assert ports["ports__0__req__payload"] == ("in", memctrl.RequestFormat.of(SMALL).bits)


# -- layout converter ---------------------------------------------------------------------------

def test_register_table_addresses_are_distinct_and_fit():
    fields = cc.register_fields()
    addresses = [f.address for f in fields]
    fixed = [int(cc.Reg.CTRL), int(cc.Reg.STATUS), *map(int, cc.COUNTERS.values())]
    assert len(set(addresses + fixed)) == len(addresses) + len(fixed)
    assert max(addresses + fixed) < 1 << cc.REG_ADDR_BITS
    assert {f.path[0] for f in fields} >= {t.name for t in cc.LOOP_TABLES}
    assert all(0 < f.bits <= cc.REG_BITS for f in fields)


def test_every_converter_register_lands_in_its_field():
    """Distinct values written at every address of the table appear in the field the table
    names, read back at that address; STATUS, the counters and CTRL decode as declared."""
    from mncore_hdl.converter.config import field_view
    from mncore_hdl.converter.regfile import RegisterFile

    dut = RegisterFile(SMALL, buffer_lw=512)
    rng = random.Random(9)
    fields = cc.register_fields()
    values = {f.address: rng.getrandbits(cc.REG_BITS) for f in fields}
    counters = {name: 1000 + i for i, name in enumerate(cc.COUNTERS)}
    got: dict[str, object] = {}

    def expected(field: cc.RegisterField) -> int:
        value = values[field.address] & ((1 << field.bits) - 1)
        if field.signed and value >> (field.bits - 1):
            value -= 1 << field.bits
        return value

    async def bench(ctx):
        ctx.set(dut.reg_we, 1)
        for address, value in values.items():
            ctx.set(dut.reg_addr, address)
            ctx.set(dut.reg_wdata, value)
            await ctx.tick()
        ctx.set(dut.reg_we, 0)
        got["fields"] = {f.name: ctx.get(field_view(dut.cfg, f)) for f in fields}
        readback = {}
        for f in fields:
            ctx.set(dut.reg_addr, f.address)
            readback[f.name] = ctx.get(dut.reg_rdata)
        got["readback"] = readback
        for name, value in counters.items():
            ctx.set(getattr(dut, name), value)
        ctx.set(dut.done, 1)
        ctx.set(dut.error_code, cc.ErrorCode.OVERLAP)
        ctx.set(dut.error, 1)
        ctx.set(dut.reg_addr, cc.Reg.STATUS)
        got["status"] = ctx.get(dut.reg_rdata)
        got["counters"] = {}
        for name, address in cc.COUNTERS.items():
            ctx.set(dut.reg_addr, address)
            got["counters"][name] = ctx.get(dut.reg_rdata)
        ctx.set(dut.reg_addr, cc.Reg.CTRL)
        ctx.set(dut.reg_we, 1)
        for bits in (cc.CTRL_START, cc.CTRL_CLEAR):
            ctx.set(dut.reg_wdata, bits)
            got[bits] = (ctx.get(dut.start), ctx.get(dut.clear))
        ctx.set(dut.busy, 1)  # registers are locked while busy
        ctx.set(dut.reg_addr, fields[0].address)
        ctx.set(dut.reg_wdata, values[fields[0].address] ^ 1)
        await ctx.tick()
        got["locked"] = ctx.get(field_view(dut.cfg, fields[0])) == expected(fields[0])

    _run(dut, bench)
    assert got["fields"] == {f.name: expected(f) for f in fields}
    assert got["readback"] == {f.name: expected(f) & ((1 << cc.REG_BITS) - 1) for f in fields}
    assert got["status"] == cc.status_word(False, True, True, cc.ErrorCode.OVERLAP)
    assert got["counters"] == counters
    assert got[cc.CTRL_START] == (1, 0) and got[cc.CTRL_CLEAR] == (0, 1)
    assert got["locked"]


def test_registers_fill_the_table_from_a_program():
    from mncore_hdl.converter.regmap import program_state

    src, dst = host_layout((9, 13), "float16"), native_layout((9, 13), "float16", SMALL)
    prog = compile_program(conversion(src, dst), SMALL)
    regs = registers(prog, 1, 0x40, 2, 0x800)
    by_address = {f.address: f for f in cc.register_fields()}
    assert set(regs) <= set(by_address)
    state = program_state(prog, 1, 0x40, 2, 0x800)
    for address, value in regs.items():
        node = state
        for part in by_address[address].path:
            node = node[part]
        assert value == node & ((1 << cc.REG_BITS) - 1), by_address[address].name
    assert regs[cc.Reg.SRC_ADDR] == 0x40
    # native over two Groups: their loop is split over two engines, no outer loop is left
    assert dst.groups == 2 and prog.engines == 2 and regs[cc.SPLIT_BASE] == 2
    assert regs[cc.Reg.N_OUTER] == 0
    assert cc.OUTER.base not in regs


# -- tops, back doors and the driver ------------------------------------------------------------

def test_top_ports_match_the_declared_lists():
    from mncore_hdl.top.cosim_top import CosimTop
    from mncore_hdl.top.system import MemorySystem

    assert _ports(lambda: MemorySystem(SMALL)) == cosim.system_ports(SMALL)
    top = _ports(lambda: CosimTop(SMALL))
    assert top == cosim.cosim_ports(SMALL)
    assert set(cosim.top_inputs(SMALL)) == {n for n, (d, _) in top.items() if d == "in"}


@pytest.mark.parametrize("top", sorted(cosim.BACKING_STORE))
def test_backing_store_paths_exist(top):
    from mncore_hdl.converter.harness import ConverterHarness
    from mncore_hdl.memctrl.controller import MemoryController
    from mncore_hdl.top.cosim_top import CosimTop
    from mncore_hdl.top.system import MemorySystem

    # cosim_tb is Verilog written around the exported CosimTop, instantiated as TB_DUT_INSTANCE
    factory = {"controller": lambda: MemoryController(SMALL), "system": lambda: MemorySystem(SMALL),
               "cosim": lambda: CosimTop(SMALL), "cosim_tb": lambda: CosimTop(SMALL),
               "harness": lambda: ConverterHarness(SMALL)}[top]
    prefix = f"{cosim.TB_DUT_INSTANCE}." if top == "cosim_tb" else ""
    groups = 1 if top == "controller" else SMALL.groups
    memories = {prefix + m for m in _memories(factory())}
    for g in range(groups):
        assert cosim.backing_store(top, g) in memories


class RecordingBus:
    """A :class:`~mlsdk.device.rtl.bus.Bus` that answers "ready" and records every name."""

    def __init__(self):
        self.driven: set[str] = set()
        self.read: set[str] = set()

    def set(self, name, value):
        self.driven.add(name)

    def get(self, name):
        self.read.add(name)
        return 0

    async def edge(self, names):
        self.read.update(names)
        return [0 if name.endswith("payload") else 1 for name in names]

    async def wait_until(self, name, value, max_cycles):
        self.read.add(name)
        return True

    def mem_read(self, group, address, count):
        return np.zeros(count, dtype=np.uint64)

    def mem_write(self, group, address, words):
        pass


def test_driver_uses_only_ports_of_the_cosim_top():
    from mlsdk.device.rtl.driver import Driver, pack_words

    bus = RecordingBus()
    driver = Driver(bus, SMALL)
    buf = {"group": 0, "groups": 2, "address": 0x10, "lw_per_group": 3}
    src, dst = host_layout((16, 16), "float32"), native_layout((16, 16), "float32", SMALL)
    ops = [{"op": "write", "path": "host", "buffer": buf,
            "data": pack_words(np.zeros((2, 3), dtype=np.uint64))},
           {"op": "read", "path": "compute", "buffer": buf},
           {"op": "convert", "descriptor": conversion(src, dst).to_dict(),
            "src": {"group": 0, "address": 0x40}, "dst": {"group": 0, "address": 0x800}},
           {"op": "bind", "slot": 3, "buffer": buf},
           {"op": "lookup", "slot": 3},
           {"op": "counters"}]
    for op in ops:
        result = asyncio.run(driver.execute(op))
        assert "error" not in result, (op["op"], result)
    ports = cosim.cosim_ports(SMALL)
    assert bus.driven <= set(cosim.top_inputs(SMALL)), bus.driven - set(cosim.top_inputs(SMALL))
    assert bus.read <= set(ports), bus.read - set(ports)
    assert asyncio.run(driver.execute({"op": "idle"})) == {"error": "unknown operation 'idle'"}


# -- the testbench top around the co-simulation top ---------------------------------------------

_TB_DECLARATION = re.compile(r"^  (?:reg|wire) (?:\[(\d+):0\] )?(\w+)(?: = [^;]+)?;$", re.MULTILINE)


def _cosim_top_verilog(config) -> str:
    """A ``cosim_top`` module header with the declared ports (held to the elaborated design by
    :func:`test_top_ports_match_the_declared_lists`), as yosys writes it."""
    ports = cosim.cosim_ports(config)
    lines = [f"module cosim_top({', '.join(['clk', 'rst', *ports])});", "  input clk;",
             "  input rst;"]
    for name, (direction, width) in ports.items():
        rng = f"[{width - 1}:0] " if width > 1 else ""
        lines.append(f"  {'input' if direction == 'in' else 'output'} {rng}{name};")
    return "\n".join([*lines, "endmodule", ""])


def test_cosim_tb_signals_are_the_declared_ones():
    """Every signal ``cosim_tb`` makes public (what the driver, the server and Verilator's
    control file use) is declared in ``contracts.testbench`` with its width and direction,
    and every declared one is in the testbench."""
    from mncore_hdl.top.cosim_tb import TB_MODULE, cosim_tb_verilog, public_signals

    top = _cosim_top_verilog(SMALL)
    text = cosim_tb_verilog(top, SMALL)
    body = text[text.index(f"module {TB_MODULE}("):text.index("endmodule")]
    declared = {name: int(hi) + 1 if hi else 1 for hi, name in _TB_DECLARATION.findall(body)}
    public = {name: access for access, _, name in public_signals(top)}
    assert public.pop(tb.CLOCK) == "rd"
    ports = tb.tb_ports(SMALL)
    assert set(public) == set(ports), set(public) ^ set(ports)
    assert {name: declared[name] for name in ports} == {n: w for n, (_, w) in ports.items()}
    assert sorted(n for n, access in public.items() if access == "rw") == sorted(
        tb.driven_ports(SMALL))
    assert set(tb.control_ports(SMALL)) == set(tb.CONTROL)
    for path in cosim.TOP_PATHS:  # the engines take over the port dma_path_code selects
        assert (f"  wire {cosim.requester_prefix(path, 0)}dma = {tb.DMA_GO} && "
                f"{tb.DMA_GROUPS}[0] && {tb.DMA_PATH} == {tb.dma_path_code(path)};") in text


class RecordingBulkBus(RecordingBus):
    """A :class:`~mlsdk.device.rtl.dma.BulkBus` on ``cosim_tb``: it also answers the back door
    (a dump of zeros) and records every name."""

    def __init__(self, memfile):
        super().__init__()
        self.memfile = memfile
        self.mem_binary = False
        self.values: dict[str, int] = {}

    def set(self, name, value):
        super().set(name, value)
        self.values[name] = value

    def has(self, name):
        return name in tb.tb_ports(SMALL)

    async def wait_change(self, name):
        from mlsdk.device.rtl.dma import write_word_file

        self.read.add(name)
        if self.values.get(tb.MEM_DIR):
            count = self.values[tb.MEM_HI] - self.values[tb.MEM_LO] + 1
            write_word_file(self.memfile, np.zeros(count, dtype=np.uint64), self.mem_binary)


def test_driver_dma_path_uses_only_ports_of_the_cosim_tb(tmp_path):
    from mlsdk.device.rtl.driver import Driver, pack_words

    bus = RecordingBulkBus(tmp_path / "mem.dat")
    driver = Driver(bus, SMALL)
    buf = {"group": 1, "groups": 2, "address": 0x10, "lw_per_group": 3}
    ops = [{"op": "write", "path": "compute", "buffer": buf,
            "data": pack_words(np.zeros((2, 3), dtype=np.uint64))},
           {"op": "read", "path": "host", "buffer": buf}]
    for op in ops:
        result = asyncio.run(driver.execute(op))
        assert "error" not in result, (op["op"], result)
    ports = tb.tb_ports(SMALL)
    assert bus.values[tb.DMA_PATH] == tb.dma_path_code("host")
    assert bus.driven <= set(tb.driven_ports(SMALL)), bus.driven - set(tb.driven_ports(SMALL))
    assert bus.read <= set(ports), bus.read - set(ports)
    assert {tb.DMA_GO, tb.MEM_GO} <= bus.driven and {tb.DMA_DONE, tb.MEM_ACK} <= bus.read
