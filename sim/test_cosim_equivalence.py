"""Both RTL backends run the same design from the same state, so they measure the same cycles.

The 32 KiB conversion below spans the controllers' second refresh (tREFI = 2925 cycles): when
the Icarus server began its first operation one clock edge later after reset than the Amaranth
bench did, the refreshes fell one cycle later within the conversion, and the two backends
counted different stall cycles (2576 vs 2577; at 128 KiB, 27589 vs 27590 cycles).
"""

from __future__ import annotations

import numpy as np
import torch
from mlsdk import Context, MNDevice
from mlsdk.device.commands import Convert
from mncore_hdl.arch import MNCORE2_SIM
from mncore_hdl.layout import conversion, host_layout, native_layout, to_device
from test_relocation import _require

SHAPE = (128, 64)  # 32 KiB of fp32


def _convert_on(device: str) -> tuple[int, dict[str, int], np.ndarray]:
    src = native_layout(SHAPE, "float32", MNCORE2_SIM)
    dst = host_layout(SHAPE, "float32")
    image = np.random.default_rng(3).integers(0, 1 << 32, SHAPE, dtype=np.uint32)
    with Context(MNDevice(device, config=MNCORE2_SIM)) as ctx:
        dev = ctx.device
        a, b = dev.allocate(src), dev.allocate(dst)
        dev.poke(a, to_device(torch.from_numpy(image.view(np.float32)), src))
        result = dev.execute(Convert(a, str(src), b, str(dst), conversion(src, dst).to_dict(),
                                     "float32"))
        return result.cycles, dev.counters(), dev.peek(b)


def test_icarus_and_amaranth_measure_identical_cycles():
    _require("mncore2:icarus")
    cycles_i, counters_i, out_i = _convert_on("mncore2:icarus")
    cycles_a, counters_a, out_a = _convert_on("mncore2:rtl")
    assert cycles_i == cycles_a
    # Free-running clocks read as an absolute value: cocotb reads, right after an edge, the value
    # that edge sampled, Amaranth's testbench the value after it. Durations (differences of two
    # reads) and every event counter agree exactly.
    clocks = {"cycle", *(f"mc{g}.cycles" for g in range(MNCORE2_SIM.groups))}
    for k in clocks:
        assert 0 <= counters_a[k] - counters_i[k] <= 1, k
    differ = {k: (counters_i[k], counters_a[k]) for k in counters_i
              if k not in clocks and counters_i[k] != counters_a.get(k)}
    assert not differ, f"counters differ (icarus, amaranth): {differ}"
    assert counters_i["mc0.refreshes"] >= 2, "the conversion should span two refreshes"
    assert (out_i == out_a).all()
