"""mncore_hdl.tooling.files: the one atomic write, build lock and temporary-name scheme."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest
from mncore_hdl.paths import repo_root
from mncore_hdl.tooling.files import (
    STALE_SECONDS,
    atomic_output,
    atomic_write,
    build_lock,
    canonical_json,
    is_stale_temporary,
    temporary_path,
)

ROOT = repo_root()


def test_atomic_write_replaces_whole_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "program.json"
    target.write_text("old")
    atomic_write(target, "new")
    assert target.read_text() == "new"
    assert oct(target.stat().st_mode & 0o777) == oct(0o644)
    assert [p.name for p in tmp_path.iterdir()] == ["program.json"]


def test_a_failed_writer_keeps_the_old_file_and_removes_its_temporary(tmp_path):
    target = tmp_path / "data.bin"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="disk full"), atomic_output(target) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("disk full")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["data.bin"]


def test_mode_none_keeps_the_writers_permissions(tmp_path):
    target = tmp_path / "words.hex"
    with atomic_output(target, mode=None) as tmp:
        tmp.write_text("x")
        os.chmod(tmp, 0o600)
    assert oct(target.stat().st_mode & 0o777) == oct(0o600)


def test_temporaries_name_their_writer_and_go_stale_when_it_dies(tmp_path):
    mine = temporary_path(tmp_path / "program.json")
    assert mine.parent == tmp_path and mine.name.startswith(".program.json.")
    mine.write_text("")
    assert not is_stale_temporary(mine)  # this process is alive and the file is new
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    orphan = tmp_path / f".program.json.{int(dead.stdout)}.abcd1234.tmp"
    orphan.write_text("")
    assert is_stale_temporary(orphan)
    os.utime(mine, (time.time() - STALE_SECONDS - 5,) * 2)
    assert is_stale_temporary(mine)  # alive, but older than any writer takes
    assert not is_stale_temporary(tmp_path / "program.json")  # not a temporary's name


def test_build_lock_lets_one_process_in_at_a_time(tmp_path):
    lock = tmp_path / ".lock"
    child = (
        "import sys, time\n"
        "from mncore_hdl.tooling.files import build_lock\n"
        "calls = []\n"
        "with build_lock(sys.argv[1], waiting=lambda: calls.append(time.time())):\n"
        "    print(len(calls), flush=True)\n"
    )
    with build_lock(lock):
        proc = subprocess.Popen([sys.executable, "-c", child, str(lock)],
                                stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": str(ROOT / "hdl")})
        time.sleep(1.0)
        assert proc.poll() is None, "the second builder went in while the lock was held"
    out, _ = proc.communicate(timeout=60)
    assert out.strip() == "1"  # it was told it waited, once


def test_canonical_json_is_key_order_free():
    assert canonical_json({"b": 1, "a": [1, 2]}) == b'{"a":[1,2],"b":1}'
    assert canonical_json({"a": 1, "b": 2}) == canonical_json({"b": 2, "a": 1})


def test_no_other_atomic_write_or_build_lock_in_the_tree():
    """The tree's writers and locks all go through tooling/files (issue 37, item 5)."""
    pattern = re.compile(r"\bos\.replace\(|\bfcntl\.flock\(|\btempfile\.mkstemp\(")
    found = []
    for folder in ("sdk", "compiler", "hdl", "bench", "sim", "scripts", "examples"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name == "files.py" and path.parent.name == "tooling":
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if pattern.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "use mncore_hdl.tooling.files instead:\n" + "\n".join(found)
