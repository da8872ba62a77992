"""LiteDRAM's controller driven with the memory-controller bench's request streams
(:mod:`.memctrl_bench`), in migen's simulator or Verilated.

``bench/bench_memctrl.py --litedram`` prints its cycles beside ours. ``litedram`` and ``migen``
come with the ``bench`` extra (``pip install -e .[bench]``); this module imports them only when
a run starts, so :mod:`.memctrl_bench` loads without them.

The mapping of our controller onto LiteDRAM's parameters (see docs/memory_controller.md):

- one LiteDRAM system clock is one of our controller cycles, and its native port moves one LW
  (64 bits) a cycle: a 2-phase DFI (``nphases=2``, DDR-style burst of 4 columns of 16 bits), so
  that activates and precharges go on the command phase and never take a column slot;
- the same geometry: ``banks`` banks, rows of ``row_lw`` LWs, ``sim_window_lw`` LWs in all,
  and the same address map (column low, then bank, then row: LiteDRAM's ``ROW_BANK_COL``), so
  an LW address is the native port address unchanged;
- each of our chunks of ``burst_length`` beats is ``burst_length`` native commands to
  consecutive LWs (LiteDRAM's column command carries one native word), so LiteDRAM's tCCD is
  one cycle: ours (``tccd``) spaces chunks that already hold the bus ``burst_length`` cycles;
- the timings in cycles, unchanged: tRP, tRCD, tRAS, tRC = tRAS + tRP (ours has no separate
  tRC: an activate waits tRAS then tRP), tWR and tWTR from the last write beat (LiteDRAM adds
  the write latency and tCCD itself), tREFI, tRFC, tRRD, tFAW; read latency = CL.
  LiteDRAM has no tRTP (read to precharge waits for tRAS only) and no separate read-to-write
  gap: after the last read it waits ``read_latency - 1`` cycles before it issues a write.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from mncore_hdl.arch import ArchConfig
from mncore_hdl.memctrl.trafficgen import RW, Mode
from mncore_hdl.paths import BUILD_ROOT, PACKAGE_DIR

__all__ = ["PortStream", "port_streams", "litedram_settings", "run_litedram", "build_verilated",
           "run_verilated", "VERILATED_PORTS"]

#: Columns of 16 bits per native word (``DDR`` burst of 4 on a 16-bit part: 64 bits).
_COLS_PER_LW = 4
_NPHASES = 2


@dataclass(frozen=True)
class PortStream:
    """One port's native commands: ``(LW address, write)`` each, in issue order."""

    commands: tuple[tuple[int, bool], ...]

    @property
    def beats(self) -> int:
        return len(self.commands)


def _seed(port: int) -> int:
    """The LFSR seed ``trafficgen.BenchTop`` gives generator ``port``."""
    return 0x1234_5679 * (port + 1) & 0xFFFF_FFFF


def _lfsr_next(v: int) -> int:
    fb = (v ^ (v >> 1) ^ (v >> 21) ^ (v >> 31)) & 1
    return (v >> 1) | (fb << 31)


def _bursts(config: ArchConfig, gen: dict, seed: int) -> list[tuple[int, int, bool]]:
    """``(address, beats, write)`` of each request ``trafficgen.TrafficGen`` issues."""
    mode, rw, count, blen = gen["mode"], gen["rw"], gen["count"], gen["blen"]
    win_bits = max(1, config.sim_window_lw.bit_length() - 1)
    bl_bits = config.timing.burst_length.bit_length() - 1
    rand_mask = ((1 << win_bits) - 1) & ~((1 << bl_bits) - 1)
    addr_a, addr_b, phase, third, lfsr = gen["base"], gen["base2"], 0, 0, seed
    out = []
    for _ in range(count):
        if mode == Mode.READ:
            addr, write = addr_a, False
        elif mode == Mode.WRITE:
            addr, write = addr_a, True
        elif mode == Mode.MIXED:
            addr, write = (addr_b, True) if phase else (addr_a, False)
        elif mode == Mode.RANDOM:
            addr = lfsr & rand_mask
            write = {RW.COIN: bool(lfsr >> 31), RW.READ: False, RW.TWO_ONE: third == 2}[rw]
        else:
            raise ValueError(f"Unknown traffic generator mode {mode!r}; expected one of "
                             f"{Mode.READ}, {Mode.WRITE}, {Mode.MIXED}, {Mode.RANDOM}")
        out.append((addr, blen, write))
        if mode == Mode.MIXED and phase:
            addr_b += blen
        else:
            addr_a += blen
        phase ^= 1
        third = 0 if third == 2 else third + 1
        lfsr = _lfsr_next(lfsr)
    return out


