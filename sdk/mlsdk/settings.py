"""The SDK's environment variables, declared once each (``mncore_hdl.settings`` explains the
declaration), the test suite's and scripts' own, and ``docs/settings.md`` written from every
table: ``python -m mlsdk.settings > docs/settings.md``."""

from __future__ import annotations

import sys

from mncore_hdl.settings import HDL, Setting, SettingError, Settings

__all__ = ["HDL", "REGENERATE", "SDK", "TABLES", "TOOLS", "Setting", "SettingError",
           "settings_markdown"]

REGENERATE = "./exec_with_env.sh python -m mlsdk.settings > docs/settings.md"

SDK = Settings("mlsdk", [
    Setting("MNCORE_COSIM_TIMEOUT", "float", 120.0, "Seconds an RTL device waits for its "
            "simulator before giving up (each command's allowance grows from this base)."),
    Setting("MNCORE_COSIM_DMA", "bool", True, "Whether the RTL devices move host data through "
            "the testbench's DMA engines and file back door (0: beat by beat through cocotb)."),
    Setting("MNCORE_COSIM_KEEP_RUNS", "bool", False, "Keep every RTL session's run folder "
            "(logs, sockets) under the build folder; unset, only failed runs are kept."),
    Setting("MNCORE_PROGRESS", "bool", None, "Print progress lines (builds, simulated "
            "cycles) on stderr: 1 even when it is not a terminal, 0 never; unset, on a "
            "terminal only."),
    Setting("MNCORE_WAVES", "path", None, "A folder: every RTL-device session writes its "
            "waves there (as `?waves=` does for one device)."),
    Setting("MNCORE_WAVES_FORMAT", "str", None, "The wave file's format (unset: the "
            "simulator's default, FST where it can write it).", choices=("fst", "vcd")),
    Setting("MNCORE_WAVES_CALLS", "str", None, "The calls whose waves are recorded, as "
            "`2-3` or `1,4` (unset: all)."),
    Setting("MNCORE_VERILATOR_ONE_MODEL", "bool", False, "Run `mncore2:verilator` sessions "
            "without waves on the FST model with tracing off, so that one Verilator build "
            "serves every session (the rtl test tier sets it: the untraced, profile-guided "
            "model is not built, and its sessions run about 15-20% slower)."),
    Setting("MNCORE_SHARED_DIR", "path", None, "The folder holding `seeds/` (the reference "
            "programs; unset: `../shared` beside the checkout)."),
    Setting("MNCORE_COSIM_CONFIG", "json", None, "The architecture config of the design a "
            "co-simulation server runs, set by the RTL device for it.", who="internal"),
    Setting("MNCORE_COSIM_LAUNCH", "json", None, "How the Icarus launcher starts the "
            "simulator, set by the RTL device for it.", who="internal"),
    Setting("MNCORE_COSIM_SOCKET", "path", None, "The co-simulation server's socket, set by "
            "the RTL device and removed from the server's environment once read.",
            who="internal"),
    Setting("MNCORE_COSIM_TOKEN", "str", None, "The session secret the server must present, "
            "set by the RTL device and removed from the server's environment once read.",
            who="internal"),
    Setting("MNCORE_COSIM_CLOCK", "str", None, "`simulator` when the simulator's own loop "
            "drives the clock (Verilator); unset, cocotb's GPI clock does.", who="internal",
            choices=("simulator",)),
    Setting("COCOTB_REWRITE_ASSERTION_FILES", "str", "", "cocotb's assertion rewriting, "
            "turned off for the co-simulation server.", who="external"),
    Setting("OPENBLAS_NUM_THREADS", "int", 1, "One BLAS thread in the simulator process (it "
            "runs beside the host's).", who="external"),
    Setting("HF_HUB_OFFLINE", "bool", None, "Hugging Face offline mode; the LLM examples and "
            "benches set it to 1 (tiny random configs, never a download).", who="external"),
])

TOOLS = Settings("tests and scripts", [
    Setting("MNCORE_TEST_SEED", "int", 1234, "The base of every test's seed (`tests/` "
            "fixture `seed`)."),
    Setting("MNCORE_TEST_WORKERS", "int", None, "pytest-xdist workers a tier runs with in "
            "`scripts/test` (unset: one a core; 0 in-process)."),
    Setting("MNCORE_FUZZ_EXAMPLES", "int", 120, "Hypothesis examples per artifact-fuzz test "
            "(5000 for a long run)."),
    Setting("FAKE_COSIM_MODE", "str", None, "The misbehaviour the fake co-simulation server "
            "of `tests/sdk/device` plays, set by its tests.", who="internal"),
    Setting("FAKE_COSIM_REPORT", "path", None, "Where that fake server reports what it saw.",
            who="internal"),
    Setting("MNCORE_VENV", "path", None, "Where `exec_with_env.sh` keeps the environment "
            "(unset: `.venv` in the checkout)."),
])

TABLES = (SDK, HDL, TOOLS)


def settings_markdown() -> str:
    """``docs/settings.md``: every table, a row a variable."""
    out = ["# Settings", "",
           "Every environment variable the kit reads, generated from the tables in "
           "`sdk/mlsdk/settings.py` and `hdl/mncore_hdl/settings.py`",
           f"(`{REGENERATE}`; `tests/sdk/test_settings.py` fails when this page is stale or "
           "the code reads a variable no table declares).", "",
           "*user*: a knob for people running the kit; *internal*: set by the kit for a child "
           "process it starts; *external*: another tool's variable the kit reads or sets.", ""]
    for table in TABLES:
        out += [f"## {table.package}", "", "| variable | who | type | default | meaning |",
                "|---|---|---|---|---|"]
        for setting in table.values():
            kind = setting.kind + (f" ({' / '.join(setting.choices)})" if setting.choices
                                   else "")
            out.append(f"| `{setting.name}` | {setting.who} | {kind} | "
                       f"{setting.describe_default()} | {setting.meaning} |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(settings_markdown())
