"""The model zoo on ``mncore2:auto``: does each architecture compile and match torch eager?

For every model of ``zoo_models.py`` (tiny random configs of transformers' causal LMs, masked
LMs, seq2seq, vision and audio models; diffusers' UNet2D, UNet2DCondition and VAE and a peft
LoRA when those packages are importable), in a subprocess of its own with a time limit:

- **inference**: ``model.eval()``, its first output (logits, or the sample) compiled and called
  on the batch it was compiled with, compared with eager to ``rtol=1e-4, atol=1e-4`` (float32:
  a few ulps per op through a two-layer model; a wrong op is off by far more);
- **training**: ``model.train()`` (dropout is 0 in every config), one compiled step of
  ``zero_grad``, ``loss = mean(output ** 2)``, ``backward``, ``MNCoreSGD(lr=0.01).step()``, its
  loss and every updated parameter compared with the same step of ``torch.optim.SGD`` in eager,
  to ``rtol=1e-4, atol=1e-5``.

Where those tolerances fail, the model may be ill-conditioned rather than the compile wrong (a
training-mode BatchNorm over two values, as MobileNetV2's last tiny feature maps are, turns
float32 rounding into errors of 1e-3): the same call or step is then run in float64 eagerly,
and the compile still *matches* when, for every compared tensor, its largest distance from
float64 is within ``CONDITIONING`` (10) times eager float32's own. Float32 computed in another
order lands within a few times that; a wrong op is off by far more. Such rows say so.

A model that does not compile is a *refusal* when the kit says why (``UnsupportedOperationError``
listing the missing ops, ``TraceError``, ``CaptureError``, or the model's own exception raised
while traced, which the kit annotates with the tracing state), an *error* otherwise (an internal
error, a crash: a bug), *mismatch* when it compiles and disagrees with eager (a wrong number: the
worst outcome), *timeout* past ``--timeout``. The time ratio is one compiled call (outputs read
back) over one eager call, median of 2 each after a warm-up call. Prints one row a model,
the missing ops by how many models need them, and the totals.

    python bench/bench_zoo.py [--models gpt2,llama,...] [--timeout 240] [--write docs/zoo.md]
"""

from __future__ import annotations

import argparse
import collections
import copy
import json
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

RTOL, ATOL = 1e-4, 1e-4
TRAIN_RTOL, TRAIN_ATOL = 1e-4, 1e-5
#: How many times eager float32's own distance from float64 a compiled result may be off.
CONDITIONING = 10.0
FIELDS = ("name", "family", "infer", "train", "missing", "ratio", "detail")


def _median_seconds(call: Callable[[], object], repeat: int = 2) -> float:
    call()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _failure(exc: BaseException) -> tuple[str, list[str], str]:
    """(outcome, missing ops, first line of the message) for a compile that raised."""
    from mncore_compiler.errors import CaptureError, TraceError, UnsupportedOperationError
    from mncore_compiler.training import TRACING_NOTE

    first = (str(exc).strip().splitlines() or [""])[0][:160]
    if isinstance(exc, UnsupportedOperationError):
        problems = getattr(exc, "problems", None) or [(str(exc), "")]
        ops = sorted({str(p).split(" ", 1)[0] for p, _ in problems})
        return "refused", ops, first
    if isinstance(exc, (TraceError, CaptureError)):
        return "refused", [], f"{type(exc).__name__}: {first}"
    if TRACING_NOTE in getattr(exc, "__notes__", []):  # the model's own error, while traced
        return "refused", [], f"the model raised {type(exc).__name__} while traced: {first}"
    return "error", [], f"{type(exc).__name__}: {first}"


def _infer(entry: Any, model: Any, batch: dict[str, Any], outdir: Path) -> dict[str, Any]:
    import torch
    from mlsdk import Context, MNDevice, storage

    model.eval()
    fn = lambda d: {"out": entry.output(model, d)}  # noqa: E731
    with torch.no_grad():
        want = fn(batch)["out"]
        eager = _median_seconds(lambda: fn(batch))
    with Context(MNDevice("mncore2:auto")) as context:
        context.registry.register("model", model)
        try:
            compiled = context.compile(fn, batch, storage.path(outdir / "infer"))
            got = compiled(batch)["out"].cpu()
        except Exception as exc:  # noqa: BLE001 - every failure is classified and reported
            outcome, ops, detail = _failure(exc)
            return {"infer": outcome, "missing": ops, "detail": detail}
        seconds = _median_seconds(lambda: [v.cpu() for v in compiled(batch).values()])
    try:
        torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL)
    except AssertionError as exc:
        with torch.no_grad():
            exact = fn(_double(batch)) if _double_model(model) else None
        verdict = within_conditioning({"out": got}, {"out": want},
                                       None if exact is None else {"out": exact["out"]})
        if verdict is None:
            return {"infer": "mismatch", "detail": str(exc).splitlines()[1][:160]}
        return {"infer": "ok", "ratio": seconds / eager, "detail": verdict}
    return {"infer": "ok", "ratio": seconds / eager}


