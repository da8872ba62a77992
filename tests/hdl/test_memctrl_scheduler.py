"""Unit tests of the command scheduler and the error flag (Amaranth simulator).

The scheduler is combinational: each test sets the bank states, the port heads, the arbiter's
grant, the refresh request and the data bus, and reads the command it issues, as readable
tuples (``("ACT", bank, row, port)``, ``("RD", bank, row, port, length)``, ...). Random states
are compared with :func:`decide`, a plain Python statement of the rules.
"""

import random

import pytest
from amaranth.sim import Simulator
from mncore_hdl.arch import MNCORE2_SIM, DramTiming
from mncore_hdl.memctrl.scheduler import ErrorFlag, Scheduler
from mncore_hdl.testing.hdl_checks import expect_error

TINY = MNCORE2_SIM.replace(
    banks=4, row_lw=32, sim_window_lw=512,
    timing=DramTiming(cl=4, trcd=3, trp=3, tras=8, twr=3, trefi=300, trfc=20, burst_length=8))
ONE_BANK = TINY.replace(banks=1, sim_window_lw=256)

OUTPUTS = ("act", "pre", "col", "ref", "oow", "issue", "issue_port", "bank", "row", "port",
           "addr", "len", "write")


# -- the rules in plain Python -------------------------------------------------------------------

def addr_of(config, bank, row, col=0):
    """The LW address of column ``col`` of ``row`` in ``bank``."""
    return (row << (config.col_bits + config.bank_bits)) | (bank << config.col_bits) | col


def split(config, addr):
    """(bank, row) of an LW address."""
    cb, bb = config.col_bits, config.bank_bits
    return (addr >> cb) & ((1 << bb) - 1), addr >> (cb + bb)


def head(addr=0, length=8, write=False, oow=False, valid=True, la=None):
    """One port's view: head chunk at ``addr`` (if ``valid``), look-ahead at ``la``."""
    return {"head_valid": valid, "head_addr": addr, "head_len": length, "head_write": write,
            "head_oow": oow, "la_valid": la is not None, "la_addr": la or 0}


def bank_state(open_row=None, act_ready=None, pre_ready=None, col_ready=None):
    """One bank: closed (``open_row=None``) or open at ``open_row``, ready for what it may do."""
    is_open = open_row is not None
    return {"is_open": is_open, "open_row": open_row or 0,
            "act_ready": (not is_open) if act_ready is None else act_ready,
            "pre_ready": is_open if pre_ready is None else pre_ready,
            "col_ready": is_open if col_ready is None else col_ready}


def state(config, heads, banks=None, grant=0, grant_valid=True, want=False, ready=True,
          bus_free=True, act_ok=True, rd_ok=True, wr_ok=True):
    """All scheduler inputs; banks default to closed and ready, the rank rules to met."""
    banks = banks or [bank_state() for _ in range(config.banks)]
    return {"heads": heads, "banks": banks, "grant": grant, "grant_valid": grant_valid,
            "want": want, "ready": ready, "bus_free": bus_free, "act_ok": act_ok,
            "rd_ok": rd_ok, "wr_ok": wr_ok}


def _prepare(config, st, p_mem, p_bank):
    """The preparation candidate that wins: (kind, bank, row, port) or None."""
    banks = st["banks"]
    protected = [False] * config.banks
    for h in st["heads"]:
        if h["head_valid"] and not h["head_oow"]:
            b, r = split(config, h["head_addr"])
            protected[b] |= r == banks[b]["open_row"]
        if h["la_valid"]:
            b, r = split(config, h["la_addr"])
            protected[b] |= r == banks[b]["open_row"]
    cands = [(i, h["head_valid"] and not h["head_oow"], h["head_addr"])
             for i, h in enumerate(st["heads"])]
    cands += [(i, h["la_valid"], h["la_addr"]) for i, h in enumerate(st["heads"])]
    for i, valid, addr in cands:
        b, r = split(config, addr)
        if not valid or (p_mem and (b == p_bank or config.banks == 1)):
            continue
        bs = banks[b]
        if bs["act_ready"] and st["act_ok"]:
            return "act", b, r, i
        if bs["is_open"] and bs["open_row"] != r and bs["pre_ready"] and not protected[b]:
            return "pre", b, r, i
    return None


