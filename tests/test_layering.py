"""Imports run one way: the import-linter contracts hold, can fail, and no private name crosses
a module boundary (docs/where_to_add.md)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mncore_hdl.paths import repo_root

ROOT = repo_root()
SOURCE_ROOTS = {"mlsdk": ROOT / "sdk", "mncore_compiler": ROOT / "compiler",
                "mncore_hdl": ROOT / "hdl"}
# Every tree whose Python files must keep to public names: the packages and what uses them.
CHECKED_TREES = ("sdk", "compiler", "hdl", "sim", "tests", "bench", "examples")
# Other projects' private modules the packages use, each for want of a public API.
THIRD_PARTY_PRIVATE = {
    "torch.utils._pytree": "torch's pytree registry, the one torch.export itself uses",
    "amaranth.hdl._mem": "MemoryInstance: Amaranth 0.5 has no public way to reach the "
                         "memories of a simulated design (the RTL back door, the VCD writer)",
    "amaranth.hdl._ast": "SignalDict, to hand the VCD writer a design without its memories",
    "torch._export.utils": "_compiling_state_context, the state non-strict torch.export traces "
                           "in (is_compiling/is_exporting set), which transformers reads; "
                           "torch has no public way to enter it",
}


def _lint_imports() -> str:
    tool = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if tool is None:
        pytest.skip("lint-imports is not installed (the project's test extra installs it)")
    return tool


def _run_lint(cwd: Path, pythonpath: list[Path]) -> subprocess.CompletedProcess[str]:
    env = {"PATH": str(Path(sys.executable).parent), "PYTHONPATH": ":".join(map(str, pythonpath)),
           "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([_lint_imports(), "--no-cache"], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=300)


def test_import_contracts_hold():
    result = _run_lint(ROOT, list(SOURCE_ROOTS.values()))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


# One upward import per contract kind: across packages, inside each package, and the device
# layer reaching the SDK's front end.
UPWARD = {
    "hdl/mncore_hdl/arch.py": "import mncore_compiler.errors",
    "compiler/mncore_compiler/errors.py": "import mncore_compiler.driver",
    "sdk/mlsdk/device/commands.py": "import mlsdk.context",
}


@pytest.mark.parametrize("path, line", sorted(UPWARD.items()))
def test_an_upward_import_breaks_a_contract(tmp_path, path, line):
    for name, root in SOURCE_ROOTS.items():
        shutil.copytree(root / name, tmp_path / root.name / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    clean = _run_lint(tmp_path, [tmp_path / root.name for root in SOURCE_ROOTS.values()])
    assert clean.returncode == 0, clean.stdout + clean.stderr
    target = tmp_path / path
    target.write_text(target.read_text() + f"\n{line}  # an upward import\n")
    broken = _run_lint(tmp_path, [tmp_path / root.name for root in SOURCE_ROOTS.values()])
    assert broken.returncode != 0, broken.stdout
    assert "BROKEN" in broken.stdout


# --- private names -------------------------------------------------------------------------


def _module_name(path: Path) -> str | None:
    """The dotted name of a file inside one of the three packages, else None."""
    for name, root in SOURCE_ROOTS.items():
        base = root / name
        if path.is_relative_to(base):
            parts = [name, *path.relative_to(base).with_suffix("").parts]
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    return None


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _resolve(node: ast.ImportFrom, importer: str | None, package: bool) -> str:
    if not node.level:
        return node.module or ""
    if importer is None:
        return node.module or ""  # a relative import outside the packages: never ours
    base = importer.split(".")
    base = base if package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _ours(module: str) -> bool:
    return module.split(".")[0] in SOURCE_ROOTS


def _module_exists(module: str) -> bool:
    top, *rest = module.split(".")
    base = SOURCE_ROOTS[top] / top / Path(*rest) if rest else SOURCE_ROOTS[top] / top
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def _crossing(importer: str | None, target: str) -> bool:
    """A private part of ``target`` reached from outside the package that holds it."""
    parts = target.split(".")
    for depth, part in enumerate(parts):
        if _private(part):
            owner = ".".join(parts[:depth])
            return importer is None or not (importer == owner or
                                            importer.startswith(owner + "."))
    return False


def _third_party_private(importer: str | None, module: str) -> bool:
    """A package module importing another project's private module, not one we accept."""
    return (importer is not None and not _ours(module) and _crossing(None, module)
            and module not in THIRD_PARTY_PRIVATE)


