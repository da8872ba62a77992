"""The back door (``peek``/``poke``) and the host port see the same DRAM on both RTL backends.

Benches stage workloads through ``poke`` (no cycles spent), so it must store exactly what a
HostWrite through the controllers would, and ``peek`` must read what a HostRead returns.
"""

from __future__ import annotations

import numpy as np
import pytest
from mlsdk import Context, MNDevice
from mlsdk.device.commands import HostRead, HostWrite
from mlsdk.testing.flows import require_device
from mncore_hdl.arch import MNCORE2_SIM
from mncore_hdl.layout import native_layout


@pytest.mark.parametrize("device", ["mncore2:icarus", "mncore2:rtl"])
def test_poke_and_peek_agree_with_the_host_port(device):
    require_device(device)
    layout = native_layout((40, 64), "float32", MNCORE2_SIM)  # spread over all 4 Groups
    rng = np.random.default_rng(7)
    with Context(MNDevice(device, config=MNCORE2_SIM)) as ctx:
        dev = ctx.device
        a, b = dev.allocate(layout), dev.allocate(layout)
        image_a = rng.integers(0, 1 << 63, (a.groups, a.lw_per_group), dtype=np.uint64)
        image_b = rng.integers(0, 1 << 63, (b.groups, b.lw_per_group), dtype=np.uint64)
        c0 = dev.counters()["cycle"]  # reading the counters costs CSR cycles of its own
        c1 = dev.counters()["cycle"]
        dev.poke(a, image_a)
        c2 = dev.counters()["cycle"]
        assert c2 - c1 == c1 - c0, f"poke spent {c2 - c1 - (c1 - c0)} simulated cycles"
        assert (dev.execute(HostRead(a)).data == image_a).all()
        dev.execute(HostWrite(b, image_b))
        assert (dev.peek(b) == image_b).all()
        with pytest.raises(ValueError, match=r"shape \(4, \d+\)"):
            dev.poke(b, image_a[:1])
        assert (dev.peek(b) == image_b).all()
