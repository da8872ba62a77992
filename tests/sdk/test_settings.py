"""Environment variables: declared once each (mncore_hdl.settings, mlsdk.settings), read
through their declaration, every one the code reads listed in docs/settings.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mlsdk.settings import REGENERATE, TABLES, Setting, SettingError, settings_markdown
from mncore_hdl.paths import repo_root

ROOT = repo_root()
DOC = ROOT / "docs" / "settings.md"
# An environment variable's name in a line that reads, sets or names one.
_NAME = re.compile(r"""["']([A-Z][A-Z0-9]*_[A-Z0-9_]+|SIM|CPATH|PYTHONPATH)["']""")
_ENV_LINE = re.compile(r"environ|getenv|setenv|delenv|_ENV\s*=")


def declared() -> set[str]:
    return {name for table in TABLES for name in table}


def read_in_code() -> dict[str, str]:
    """Every variable name on a line of the tree's Python that touches the environment."""
    found: dict[str, str] = {}
    for folder in ("sdk", "compiler", "hdl", "sim", "bench", "scripts", "examples", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if _ENV_LINE.search(line):
                    for name in _NAME.findall(line):
                        found.setdefault(name, f"{path.relative_to(ROOT)}:{number}")
    for script in (ROOT / "scripts" / "test", ROOT / "exec_with_env.sh"):
        for name in re.findall(r"\$\{?(MNCORE_[A-Z0-9_]+)", script.read_text()):
            found.setdefault(name, str(script.relative_to(ROOT)))
    return found


def test_docs_page_is_generated_from_the_tables():
    assert DOC.read_text() == settings_markdown(), (
        f"docs/settings.md is stale: regenerate it with {REGENERATE}")


def test_every_variable_the_code_reads_is_declared():
    found = read_in_code()
    missing = {name: where for name, where in found.items() if name not in declared()}
    assert not missing, ("declare these in mlsdk/settings.py or mncore_hdl/settings.py:\n"
                         + "\n".join(f"{n} ({w})" for n, w in sorted(missing.items())))
    assert {"SIM", "MNCORE_COSIM_DMA", "MNCORE_COVERAGE"} <= set(found)  # the grep sees


def test_each_variable_is_declared_once_across_the_tables():
    names = [name for table in TABLES for name in table]
    assert len(names) == len(set(names))


@pytest.mark.parametrize(("kind", "text", "value"), [
    ("int", "0x10", 16), ("float", "2.5", 2.5), ("bool", "0", False), ("bool", "yes", True),
    ("path", "build/x", Path("build/x")), ("str", "anything", "anything"),
])
def test_values_are_read_as_their_kind(kind, text, value):
    setting = Setting("MNCORE_X", kind, None, "a test knob")
    assert setting.get({"MNCORE_X": text}) == value
    assert setting.get({}) is None and setting.get({"MNCORE_X": ""}) is None


@pytest.mark.parametrize(("kind", "text", "expected"), [
    ("int", "ten", "an integer"), ("float", "fast", "a number"), ("bool", "2", "one of 1"),
])
def test_a_bad_value_names_the_variable_and_what_it_must_be(kind, text, expected):
    setting = Setting("MNCORE_X", kind, None, "a test knob")
    with pytest.raises(SettingError, match=rf"\$MNCORE_X must be {expected}.*'{text}'"):
        setting.get({"MNCORE_X": text})


def test_the_simulator_choice_is_checked(monkeypatch):
    from mncore_hdl.testing.runner import simulator

    monkeypatch.setenv("SIM", "Verilator")
    assert simulator() == "verilator"
    monkeypatch.setenv("SIM", "questa")
    with pytest.raises(ValueError, match=r"\$SIM must be one of icarus, verilator, not 'questa'"):
        simulator()


def test_a_variable_a_launcher_must_set_names_itself_when_missing():
    setting = Setting("MNCORE_X", "path", None, "where the bench writes its results")
    assert setting.required({"MNCORE_X": "out.json"}) == Path("out.json")
    with pytest.raises(SettingError, match=r"\$MNCORE_X must be set \(where the bench writes"):
        setting.required({})
