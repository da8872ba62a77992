"""The compile cache trusts nothing it reads: foreign or open directories, symlinks, swapped
programs, nested or mutated JSON (issue 22, items 2, 3, 8 and 9)."""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path

import pytest
import torch
from mlsdk import CacheError, CacheOptions, CacheWarning, storage
from mncore_compiler.program import DeviceProgram, body_checksum


def add(inputs):
    return {"out": inputs["x"] + inputs["y"]}


def sub(inputs):
    return {"out": inputs["x"] - inputs["y"]}


WEIGHT = torch.linspace(-1.0, 1.0, 16)


def scaled(inputs):
    return {"out": inputs["x"] * WEIGHT}


def _sample():
    return {"x": torch.randn(8, 16), "y": torch.randn(8, 16)}


def _compile(context, tmp_path, fn=add, sample=None, out="out"):
    return context.compile(fn, sample or _sample(), storage.path(tmp_path) / out,
                           cache_options=CacheOptions(tmp_path / "cache"))


def _only_entry(tmp_path: Path) -> Path:
    (entry,) = [p for p in (tmp_path / "cache").iterdir() if not p.name.startswith(".")]
    return entry


def _rewrite_program(entry: Path, edit) -> None:
    """Edit an entry's program.json and recompute its checksum, as a forger would."""

    path = entry / "program.json"
    body = json.loads(path.read_text())
    body.pop("sha256")
    edit(body)
    body["sha256"] = body_checksum(body)
    path.unlink()  # a fresh inode: the codegen directory's hard link keeps the old bytes
    path.write_text(json.dumps(body))


# -- the directory ------------------------------------------------------------------------------


def test_a_group_writable_cache_directory_is_refused(context, tmp_path):
    (tmp_path / "cache").mkdir()
    os.chmod(tmp_path / "cache", 0o775)
    with pytest.raises(CacheError, match="writable by group or others.*chmod go-w"):
        _compile(context, tmp_path)
    assert not (tmp_path / "out").exists()  # refused before anything was compiled


def test_a_cache_directory_of_another_user_is_refused(context, tmp_path):
    (tmp_path / "cache").mkdir()
    try:
        os.chown(tmp_path / "cache", 12345, -1)
    except PermissionError:
        pytest.skip("needs root to give the directory to another uid")
    with pytest.raises(CacheError, match="belongs to uid 12345, not to you"):
        _compile(context, tmp_path)


def test_a_new_cache_directory_is_private_whatever_the_umask(context, tmp_path):
    old = os.umask(0o002)
    try:
        _compile(context, tmp_path)
        assert _compile(context, tmp_path).cache_status == "hit"
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "cache").st_mode & 0o022 == 0
    assert os.stat(_only_entry(tmp_path)).st_mode & 0o022 == 0


# -- symlinks and extra files -------------------------------------------------------------------


def test_a_symlink_in_an_entry_is_never_followed(context, tmp_path):
    secret = tmp_path / "secret"
    secret.write_bytes(b"private")
    os.chmod(secret, 0o600)
    _compile(context, tmp_path, fn=scaled)
    entry = _only_entry(tmp_path)
    (constant,) = (entry / "constants").iterdir()
    constant.unlink()
    constant.symlink_to(secret)
    (entry / "planted").symlink_to(secret)
    shutil.rmtree(tmp_path / "out")
    with pytest.warns(CacheWarning, match="not a plain file"):
        rebuilt = _compile(context, tmp_path, fn=scaled)
    assert rebuilt.cache_status == "miss"
    out = tmp_path / "out"
    assert not [p for p in out.rglob("*") if p.is_symlink() or p.name == "planted"]
    assert all(p.read_bytes() != b"private" for p in out.rglob("*") if p.is_file())


