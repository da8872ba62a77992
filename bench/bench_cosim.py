"""Co-simulation figures: seed-program wall time per device, simulated cycles per second, and
hand-off cycles (relocation vs conversion) measured on the RTL, with a log-log PNG.

Run:  MNCORE_SHARED_DIR=../shared ./exec_with_env.sh python bench/bench_cosim.py [--quick]

All devices run side by side in one run (``mncore2:verilator`` is left out, with the reason, when
Verilator is not installed); the machine's load average is printed with each section, since the
figures are wall-clock rates.

- seed program: the unmodified sample program of ``shared/seeds`` on each device, wall time;
- simulated cycles per second of the RTL backends (``--speed-devices``): the whole seed flow
  (8 KiB, unconstrained:
  host writes, launches, conversion, host read); one conversion alone (``--big-kib``, default
  1 MiB: the hand-off's native -> host conversion, source staged by back door so only the
  conversion is simulated; the Amaranth simulator runs a few hundred cycles per second, so it
  takes it ten minutes or more; ``--big-devices`` picks the devices); a HostWrite and a
  HostRead of ``--big-kib`` over all four Groups (``--host-devices``; on Icarus also the
  same two transfers with no cocotb at all, the simulator's own speed: ``icarus_kernel.py``;
  on Verilator the model alone, with no VPI, cocotb or Python, per process second: 100k idle
  cycles and the same transfers, ``verilator_kernel.py``); and the whole unconstrained
  hand-off of ``--big-kib`` end to end (``--handoff-devices``): one row for the whole flow
  (Context open to close: simulator start, both compiles, both calls, close), one for its two
  calls alone, the split of the whole flow's wall time, and the split of the calls' (the
  simulator's profile, ``RtlDevice.simulator_profile``: the model, the simulator's Python,
  the JSON lines, the transfer, the host);
- hand-off sweep on ``--sweep-device`` (Icarus): relocation vs conversion cycles for 4 KiB to
  ``--max-kib`` (1 MiB), measured, with the conversion model beside them; drawn into ``--png``.

``--sections`` picks sections (``seed,speed,sweep``). ``--quick`` stops the sweep at 64 KiB and
skips the big conversion. Progress (simulated cycles,
operations) is shown on a terminal only.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from mlsdk import Context, DeviceMemoryError, MNDevice, storage
from mncore_hdl.arch import MNCORE2_SIM
from mncore_hdl.layout import conversion
from mncore_hdl.paths import repo_root

ROOT = repo_root()

DEVICES = ["mncore2:auto", "mncore2:rtl", "mncore2:icarus", "mncore2:verilator"]


def _available(device: str) -> str | None:
    """None when ``device`` can run here, else the reason it cannot."""
    if device == "mncore2:verilator":
        from mncore_hdl.tooling.verilator import missing_tools

        missing = missing_tools()
        return "missing: " + "; ".join(missing) if missing else None
    return None


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"(load average {one:.2f} / {five:.2f}, {os.cpu_count()} CPUs)"


def host_transfer_speed(device: str, nbytes: int) -> list[tuple[str, int, float]]:
    """A HostWrite then a HostRead of ``nbytes`` over all Groups: (what, cycles, wall s)."""
    import numpy as np
    from mlsdk.device.commands import HostRead, HostWrite
    from mncore_hdl.layout import native_layout

    shape = (nbytes // 4 // 64, 64)
    layout = native_layout(shape, "float32", MNCORE2_SIM)
    rows = []
    with Context(MNDevice(device, config=MNCORE2_SIM)) as ctx:
        dev = ctx.device
        buf = dev.allocate(layout)
        image = np.random.default_rng(0).integers(0, 1 << 63, (buf.groups, buf.lw_per_group),
                                                  dtype=np.uint64)
        dev.execute(HostRead(dev.allocate(layout)))  # start the simulator outside the timing
        for what, command in (("HostWrite", HostWrite(buf, image)), ("HostRead", HostRead(buf))):
            t = time.perf_counter()
            done = dev.execute(command)
            rows.append((f"{nbytes >> 10} KiB {what}", done.cycles, time.perf_counter() - t))
    return rows


def seed_wall_times(tmp: Path, devices: list[str]) -> list[tuple[str, float, str]]:
    from mlsdk.testing.seeds import extract_sample_program, seed_documents

    seeds = seed_documents()
    if not seeds:
        return [(d, float("nan"), "no seed program found") for d in devices]
    program = tmp / "io_spec_constraints.py"
    program.write_text(extract_sample_program(seeds[0].read_text()))
    rows = []
    for device in devices:
        t = time.perf_counter()
        run = subprocess.run([sys.executable, str(program), "--device", device], cwd=tmp,
                             capture_output=True, text=True, timeout=1800)
        last = run.stdout.strip().splitlines()[-1:] or [run.stderr[-200:]]
        rows.append((device, time.perf_counter() - t, last[0]))
    return rows


def _pair(ctx: Context, shape: tuple[int, ...], constrained: bool, tmp: Path, tag: str):
    consumer = ctx.compile(lambda d: {"r": d["s"] + 1}, {"s": torch.zeros(shape)},
                           storage.path(tmp / f"c{tag}"))
    producer = ctx.compile(lambda d: {"s": d["x"] * 2}, {"x": torch.zeros(shape)},
                           storage.path(tmp / f"p{tag}"),
                           io_spec_constraints={"s": consumer.input_specs["s"]}
                           if constrained else None)
    return producer, consumer


def _profile(device) -> tuple[dict[str, float], dict[str, float]]:
    """The device's round-trip seconds per operation and its simulator's profile, now."""
    wall = dict(getattr(device, "wall_seconds", {}))
    profile = device.simulator_profile() if hasattr(device, "simulator_profile") else {}
    return wall, profile


def handoff(device: str, nbytes: int, constrained: bool, tmp: Path,
            split: dict[str, float] | None = None) -> tuple[int, float, int]:
    """(hand-off cycles, wall seconds of the whole flow, simulated cycles of the session).

    The whole flow is everything from opening the Context to closing it: compiling both
    functions (tracing, passes, codegen, program loads), starting the simulator, both calls
    and closing. ``split``, when given, receives where that wall time went (:func:`split_calls`
    splits ``calls`` further): ``start`` (the simulator process up to its first answer),
    ``compile`` (the two compiles without the start), ``calls`` (the two calls),
    ``conversion`` (the Convert's round trip, inside ``calls``), ``close`` (reading the
    counters and closing); ``call_cycles``, the simulated cycles of the two calls.
    """
    shape = (nbytes // 4 // 64, 64)
    t = time.perf_counter()
    with Context(MNDevice(device, config=MNCORE2_SIM)) as ctx:
        producer, consumer = _pair(ctx, shape, constrained, tmp, f"{nbytes}{constrained}")
        before = _profile(ctx.device) if split is not None else ({}, {})
        t_compiled = time.perf_counter()
        out = producer({"x": torch.ones(shape)})
        consumer(out)
        t_called = time.perf_counter()
        after = _profile(ctx.device) if split is not None else ({}, {})
        calls = ctx.report().calls()
        record = calls[-1]
        cycles = sum(c.cycles for c in record.commands
                     if c.command.startswith(("Convert", "Bind")))
        call_cycles = sum(c.cycles for r in calls[-2:] for c in r.commands)
        total = ctx.device.counters()["cycle"] if hasattr(ctx.device, "counters") else 0
    end = time.perf_counter()
    if split is not None:
        start = after[0].get("start", 0.0)
        split.update(start=start, compile=t_compiled - t - start, calls=t_called - t_compiled,
                     conversion=after[0].get("convert", 0.0) - before[0].get("convert", 0.0),
                     close=end - t_called, call_cycles=call_cycles,
                     **split_calls(t_called - t_compiled, before, after))
    return cycles, end - t, total


def split_calls(calls: float, before: tuple[dict[str, float], dict[str, float]],
                after: tuple[dict[str, float], dict[str, float]]) -> dict[str, float]:
    """Where the calls' wall time went, from the device's round trips and the simulator's
    profile taken before and after them: ``model`` (awaiting the simulator: the model, or
    Icarus, running; ``model_cpu``: its process seconds), ``sim_python`` (the server's Python
    executing operations: the driver, the back door's files), ``protocol`` (the server
    reading and writing JSON lines), ``transfer`` (the rest of the round trips: the host
    encoding and decoding requests and answers, the socket), ``host`` (the host outside the
    round trips: the device's command logic, the compiled program's steps). Empty when the
    simulator keeps no profile (``mncore2:rtl``)."""
    (wall0, prof0), (wall1, prof1) = before, after
    if "sim_s" not in prof1:
        return {}

    def grew(key: str) -> float:
        return prof1.get(key, 0.0) - prof0.get(key, 0.0)

    trips = sum(v - wall0.get(k, 0.0) for k, v in wall1.items() if k != "start")
    trips -= wall1.get("profile", 0.0) - wall0.get("profile", 0.0)
    served = grew("op_s") + grew("protocol_s")
    return {"model": grew("sim_s"), "model_cpu": grew("sim_cpu_s"),
            "sim_python": grew("op_s") - grew("sim_s"), "protocol": grew("protocol_s"),
            "transfer": trips - served, "host": calls - trips}


def conversion_speed(device: str, nbytes: int) -> tuple[int, float, bool]:
    """The hand-off conversion alone, its source staged by back door (``poke``), so the
    simulator spends its time on the conversion only: (measured cycles, wall seconds of the
    Convert, result exact)."""
    from mlsdk.testing.flows import staged_conversion

    shape = (nbytes // 4 // 64, 64)
    run = staged_conversion(device, torch.arange(math.prod(shape), dtype=torch.float32)
                            .reshape(shape))
    return run.cycles, run.wall_s, run.exact


def print_split(split: dict[str, float]) -> None:
    """The whole hand-off's wall time, and its calls', split (:func:`handoff`)."""
    print(f"{'':18s}   whole = start {split['start']:.2f} s + compile "
          f"{split['compile']:.2f} s + calls {split['calls']:.2f} s + close "
          f"{split['close']:.2f} s", flush=True)
    if "model" in split:
        print(f"{'':18s}   calls = model {split['model']:.2f} s (cpu {split['model_cpu']:.2f} s)"
              f" + simulator's Python {split['sim_python']:.2f} s + protocol "
              f"{split['protocol']:.2f} s + transfer {split['transfer']:.2f} s + host "
              f"{split['host']:.2f} s", flush=True)


def modeled_handoff(nbytes: int) -> int:
    from mncore_hdl.converter.timing import conversion_cycles

    with Context(MNDevice("mncore2:auto", config=MNCORE2_SIM)) as ctx:
        shape = (nbytes // 4 // 64, 64)
        producer, consumer = _pair(ctx, shape, False, Path(tempfile.mkdtemp()), "m")
        return conversion_cycles(MNCORE2_SIM, conversion(producer.output_specs["s"].layout,
                                                         consumer.input_specs["s"].layout))


def plot(sizes, reloc, conv, model, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    kib = [s / 1024 for s in sizes]
    ax.loglog(kib, conv, "o", label="conversion, measured (RTL)")
    if model:
        ax.loglog(kib, model, "-", label="conversion, modeled")
    ax.loglog(kib, reloc, "s", label="relocation, measured (RTL)")
    ax.set_xlabel("tensor size (KiB)")
    ax.set_ylabel("hand-off cycles")
    ax.set_title("Producer -> consumer hand-off on MN-Core 2 RTL")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--png", default=str(ROOT / "docs" / "handoff_cycles.png"))
    parser.add_argument("--sweep-device", default="mncore2:icarus")
    parser.add_argument("--max-kib", type=int, default=1024,
                        help="largest tensor of the hand-off sweep (KiB)")
    parser.add_argument("--big-kib", type=int, default=1024,
                        help="conversion size for the cycles/s figure (KiB; 0 skips it)")
    parser.add_argument("--big-devices", default=",".join(DEVICES[1:]),
                        help="RTL devices that run the --big-kib conversion")
    parser.add_argument("--host-devices", default="mncore2:icarus,mncore2:verilator",
                        help="RTL devices that run the --big-kib HostWrite and HostRead")
    parser.add_argument("--handoff-devices", default="mncore2:icarus,mncore2:verilator",
                        help="RTL devices that run the whole --big-kib hand-off end to end")
    parser.add_argument("--speed-devices", default=",".join(DEVICES[1:]),
                        help="RTL devices of the speed section (each runs the seed flow)")
    parser.add_argument("--sections", default="seed,speed,sweep",
                        help="which sections to run: seed (the seed program per device), speed "
                             "(simulated cycles per second, with the hand-off's split), sweep")
    args = parser.parse_args()
    sections = set(args.sections.split(","))
    tmp = Path(tempfile.mkdtemp(prefix="bench_cosim_"))
    devices = []
    for device in DEVICES:
        reason = _available(device)
        if reason:
            print(f"{device}: left out, {reason}")
        else:
            devices.append(device)
    rtl = [d for d in devices if d != "mncore2:auto"]

    if "seed" in sections:
        print(f"== seed program, end to end == {_load()}")
        print(f"{'device':18s} {'wall s':>8s}  last line")
        for device, wall, line in seed_wall_times(tmp, devices):
            print(f"{device:18s} {wall:8.1f}  {line}")
    if "speed" in sections:
        speed([d for d in rtl if d in args.speed_devices.split(",")], args)
    if "sweep" in sections:
        sweep(args, tmp)


def speed(rtl: list[str], args: argparse.Namespace) -> None:
    """The simulated cycles per second of each RTL device, and where a hand-off's time goes."""
    tmp = Path(tempfile.mkdtemp(prefix="bench_cosim_"))
    print(f"\n== simulated cycles per second == {_load()}")
    if "mncore2:verilator" in rtl:
        from mncore_hdl.tooling.verilator_cxx import model_compiler

        print(f"(mncore2:verilator's model compiled by {model_compiler().version}; "
              "$MNCORE_VERILATOR_CXX chooses)")
    print(f"{'device':18s} {'workload':30s} {'cycles':>9s} {'wall s':>8s} {'cycles/s':>9s}")

    def row(device: str, label: str, cycles: int, wall: float, note: str = "") -> None:
        print(f"{device:18s} {label:30s} {cycles:9d} {wall:8.2f} {cycles / wall:9.0f}{note}",
              flush=True)

    big = args.big_kib << 10
    for device in rtl:
        _, wall, total = handoff(device, 8192, False, tmp)
        row(device, "seed flow, 8 KiB (whole)", total, wall)
        if args.quick or not big:
            continue
        if device in args.big_devices.split(","):
            cycles, wall, exact = conversion_speed(device, big)
            row(device, f"{args.big_kib} KiB conversion", cycles, wall,
                "" if exact else "  RESULT DIFFERS FROM THE GOLDEN MODEL")
        if device in args.host_devices.split(","):
            for label, cycles, wall in host_transfer_speed(device, big):
                row(device, label, cycles, wall)
            if device == "mncore2:icarus":  # the bound: the same transfers with no cocotb
                from icarus_kernel import kernel_transfer_speed

                for label, cycles, wall in kernel_transfer_speed(big):
                    row(device, label, cycles, wall)
            if device == "mncore2:verilator":  # the bound: the model with no VPI, no cocotb
                from verilator_kernel import kernel_speed

                for label, cycles, cpu, _ in kernel_speed(big):
                    row(device, label, cycles, cpu, "  (process seconds)")
        if device in args.handoff_devices.split(","):
            split: dict[str, float] = {}
            conv, wall, total = handoff(device, big, False, tmp, split)
            row(device, f"{args.big_kib} KiB hand-off (whole)", total, wall,
                f"  (its conversion: {conv} cycles)")
            row(device, f"{args.big_kib} KiB hand-off (2 calls)", int(split["call_cycles"]),
                split["calls"], f"  (its conversion: {split['conversion']:.2f} s)")
            print_split(split)



