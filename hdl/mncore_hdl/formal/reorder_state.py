"""Invariants of the reordering frontend's state: what k-induction needs to start sane.

:class:`~..memctrl.reorder.ReorderFrontend` keeps a window of chunks tagged with read
sequence numbers and write-buffer positions, a reorder buffer (per slot: beats arrived, the
chunk's length) and a queue of the issued reads' slots. Each function below asserts, of the
state the frontend exposes (``entries``, ``cut``, ``pointers``, ``passed``, ``rob``,
``inflight``), facts true of every reachable state; they are proved with the rest in the
induction, and they rule out the start states where, for example, the reorder buffer hands
out a read that was never issued.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal

from .backend import one_burst
from .primitives import Assert

__all__ = ["PARTS", "reorder_invariants"]


#: The invariants' parts: the window and cap counter, the write buffer, the reorder buffer.
PARTS = ("window", "write", "read")


def reorder_invariants(m: Module, fe, read_owed=None, kind=Assert, parts=PARTS) -> None:
    """Assert the invariants of one elaborated :class:`ReorderFrontend` ``fe``.

    - the window: valid entries are a prefix, each one column burst; the chunk being cut
      has beats left; the cap counter (``passed``) at most the cap;
    - writes (:func:`_write_invariants`): window writes in request order inside the write
      buffer, the beats received within its room;
    - reads (:func:`_read_invariants`): the sequence numbers of window reads, the slots'
      counters and the in-flight queue agree with which reads were issued.

    Parameters
    ----------
    m : Module
        The harness module.
    fe : ReorderFrontend
        The frontend, elaborated by the harness (its state is read).
    read_owed : dict or None
        The reads whose beats the data engine owes the port, in issue order (the harness's
        queue, :func:`~.frontend.reads_owed`); None leaves the equations with it out.
    kind : Assert or Assume
        Asserted where they are proved; assumed where a proof rests on them.
    parts : tuple of str
        Which of :data:`PARTS` (the write buffer's hold on their own, with the window's).
    """
    if "window" in parts:
        _window_invariants(m, fe, kind)
    if "write" in parts:
        _write_invariants(m, fe, kind)
    if "read" in parts:
        _read_invariants(m, fe, read_owed, kind)


def _window_invariants(m: Module, fe, kind) -> None:
    """Valid entries are a prefix, each one column burst; the chunk being cut has beats
    left; the cap counter at most the cap."""
    cfg = fe.config
    q = fe.entries
    for k, e in enumerate(q):
        if k:
            m.d.comb += kind(~e.valid | q[k - 1].valid, f"window entry {k} valid above a free one")
        m.d.comb += kind(~e.valid | one_burst(e.addr, e.len, cfg),
                           f"window entry {k} is not one column burst")
    m.d.comb += [
        kind(~fe.cut["valid"] | (fe.cut["rem"] >= 1), "a request being cut with no beats left"),
        kind(fe.passed <= cfg.scheduler_starvation_cap, "the cap counter past the cap"),
    ]


def _write_invariants(m: Module, fe, kind) -> None:
    """Write tags, as distances from the oldest window write's first beat (``tail``, the
    frontend's own reference): window writes in order and apart; each starts within the beats
    received or right after the window write before it (a gap between two window writes is a
    write issued, whose beats had all come); ``walloc`` past every window write, and within
    the beats received or at the end of the newest; the beats received at most the room."""
    cfg = fe.config
    bl = cfg.timing.burst_length
    p = fe.pointers
    wb = len(p["wfill"])
    tail = p["walloc"]
    for e in reversed(fe.entries):
        tail = Mux(e.valid & e.write, e.tag[:wb], tail)

    def rel(v):
        return (v - tail)[:wb]

    used, alloc = rel(p["wfill"]), rel(p["walloc"])
    m.d.comb += kind(used <= fe.write_beats_held - bl, "write beats received past the room")
    writes = [(e.valid & e.write, rel(e.tag[:wb]), e.len) for e in fe.entries]
    end = Const(0, wb + 1)      # end of the newest window write so far (0: none)
    total = Const(0, wb + 1)
    for k, (w, start, length) in enumerate(writes):
        for j, (wj, sj, lj) in enumerate(writes[:k]):
            m.d.comb += kind(~(wj & w) | (sj + lj <= start), f"window writes {j}, {k} out of order")
        m.d.comb += [
            kind(~w | (start + length <= alloc), f"window write {k} past the next write's beats"),
            kind(~w | (start <= used) | (start == end),
                   f"window write {k} apart from the beats received and the write before it"),
        ]
        end = Mux(w, start + length, end)
        total = total + Mux(w, length, 0)
    any_write = Cat(w for w, _, _ in writes).any()
    m.d.comb += [
        kind((alloc <= used) | (any_write & (end == alloc)),
               "the next write's first beat neither received nor after the newest window write"),
        kind(alloc <= used + total, "write beats allocated beyond the window's writes"),
        kind(alloc <= fe.write_beats_held - bl + fe.depth * bl,
             "write beats allocated beyond the room and the window"),
    ]


def _read_invariants(m: Module, fe, read_owed, kind) -> None:
    """Read sequence numbers, as distances from ``drain`` (the oldest read owed): the
    outstanding reads are ``drain .. ralloc - 1``; the window's reads are among them, in
    order, and every one ``slots`` or more past ``drain`` is in the window (a read issues only
    inside the slots). Then the slots (:func:`_slot_invariants`) and the queue of issued
    reads (:func:`_inflight_invariants`)."""
    p = fe.pointers
    drain, rb = p["drain"], len(p["drain"])
    owed = (p["ralloc"] - drain)[:rb]
    reads = [(e.valid & ~e.write, (e.tag[:rb] - drain)[:rb]) for e in fe.entries]
    m.d.comb += kind(owed <= fe.slots + fe.depth, "more reads owed than slots and window")
    for k, (r, dist) in enumerate(reads):
        m.d.comb += kind(~r | (dist < owed), f"window read {k} not outstanding")
        for j, (rj, dj) in enumerate(reads[:k]):
            m.d.comb += kind(~(rj & r) | (dj < dist), f"window reads {j}, {k} out of order")
    beyond = sum(Mux(r & (dist >= fe.slots), 1, 0) for r, dist in reads)
    m.d.comb += kind(beyond == Mux(owed > fe.slots, owed - fe.slots, 0),
                     "a read beyond the slots issued, or missing from the window")
    flying = _slot_invariants(m, fe, owed, reads, kind)
    _inflight_invariants(m, fe, flying, read_owed, kind)


def _slot_invariants(m: Module, fe, owed, reads, kind):
    """Per slot, with ``n`` the outstanding distance from ``drain`` it serves next: *issued*
    when ``n`` is outstanding and not in the window. A slot not issued has no beat; an issued
    one has a length of 1 .. BL and at most that many beats; it is *in flight* while beats
    are missing. ``beat_out`` is within the oldest slot's beats. Returns the in-flight bits,
    one per slot."""
    ns, bl = fe.slots, fe.config.timing.burst_length
    sb = (ns - 1).bit_length()
    drain, rob = fe.pointers["drain"], fe.rob
    arrived, length = rob["arrived"], rob["length"]
    issued, flying = [], []
    for s in range(ns):
        ahead = (Const(s, sb) - drain[:sb])[:sb]
        waiting = Cat(r & (dist == ahead) for r, dist in reads).any()
        iss = Signal(name=f"inv_issued{s}")
        fly = Signal(name=f"inv_flying{s}")
        m.d.comb += [iss.eq((ahead < owed) & ~waiting), fly.eq(iss & (arrived[s] < length[s]))]
        m.d.comb += [
            kind(iss | (arrived[s] == 0), f"slot {s}: beats arrived, not issued"),
            kind(~iss | ((length[s] >= 1) & (length[s] <= bl) & (arrived[s] <= length[s])),
                 f"slot {s}: issued, its length or beats out of range"),
        ]
        issued.append(iss)
        flying.append(fly)
    oldest = drain[:sb]
    m.d.comb += [
        kind(rob["beat_out"] <= Array(arrived)[oldest], "more beats handed out than arrived"),
        kind(~Cat(*issued).bit_select(oldest, 1) | (rob["beat_out"] < Array(length)[oldest]),
             "the oldest read handed out past its length"),
    ]
    return Cat(*flying)


def _inflight_invariants(m: Module, fe, flying, read_owed, kind) -> None:
    """The queue of issued reads, through a ghost of the slots in flight (set by the queue's
    push of a slot, cleared by its pop) equal to ``flying``: its live entries are distinct
    slots of the ghost, none with a beat but the head, whose beats arrived are ``beat_in``;
    its level counts the ghost's slots (so a push never meets a full queue, a beat never an
    empty one) and its pointers agree with its level; with ``read_owed``, the harness's queue
    of reads owed is this queue (:func:`_owed_invariants`)."""
    ns = fe.slots
    sb = (ns - 1).bit_length()
    inf, rob = fe.inflight, fe.rob
    entries, consume, produce, level = (inf["entries"], inf["consume"], inf["produce"],
                                        inf["level"])
    arrived_v = Cat(*rob["arrived"])
    lb = len(rob["arrived"][0])
    head = Cat(*entries).word_select(consume, len(entries[0]))
    # a ghost of the slots in flight, kept from the queue's pushes and pops: the count of
    # the queue's level is taken of it, not of ``flying`` (whose bits the step must
    # otherwise re-derive, all at once, to add them up)
    ghost = Signal(ns, name="inv_in_flight")
    m.d.sync += ghost.eq(Cat(
        Mux(inf["push"] & (inf["slot"] == s), 1, Mux(inf["pop"] & (head == s), 0, ghost[s]))
        for s in range(ns)))
    m.d.comb += [kind(ghost[s] == flying[s], f"slot {s}: in flight, not in the queue's ghost")
                 for s in range(ns)]
    live = [Signal(name=f"inv_live{i}") for i in range(ns)]
    m.d.comb += [lv.eq((Const(i, sb) - consume)[:sb] < level) for i, lv in enumerate(live)]
    for i, (lv, e) in enumerate(zip(live, entries, strict=True)):
        m.d.comb += [
            kind(~lv | ghost.bit_select(e, 1), f"in-flight entry {i}: its slot not in flight"),
            kind(~lv | (consume == i) | (arrived_v.word_select(e, lb) == 0),
                 f"in-flight entry {i}: beats before its turn"),
        ]
        for j in range(i):
            m.d.comb += kind(~(lv & live[j]) | (e != entries[j]),
                             f"in-flight entries {j}, {i} hold one slot")
    beat_in = rob["beat_in"]
    m.d.comb += [
        kind(level == sum(ghost[s] for s in range(ns)),
             "in-flight level is not the slots in flight"),
        kind((produce - consume)[:sb] == level[:sb], "in-flight queue's pointers and level"),
        kind((level != 0) | (beat_in == 0), "beats arrived with nothing in flight"),
        kind((level == 0) | (arrived_v.word_select(head, lb) == beat_in),
             "the head's beats arrived are not beat_in"),
    ]
    if read_owed is not None:
        _owed_invariants(m, fe, read_owed, live, kind)


def _owed_invariants(m: Module, fe, owed, live, kind) -> None:
    """The harness's queue of reads owed (:func:`~.frontend.reads_owed`) is the in-flight
    queue: the same pointers and level, its beat count ``beat_in``, each live entry's length
    its slot's; and no read issues while it is full."""
    inf, rob = fe.inflight, fe.rob
    lb = len(rob["length"][0])
    length_v = Cat(*rob["length"])
    m.d.comb += [
        kind(~owed["full_issue"], "a read issued with every slot owed"),
        kind(owed["level"] == inf["level"], "reads owed: level is not the in-flight level"),
        kind((owed["produce"] == inf["produce"]) & (owed["consume"] == inf["consume"]),
             "reads owed: pointers are not the in-flight queue's"),
        kind(owed["beat"] == rob["beat_in"], "reads owed: beats pushed are not beat_in"),
    ]
    for i, (lv, e) in enumerate(zip(live, inf["entries"], strict=True)):
        m.d.comb += kind(~lv | (owed["lens"][i] == length_v.word_select(e, lb)),
                         f"reads owed entry {i}: length is not its slot's")
