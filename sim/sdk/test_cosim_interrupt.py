"""A caught Ctrl-C never makes an RTL session answer the wrong request.

A conversion (staged by ``poke``) is interrupted by a real SIGINT while the simulator runs it;
the KeyboardInterrupt is caught, and the same Context is used again: a HostWrite / HostRead of
a known image, the interrupted conversion's result, the counters and a compiled call must all
be right. The simulator finished the interrupted operation on its own; the session drains its
answer before the next one (sequence numbers, :mod:`mlsdk.device.rtl.protocol`). Before them,
every later request read the previous request's answer (``KeyError: 'port_beats'``, then
another tensor's data).

Sizes keep each run short: the conversion must outlast the interrupt, no more.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from mlsdk import Context, MNDevice, storage
from mlsdk.device.commands import Convert, HostRead, HostWrite
from mlsdk.testing.flows import require_device
from mlsdk.testing.interrupts import sigint_after
from mncore_hdl.arch import MNCORE2_SIM
from mncore_hdl.layout import conversion, host_layout, native_layout, to_device

#: device -> (rows of the 64-column fp32 tensor converted, seconds before the interrupt).
#: Amaranth runs ~250 cycles/s, Icarus ~2k, Verilator ~100k.
CASES = {
    "mncore2:rtl": (32, 1.0),        # 8 KiB, ~1.8k cycles
    "mncore2:icarus": (128, 1.0),    # 32 KiB, ~7k cycles
    "mncore2:verilator": (4096, 0.3),  # 1 MiB, ~220k cycles
}



def triple(inputs):
    return {"y": inputs["x"] * 3}


@pytest.mark.parametrize("device", list(CASES))
def test_an_interrupted_conversion_leaves_the_session_right(device, tmp_path):
    require_device(device)
    rows, delay = CASES[device]
    tensor = torch.randn(rows, 64, generator=torch.Generator().manual_seed(5))
    src = native_layout(tuple(tensor.shape), "float32", MNCORE2_SIM)
    dst = host_layout(tuple(tensor.shape), "float32")
    rng = np.random.default_rng(11)
    with Context(MNDevice(device, config=MNCORE2_SIM)) as ctx:
        dev = ctx.device
        src_buf, dst_buf = dev.allocate(src), dev.allocate(dst)
        dev.poke(src_buf, to_device(tensor, src))  # also starts the simulator
        convert = Convert(src_buf, str(src), dst_buf, str(dst), conversion(src, dst),
                          "float32")
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt), sigint_after(delay):
            dev.execute(convert)
            pytest.fail(f"the conversion ended in {time.monotonic() - started:.1f} s, before "
                        f"the interrupt at {delay} s; convert a larger tensor")
        assert dev.lock.acquire_if_idle(), "the interrupt left the device lock held"
        dev.lock.__exit__()

        # A known image through the host port, then back: never another request's answer.
        known = dev.allocate(native_layout((8, 64), "float32", MNCORE2_SIM))
        image = rng.integers(0, 1 << 63, (known.groups, known.lw_per_group), dtype=np.uint64)
        wrote = dev.execute(HostWrite(known, image))
        assert wrote.bytes["host"] == known.nbytes
        read = dev.execute(HostRead(known))
        assert (read.data == image).all()
        assert read.bytes["host"] == known.nbytes
        # The interrupted conversion ran to its end in the simulator.
        assert (dev.peek(dst_buf) == to_device(tensor, dst)).all()
        assert dev.counters()["converter.beats_written"] > 0
        # A compiled call on the same Context.
        x = torch.arange(64.0 * 8).reshape(8, 64)
        f = ctx.compile(triple, {"x": x}, storage.path(tmp_path / "triple"))
        assert torch.equal(f({"x": x})["y"].cpu(), x * 3)
        # And a conversion run to its end now measures what it should.
        again = dev.execute(convert)
        assert again.cycles > 0 and (dev.peek(dst_buf) == to_device(tensor, dst)).all()