def _train(entry: Any, model: Any, batch: dict[str, Any], outdir: Path) -> dict[str, Any]:
    import torch
    from mlsdk import Context, MNCoreSGD, MNDevice, set_buffer_name_in_optimizer, storage

    model.train()
    reference = copy.deepcopy(model)

    def make_step(m: Any, opt: Any, dtype: Any = torch.float32
                  ) -> Callable[[dict[str, Any]], dict[str, Any]]:
        def step(d: dict[str, Any]) -> dict[str, Any]:
            opt.zero_grad()
            loss = entry.output(m, d).to(dtype).pow(2).mean()
            loss.backward()
            opt.step()
            return {"loss": loss.detach()}
        return step

    exact_model = copy.deepcopy(model)
    want = make_step(reference, torch.optim.SGD(reference.parameters(), lr=0.01,
                                                foreach=False))(batch)["loss"]
    with Context(MNDevice("mncore2:auto")) as context:
        context.registry.register("model", model)
        opt = MNCoreSGD(model.parameters(), lr=0.01, foreach=False)
        set_buffer_name_in_optimizer(opt, "opt")
        context.register_optimizer_buffers(opt)
        try:
            compiled = context.compile(make_step(model, opt), batch,
                                       storage.path(outdir / "train"))
            got = compiled(batch)["loss"].cpu()
            context.synchronize()
        except Exception as exc:  # noqa: BLE001
            outcome, ops, detail = _failure(exc)
            return {"train": outcome, "missing": ops, "detail": detail}
    try:
        torch.testing.assert_close(got, want, rtol=TRAIN_RTOL, atol=TRAIN_ATOL)
        for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.detach(), q.detach(), rtol=TRAIN_RTOL,
                                       atol=TRAIN_ATOL, msg=lambda m, n=name: f"{n}: {m}")
    except AssertionError as exc:
        exact = None
        if _double_model(exact_model):
            loss = make_step(exact_model, torch.optim.SGD(exact_model.parameters(), lr=0.01,
                                                          foreach=False),
                             torch.float64)(_double(batch))
            exact = {"loss": loss["loss"], **dict(exact_model.named_parameters())}
        verdict = within_conditioning({"loss": got, **dict(model.named_parameters())},
                                       {"loss": want, **dict(reference.named_parameters())},
                                       exact)
        if verdict is None:
            return {"train": "mismatch", "detail": " ".join(str(exc).split())[:160]}
        return {"train": "ok", "detail": verdict}
    return {"train": "ok"}


def _double(batch: dict[str, Any]) -> dict[str, Any]:
    return {k: v.double() if v.is_floating_point() else v for k, v in batch.items()}


def _double_model(model: Any) -> bool:
    """``model`` in float64, in place; False when it cannot be (then there is no check)."""
    try:
        model.double()
    except (RuntimeError, TypeError):
        return False
    return True


def within_conditioning(got: dict[str, Any], want: dict[str, Any],
                         exact: dict[str, Any] | None) -> str | None:
    """None when some compiled tensor in ``got`` is further from float64 (``exact``) than
    ``CONDITIONING`` times eager float32 (``want``) is; else what the check found."""
    if exact is None:
        return None
    worst, worst_name = 0.0, ""
    for name, value in got.items():
        reference = exact[name].detach().double()
        mine = float((value.detach().double() - reference).abs().max())
        eager = float((want[name].detach().double() - reference).abs().max())
        ratio = mine / eager if eager > 0 else (0.0 if mine == 0 else float("inf"))
        if ratio > worst:
            worst, worst_name = ratio, name
    if worst > CONDITIONING:
        return None
    return (f"ill-conditioned in float32: {worst:.1f}x eager float32's distance from float64 "
            f"at most ({worst_name})")


def worker(name: str, modes: list[str]) -> dict[str, Any]:
    """Run one model in this process; the row of the table."""
    import torch
    import zoo_models

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    entry = next(e for e in zoo_models.entries() if e.name == name)
    row: dict[str, Any] = {"name": name, "family": entry.family, "infer": "-", "train": "-",
                           "missing": [], "ratio": None, "detail": ""}
    try:
        model, batch = entry.build()
    except Exception as exc:  # noqa: BLE001 - a config the bench cannot build is reported
        return {**row, "infer": "not built", "train": "not built",
                "detail": f"{type(exc).__name__}: {str(exc)[:120]}"}
    with tempfile.TemporaryDirectory() as tmp:
        for mode, run in (("infer", _infer), ("train", _train)):
            if mode not in modes:
                continue
            result = run(entry, copy.deepcopy(model), batch, Path(tmp))
            row["missing"] = sorted(set(row["missing"]) | set(result.pop("missing", [])))
            if result.get("detail") and not row["detail"]:
                row["detail"] = f"{mode}: {result['detail']}"
            result.pop("detail", None)
            row.update(result)
    return row


