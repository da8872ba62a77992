"""A simulator session's private run folder: ``build/cosim/runs/<kind>-<pid>-<random>/``.

It holds the simulator's log, its cocotb results, the back door's scratch file (tensor data) and,
for a moment, the session's socket. It is created fresh by ``mkdtemp`` (mode 0700: no other user
can enter it) and removed when its session ends well; a failed session's folder is kept, and
named in the error, for debugging. ``$MNCORE_COSIM_KEEP_RUNS=1`` keeps every folder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from ... import paths
from ...settings import SDK

__all__ = ["RunFolder", "COSIM_ROOT", "KEEP_RUNS_ENV"]

#: Parent of everything the cocotb sessions build and run (``build/cosim``).
COSIM_ROOT = paths.BUILD_ROOT / "cosim"
#: Set to 1 to keep every session's run folder (``build/cosim/runs/<sim>-<pid>-<id>/``: the
#: simulator's log, results and back-door DRAM image); a failed session's is always kept.
KEEP_RUNS_ENV = SDK["MNCORE_COSIM_KEEP_RUNS"].name


class RunFolder:
    """A session's private working folder (mode 0700), removed when the session ends well.

    Parameters
    ----------
    kind : str
        The simulator's short name, the folder name's prefix.
    """

    def __init__(self, kind: str):
        runs = COSIM_ROOT / "runs"
        runs.mkdir(parents=True, exist_ok=True)
        # mkdtemp: a fresh name, created 0700, never a folder someone made beforehand
        self.path = Path(tempfile.mkdtemp(prefix=f"{kind}-{os.getpid()}-", dir=runs))
        #: Set when the session fails: the folder is then kept.
        self.failed = False

    def finish(self) -> None:
        """Remove the folder, unless the session failed or the user asked to keep it."""
        if not self.failed and not SDK["MNCORE_COSIM_KEEP_RUNS"].get():
            shutil.rmtree(self.path, ignore_errors=True)