def port_streams(config: ArchConfig, case: dict) -> list[PortStream]:
    """The native commands of each port of a :func:`.memctrl_bench.make_case` case (ports with a
    zero count left out): the same addresses, lengths and directions as our generators."""
    streams = []
    for i, gen in enumerate(case["gens"]):
        if not gen.get("count"):
            continue
        cmds = [(a + k, w) for a, n, w in _bursts(config, gen, _seed(i)) for k in range(n)]
        if any(a >= config.sim_window_lw for a, _ in cmds):
            raise ValueError(f"Case {case['name']!r} port {i} addresses past the simulated "
                             f"window of {config.sim_window_lw} LW")
        streams.append(PortStream(tuple(cmds)))
    return streams


def litedram_settings(config: ArchConfig) -> dict:
    """LiteDRAM's PHY, geometry, timing and controller settings for ``config``."""
    from litedram.common import GeomSettings, PhySettings, TimingSettings
    from litedram.core.controller import ControllerSettings

    t = config.timing
    colbits = (config.row_lw * _COLS_PER_LW).bit_length() - 1
    rows = config.sim_window_lw // (config.banks * config.row_lw)
    if rows < 1 or rows & (rows - 1):
        raise ValueError(f"sim_window_lw ({config.sim_window_lw}) must hold a power-of-two "
                         f"number of rows of all {config.banks} banks")
    phy = PhySettings(phytype="SDRAMPHYModel", memtype="DDR", databits=16,
                      dfi_databits=32, nphases=_NPHASES, rdphase=1, wrphase=1, cl=t.cl,
                      cwl=0, read_latency=t.cl, write_latency=0)
    geom = GeomSettings(bankbits=config.bank_bits, rowbits=rows.bit_length() - 1,
                        colbits=colbits)
    geom.addressbits = max(geom.addressbits, 11)  # A10 flags auto-precharge and all banks
    timing = TimingSettings(tRP=t.trp, tRCD=t.trcd, tWR=t.twr, tWTR=t.twtr, tREFI=t.trefi,
                            tRFC=t.trfc, tFAW=t.tfaw, tCCD=1, tRRD=t.trrd, tRC=t.tras + t.trp,
                            tRAS=t.tras, tZQCS=None)
    ctrl = ControllerSettings()
    return {"phy": phy, "geom": geom, "timing": timing, "controller": ctrl}


def _dram_clocks(config: ArchConfig, name: str, key=None):
    """``SDRAMModule.get`` for the PHY model's timing checker: rule ``name`` as
    ``(DRAM clocks, ns)``, two DRAM clocks (DFI phases) a controller cycle."""
    t = config.timing
    cycles = {"tRP": t.trp, "tRCD": t.trcd, "tWR": t.twr, "tRFC": t.trfc, "tFAW": t.tfaw,
              "tRAS": t.tras, "tREFI": t.trefi, "tWTR": t.twtr, "tCCD": 1, "tRRD": t.trrd}
    return None if name == "tZQCS" else (_NPHASES * cycles[name], 0)


def _top(config: ArchConfig, ports: int, pins: bool = False, check: bool = False):
    from litedram.common import GeomSettings
    from litedram.core.controller import LiteDRAMController
    from litedram.core.crossbar import LiteDRAMCrossbar
    from litedram.phy.model import SDRAMPHYModel
    from migen import Module

    s = litedram_settings(config)
    clk = config.clock_mhz * 1e6
    # The PHY model's storage: one row of one native word per bank. Its data alias (the bench
    # checks no data), and a full window as a migen Memory takes minutes to elaborate and makes
    # each simulated cycle take a third of a second; the timing is all the controller's.
    store = GeomSettings(bankbits=s["geom"].bankbits, rowbits=1,
                         colbits=_COLS_PER_LW.bit_length() - 1)
    store.addressbits = s["geom"].addressbits
    s["timing"].fine_refresh_mode = None
    module = SimpleNamespace(memtype="DDR", geom_settings=store, timing_settings=s["timing"],
                             get=lambda name, key=None: _dram_clocks(config, name, key))

    class Top(Module):
        def __init__(self):
            # 500 MHz for the checker alone: a whole number of ps a DFI phase (at 750 MHz its
            # rounding to 666 ps flags every back-to-back rule as broken by 1 ps); the rules
            # are in clocks (``_dram_clocks``), so the checker's figures are the same.
            self.submodules.phy = SDRAMPHYModel(module, settings=s["phy"], clk_freq=500e6,
                                                verbosity=1 if check else 0)
            self.submodules.controller = LiteDRAMController(
                s["phy"], s["geom"], s["timing"], clk, controller_settings=s["controller"])
            self.comb += self.controller.dfi.connect(self.phy.dfi)
            self.submodules.crossbar = LiteDRAMCrossbar(self.controller.interface)
            self.ports = [self.crossbar.get_port() for _ in range(ports)]
            self.pins = _pins(self, self.ports) if pins else set()

    return Top()


