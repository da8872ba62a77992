"""examples/pipeline_handoffs.py runs, and docs/pipelines.md shows the figures it prints."""

from __future__ import annotations

import subprocess
import sys

from mncore_hdl.paths import repo_root

ROOT = repo_root()


def test_the_docs_show_what_the_example_prints():
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "pipeline_handoffs.py")],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    doc = (ROOT / "docs" / "pipelines.md").read_text()
    printed = [line for line in done.stdout.splitlines() if not line.startswith("== ")]
    assert len(printed) >= 10, done.stdout
    missing = [line for line in printed if line not in doc]
    assert not missing, f"docs/pipelines.md lacks these printed lines: {missing}"
