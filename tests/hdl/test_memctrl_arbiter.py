"""Unit tests of the round-robin arbiter (Amaranth simulator) against a plain Python model."""

import random

import pytest
from amaranth.sim import Simulator
from mncore_hdl.memctrl.arbiter import RoundRobin
from mncore_hdl.testing.hdl_checks import expect_error


class RoundRobinModel:
    def __init__(self, n):
        self.n, self.last = n, n - 1

    def grant(self, requests):
        for k in range(1, self.n + 1):
            i = (self.last + k) % self.n
            if requests >> i & 1:
                return i
        return None

    def advance(self, requests):
        g = self.grant(requests)
        if g is not None:
            self.last = g


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_matches_model_and_never_starves(n):
    seed = 1234 + n
    rng = random.Random(seed)
    dut = RoundRobin(n)
    model = RoundRobinModel(n)
    waits = [0] * n
    worst = [0] * n

    async def bench(ctx):
        held = 0
        for cyc in range(400):
            # requesters hold their request until served, and new ones come at random
            held |= rng.getrandbits(n)
            ctx.set(dut.requests, held)
            adv = rng.random() < 0.7
            ctx.set(dut.advance, adv)
            want = model.grant(held)
            assert ctx.get(dut.valid) == (want is not None), f"seed={seed} cycle {cyc}"
            if want is not None:
                assert ctx.get(dut.grant) == want, f"seed={seed} cycle {cyc}"
            if adv and want is not None:
                model.advance(held)
                held &= ~(1 << want)
                for i in range(n):
                    if held >> i & 1:
                        waits[i] += 1
                        worst[i] = max(worst[i], waits[i])
                waits[want] = 0
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    # a waiting requester sees at most n-1 others served before it
    assert max(worst) <= n - 1, f"seed={seed}: worst wait {worst}"


def test_arbiter_validation():
    expect_error(TypeError, "Requester count must be an integer, not 2.0", RoundRobin, 2.0)
    expect_error(ValueError, "Requester count must be a positive integer, not 0", RoundRobin, 0)