def _pins(top, ports) -> set:
    """Named top-level signals of each port's command stream and data handshakes (for the
    Verilog the Verilator harness drives); write data is constant, read data always taken."""
    from migen import Signal

    pins = set()
    for i, p in enumerate(ports):
        s = {n: Signal(len(getattr(p.cmd, n.split("_")[-1])) if n == "cmd_addr" else 1,
                       name=f"p{i}_{n}")
             for n in ("cmd_valid", "cmd_ready", "cmd_we", "cmd_addr", "rdata_valid",
                       "wdata_ready")}
        top.comb += [p.cmd.valid.eq(s["cmd_valid"]), s["cmd_ready"].eq(p.cmd.ready),
                     p.cmd.we.eq(s["cmd_we"]), p.cmd.addr.eq(s["cmd_addr"]),
                     s["rdata_valid"].eq(p.rdata.valid), s["wdata_ready"].eq(p.wdata.ready),
                     p.wdata.valid.eq(1), p.wdata.we.eq(-1), p.rdata.ready.eq(1)]
        pins |= set(s.values())
    return pins


def run_litedram(config: ArchConfig, case: dict) -> dict:
    """Run one memory-controller bench case through LiteDRAM: ``{"name", "beats", "cycles",
    "wall_s"}``. ``cycles`` counts from the first command offered to the last write beat
    taken or read beat returned, as ``BenchTop.cycles`` does from ``start`` to ``done``."""
    from migen.sim import run_simulation

    streams = port_streams(config, case)
    if not streams:
        raise ValueError(f"Case {case['name']!r} has no port with requests (every count is 0)")
    top = _top(config, len(streams))
    result: dict = {"name": case["name"], "beats": 0}

    def bench():
        ports = top.ports
        nxt = [0] * len(ports)
        reads = [sum(not w for _, w in s.commands) for s in streams]
        writes = [s.beats - r for s, r in zip(streams, reads, strict=True)]
        for p in ports:
            yield p.wdata.valid.eq(1)
            yield p.wdata.we.eq(-1)
            yield p.rdata.ready.eq(1)
        for p, s in zip(ports, streams, strict=True):
            a, w = s.commands[0]
            yield p.cmd.valid.eq(1)
            yield p.cmd.addr.eq(a)
            yield p.cmd.we.eq(w)
        cycles = 0
        yield
        while True:
            cycles += 1
            busy = False
            for i, (p, s) in enumerate(zip(ports, streams, strict=True)):
                if (yield p.rdata.valid):
                    reads[i] -= 1
                    result["beats"] += 1
                if (yield p.wdata.ready):
                    writes[i] -= 1
                    result["beats"] += 1
                    yield p.wdata.data.eq(writes[i])
                if nxt[i] < s.beats and (yield p.cmd.ready):
                    nxt[i] += 1
                    if nxt[i] < s.beats:
                        a, w = s.commands[nxt[i]]
                        yield p.cmd.addr.eq(a)
                        yield p.cmd.we.eq(w)
                    else:
                        yield p.cmd.valid.eq(0)
                busy |= nxt[i] < s.beats or reads[i] > 0 or writes[i] > 0
            if not busy:
                break
            yield
        result["cycles"] = cycles

    t0 = time.perf_counter()
    run_simulation(top, [bench()])
    result["wall_s"] = time.perf_counter() - t0
    return result


# -- Verilator ------------------------------------------------------------------------------------

#: Ports the Verilated top always has (unused ones stay idle): :data:`.memctrl_bench.MAX_PORTS`.
VERILATED_PORTS = 3
_HARNESS = PACKAGE_DIR / "testing" / "litedram_harness.cpp"