def decide(config, st):
    """What the scheduler outputs for the inputs ``st`` (see :class:`Scheduler`)."""
    out = dict.fromkeys(OUTPUTS, 0)
    banks, g = st["banks"], st["grant"]
    p = st["heads"][g]
    out.update(addr=p["head_addr"], len=p["head_len"], write=int(p["head_write"]), issue_port=g)
    p_bank, p_row = split(config, p["head_addr"])
    if st["want"]:
        closable = [b for b, bs in enumerate(banks) if bs["pre_ready"]]
        if closable:
            out.update(pre=1, bank=closable[0])
        if (not any(bs["is_open"] for bs in banks) and all(bs["act_ready"] for bs in banks)
                and st["ready"]):
            out["ref"] = 1
    elif st["ready"]:
        primary = None
        if st["grant_valid"]:
            bs = banks[p_bank]
            if p["head_oow"]:
                out["oow"] = int(st["bus_free"])
            elif bs["is_open"] and bs["open_row"] == p_row:
                dir_ok = st["wr_ok"] if p["head_write"] else st["rd_ok"]
                primary = "col" if bs["col_ready"] and st["bus_free"] and dir_ok else None
            elif not bs["is_open"]:
                primary = "act" if bs["act_ready"] and st["act_ok"] else None
            else:
                primary = "pre" if bs["pre_ready"] else None
        prep = None
        if primary is None:
            prep = _prepare(config, st, st["grant_valid"] and not p["head_oow"], p_bank)
        if primary is not None:
            out[primary] = 1
        elif prep is not None:
            out[prep[0]] = 1
        if primary is not None:
            # An out-of-window retire (``issue_port``) issues no command: bank, row and port
            # name the preparation command of the same cycle, if any.
            out.update(bank=p_bank, row=p_row, port=g)
        elif prep is not None:
            out.update(bank=prep[1], row=prep[2], port=prep[3])
    out["issue"] = out["col"] | out["oow"]
    return out


def transcript(out):
    """The outputs as readable events, e.g. ``[("ACT", 2, 5, 1)]``."""
    events = []
    if out["oow"]:
        events.append(("OOW", out["issue_port"], out["addr"]))
    if out["ref"]:
        events.append(("REF",))
    if out["act"]:
        events.append(("ACT", out["bank"], out["row"], out["port"]))
    if out["pre"]:
        events.append(("PRE", out["bank"], out["row"], out["port"]))
    if out["col"]:
        kind = "WR" if out["write"] else "RD"
        events.append((kind, out["bank"], out["row"], out["port"], out["len"]))
    return events


# -- running the component -----------------------------------------------------------------------

def run_states(config, ports, states):
    """Apply each input state to a fresh :class:`Scheduler`; return the output dicts."""
    dut = Scheduler(config, ports)
    outs = []

    async def bench(ctx):
        for st in states:
            for view, h in zip(dut.ports, st["heads"], strict=True):
                for name, value in h.items():
                    ctx.set(getattr(view, name), value)
            for view, bs in zip(dut.banks, st["banks"], strict=True):
                for name, value in bs.items():
                    ctx.set(getattr(view, name), value)
            ctx.set(dut.grant, st["grant"])
            ctx.set(dut.grant_valid, st["grant_valid"])
            ctx.set(dut.refresh_want, st["want"])
            ctx.set(dut.refresh_ready, st["ready"])
            ctx.set(dut.bus_free, st["bus_free"])
            ctx.set(dut.act_allowed, st["act_ok"])
            ctx.set(dut.rd_allowed, st["rd_ok"])
            ctx.set(dut.wr_allowed, st["wr_ok"])
            outs.append({name: ctx.get(getattr(dut, name)) for name in OUTPUTS})

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    return outs


def issued(config, st):
    """The events the scheduler issues for one input state (checked against the model)."""
    ports = len(st["heads"])
    (out,) = run_states(config, ports, [st])
    assert out == decide(config, st)
    return transcript(out)


def random_state(config, ports, rng):
    """Inputs biased towards coincidences: few rows, so heads often hit the open rows."""
    bl = config.timing.burst_length

    def addr():
        if rng.random() < 0.05:
            return config.sim_window_lw + rng.randrange(64)
        return addr_of(config, rng.randrange(config.banks), rng.randrange(3),
                       rng.randrange(config.row_lw))

    heads = [{"head_valid": rng.random() < 0.8, "head_addr": addr(),
              "head_len": rng.randint(0, bl), "head_write": rng.random() < 0.5,
              "head_oow": rng.random() < 0.1, "la_valid": rng.random() < 0.5,
              "la_addr": addr()} for _ in range(ports)]
    banks = [{"is_open": rng.random() < 0.6, "open_row": rng.randrange(3),
              "act_ready": rng.random() < 0.6, "pre_ready": rng.random() < 0.6,
              "col_ready": rng.random() < 0.7} for _ in range(config.banks)]
    return {"heads": heads, "banks": banks, "grant": rng.randrange(ports),
            "grant_valid": rng.random() < 0.8, "want": rng.random() < 0.2,
            "ready": rng.random() < 0.85, "bus_free": rng.random() < 0.7,
            "act_ok": rng.random() < 0.8, "rd_ok": rng.random() < 0.8,
            "wr_ok": rng.random() < 0.8}