def _run_one(name: str, modes: list[str], timeout: float) -> dict[str, Any]:
    command = [sys.executable, __file__, "--worker", name, "--modes", ",".join(modes)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              cwd=Path(__file__).parent)
    except subprocess.TimeoutExpired:
        return {"name": name, "infer": "timeout", "train": "timeout", "missing": [],
                "ratio": None, "detail": f"over {timeout:.0f} s"}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            return dict(json.loads(line))
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return {"name": name, "infer": "error", "train": "error", "missing": [], "ratio": None,
            "detail": f"worker exited {done.returncode}: {tail[:140]}"}


def table(rows: list[dict[str, Any]]) -> str:
    """The rows, the missing ops and the totals, as Markdown."""
    lines = ["| model | family | inference | training | missing ops | time ratio | notes |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = f"{r['ratio']:.1f}" if r.get("ratio") else ""
        why = str(r.get("detail", "")).replace("|", "/")
        lines.append(f"| {r['name']} | {r.get('family', '')} | {r['infer']} | {r['train']} | "
                     f"{', '.join(r['missing'])} | {ratio} | {why} |")
    built = [r for r in rows if r["infer"] not in ("not built", "not run")]
    total = len(built)
    counts = {mode: collections.Counter(r[mode] for r in built) for mode in ("infer", "train")}
    need = collections.Counter(op for r in built for op in r["missing"])
    lines += ["", "| missing op | models needing it |", "|---|---|"]
    lines += [f"| {op} | {count} |" for op, count in need.most_common()]
    lines += ["", "| | built | compile and match | mismatch (wrong number) | refused | error "
              "| timeout |", "|---|---|---|---|---|---|---|"]
    for mode, label in (("infer", "inference"), ("train", "training step")):
        c = counts[mode]
        share = f"{c['ok']} ({100 * c['ok'] / total:.0f}%)" if total else "0"
        lines.append(f"| {label} | {total} | {share} | {c['mismatch']} | {c['refused']} | "
                     f"{c['error']} | {c['timeout']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help="comma-separated names (default: all)")
    parser.add_argument("--modes", default="infer,train", help="infer, train or both")
    parser.add_argument("--timeout", type=float, default=240.0,
                        help="seconds a model may take, both modes together (default 240)")
    parser.add_argument("--list", action="store_true", help="print the model names and exit")
    parser.add_argument("--write", type=Path, help="also write the table to this Markdown file")
    parser.add_argument("--rows", type=Path,
                        help="append each model's row to this JSON-lines file as it is done")
    parser.add_argument("--table-from", type=Path, nargs="+", metavar="ROWS",
                        help="print the table of rows files (runs split with --models)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    if args.worker:
        print(json.dumps(worker(args.worker, modes)), flush=True)
        return
    import zoo_models

    families = {e.name: e.family for e in zoo_models.entries()}
    names = list(families)
    if args.list:
        print("\n".join(names))
        return
    if args.table_from:
        found = {}
        for path in args.table_from:
            for line in path.read_text().splitlines():
                row = json.loads(line)
                found[row["name"]] = row
        # A model the split runs did not reach is listed, outside the totals.
        rows = [found.get(n, {"name": n, "infer": "not run", "train": "not run",
                              "missing": [], "ratio": None, "detail": ""}) for n in names]
        for row in rows:
            row.setdefault("family", families[row["name"]])
        _report(rows, args, argv)
        return
    chosen = [n for n in args.models.split(",") if n] or names
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        parser.error(f"unknown models {unknown}; --list prints the {len(names)} known ones")
    rows = []
    for name in chosen:
        start = time.perf_counter()
        rows.append({"family": families[name], **_run_one(name, modes, args.timeout)})
        r = rows[-1]
        if args.rows:
            with args.rows.open("a") as out:
                out.write(json.dumps(r) + "\n")
        print(f"{name}: inference {r['infer']}, training {r['train']} "
              f"({time.perf_counter() - start:.0f} s) {' '.join(r['missing'])}",
              file=sys.stderr, flush=True)
    _report(rows, args, argv)


def _report(rows: list[dict[str, Any]], args: argparse.Namespace, argv: list[str] | None) -> None:
    text = table(rows)
    print(text)
    if args.write:
        command = "python bench/bench_zoo.py " + " ".join(argv if argv is not None
                                                          else sys.argv[1:])
        args.write.write_text(f"# The model zoo on mncore2:auto\n\n{__doc__.split(chr(10), 2)[2]}"
                              f"\nPrinted by `{command.strip()}`:\n\n{text}\n")


if __name__ == "__main__":
    main()