def _ports_header(n: int) -> str:
    def pick(member: str) -> str:
        expr = "0"
        for i in reversed(range(n)):
            expr = f"((i) == {i} ? top->p{i}_{member} : {expr})"
        return expr

    sets = " ".join(f"case {i}: top->p{i}_cmd_valid = (v); top->p{i}_cmd_addr = (a); "
                    f"top->p{i}_cmd_we = (w); break;" for i in range(n))
    return (f"#define NPORTS {n}\n"
            f"#define SET_CMD(i, v, a, w) do {{ switch (i) {{ {sets} }} }} while (0)\n"
            f"#define GET_CMD_READY(i) {pick('cmd_ready')}\n"
            f"#define GET_RDATA_VALID(i) {pick('rdata_valid')}\n"
            f"#define GET_WDATA_READY(i) {pick('wdata_ready')}\n")


def build_verilated(config: ArchConfig, check: bool = False) -> Path:
    """LiteDRAM's Verilog for ``config`` (controller, crossbar of ``VERILATED_PORTS`` ports,
    PHY model) Verilated with the harness; cached under ``build/litedram/`` by content. With
    ``check`` the PHY model's timing checker prints every rule LiteDRAM breaks (a
    ``violation`` line each) to the run's standard output."""
    from migen.fhdl import verilog

    from mncore_hdl.tooling.verilator import missing_tools, verilator_env

    missing = missing_tools()
    if missing:
        raise RuntimeError(f"--litedram needs Verilator; missing: {', '.join(missing)}")
    top = _top(config, VERILATED_PORTS, pins=True, check=check)
    text = str(verilog.convert(top, top.pins, name="litedram_top"))
    header = _ports_header(VERILATED_PORTS)
    key = hashlib.sha256((text + header + _HARNESS.read_text()).encode()).hexdigest()[:16]
    out = BUILD_ROOT / "litedram" / key
    exe = out / "obj_dir" / "Vlitedram_top"
    if exe.exists():
        return exe
    out.mkdir(parents=True, exist_ok=True)
    (out / "litedram_top.v").write_text(text)
    (out / "ports.h").write_text(header)
    cmd = ["verilator", "--cc", "--exe", "--build", "-j", "2", "-Wno-fatal", "-Wno-lint",
           "-Wno-style", "--top-module", "litedram_top", "-O3", "--x-assign", "fast",
           "--x-initial", "fast", "-CFLAGS", f"-I{out}",
           "litedram_top.v", str(_HARNESS)]
    run = subprocess.run(cmd, cwd=out, env=verilator_env(), capture_output=True, text=True)
    if run.returncode or not exe.exists():
        raise RuntimeError(f"Verilating LiteDRAM failed in {out}:\n{run.stdout[-3000:]}"
                           f"\n{run.stderr[-3000:]}")
    return exe


def run_verilated(exe: Path, config: ArchConfig, case: dict) -> dict:
    """One memory-controller bench case on the Verilated LiteDRAM: ``{"name", "beats", "cycles",
    "wall_s"}`` as :func:`run_litedram` gives (the two agree within a cycle), ``beats`` as the
    harness counted the read beats returned and write beats taken."""
    streams = port_streams(config, case)
    if not streams:
        raise ValueError(f"Case {case['name']!r} has no port with requests (every count is 0)")
    if len(streams) > VERILATED_PORTS:
        raise ValueError(f"Case {case['name']!r} has {len(streams)} ports; the Verilated "
                         f"LiteDRAM has {VERILATED_PORTS}")
    beats = sum(s.beats for s in streams)  # the harness counts the beats it moves itself
    lines = [str(len(streams))]
    for s in streams:
        lines.append(str(s.beats))
        lines.extend(f"{a} {int(w)}" for a, w in s.commands)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(lines) + "\n")
        path = f.name
    t0 = time.perf_counter()
    try:
        run = subprocess.run([str(exe), path, str(100 * beats + 10_000)], capture_output=True,
                             text=True)
    finally:
        os.unlink(path)
    wall = time.perf_counter() - t0
    if run.returncode or "cycles " not in run.stdout:
        raise RuntimeError(f"LiteDRAM run of {case['name']!r} failed: {run.stderr.strip()}")
    last = run.stdout.strip().splitlines()[-1].split()
    return {"name": case["name"], "beats": int(last[3]), "cycles": int(last[1]),
            "wall_s": wall, "violations": run.stdout.count("violation")}
