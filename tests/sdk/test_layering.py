"""mlsdk's imports run one way: its import-linter contracts hold, fail on an upward import, and
no module imports (or reaches through a module for) another module's private name."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "sdk" / "mlsdk"


def _lint_imports(config: Path, cwd: Path, pythonpath: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("lint-imports")
    if not exe.exists():
        pytest.skip(f"lint-imports is not installed beside {sys.executable}")
    return subprocess.run([str(exe), "--config", str(config), "--no-cache"], cwd=cwd,
                          env={"PYTHONPATH": str(pythonpath), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=300)


def _mlsdk_config(path: Path) -> None:
    """pyproject's mlsdk contracts alone, rooted at mlsdk, as an import-linter TOML file."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    lines = ['[tool.importlinter]', 'root_packages = ["mlsdk"]', '']
    for contract in contracts["contracts"]:
        if not contract["name"].startswith("mlsdk"):
            continue
        lines.append("[[tool.importlinter.contracts]]")
        for key, value in contract.items():
            lines.append(f"{key} = {_toml(value)}")
        lines.append("")
    path.write_text("\n".join(lines))


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return '"' + str(value).replace('"', '\\"') + '"'


@pytest.fixture(scope="module")
def package_copy(tmp_path_factory) -> Path:
    """A copy of mlsdk (its Python files) to break on purpose."""
    root = tmp_path_factory.mktemp("layering")
    shutil.copytree(PACKAGE, root / "mlsdk", ignore=shutil.ignore_patterns("__pycache__"))
    _mlsdk_config(root / "contracts.toml")
    return root


def test_the_mlsdk_contracts_hold(package_copy):
    result = _lint_imports(package_copy / "contracts.toml", package_copy, package_copy)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout and "KEPT" in result.stdout


@pytest.mark.parametrize(("module", "upward"), [
    ("device/base.py", "from ..compiled import CompiledFunction"),
    ("session.py", "from .proxy import TensorProxy"),
])
def test_an_upward_import_breaks_them(package_copy, module, upward):
    target = package_copy / "mlsdk" / module
    original = target.read_text()
    try:
        # Even under TYPE_CHECKING: the contracts count type-only imports too.
        target.write_text(original + f"\n\nif False:\n    {upward}  # noqa\n")
        result = _lint_imports(package_copy / "contracts.toml", package_copy, package_copy)
    finally:
        target.write_text(original)
    assert result.returncode != 0, result.stdout
    assert "BROKEN" in result.stdout


def _private_uses(path: Path) -> list[str]:
    """Private names ``path`` imports from another mlsdk module, or reads off one."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    modules: set[str] = set()  # names bound to mlsdk modules
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith(
                "mlsdk")):
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and not _is_module(path, node, alias.name):
                    found.append(f"{path.name}:{node.lineno} imports {alias.name}")
                elif _is_module(path, node, alias.name):
                    modules.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in modules and node.attr.startswith("_")
                and not node.attr.startswith("__")):
            found.append(f"{path.name}:{node.lineno} reads {node.value.id}.{node.attr}")
    return found


def _is_module(path: Path, node: ast.ImportFrom, name: str) -> bool:
    """Whether ``from <node.module> import name`` binds a module (a private *module* such
    as ``_lazy`` is fine to import)."""
    if node.level:
        base = path.parent
        for _ in range(node.level - 1):
            base = base.parent
    else:
        base = PACKAGE.parent
    for part in (node.module or "").split(".") if node.module else []:
        base = base / part
    return (base / f"{name}.py").exists() or (base / name / "__init__.py").exists()


#: Known uses left for their owners: ``icarus.py`` is being changed by issue 22 (its build memo
#: ``_built`` gets a public name there, or this test a public hook).
KNOWN = {"test_cosim_build_memo.py"}


def test_no_module_imports_a_private_name_of_another():
    files = sorted(PACKAGE.rglob("*.py")) + sorted((ROOT / "tests" / "sdk").rglob("*.py"))
    found = [use for path in files if path.name not in KNOWN for use in _private_uses(path)]
    assert found == []


def test_the_private_name_check_sees_one(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from mlsdk.device.functional import FunctionalDevice, _secret\n"
                   "from mlsdk import trace\n"
                   "trace._hidden\n")
    assert _private_uses(bad) == ["bad.py:1 imports _secret", "bad.py:3 reads trace._hidden"]