def _violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    importer = _module_name(path)
    found: list[str] = []
    aliases: set[str] = set()  # local names bound to one of our modules
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _third_party_private(importer, alias.name):
                    found.append(f"import {alias.name}")
                if _ours(alias.name):
                    if _crossing(importer, alias.name):
                        found.append(f"import {alias.name}")
                    if alias.asname:
                        aliases.add(alias.asname)
        elif isinstance(node, ast.ImportFrom):
            module = _resolve(node, importer, _is_package(path))
            if _third_party_private(importer, module):
                found.append(f"from {module} import ...")
            if not _ours(module):
                continue
            if _crossing(importer, module):
                found.append(f"from {module} import ...")
                continue
            for alias in node.names:
                full = f"{module}.{alias.name}"
                if _module_exists(full):
                    aliases.add(alias.asname or alias.name)
                    if _crossing(importer, full):
                        found.append(f"from {module} import {alias.name}")
                elif _private(alias.name):
                    found.append(f"from {module} import {alias.name}")
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in aliases and _private(node.attr)):
            found.append(f"{node.value.id}.{node.attr} (line {node.lineno})")
    return found


def _python_files():
    for tree in CHECKED_TREES:
        for path in sorted((ROOT / tree).rglob("*.py")):
            if "__pycache__" not in path.parts:
                yield path


def test_no_module_imports_a_private_name_from_another():
    bad = {str(p.relative_to(ROOT)): v for p in _python_files() if (v := _violations(p))}
    assert not bad, "private names reached across modules:\n" + "\n".join(
        f"  {path}: {', '.join(found)}" for path, found in bad.items())


def test_the_private_name_check_finds_each_form(tmp_path):
    package = tmp_path / "sdk" / "mlsdk"
    sample = package / "device" / "sample.py"
    sample.parent.mkdir(parents=True)
    sample.write_text(
        "from ..naming import _check_tensor\n"
        "from .. import naming\n"
        "import mncore_compiler.program as program\n"
        "naming._module_tensors\n"
        "program._canonical\n"
        "from .._lazy import lazy_exports\n"
        "from torch._decomp import decomposition_table\n"
        "from torch.utils._pytree import tree_map\n")
    try:
        SOURCE_ROOTS["mlsdk"] = tmp_path / "sdk"
        (package / "naming.py").write_text("")
        (package / "_lazy.py").write_text("")
        found = _violations(sample)
    finally:
        SOURCE_ROOTS["mlsdk"] = ROOT / "sdk"
    # ``_lazy`` is a private module of the package that imports it, and torch's pytree is
    # accepted (THIRD_PARTY_PRIVATE): allowed.
    assert found == ["from mlsdk.naming import _check_tensor", "from torch._decomp import ...",
                     "naming._module_tensors (line 4)", "program._canonical (line 5)"]


def test_test_modules_have_unique_names():
    # pytest imports tests/ and sim/ in one run (rootdir-relative, no packages): two test
    # files of one basename stop the whole collection.
    seen: dict[str, Path] = {}
    clashes = []
    for tree in ("tests", "sim"):
        for path in sorted((ROOT / tree).rglob("*.py")):
            if "__pycache__" in path.parts or path.name == "conftest.py":
                continue
            if path.name in seen:
                clashes.append(f"{seen[path.name].relative_to(ROOT)} and {path.relative_to(ROOT)}")
            seen.setdefault(path.name, path)
    assert not clashes, "modules of one name: " + "; ".join(clashes)
