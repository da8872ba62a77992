"""The beat-by-beat host transfer: the driver's loop that presents requests and data beats.

Used where the simulator has no DMA engines (the Amaranth simulator, or a cocotb simulator with
``$MNCORE_COSIM_DMA=0``): each Group's share of a transfer (a :class:`Lane`) presents its
requests of at most one DRAM row and its write beats as soon as the port takes them, all Groups
in parallel, one clock edge per loop turn. ``cosim_tb``'s DMA engines run the same loop in
hardware, so both paths measure the same cycles (``sim/sdk/test_cosim_dma.py``).
"""

from __future__ import annotations

import numpy as np
from mncore_hdl.contracts.cosim import requester_prefix
from mncore_hdl.contracts.memctrl import RequestFormat, pack_wdata, unpack_rdata

from .bus import Bus

__all__ = ["Lane", "make_lanes", "run_beats"]


class Lane:
    """One Group's share of a burst transfer: its request list and its beat position."""

    def __init__(self, prefix: str, bursts: list[tuple[int, int]], words: np.ndarray):
        self.prefix = prefix
        self.bursts = bursts
        self.words = words
        self.req = 0
        self.beat = 0
        self.error = False
        self.driven: dict[str, int] = {}

    def set(self, bus: Bus, field: str, value: int) -> None:
        if self.driven.get(field) != value:
            bus.set(self.prefix + field, value)
            self.driven[field] = value


def make_lanes(path: str, buf: dict[str, int], image: np.ndarray | None,
               row: int) -> list[Lane]:
    """One lane per Group of ``buf`` on port ``path``: its bursts of at most ``row`` LW (one
    DRAM row) and the words it writes (``image``'s row) or reads into."""
    lanes = []
    for i in range(buf["groups"]):
        bursts = []
        address, end = buf["address"], buf["address"] + buf["lw_per_group"]
        while address < end:
            n = min(row - address % row, end - address)  # max burst: one DRAM row
            bursts.append((address, n))
            address += n
        words = (image[i] if image is not None
                 else np.zeros(buf["lw_per_group"], dtype=np.uint64))
        lanes.append(Lane(requester_prefix(path, buf["group"] + i), bursts, words))
    return lanes


async def run_beats(bus: Bus, lanes: list[Lane], write: bool, total: int, limit: int,
                    request: RequestFormat) -> bool:
    """Move every lane's ``total`` beats, one clock edge a turn; False when ``limit`` edges
    passed first. Read data lands in each lane's ``words`` (``error`` set for a flagged
    beat)."""
    data_field = "wdata__" if write else "rdata__"
    names: list[str] = []
    for lane in lanes:
        names += [lane.prefix + "req__ready", lane.prefix + data_field + "ready"
                  if write else lane.prefix + "rdata__valid"]
        if not write:
            names.append(lane.prefix + "rdata__payload")
            lane.set(bus, "rdata__ready", 1)
    for _ in range(limit):
        busy = False
        for lane in lanes:
            if lane.req < len(lane.bursts):
                busy = True
                lane.set(bus, "req__valid", 1)
                address, length = lane.bursts[lane.req]
                lane.set(bus, "req__payload", request.pack(address, length, write))
            else:
                lane.set(bus, "req__valid", 0)
            if lane.beat < total:
                busy = True
                if write:
                    lane.set(bus, "wdata__valid", 1)
                    lane.set(bus, "wdata__payload", pack_wdata(int(lane.words[lane.beat])))
            elif write:
                lane.set(bus, "wdata__valid", 0)
        if not busy:
            return True
        sampled = await bus.edge(names)
        k = 0
        for lane in lanes:
            req_ready, data_ok = sampled[k], sampled[k + 1]
            k += 2
            if lane.driven.get("req__valid") and req_ready:
                lane.req += 1
            if write:
                if lane.driven.get("wdata__valid") and data_ok:
                    lane.beat += 1
            else:
                payload = sampled[k]
                k += 1
                if data_ok and lane.beat < total:
                    data, error = unpack_rdata(payload)
                    lane.words[lane.beat] = data
                    lane.error |= error
                    lane.beat += 1
    return False
