"""The functional model's side of a replayed call (:class:`~.replay.CallReplay`): a HostWrite
into the same buffer and a Launch of the same program with the same bindings, call after call,
with what those fix worked out once.

A repeated call's commands meet the same state every time: the buffer a HostWrite writes holds
the last call's tensor (write-back, alone over its range), the Launch reads the same buffers in
the same layouts, and each output lands where the last call's output was (its proxy dropped,
the allocator gives the same range back), over that output's write-back value. Each function
here takes that case at once, and anything else the way the device's own hooks take it
(:class:`~.functional.FunctionalDevice`), so a replayed call leaves the device as the commands
would, value for value and figure for figure (``tests/sdk/test_call_plan.py`` compares the two
after every step). What is worked out once holds only facts that cannot change under the
replay (a buffer's range, a layout's cache key, a read's cycles); whatever another command, a
free or a write could change is asked on every call: each buffer live, each kept tensor
current (its version), each entry's place in the decoded cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mncore_hdl.layout import Layout

from .base import LoadedProgram
from .commands import Buffer
from .host_values import layout_key, lazy_clone

__all__ = ["run_planned", "write_facts", "write_planned"]


def write_facts(device: Any, buf: Buffer, layout: Layout) -> tuple:
    """What :func:`write_planned` works out once for writes into ``buf`` in ``layout``."""
    fits = layout.groups == buf.groups and layout.lw_per_group == buf.lw_per_group
    return (buf, layout, (buf.id, layout_key(layout)),
            device._stream_cycles(buf.lw_per_group, write=True), fits)


def write_planned(device: Any, facts: tuple, tensor: Any) -> int:
    """``device._write_host_tensor`` of ``tensor`` into the buffer and layout of ``facts``
    (:func:`write_facts`), returning the cycles: when the buffer holds the last call's tensor,
    write-back and alone over its range, a tensor that qualifies to be kept as ``_keep_host``
    keeps it (all of its memory, on the CPU, not a view of DRAM, within the cache's limit)
    replaces it where it stands (:meth:`~.decoded.DecodedCache.replace_dirty`); anything
    else takes ``_write_host_tensor``."""
    buf, layout, key, cycles, fits = facts
    if fits and not tensor.requires_grad and device._keepable(tensor):
        clone = lazy_clone(tensor)
        if clone is not None and device.dram.decoded.replace_dirty(key, clone, layout):
            return cycles
    return device._write_host_tensor(buf, tensor, layout)


def run_planned(device: Any, program: LoadedProgram, bindings: Mapping[str, Buffer],
                stores: Mapping[str, Buffer], memo: dict[str, Any]) -> tuple[int, int]:
    """``device._run_program(program, bindings, stores)``: the loads, the program, the stores,
    with the Launch's fixed facts kept in ``memo`` (the caller's, one per replayed call) for
    the same ``program`` and ``bindings`` (the replay passes the same mapping while the
    bindings stay, and never changes it): each read's buffer, cache key and layout, the
    reads' and the compute's cycles and bytes; and the cache key of the value it last
    stored over each range."""
    plan = memo.get("launch")
    if plan is None or plan[0] is not program or plan[1] is not bindings:
        plan = memo["launch"] = _launch_facts(device, program, bindings)
    _, _, reads, cycles, nbytes, writes, large, _ = plan
    if device._released:  # buffers given back by finalizers: forget what they held first
        device._forget_released()
    allocator, decoded = device.allocator, device.dram.decoded
    released, lives = allocator.pending, allocator.by_id
    entries = decoded.entries
    values: dict[str, Any] = {}
    for name, buf, key, layout in reads:
        if (released or lives.get(buf.id) is not buf) and not allocator.is_live(buf):
            device._check_buffer(buf)  # raises
        if key is None:  # never read by the program (LoadedProgram.unread)
            continue
        entry = entries.get(key)
        if entry is not None and entry.value._version == entry.version:
            values[name] = entry.value
            entries.move_to_end(key)
        else:
            values[name] = device._load_missed(buf, layout, key, entry is not None)
    vacated: tuple = ()
    if large:  # outputs that may forget a freed buffer's write-back value first
        found = _vacate(device, large, plan[7], stores, memo)
        if found is None:
            device._before_run(program, bindings, stores)
        else:
            vacated = found
    try:
        outputs = device._own_outputs(program.run(values))
        stored, moved = _store_planned(device, writes, stores, outputs, memo, vacated)
    except BaseException:
        for key in vacated:  # the places not handed on: forgotten, as _before_run forgets
            decoded.discard(key)
        raise
    return cycles + stored, nbytes + moved


def _vacate(device: Any, large: tuple[str, ...], read: frozenset[int],
            stores: Mapping[str, Buffer], memo: dict[str, Any]) -> tuple | None:
    """``device._before_run`` for the large outputs ``large`` (``read``: the ids of the
    buffers the Launch reads), when each lies over the very range of a value this replay
    stored before, dirty and alone there: then that value is the one write-back value the
    hook would forget (when its buffer is freed and the output's buffer is no read's), and
    it lets go of its tensor keeping its place (:meth:`~.decoded.DecodedCache.vacate`),
    which the output's store then takes over. Returns the keys vacated, or None when an
    output is not in that case (the hook then does it all, nothing having changed)."""
    live = device.allocator.is_live
    if not all(live(buf) for buf in stores.values()):
        return None  # a store will refuse: the hook forgets nothing either
    decoded, last = device.dram.decoded, memo.get("stored", {})
    found = []
    for name in large:
        buf = stores[name]
        span = (buf.group, buf.groups, buf.address, buf.lw_per_group)
        before = last.get(span)
        entry = None if before is None else decoded.entries.get(before)
        if entry is None or not entry.dirty or not entry.alone or entry.span != span:
            return None
        if buf.id not in read and isinstance(entry.owner, Buffer) and not live(entry.owner):
            found.append((before, span))
    return tuple(key for key, span in found if decoded.vacate(key, span))


def _launch_facts(device: Any, program: LoadedProgram, bindings: Mapping[str, Buffer]
                  ) -> tuple:
    """What :func:`run_planned` works out once: ``(program, bindings, reads, cycles,
    bytes, stores, large, read)``, each read as ``(name, buffer, cache key or None when
    unread, layout)``, the cycles those of the reads and the compute, the bytes the reads',
    each store as ``(name, layout, layout number, torch type, LWs, cycles of a store of
    them)``, the outputs large enough for ``_before_run`` to have work (with none, the hook,
    which would return at once, is not called), and the ids of the buffers read."""
    plan_reads, plan_stores, large = device._plan(program)
    reads, cycles, nbytes = [], device._compute_cycles(program), 0
    for name, layout, number, unread in plan_reads:
        buf = bindings[name]
        reads.append((name, buf, None if unread else (buf.id, number), layout))
        cycles += device._stream_cycles(buf.lw_per_group, write=False)
        nbytes += buf.nbytes
    writes = tuple((name, layout, number, ttype, layout.lw_per_group,
                    device._stream_cycles(layout.lw_per_group, write=True))
                   for name, layout, number, ttype in plan_stores)
    read = frozenset(buf.id for buf in bindings.values())
    return program, bindings, tuple(reads), cycles, nbytes, writes, large, read


def _store_planned(device: Any, writes: tuple, stores: Mapping[str, Buffer],
                   outputs: Mapping[str, Any], memo: dict[str, Any], vacated: tuple
                   ) -> tuple[int, int]:
    """``device._store_outputs`` of the stores ``writes`` (:func:`_launch_facts`): an output
    that qualifies for write-back (as ``_store`` asks) whose buffer lies over the very range
    of a value this replay stored before, that value still there, dirty and alone, takes its
    place in the decoded cache (:meth:`~.decoded.DecodedCache.rekey_alone`), a place
    ``vacated`` (:func:`_vacate`) included; any other output is stored by ``_store`` (a
    vacated place it does not take forgotten first)."""
    cycles = nbytes = 0
    live, dram = device.allocator.is_live, device.dram
    # The key of the last value this replay stored over each range (a caller holding the
    # last call's outputs while it calls again sees its outputs take turns over two ranges).
    last: dict[tuple[int, int, int, int], tuple[int, int]] = memo.setdefault("stored", {})
    for name, layout, number, ttype, lw, taken in writes:
        buf = stores[name]
        if not live(buf):
            device._check_buffer(buf)  # raises
        tensor, key = outputs[name], (buf.id, number)
        span = (buf.group, buf.groups, buf.address, buf.lw_per_group)
        before = last.get(span)
        if not (before is not None and not tensor.requires_grad
                and device._storable(tensor, ttype)
                and tensor.element_size() * tensor.nelement() <= dram.decoded.limit_bytes
                and dram.decoded.rekey_alone(before, key, tensor, span, buf, layout)):
            if before in vacated:  # a place not handed on: forgotten, as _before_run does
                dram.decoded.discard(before)
            device._store(buf, tensor, layout, number, ttype)
        if len(last) >= 64:
            last.clear()
        last[span] = key
        cycles += (taken if buf.lw_per_group == lw
                   else device._stream_cycles(buf.lw_per_group, write=True))
        nbytes += buf.nbytes
    return cycles, nbytes