def test_a_symlinked_entry_is_rebuilt(context, tmp_path):
    _compile(context, tmp_path)
    entry = _only_entry(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    entry.rename(elsewhere)
    entry.symlink_to(elsewhere)
    with pytest.warns(CacheWarning, match="not a directory"):
        assert _compile(context, tmp_path).cache_status == "miss"
    assert entry.is_dir() and not entry.is_symlink()
    assert _compile(context, tmp_path).cache_status == "hit"


def test_only_the_files_program_json_names_are_materialised(context, tmp_path):
    _compile(context, tmp_path, fn=scaled)
    entry = _only_entry(tmp_path)
    (entry / "extra.sh").write_text("echo planted\n")
    (entry / "constants" / "more.npy").write_bytes(b"x")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _compile(context, tmp_path, fn=scaled, out="again").cache_status == "hit"
    names = sorted(str(p.relative_to(tmp_path / "again")) for p in
                   (tmp_path / "again").rglob("*") if p.is_file())
    assert "extra.sh" not in names and "constants/more.npy" not in names
    assert len(names) == 3  # program.json, program.txt, the one constant


# -- binding to the key -------------------------------------------------------------------------


def test_a_swapped_program_is_a_miss_not_a_hit(context, tmp_path):
    sample = _sample()
    _compile(context, tmp_path, fn=sub, sample=sample, out="other")
    other = json.loads((_only_entry(tmp_path) / "program.json").read_text())
    shutil.rmtree(tmp_path / "cache")
    _compile(context, tmp_path, sample=sample)
    entry = _only_entry(tmp_path)
    # The forger keeps the name, so name and chip checks pass; only the binding catches it.
    _rewrite_program(entry, lambda body: body.update(graph=other["graph"]))
    with pytest.warns(CacheWarning, match="not the one stored"):
        rebuilt = _compile(context, tmp_path, sample=sample)
    assert rebuilt.cache_status == "miss"
    assert torch.allclose(rebuilt(sample)["out"].cpu(), sample["x"] + sample["y"])


def test_an_entry_for_another_captured_graph_is_a_miss(context, tmp_path):
    _compile(context, tmp_path)
    entry = _only_entry(tmp_path)
    meta = json.loads((entry / "entry.json").read_text())
    meta["graph"] = "0" * 64
    (entry / "entry.json").write_text(json.dumps(meta))
    with pytest.warns(CacheWarning, match="another captured graph"):
        assert _compile(context, tmp_path).cache_status == "miss"


@pytest.mark.parametrize("victim", ["entry.json", "program.json"])
def test_deeply_nested_json_in_an_entry_is_warned_about_and_rebuilt(context, tmp_path, victim):
    _compile(context, tmp_path)
    entry = _only_entry(tmp_path)
    (entry / victim).unlink()
    (entry / victim).write_text("[" * 100_000 + "]" * 100_000)
    with pytest.warns(CacheWarning, match="Ignoring compile cache entry"):
        assert _compile(context, tmp_path).cache_status == "miss"
    assert _compile(context, tmp_path).cache_status == "hit"


def test_an_entry_with_a_renamed_input_is_rebuilt(context, tmp_path):
    sample = _sample()
    _compile(context, tmp_path, sample=sample)
    entry = _only_entry(tmp_path)

    def rename(body):
        body["inputs"][0]["name"] = "renamed"
    _rewrite_program(entry, rename)
    meta = json.loads((entry / "entry.json").read_text())  # a forger rebinding the entry too
    meta["program"] = __import__("hashlib").sha256(
        (entry / "program.json").read_bytes()).hexdigest()
    (entry / "entry.json").write_text(json.dumps(meta))
    with pytest.warns(CacheWarning, match="Ignoring compile cache entry"):
        rebuilt = _compile(context, tmp_path, sample=sample)
    assert torch.allclose(rebuilt(sample)["out"].cpu(), sample["x"] + sample["y"])
    assert _compile(context, tmp_path, sample=sample).cache_status == "hit"


def test_a_stored_entry_loads_as_a_program(context, tmp_path):
    _compile(context, tmp_path)
    assert DeviceProgram.load(_only_entry(tmp_path)).name == "add"
