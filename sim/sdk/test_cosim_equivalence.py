"""Every RTL backend runs the same design from the same state, so they measure the same cycles
(Icarus and Verilator each against the Amaranth simulator; see also ``test_cosim_dma.py``).

The 48 KiB conversion below spans the controllers' second refresh (tREFI = 2925 cycles; 32 KiB
did until the converter read every Group at once and finished before it): when
the Icarus server began its first operation one clock edge later after reset than the Amaranth
bench did, the refreshes fell one cycle later within the conversion, and the two backends
counted different stall cycles (2576 vs 2577; at 128 KiB, 27589 vs 27590 cycles).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from mlsdk.testing.flows import require_device, staged_conversion
from mncore_hdl.arch import MNCORE2_SIM

SHAPE = (192, 64)  # 48 KiB of fp32: about 8,000 cycles, two refreshes


@pytest.mark.parametrize("device", ["mncore2:icarus", "mncore2:verilator"])
def test_cocotb_simulators_and_amaranth_measure_identical_cycles(device):
    require_device(device)
    bits = np.random.default_rng(3).integers(0, 1 << 32, SHAPE, dtype=np.uint32)
    tensor = torch.from_numpy(bits.view(np.float32))
    icarus = staged_conversion(device, tensor)
    amaranth = staged_conversion("mncore2:rtl", tensor)
    assert icarus.cycles == amaranth.cycles
    counters_i, counters_a = icarus.counters, amaranth.counters
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
    assert icarus.exact and amaranth.exact