# -- tests -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("config,ports", [(TINY, 3), (TINY, 1), (ONE_BANK, 2)],
                         ids=["4banks-3ports", "4banks-1port", "1bank-2ports"])
def test_matches_model_on_random_states(config, ports):
    seed = 4242 + ports + config.banks
    rng = random.Random(seed)
    states = [random_state(config, ports, rng) for _ in range(1500)]
    outs = run_states(config, ports, states)
    kinds = set()
    for k, (st, out) in enumerate(zip(states, outs, strict=True)):
        want = decide(config, st)
        assert out == want, f"seed={seed} state {k}: {st}\nRTL {out}\nmodel {want}"
        kinds.update(e[0] for e in transcript(out))
    assert kinds == {"OOW", "REF", "ACT", "PRE", "RD", "WR"}, f"seed={seed}: only {kinds}"


def test_refresh_closes_lowest_bank_then_refreshes():
    c = TINY
    heads = [head(addr_of(c, 0, 1))]
    banks = [bank_state(), bank_state(2), bank_state(1), bank_state()]
    assert issued(c, state(c, heads, banks, want=True)) == [("PRE", 1, 0, 0)]
    # a bank still in tRAS is skipped; the next one closes
    banks[1] = bank_state(2, pre_ready=False)
    assert issued(c, state(c, heads, banks, want=True)) == [("PRE", 2, 0, 0)]
    # open banks nobody may close yet: nothing issues
    banks[2] = bank_state(1, pre_ready=False)
    assert issued(c, state(c, heads, banks, want=True)) == []
    closed = [bank_state() for _ in range(c.banks)]
    assert issued(c, state(c, heads, closed, want=True)) == [("REF",)]
    # REF waits for tRP of every bank
    closed[3] = bank_state(act_ready=False)
    assert issued(c, state(c, heads, closed, want=True)) == []


def test_nothing_issues_during_trfc():
    c = TINY
    heads = [head(addr_of(c, 0, 1)), head(addr_of(c, 1, 0))]
    assert issued(c, state(c, heads, ready=False)) == []


def test_primary_opens_its_row_then_reads():
    c = TINY
    heads = [head(addr_of(c, 2, 1, 8), length=5)]
    banks = [bank_state() for _ in range(c.banks)]
    assert issued(c, state(c, heads, banks)) == [("ACT", 2, 1, 0)]
    banks[2] = bank_state(1, col_ready=False)                     # tRCD running
    assert issued(c, state(c, heads, banks)) == []
    banks[2] = bank_state(1)
    assert issued(c, state(c, heads, banks)) == [("RD", 2, 1, 0, 5)]
    heads[0] = head(addr_of(c, 2, 1, 8), length=5, write=True)
    assert issued(c, state(c, heads, banks, bus_free=False)) == []
    assert issued(c, state(c, heads, banks)) == [("WR", 2, 1, 0, 5)]


def test_primary_closes_another_row_of_its_bank():
    c = TINY
    heads = [head(), head(addr_of(c, 3, 2))]
    banks = [bank_state() for _ in range(c.banks)]
    banks[3] = bank_state(0)
    assert issued(c, state(c, heads, banks, grant=1)) == [("PRE", 3, 2, 1)]


def test_preparation_uses_a_slot_the_primary_leaves():
    c = TINY
    # port 0 (primary) waits for the bus; port 1's head bank is closed: opened now
    heads = [head(addr_of(c, 0, 0)), head(addr_of(c, 1, 2))]
    banks = [bank_state(0)] + [bank_state() for _ in range(c.banks - 1)]
    assert issued(c, state(c, heads, banks, bus_free=False)) == [("ACT", 1, 2, 1)]
    # a look-ahead row of the primary's own port is prepared too (never its current bank)
    heads = [head(addr_of(c, 0, 0), la=addr_of(c, 1, 0)), head(valid=False)]
    assert issued(c, state(c, heads, banks, bus_free=False)) == [("ACT", 1, 0, 0)]
    heads = [head(addr_of(c, 0, 0), la=addr_of(c, 0, 1)), head(valid=False)]
    assert issued(c, state(c, heads, banks, bus_free=False)) == []


def test_preparation_never_closes_a_wanted_row():
    c = TINY
    banks = [bank_state() for _ in range(c.banks)]
    banks[1] = bank_state(0)
    heads = [head(addr_of(c, 2, 0)), head(addr_of(c, 1, 3))]
    blocked = [bank_state() if b != 2 else bank_state(act_ready=False) for b in range(c.banks)]
    blocked[1] = bank_state(0)
    # the primary (port 0) waits for tRP; port 1 wants row 3 of bank 1, where row 0 is open
    assert issued(c, state(c, heads, blocked)) == [("PRE", 1, 3, 1)]
    # unless a look-ahead wants row 0 of bank 1
    heads[0] = head(addr_of(c, 2, 0), la=addr_of(c, 1, 0))
    assert issued(c, state(c, heads, blocked)) == []


