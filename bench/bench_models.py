"""Real models compiled vs torch eager: a ResNet-style CNN and a GPT, inference and training.

Per model and mode, prints the wall time of one compiled call (its outputs read back with
``.cpu()``) next to the same call in torch eager, and the modeled cycles of one call from
``Context.report()``. Sizes (``--size full``, the default): the CNN at ResNet-18 widths
(64-128-256-512, two blocks a stage), batch 32 of 3x32x32; the GPT with 4 layers, d=256,
8 heads, T=128, batch 8, vocabulary 256, in both attention variants (masked softmax and
``F.scaled_dot_product_attention``). Inference runs the model in ``eval()``; a training step
is zero_grad, forward, cross-entropy, backward and the optimizer step (the CNN with SGD
momentum and BatchNorm in train mode, the GPT with AdamW), its state registered on the device.
An MLP (what compiles today) is the reference point. A model that does not compile yet is
reported as such, with the unsupported ops the compile error lists, and the others still run.

Torch runs on ``--threads`` threads (default 1) on both paths, as ``bench_training.py`` does.
The compiled and the eager call are timed in turn (compiled, eager, compiled, ...) and each
row prints the medians, so a shared machine's load disturbs both alike; the load is printed
at the start and the end.

    ./exec_with_env.sh python3 bench/bench_models.py [--models mlp,cnn,gpt,gpt-sdpa]
        [--modes infer,train] [--size full|small] [--repeat 3] [--device mncore2:auto]
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from call_split import ROLES, CallSplit
from mlsdk import (
    Context,
    MLSDKError,
    MNCoreAdamW,
    MNCoreSGD,
    MNDevice,
    set_buffer_name_in_optimizer,
    storage,
)
from mlsdk.testing.cnn import CNN, Block
from mlsdk.testing.gpt import GPT
from mncore_compiler.errors import CompilerError, UnsupportedOperationError
from torch import nn

Batch = dict[str, torch.Tensor]

# -- the models ---------------------------------------------------------------------------------


class ResNet18(nn.Module):
    """ResNet-18's layout of :class:`mlsdk.testing.cnn.Block`: stem, four stages of two blocks
    (widths w, 2w, 4w, 8w), pool, fc."""

    def __init__(self, width: int = 64, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False),
                                  nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(2))
        stages, cin = [], width
        for index, cout in enumerate(width * m for m in (1, 2, 4, 8)):
            stride = 1 if index == 0 else 2
            stages += [Block(cin, cout, stride), Block(cout, cout, 1)]
            cin = cout
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.stages(self.stem(x))), 1))


@dataclass(frozen=True)
class Case:
    """A model, a batch and how it trains: ``loss(output, batch) -> scalar``."""

    describe: str
    model: nn.Module
    batch: Batch
    optimizer: str  # "sgd" (momentum 0.9) or "adamw"
    loss: Callable[[torch.Tensor, Batch], torch.Tensor]


def _xent(out: torch.Tensor, batch: Batch) -> torch.Tensor:
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), batch["y"].reshape(-1))


def make_case(name: str, size: str) -> Case:
    """The model ``name`` at ``size`` ("full": the figures' sizes; "small": a smoke test)."""
    torch.manual_seed(0)
    full = size == "full"
    if name == "mlp":
        batch, width = (64, 512) if full else (8, 16)
        model: nn.Module = nn.Sequential(nn.Linear(width, width), nn.ReLU(),
                                         nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
        data = {"x": torch.randn(batch, width), "y": torch.randint(0, 10, (batch,))}
        return Case(f"MLP {width}-{width}-10, batch {batch}", model, data, "sgd", _xent)
    if name == "cnn":
        batch, width, side = (32, 64, 32) if full else (2, 4, 8)
        data = {"x": torch.randn(batch, 3, side, side), "y": torch.randint(0, 10, (batch,))}
        return Case(f"ResNet-18 widths {width}..{8 * width}, batch {batch} at {side}x{side}",
                    ResNet18(width), data, "sgd", _xent)
    if name in ("gpt", "gpt-sdpa"):
        sdpa = name == "gpt-sdpa"
        layers, d, T, batch = (4, 256, 128, 8) if full else (1, 16, 8, 2)
        vocab, heads = (256, 8) if full else (32, 2)
        tokens = torch.randint(0, vocab, (batch, T + 1))
        data = {"x": tokens[:, :-1].contiguous(), "y": tokens[:, 1:].contiguous()}
        attention = "sdpa" if sdpa else "masked softmax"
        return Case(f"GPT {layers} layers d={d} T={T} batch {batch}, {attention}",
                    GPT(vocab, d, heads, layers, T, sdpa), data, "adamw", _xent)
    if name == "gpt-small":
        tokens = torch.randint(0, 64, (8, 17))
        data = {"x": tokens[:, :-1].contiguous(), "y": tokens[:, 1:].contiguous()}
        return Case("GPT 2 layers d=64 T=16 batch 8, 4 heads, vocabulary 64, masked softmax",
                    GPT(64, 64, 4, 2, 16), data, "adamw", _xent)
    if name == "cnn-small":
        data = {"x": torch.randn(32, 1, 8, 8), "y": torch.randint(0, 10, (32,))}
        return Case("CNN width 8 (stem, 2 residual blocks), batch 32 of 1x8x8", CNN(8), data,
                    "sgd", _xent)
    if name == "recsys":
        users, items = torch.randint(0, 1000, (64,)), torch.randint(0, 500, (64,))
        data = {"x": torch.stack([users, items], 1), "y": torch.randint(0, 2, (64,))}
        return Case("embedding+MLP recommender: 1000 users, 500 items, 32-dim, MLP 64-64-2 "
                    "(click or not), batch 64", Recommender(1000, 500, 32), data, "adamw", _xent)
    raise ValueError(f"unknown model {name!r}; expected one of {', '.join(MODELS + SMALL)}")


class Recommender(nn.Module):
    """A user and an item embedding, concatenated, through an MLP to two logits (click or
    not)."""

    def __init__(self, users: int, items: int, dim: int):
        super().__init__()
        self.user, self.item = nn.Embedding(users, dim), nn.Embedding(items, dim)
        self.mlp = nn.Sequential(nn.Linear(2 * dim, 64), nn.ReLU(), nn.Linear(64, 64),
                                 nn.ReLU(), nn.Linear(64, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(torch.cat([self.user(x[:, 0]), self.item(x[:, 1])], 1))


MODELS = ("mlp", "cnn", "gpt", "gpt-sdpa")
#: The models ``--small`` runs: those people try first, where per-call overhead dominates.
SMALL = ("gpt-small", "cnn-small", "recsys")
MODES = ("infer", "train")

# -- the functions compiled and timed -----------------------------------------------------------


def _optimizer(case: Case, model: nn.Module, mncore: bool) -> torch.optim.Optimizer:
    if case.optimizer == "sgd":
        cls = MNCoreSGD if mncore else torch.optim.SGD
        return cls(model.parameters(), lr=0.01, momentum=0.9, foreach=False)
    cls = MNCoreAdamW if mncore else torch.optim.AdamW
    return cls(model.parameters(), lr=1e-3, weight_decay=0.1, foreach=False)


def _functions(case: Case, model: nn.Module, opt: torch.optim.Optimizer | None
               ) -> Callable[[Batch], Batch]:
    if opt is None:
        return lambda d: {"out": model(d["x"])}

    def train_step(d: Batch) -> Batch:
        opt.zero_grad()
        loss = case.loss(model(d["x"]), d)
        loss.backward()
        opt.step()
        return {"loss": loss}
    return train_step


#: The clock calls are timed by: ``time.perf_counter`` (wall) or ``time.process_time`` (this
#: process' CPU time, what a shared machine's neighbours disturb least; torch runs on
#: ``--threads`` threads, 1 by default, so it is the call's own work). Set by ``--clock``.
CLOCK: Callable[[], float] = time.perf_counter


def _median_seconds(call: Callable[[], object], repeat: int) -> float:
    return _interleaved([call], repeat)[0]


def _interleaved(calls: list[Callable[[], object]], repeat: int) -> list[float]:
    """The median seconds of each of ``calls``, timed in turn (A, B, A, B, ...) after one
    warming call each, so a shared machine's load disturbs them alike."""
    for call in calls:
        call()  # warm
    times: list[list[float]] = [[] for _ in calls]
    for _ in range(repeat):
        for call, kept in zip(calls, times, strict=True):
            start = CLOCK()
            call()
            kept.append(CLOCK() - start)
    return [statistics.median(kept) for kept in times]


def eager_call(case: Case, mode: str) -> Callable[[], object]:
    """One eager call of ``case`` in ``mode`` on a copy of its model (no_grad for inference)."""
    model = copy.deepcopy(case.model)
    model.train(mode == "train")
    fn = _functions(case, model, _optimizer(case, model, False) if mode == "train" else None)
    if mode == "infer":
        def infer() -> object:
            with torch.no_grad():
                return fn(case.batch)
        return infer
    return lambda: fn(case.batch)


def time_eager(case: Case, mode: str, repeat: int) -> float:
    return _median_seconds(eager_call(case, mode), repeat)


@dataclass
class Compiled:
    seconds: float = 0.0
    cycles: float = 0.0
    error: str = ""
    #: Milliseconds per call by role (:mod:`call_split`), from instrumented calls of their own.
    split: dict[str, float] = field(default_factory=dict)
    #: The eager call's median seconds, when it was timed interleaved with the compiled one.
    eager: float = 0.0


def time_compiled(case: Case, mode: str, repeat: int, device: str, outdir: Path,
                  split: bool = False, eager: Callable[[], object] | None = None) -> Compiled:
    """One compiled call's wall time (outputs read back) and modeled cycles, or why the model
    does not compile; with ``split``, also where the call's time goes (:mod:`call_split`).
    With ``eager``, that call is timed too, interleaved with the compiled one
    (:func:`_interleaved`), into ``Compiled.eager``."""
    model = copy.deepcopy(case.model)
    model.train(mode == "train")
    with Context(MNDevice(device)) as context:
        context.registry.register("model", model)
        opt = None
        if mode == "train":
            opt = _optimizer(case, model, True)
            set_buffer_name_in_optimizer(opt, "opt")
            context.register_optimizer_buffers(opt)
        try:
            fn = context.compile(_functions(case, model, opt), case.batch,
                                 storage.path(outdir / f"{mode}"))
        except UnsupportedOperationError as exc:
            ops = sorted({problem.split(" ", 1)[0] for problem, _ in exc.problems})
            return Compiled(error="does not compile yet, unsupported: " + ", ".join(ops))
        except (CompilerError, MLSDKError) as exc:
            return Compiled(error=f"does not compile: {str(exc).splitlines()[0]}")

        def call() -> None:
            for value in fn(case.batch).values():
                value.cpu()

        try:
            if eager is None:
                seconds, eager_seconds = _median_seconds(call, repeat), 0.0
            else:
                seconds, eager_seconds = _interleaved([call, eager], repeat)
        except MLSDKError as exc:  # e.g. a model larger than the device's DRAM
            return Compiled(error=f"does not run: {type(exc).__name__}: {exc}")
        calls = context.report().calls(fn.name)
        cycles = statistics.median(record.cycles for record in calls)
        got = Compiled(seconds, cycles, eager=eager_seconds)
        if split and hasattr(context.device, "dram"):
            got.split = _split(context.device, call, seconds, repeat)
    return got


def _split(device, call: Callable[[], None], seconds: float, repeat: int) -> dict[str, float]:
    """Milliseconds per call by role over ``repeat`` instrumented calls; ``front end`` is what
    the uninstrumented call's ``seconds`` leave over."""
    timer = CallSplit(CLOCK)
    timer.install(device)
    for _ in range(repeat):
        call()
    got = {role: timer.seconds[role] / repeat * 1e3 for role in ROLES}
    got["front end"] = max(0.0, seconds * 1e3 - sum(got.values()))
    return got


# -- the table ----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=None,
                        help=f"comma-separated, of {', '.join(MODELS + SMALL)} (default: "
                             f"{', '.join(MODELS)}; with --small, {', '.join(SMALL)})")
    parser.add_argument("--small", action="store_true",
                        help="the small models users try first, with where each call's time "
                             "goes (interpreter, DRAM model, cycle model, host copies)")
    parser.add_argument("--modes", default=",".join(MODES),
                        help="comma-separated, of infer, train (default: both)")
    parser.add_argument("--size", choices=("full", "small"), default="full",
                        help="full: the figures' sizes; small: a seconds-long smoke run")
    parser.add_argument("--repeat", type=int, default=3, help="timed calls (median)")
    parser.add_argument("--device", default="mncore2:auto")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads for both paths (default 1)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="wall: elapsed time; cpu: this process' CPU time (steadier on a "
                             "loaded machine)")
    args = parser.parse_args(argv)
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    if args.models is None:
        args.models = ",".join(SMALL if args.small else MODELS)
    models, modes = args.models.split(","), args.modes.split(",")
    for value, known, what in ((models, MODELS + SMALL, "--models"), (modes, MODES, "--modes")):
        unknown = [v for v in value if v not in known]
        if unknown:
            parser.error(f"{what}: unknown {', '.join(unknown)}; expected {', '.join(known)}")
    if args.repeat < 1 or args.threads < 1:
        parser.error(f"--repeat and --threads must be at least 1, not {args.repeat} and "
                     f"{args.threads}")
    torch.set_num_threads(args.threads)
    print(f"{args.device} vs torch eager; torch threads {torch.get_num_threads()} "
          f"({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}); median of {args.repeat} "
          f"calls each, compiled and eager interleaved, {args.clock} clock")
    roles = (*ROLES, "front end")
    print(f"{'model':<10}{'mode':<7}{'eager ms':>10}{'compiled ms':>13}{'ratio':>8}"
          f"{'modeled cycles':>16}"
          + ("  per call ms: " + " / ".join(roles) if args.small else ""))
    with tempfile.TemporaryDirectory(prefix="mncore_bench_models_") as tmp:
        for name in models:
            case = make_case(name, args.size)
            print(f"# {name}: {case.describe}")
            for mode in modes:
                got = time_compiled(case, mode, args.repeat, args.device,
                                    Path(tmp) / name, split=args.small,
                                    eager=eager_call(case, mode))
                eager = got.eager or time_eager(case, mode, args.repeat)
                head = f"{name:<10}{mode:<7}{eager * 1e3:>10.2f}"
                if got.error:
                    print(f"{head}  {got.error}")
                else:
                    split = "  " + " / ".join(f"{got.split[r]:.2f}" for r in roles
                                              ) if got.split else ""
                    print(f"{head}{got.seconds * 1e3:>13.2f}{got.seconds / eager:>7.2f}x"
                          f"{got.cycles:>16.0f}{split}")
    print(f"load at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
