"""Resealed mutants of every artifact kind give only the package's errors (issue 38, item 1).

A hypothesis state machine per kind takes a real artifact (``program.json``, a cache entry's
``entry.json``, ``pipeline_plan.json``, a sweep's ``results.jsonl``), applies structured edits
one after another (rename one name in one table only, retype a field, drop or duplicate an
entry, swap two values, push a number past its range), reseals what a forger can reseal (the
program's SHA-256, the entry's hash of its program) and uses the artifact as the package
does. Each use must succeed or raise the package's error, and write nothing outside the
artifact's folder. Derandomised: every run draws the same mutants; ``MNCORE_FUZZ_EXAMPLES``
scales the count.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from mlsdk import CacheOptions, CacheWarning, Context, MLSDKError, MNDevice, storage
from mlsdk.cachedir import CacheDir
from mlsdk.pipeline import PLAN_FILE, format_plan, load_plan
from mncore_compiler.program import body_checksum
from mncore_hdl.arch import MNCORE2
from mncore_hdl.sweep import ResultStore, SweepSpec, run_sweep
from mncore_hdl.sweep.report import design_params, table
from mncore_hdl.sweep.store import ResultsError
from pipeline_fns import first, second, third

#: Mutants each kind must see (the issue's bar).
MUTANTS = 1000
STEPS = 25
EXAMPLES = int(os.environ.get("MNCORE_FUZZ_EXAMPLES", str(MUTANTS // STEPS + 8)))
MACHINE = settings(max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None,
                   derandomize=True, database=None, suppress_health_check=list(HealthCheck))
WEIGHT = torch.linspace(-1.0, 1.0, 16)
#: Names an edit gives: the others of the artifact, a path, empty, huge, control characters.
NAMES = ["x", "y", "z", "W", "../x", "/etc/passwd", "", "a" * 300, "x\n", "sum", "f1", "f2"]
VALUES = st.one_of(
    st.none(), st.booleans(), st.sampled_from([0, -1, 1, 3, 2 ** 31, 2 ** 63, 2 ** 70, 0.5]),
    st.sampled_from(NAMES), st.just([]), st.just({}), st.just([4, 16]), st.just([1 << 40]))


def model(inputs):
    h = torch.relu(inputs["x"] * WEIGHT).permute(1, 0)
    return {"y": h.sum(0), "z": inputs["x"] + 1}


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


def _parent(body: Any, where: tuple) -> Any:
    for step in where[:-1]:
        body = body[step]
    return body


def _replace(path: Path, text: str) -> None:
    """Write ``path`` anew (a rename, as a tool would): never through a hard link the codegen
    directory shares with its cache entry."""
    tmp = path.with_name(f".{path.name}.mutant")
    tmp.write_text(text)
    os.replace(tmp, path)


def _snapshot(root: Path, inside: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` but outside ``inside``, with its size and mtime."""
    seen = {}
    for path in root.rglob("*"):
        if path == inside or inside in path.parents:
            continue
        info = path.lstat()
        seen[str(path)] = (info.st_size, info.st_mtime_ns)
    return seen


class Mutating(RuleBasedStateMachine):
    """Edits of one JSON artifact; subclasses say how it is resealed and used."""

    original: Any = None
    root: Path = Path()
    folder: Path = Path()
    count = 0
    skip_fields: tuple[str, ...] = ()

    def __init__(self):
        super().__init__()
        self.body = json.loads(json.dumps(self.original))
        self.outside = _snapshot(self.root, self.folder)

    def _where(self, data: st.DataObject, kind: type | None = None) -> tuple | None:
        paths = [p for p in _paths(self.body) if p[0] not in self.skip_fields
                 and (kind is None or isinstance(_parent(self.body, p)[p[-1]], kind))]
        return data.draw(st.sampled_from(paths)) if paths else None

    @rule(data=st.data())
    def rename_one_name(self, data):
        """A name changed in one place only (the IO table, an edge, a key)."""
        where = self._where(data, str)
        if where is not None:
            _parent(self.body, where)[where[-1]] = data.draw(st.sampled_from(NAMES))

    @rule(data=st.data(), value=VALUES)
    def retype(self, data, value):
        where = self._where(data)
        if where is not None:
            # A copy: st.just hands the same list to every case, and later edits change it.
            _parent(self.body, where)[where[-1]] = json.loads(json.dumps(value))

    @rule(data=st.data())
    def drop(self, data):
        where = self._where(data)
        if where is not None:
            del _parent(self.body, where)[where[-1]]

    @rule(data=st.data())
    def duplicate(self, data):
        where = self._where(data, list)
        if where is not None:
            items = _parent(self.body, where)[where[-1]]
            if items:
                items.append(json.loads(json.dumps(items[0])))

    @rule(data=st.data())
    def swap(self, data):
        a, b = self._where(data), self._where(data)
        if a is not None and b is not None and a[:len(b)] != b and b[:len(a)] != a:
            pa, pb = _parent(self.body, a), _parent(self.body, b)
            pa[a[-1]], pb[b[-1]] = pb[b[-1]], pa[a[-1]]

    @rule(data=st.data(), by=st.sampled_from([1, -1, 2 ** 62, -(2 ** 62)]))
    def shift_number(self, data, by):
        where = self._where(data, int)
        if where is not None:
            parent = _parent(self.body, where)
            if not isinstance(parent[where[-1]], bool):
                parent[where[-1]] += by

    @rule()
    def restore(self):
        self.body = json.loads(json.dumps(self.original))

    @invariant()
    def only_package_errors(self):
        type(self).count += 1
        self.write_and_use()
        assert _snapshot(self.root, self.folder) == self.outside

    def write_and_use(self) -> None:
        raise NotImplementedError