def sweep(args: argparse.Namespace, tmp: Path) -> None:
    """Relocation against conversion cycles over tensor sizes, measured, and the plot."""
    print(f"\n== hand-off cycles on {args.sweep_device} (measured) == {_load()}")
    top = 64 << 10 if args.quick else args.max_kib << 10
    sizes = [4096 << k for k in range(20) if 4096 << k <= top]
    reloc, conv, model = [], [], []
    print(f"{'bytes':>9s} {'relocation':>11s} {'conversion':>11s} {'modeled conv':>13s} "
          f"{'conv flow cycles':>17s} {'cycles/s':>9s}")
    for nbytes in sizes:
        try:
            reloc_cycles = handoff(args.sweep_device, nbytes, True, tmp)[0]
            cycles, wall, total = handoff(args.sweep_device, nbytes, False, tmp)
        except DeviceMemoryError as exc:
            # The RTL simulates a window of MNCORE2_SIM.dram_bytes_per_group per Group; the
            # flow's host-layout buffers (input and consumer input) all sit in Group 0.
            print(f"{nbytes:9d}  does not fit the simulated DRAM window ({exc})")
            sizes = sizes[:len(conv)]
            break
        reloc.append(reloc_cycles)
        conv.append(cycles)
        try:
            model.append(modeled_handoff(nbytes))
        except ImportError:
            model.append(0)
        print(f"{nbytes:9d} {reloc[-1]:11d} {conv[-1]:11d} {model[-1]:13d} {total:17d} "
              f"{total / wall:9.0f}")
    plot(sizes, reloc, conv, [m for m in model if m] and model, Path(args.png))
    print(f"\nplot: {args.png}")


if __name__ == "__main__":
    main()