def test_rank_rules_hold_acts_and_columns():
    c = TINY
    heads = [head(addr_of(c, 2, 1)), head(addr_of(c, 1, 0))]
    banks = [bank_state() for _ in range(c.banks)]
    # tRRD / tFAW: neither the primary nor the preparation may activate
    assert issued(c, state(c, heads, banks, act_ok=False)) == []
    banks[2] = bank_state(1)
    assert issued(c, state(c, heads, banks, rd_ok=False)) == [("ACT", 1, 0, 1)]
    assert issued(c, state(c, heads, banks, wr_ok=False)) == [("RD", 2, 1, 0, 8)]
    heads[0] = head(addr_of(c, 2, 1), write=True)
    assert issued(c, state(c, heads, banks, wr_ok=False, act_ok=False)) == []
    assert issued(c, state(c, heads, banks, rd_ok=False)) == [("WR", 2, 1, 0, 8)]


def test_out_of_window_chunk_waits_only_for_the_bus():
    c = TINY
    oow = c.sim_window_lw + 16
    heads = [head(oow, oow=True)]
    assert issued(c, state(c, heads, bus_free=False)) == []
    assert issued(c, state(c, heads)) == [("OOW", 0, oow)]


def test_oow_with_preparation():
    c = TINY
    oow = c.sim_window_lw + addr_of(c, 1, 0)
    heads = [head(oow, oow=True), head(addr_of(c, 2, 1))]
    banks = [bank_state() for _ in range(c.banks)]
    banks[1] = bank_state(0)
    assert issued(c, state(c, heads, banks)) == [("OOW", 0, oow), ("ACT", 2, 1, 1)]
    # a preparation PRE too: port 1 wants row 1 of bank 2, where row 0 is open
    banks[2] = bank_state(0)
    assert issued(c, state(c, heads, banks)) == [("OOW", 0, oow), ("PRE", 2, 1, 1)]


def test_error_flag_keeps_the_first_address_until_cleared():
    dut = ErrorFlag(TINY)
    seen = []
    script = [(0, 0, 0), (1, 0x210, 0), (1, 0x230, 0), (0, 0, 0), (1, 0x250, 1), (0, 0, 0),
              (1, 0x270, 0), (0, 0, 0)]

    async def bench(ctx):
        for oow, addr, clear in script:
            ctx.set(dut.oow, oow)
            ctx.set(dut.addr, addr)
            ctx.set(dut.clear, clear)
            await ctx.tick()
            seen.append((ctx.get(dut.error), ctx.get(dut.error_addr)))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen == [(0, 0), (1, 0x210), (1, 0x210), (1, 0x210), (0, 0x210), (0, 0x210),
                    (1, 0x270), (1, 0x270)]


def test_validation():
    expect_error(TypeError, "Config must be an ArchConfig, not 7", Scheduler, 7, 2)
    expect_error(TypeError, "Port count must be an integer, not True", Scheduler, TINY, True)
    expect_error(ValueError, "Port count must be a positive integer, not 0", Scheduler, TINY, 0)
    expect_error(TypeError, "Config must be an ArchConfig, not 7", ErrorFlag, 7)


# -- select_word: the open-row lookup without wide shifts -----------------------------------------

@pytest.mark.parametrize("count, width", [(16, 9), (8, 9), (4, 13), (16, 3), (2, 40), (32, 9),
                                          (3, 9), (1, 9)])
def test_select_word_is_word_select(count, width):
    """select_word gives Cat(words).word_select(index) for every count and width (groups that
    fit in 64 bits, a count that is no power of two, one word)."""
    from amaranth.hdl import Cat, Module, Signal
    from mncore_hdl.memctrl.scheduler import select_word

    words = [Signal(width, name=f"w{i}") for i in range(count)]
    index = Signal(max(1, (count - 1).bit_length()))
    got, want = Signal(width), Signal(width)
    m = Module()
    m.d.comb += [got.eq(select_word(words, index)),
                 want.eq(Cat(*words).word_select(index, width))]
    sim = Simulator(m)

    async def bench(ctx):
        rng = random.Random(count * 100 + width)
        for _ in range(100):
            for w in words:
                ctx.set(w, rng.getrandbits(width))
            ctx.set(index, rng.getrandbits(len(index)))
            assert ctx.get(got) == ctx.get(want)

    sim.add_testbench(bench)
    sim.run()