def _run(machine: type[Mutating]) -> None:
    machine.count = 0
    run_state_machine_as_test(machine, settings=MACHINE)
    print(f"{machine.__name__}: {machine.count} mutants")
    if EXAMPLES * STEPS >= MUTANTS:
        assert machine.count >= MUTANTS


# -- program.json ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A compiled program with a cache entry, a compiled pipeline with its plan, and a
    sweep's results, each in its own folder of one root."""
    root = tmp_path_factory.mktemp("mutants")
    context = Context(MNDevice("mncore2:auto"))
    context.compile(model, {"x": torch.randn(4, 16)}, storage.path(root / "program"),
                    cache_options=CacheOptions(root / "cache"))
    x, w = torch.randn(8, 8), torch.randn(8, 8)
    context.compile_pipeline({"f1": (first, {"x": x}), "f2": (second, {"a": x, "w": w}),
                              "f3": (third, {"b": x})},
                             [("f1.a", "f2.a"), ("f2.b", "f3.b")], storage.path(root / "pipe"))
    spec = SweepSpec("mutants", grid={"ports": [1, 2], "trcd": [12, 16]}, fixed={"lw": 256})
    run_sweep(spec, ResultStore(root / "sweep" / "results.jsonl"), progress=False)
    yield root, context
    context.close()


def test_program_json_mutants(built):
    root, context = built
    folder = root / "program"
    pristine = (folder / "program.json").read_text()

    class ProgramMutants(Mutating):
        original = json.loads(pristine)
        skip_fields = ("sha256",)

        def write_and_use(self):
            body = dict(self.body)
            body.pop("sha256", None)
            body["sha256"] = body_checksum(body)  # as a forger would
            _replace(folder / "program.json", json.dumps(body))
            try:
                function = context.load_codegen_dir(storage.path(folder))
            except MLSDKError:
                return
            try:
                function({"x": torch.randn(4, 16)})
            except MLSDKError:
                pass
            finally:
                function.unload()

    ProgramMutants.root, ProgramMutants.folder = root, folder
    try:
        _run(ProgramMutants)
    finally:
        _replace(folder / "program.json", pristine)
    out = context.load_codegen_dir(storage.path(folder))({"x": torch.ones(4, 16)})
    torch.testing.assert_close(out["z"].cpu(), torch.full((4, 16), 2.0))


def test_entry_json_mutants(built):
    root, _ = built
    cache = root / "cache"
    (key,) = [p.name for p in cache.iterdir() if not p.name.startswith(".")]
    folder = cache / key
    pristine = (folder / "entry.json").read_text()

    class EntryMutants(Mutating):
        original = json.loads(pristine)

        def write_and_use(self):
            body = dict(self.body)
            # A forger rebinds the entry to the program beside it.
            if self.body.get("program") == self.original["program"]:
                body["program"] = hashlib.sha256((folder / "program.json").read_bytes()
                                                 ).hexdigest()
            _replace(folder / "entry.json", json.dumps(body))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", CacheWarning)
                program = CacheDir(cache).lookup(key, "model", MNCORE2,
                                                 graph=self.original["graph"])
            if program is not None:
                assert body["key"] == key and body["name"] == "model"
                assert body["graph"] == self.original["graph"]

    EntryMutants.root, EntryMutants.folder = root, folder
    try:
        _run(EntryMutants)
    finally:
        _replace(folder / "entry.json", pristine)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        assert CacheDir(cache).lookup(key, "model", MNCORE2) is not None


def test_pipeline_plan_mutants(built):
    root, _ = built
    folder = root / "pipe"
    pristine = (folder / PLAN_FILE).read_text()

    class PlanMutants(Mutating):
        original = json.loads(pristine)

        def write_and_use(self):
            _replace(folder / PLAN_FILE, json.dumps(self.body))
            try:
                plan = load_plan(folder / PLAN_FILE)
            except MLSDKError:
                return
            assert isinstance(format_plan(plan), str)

    PlanMutants.root, PlanMutants.folder = root, folder
    try:
        _run(PlanMutants)
    finally:
        _replace(folder / PLAN_FILE, pristine)
    assert load_plan(folder / PLAN_FILE) == json.loads(pristine)


def test_sweep_results_mutants(built):
    root, _ = built
    folder = root / "sweep"
    path = folder / "results.jsonl"
    pristine = path.read_text()
    records = [json.loads(line) for line in pristine.splitlines()]
    swept, figures = ("ports", "trcd"), ("efficiency", "cycles", "wall_s")

    class ResultMutants(Mutating):
        original = records

        def write_and_use(self):
            lines = [json.dumps(r) if isinstance(r, dict | list) else str(r) for r in self.body]
            _replace(path, "".join(line + "\n" for line in lines))
            try:
                store = ResultStore(path)
            except ResultsError:
                return
            assert isinstance(table(store.records(), swept, figures), str)
            design_params(store.records(), swept)

    ResultMutants.root, ResultMutants.folder = root, folder
    try:
        _run(ResultMutants)
    finally:
        _replace(path, pristine)
    assert len(ResultStore(path)) == 4
