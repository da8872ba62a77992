"""The C++ compiler of the Verilator models: g++, or clang++ when this machine has it.

Verilator's C++ compiles under either. The profile-guided model of the co-simulation top ran
15-19% more cycles per process second under clang++ 16 with its own profile
(``-fprofile-instr-generate``, ``llvm-profdata merge``, ``-fprofile-instr-use``) than under
g++ 12 with its profile (docs/cosim.md, "The C++ compiler"), and clang compiles it several
times faster. So a build takes clang++ when it finds one with its ``llvm-profdata`` (both on
``PATH``, as ``clang++`` or a Debian-style ``clang++-N``, the newest ``N``), and g++ otherwise;
``$MNCORE_VERILATOR_CXX`` (``gcc`` or ``clang``) forces one. The compiler and its version are
part of every build's cache key.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..settings import HDL

__all__ = ["Cxx", "GCC_PGO_GENERATE", "GCC_PGO_USE", "CLANG_PGO_GENERATE",
           "CLANG_PGO_USE", "find_clang", "model_compiler"]

#: g++ options of a profile-guided build (see ``build_model(profile_run=...)``): the
#: instrumented model, then the model compiled with the profile its workload's run wrote. On
#: this machine it ran the 1 MiB conversion 6-20% faster and host transfers 10-20% faster
#: (docs/cosim.md). The profile's code-growing passes (tail duplication, loop unrolling and
#: peeling) are off: the model runs all of its ~320 KB of evaluation code at every cycle, so
#: code size is time; without them it ran 1-2% faster (docs/cosim.md, "Counted, not timed").
GCC_PGO_GENERATE = "-fprofile-generate -fprofile-update=single"
GCC_PGO_USE = ("-fprofile-use -fprofile-partial-training -fprofile-correction "
               "-Wno-missing-profile -fno-tracer -fno-unroll-loops -fno-peel-loops")
#: clang++ options of a profile-guided build: ``{folder}`` is where the instrumented model
#: writes its raw profiles (one per process), ``{profile}`` the merged profile.
CLANG_PGO_GENERATE = "-fprofile-instr-generate={folder}/%p.profraw"
CLANG_PGO_USE = "-fprofile-instr-use={profile}"
#: The merged profile of a clang build, in its build folder.
CLANG_PROFILE = "model.profdata"


@dataclass(frozen=True)
class Cxx:
    """One C++ compiler as the model's ``make`` uses it.

    ``kind`` is ``gcc`` or ``clang``; ``cxx`` the compiler's command; ``profdata`` clang's
    ``llvm-profdata`` (None for g++); ``version`` the first line of ``cxx --version`` (part of
    the cache key).
    """

    kind: str
    cxx: str
    version: str
    profdata: str | None = None

    def make_vars(self) -> list[str]:
        """``make`` variables that compile and link the model with this compiler (none for
        g++, Verilator's configured compiler)."""
        if self.kind == "gcc":
            return []
        # clang's precompiled headers are read with -include-pch; Verilator's runtime uses
        # __atomic_is_lock_free, which clang leaves to libatomic
        return [f"CXX={self.cxx}", f"LINK={self.cxx}", "CFG_CXXFLAGS_PCH_I=-include-pch",
                "CFG_GCH_IF_CLANG=.gch", "USER_LDLIBS=-latomic"]

    def pgo_generate(self, folder: Path) -> str:
        """Options of the instrumented model built in ``folder``."""
        if self.kind == "gcc":
            return GCC_PGO_GENERATE
        return CLANG_PGO_GENERATE.format(folder=folder)

    def pgo_use(self, build_dir: Path) -> str:
        """Options of the model compiled in ``build_dir`` with its profile."""
        if self.kind == "gcc":
            return GCC_PGO_USE
        return CLANG_PGO_USE.format(profile=build_dir / CLANG_PROFILE)

    def key(self) -> str:
        """What the build's cache key takes from the compiler: its version and PGO options."""
        return f"{self.version}\0{GCC_PGO_USE if self.kind == 'gcc' else CLANG_PGO_USE}"

    def keep_profile(self, scratch: Path, build_dir: Path) -> None:
        """Move the profile the instrumented model in ``scratch`` wrote to ``build_dir``:
        g++'s ``*.gcda`` files copied, clang's raw profiles merged into one. Raises
        RuntimeError when the run wrote none."""
        pattern = "*.gcda" if self.kind == "gcc" else "*.profraw"
        profiles = sorted(scratch.glob(pattern))
        if not profiles:
            raise RuntimeError(f"the profile run of the instrumented model in {scratch} wrote "
                               f"no profile ({pattern}); did its process exit normally?")
        if self.kind == "gcc":
            for profile in profiles:
                shutil.copy(profile, build_dir / profile.name)
            return
        assert self.profdata is not None
        subprocess.run([self.profdata, "merge", "-o", str(build_dir / CLANG_PROFILE),
                        *map(str, profiles)], check=True, capture_output=True)


@functools.cache
def _version(cxx: str) -> str:
    """First line of ``cxx --version`` (once per command path and process)."""
    run = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=True)
    return run.stdout.splitlines()[0].strip()


def find_clang(path: str | None = None) -> tuple[str, str] | None:
    """(clang++, llvm-profdata) commands on ``path`` (default ``$PATH``): ``clang++`` with
    ``llvm-profdata``, else the newest ``clang++-N`` with ``llvm-profdata-N``; None if none."""
    path = os.environ.get("PATH", "") if path is None else path
    plain = shutil.which("clang++", path=path), shutil.which("llvm-profdata", path=path)
    if plain[0] and plain[1]:
        return plain[0], plain[1]
    versions = set()
    for folder in path.split(os.pathsep):
        if folder and Path(folder).is_dir():
            versions |= {int(m[1]) for f in Path(folder).glob("clang++-*")
                         if (m := re.fullmatch(r"clang\+\+-(\d+)", f.name))}
    for version in sorted(versions, reverse=True):
        cxx = shutil.which(f"clang++-{version}", path=path)
        profdata = shutil.which(f"llvm-profdata-{version}", path=path)
        if cxx and profdata:
            return cxx, profdata
    return None


def model_compiler() -> Cxx:
    """The compiler of the next model build: ``$MNCORE_VERILATOR_CXX`` when set, else clang++
    when :func:`find_clang` finds it, else g++. Raises RuntimeError when clang is asked for and
    not found."""
    asked = HDL["MNCORE_VERILATOR_CXX"].get()
    clang = find_clang() if asked != "gcc" else None
    if asked == "clang" and clang is None:
        raise RuntimeError("$MNCORE_VERILATOR_CXX=clang, but no clang++ with its "
                           "llvm-profdata is on PATH (Debian: sudo apt-get install -y "
                           "clang); unset it to build with g++")
    if clang is None:
        return Cxx("gcc", "g++", _version(shutil.which("g++") or "g++"))
    return Cxx("clang", clang[0], _version(clang[0]), clang[1])
