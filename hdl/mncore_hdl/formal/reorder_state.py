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

from amaranth.hdl import Array, Cat, Const, Module, Mux

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
    read_owed : Value or None
        The read beats the data engine owes the port (the harness's count, or the engine's
        own state); None leaves that equation out.
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
    inside the slots). Per slot, with ``n`` the outstanding number in the next ``slots`` it
    serves: not issued (free, or ``n`` still in the window), no beat has arrived and the slot
    is not in flight; issued and in flight, no beat has arrived unless it is the queue's head,
    whose beats arrived are ``beat_in``; issued and not in flight, all its beats arrived. The
    queue's entries are distinct (its level counts the slots in flight); the beats owed are
    the in-flight slots' lengths less ``beat_in``; ``beat_out`` within the oldest slot."""
    p, rob, inf = fe.pointers, fe.rob, fe.inflight
    ns, depth = fe.slots, fe.depth
    sb = (ns - 1).bit_length()
    drain, rb = p["drain"], len(p["drain"])

    def rel(v):
        return (v - drain)[:rb]

    owed = rel(p["ralloc"])
    reads = [(e.valid & ~e.write, e.tag[:rb]) for e in fe.entries]
    m.d.comb += kind(owed <= ns + depth, "more reads owed than slots and window")
    for k, (r, tag) in enumerate(reads):
        m.d.comb += kind(~r | (rel(tag) < owed), f"window read {k} not outstanding")
        for j, (rj, tj) in enumerate(reads[:k]):
            m.d.comb += kind(~(rj & r) | (rel(tj) < rel(tag)),
                             f"window reads {j}, {k} out of order")
    beyond = sum(Mux(r & (rel(tag) >= ns), 1, 0) for r, tag in reads)
    m.d.comb += kind(beyond == Mux(owed > ns, owed - ns, 0),
                       "a read beyond the slots issued, or missing from the window")

    entries, consume, level = inf["entries"], inf["consume"], inf["level"]
    width = len(entries[0])
    head = Cat(*entries).word_select(consume, width)
    live = [(Const(i, sb) - consume)[:sb] < level for i in range(ns)]
    arrived, length = rob["arrived"], rob["length"]
    beat_in, beat_out = rob["beat_in"], rob["beat_out"]
    issued_bits, flying_bits, owed_beats = [], [], 0
    for s in range(ns):
        ahead = (Const(s, sb) - drain[:sb])[:sb]
        n = (drain + ahead)[:rb]
        waiting = Cat(r & (tag == n) for r, tag in reads).any()
        issued = (ahead < owed) & ~waiting
        flying = Cat(lv & (e == s) for lv, e in zip(live, entries, strict=True)).any()
        at_head = (level != 0) & (head == s)
        m.d.comb += [
            kind(issued | ((arrived[s] == 0) & ~flying),
                 f"slot {s}: beats or in flight, not issued"),
            kind(~issued | flying | (arrived[s] == length[s]), f"slot {s}: landed, beats missing"),
            kind(~flying | at_head | (arrived[s] == 0), f"slot {s}: beats before its turn"),
            kind(~at_head | ((arrived[s] == beat_in) & (beat_in < length[s])),
                   f"slot {s}: head of the queue, beats arrived not beat_in"),
            kind(~issued | ((length[s] >= 1) & (length[s] <= fe.config.timing.burst_length)),
                   f"slot {s}: issued with a length outside 1 .. burst length"),
        ]
        issued_bits.append(issued)
        flying_bits.append(flying)
        owed_beats = owed_beats + Mux(flying, length[s], 0)
    produce = inf["produce"]
    m.d.comb += [
        kind(level <= ns, "in-flight queue over its depth"),
        kind(level == sum(flying_bits), "in-flight queue holds a slot twice"),
        kind((produce - consume)[:sb] == level[:sb], "in-flight queue's pointers and level"),
        kind((level != 0) | (beat_in == 0), "beats arrived with nothing in flight"),
        kind(beat_out <= Array(arrived)[drain[:sb]], "more beats handed out than arrived"),
        kind(~Cat(issued_bits).bit_select(drain[:sb], 1)
               | (beat_out < Array(length)[drain[:sb]]),
               "the oldest read handed out past its length"),
    ]
    if read_owed is not None:
        m.d.comb += kind(read_owed + beat_in == owed_beats,
                           "beats owed are not the in-flight reads' beats")
