"""The compile cache's bound: ``CacheOptions(max_bytes=...)`` and ``mlsdk.cache.prune``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from mlsdk import CacheOptions, storage
from mlsdk.cache import PruneResult, prune


def add(inputs):
    return {"out": inputs["x"] + inputs["y"]}


def sub(inputs):
    return {"out": inputs["x"] - inputs["y"]}


def mul(inputs):
    return {"out": inputs["x"] * inputs["y"]}


def _sample():
    return {"x": torch.randn(8, 16), "y": torch.randn(8, 16)}


def _compile(context, tmp_path, fn, **options):
    compiled = context.compile(fn, _sample(), storage.path(tmp_path) / fn.__name__,
                               cache_options=CacheOptions(tmp_path / "cache", **options))
    return compiled


def _entry(tmp_path, compiled) -> Path:
    (entry,) = [p for p in (tmp_path / "cache").iterdir()
                if (p / "program.json").exists() and
                (p / "entry.json").read_text().count(f'"name": "{compiled.name}"')]
    return entry


def _size(entry: Path) -> int:
    return sum(f.stat().st_size for f in entry.rglob("*") if f.is_file())


def _used_at(entry: Path, when: float) -> None:
    os.utime(entry / "entry.json", (when, when))


def _keys(tmp_path) -> set[str]:
    return {p.name for p in (tmp_path / "cache").iterdir() if not p.name.startswith(".")}


def test_a_store_beyond_the_bound_removes_the_entries_used_longest_ago(context, tmp_path):
    a = _compile(context, tmp_path, add)
    s = _compile(context, tmp_path, sub)
    entry_a, entry_s = _entry(tmp_path, a), _entry(tmp_path, s)
    _used_at(entry_s, 1_000_000)  # sub used long ago, add recently
    _used_at(entry_a, 2_000_000)
    # Room for two entries of this size, not three (all three programs are alike in size).
    bound = _size(entry_a) + _size(entry_s) + 64
    m = _compile(context, tmp_path, mul, max_bytes=bound)
    assert m.cache_status == "miss"
    assert _keys(tmp_path) == {entry_a.name, _entry(tmp_path, m).name}
    # The evicted function compiles again (a miss), the kept one is a hit.
    assert _compile(context, tmp_path, add, max_bytes=bound).cache_status == "hit"
    assert _compile(context, tmp_path, sub).cache_status == "miss"


def test_a_hit_counts_as_a_use(context, tmp_path):
    a = _compile(context, tmp_path, add)
    entry = _entry(tmp_path, a)
    _used_at(entry, 1_000_000)
    assert _compile(context, tmp_path, add).cache_status == "hit"
    assert (entry / "entry.json").stat().st_mtime > 1_000_000 + 86400


def test_the_entry_just_stored_stays_even_when_larger_than_the_bound(context, tmp_path):
    a = _compile(context, tmp_path, add, max_bytes=0)
    assert _keys(tmp_path) == {_entry(tmp_path, a).name}
    s = _compile(context, tmp_path, sub, max_bytes=0)
    assert _keys(tmp_path) == {_entry(tmp_path, s).name}
    assert s(_sample())["out"].cpu().shape == (8, 16)  # its codegen directory is whole
    assert _compile(context, tmp_path, add, max_bytes=0).cache_status == "miss"


def test_prune_empties_or_shrinks_a_cache_and_says_what_it_did(context, tmp_path):
    a = _compile(context, tmp_path, add)
    s = _compile(context, tmp_path, sub)
    entry_a, entry_s = _entry(tmp_path, a), _entry(tmp_path, s)
    _used_at(entry_a, 1_000_000)
    _used_at(entry_s, 2_000_000)
    (tmp_path / "cache" / ".tmp-writer").mkdir()  # another writer's temporary: not an entry
    (tmp_path / "cache" / "notes.txt").write_text("mine")  # not an entry either
    size_a, size_s = _size(entry_a), _size(entry_s)
    total = size_a + size_s

    kept = prune(storage.path(tmp_path / "cache"), total)
    assert kept == PruneResult((), 0, total)
    one = prune(tmp_path / "cache", total - 1)
    assert one == PruneResult((entry_a.name,), size_a, size_s)
    rest = prune(str(tmp_path / "cache"), 0)
    assert rest.removed == (entry_s.name,) and rest.kept_bytes == 0
    left = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert left == [".tmp-writer", "notes.txt"]
    # The codegen directories keep their files (hard links to the removed entries).
    assert context.load_codegen_dir(storage.path(tmp_path) / "add").name == "add"


@pytest.mark.parametrize("bad, error, message", [
    (-1, ValueError, "must be >= 0 bytes, not -1"),
    (True, TypeError, "must be an int number of bytes, not True"),
    (1.5, TypeError, "must be an int number of bytes, not 1.5"),
    ("1G", TypeError, "must be an int number of bytes, not '1G'"),
])
def test_a_bad_bound_is_a_clear_error(tmp_path, bad, error, message):
    with pytest.raises(error, match=f"CacheOptions max_bytes {message}"):
        CacheOptions(tmp_path, max_bytes=bad)
    with pytest.raises(error, match=f"prune max_bytes {message}"):
        prune(tmp_path, bad)


def test_prune_of_a_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="No compile cache directory at .*nowhere"):
        prune(tmp_path / "nowhere", 0)
