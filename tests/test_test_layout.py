"""The test suite's own rules: ``tests/`` mirrors the packages' modules, and tests observe the
kit through its public names (README, "Tests"; docs/where_to_add.md).

Where a test goes. ``tests/<area>/`` holds the tests of one package (``sdk`` -> ``mlsdk``,
``compiler`` -> ``mncore_compiler``, ``hdl`` -> ``mncore_hdl``); a folder below it mirrors a
subpackage (``tests/sdk/device/`` -> ``mlsdk/device/``). A test file is named after the module
it tests: ``test_<module>.py``, where a module in a subpackage without a folder of its own is
spelt with ``_`` for ``/`` (``hdl/mncore_hdl/memctrl/timers.py`` -> ``tests/hdl/
test_memctrl_timers.py``, ``mlsdk/device/rtl/waves.py`` -> ``tests/sdk/device/
test_rtl_waves.py``), a package by its folder's name, a private module without its underscore;
a topic may follow (``test_memctrl_timers_<topic>.py``) when one module's tests fill more than
one file. Whole models are in ``tests/models/``; the other files that test no single module
(a feature across capture, compiler and device, hostile files of every format, whole programs
at the top of ``tests/``) are named in ``CROSS_CUTTING`` below, each group with its reason.

What a test reads. A test reads no private attribute (``obj._name``) of the kit's objects: what
it observes is what users and the rest of the kit can rely on, so a refactoring of internals
breaks no test that did not mean to pin them. Where a test legitimately needs to see state,
the class grows a small documented public accessor (as ``Registry.store``,
``FunctionalDevice.kept_views``). The scan below flags ``x._name`` unless ``x`` is ``self`` /
``cls`` (a test double's own state) or a name imported from another project (``torch._...``);
``PRIVATE_READS`` lists the few left, each with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

from mncore_hdl.paths import repo_root

ROOT = repo_root()
TESTS = ROOT / "tests"
PACKAGES = {"sdk": ROOT / "sdk" / "mlsdk", "compiler": ROOT / "compiler" / "mncore_compiler",
            "hdl": ROOT / "hdl" / "mncore_hdl"}

# Folders of tests/ that mirror no package, each with what it holds.
CROSS_CUTTING_FOLDERS = {
    "models": "whole models through the SDK against eager (the model zoo), one file a family",
}
CROSS_CUTTING = {
    # The top of tests/: whole programs, benches' smoke runs, the environment, the layering.
    "test_bench_models_short.py", "test_bench_zoo.py", "test_exec_with_env.py",
    "test_layering.py", "test_lint.py", "test_programs.py", "test_soak_short.py",
    "test_test_layout.py", "test_bench_llm.py", "test_examples_llm.py",
    # The compiler as a whole: capture -> passes -> interpreter against torch (properties), and
    # a rule read from every source file.
    "compiler/test_properties.py", "compiler/test_properties_zoo.py",
    "compiler/test_imports.py",
    # One feature through capture, the compiler and the device: ops, dtypes, training.
    "sdk/test_sdk_ops.py", "sdk/test_conv_pool_ops.py", "sdk/test_batchnorm.py",
    "sdk/test_int_dtypes.py", "sdk/test_mixed_precision.py", "sdk/test_loop_carried.py",
    "sdk/test_training.py", "sdk/test_training_idioms.py",
    # Hostile files of every format the kit reads back (docs/security.md).
    "sdk/test_artifact_fuzz.py", "sdk/test_artifact_mutants.py",
    "sdk/test_resource_bombs.py",
}

def _module_names(folder: Path) -> set[str]:
    """What ``test_<name>.py`` may name for the modules under ``folder``."""
    names = set()
    for path in folder.rglob("*.py"):
        parts = list(path.relative_to(folder).with_suffix("").parts)
        if parts[-1] in ("__init__", "__main__"):
            parts.pop()
        if parts:
            names.add("_".join(parts).lstrip("_"))
    return names


def _test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts)


def _names_a_module(path: Path) -> bool:
    area, *folders = path.relative_to(TESTS).parent.parts
    source = PACKAGES[area].joinpath(*folders)
    stem = path.stem.removeprefix("test_")
    return source.is_dir() and any(stem == name or stem.startswith(name + "_")
                                   for name in _module_names(source))


def test_every_test_file_names_a_module_or_is_cross_cutting():
    unplaced = [name for p in _test_files() if (name := str(p.relative_to(TESTS)))
                not in CROSS_CUTTING
                and p.relative_to(TESTS).parts[0] not in CROSS_CUTTING_FOLDERS
                and (p.parent == TESTS or not _names_a_module(p))]
    assert not unplaced, (
        "test files that name no module (tests/<area>/[<subpackage>/]test_<module>[_<topic>].py;"
        " or list a cross-cutting one in CROSS_CUTTING with its reason): " + ", ".join(unplaced))


def test_the_cross_cutting_list_is_current():
    files = {str(p.relative_to(TESTS)): p for p in _test_files()}
    gone = sorted(CROSS_CUTTING - set(files))
    assert not gone, f"CROSS_CUTTING names files that are not there: {gone}"
    placed = sorted(n for n in CROSS_CUTTING if files[n].parent != TESTS
                    and _names_a_module(files[n]))
    assert not placed, f"CROSS_CUTTING names files that name a module: {placed}"


def test_test_folders_mirror_subpackages():
    for folder in sorted(p for p in TESTS.rglob("*") if p.is_dir()):
        parts = folder.relative_to(TESTS).parts
        if "__pycache__" in parts or not list(folder.glob("test_*.py")) \
                or parts[0] in CROSS_CUTTING_FOLDERS:
            continue
        assert parts[0] in PACKAGES, f"tests/{parts[0]}/ mirrors no package"
        assert PACKAGES[parts[0]].joinpath(*parts[1:]).is_dir(), (
            f"tests/{'/'.join(parts)}/ mirrors no subpackage of {PACKAGES[parts[0]].name}")


def test_the_naming_rule_places_each_kind_of_name():
    def ok(name: str) -> bool:
        return _names_a_module(TESTS / name)

    assert ok("hdl/test_memctrl_timers.py") and ok("hdl/test_memctrl_timers_edges.py")
    assert ok("hdl/test_memctrl.py")  # the package
    assert ok("sdk/device/test_rtl_waves.py") and ok("sdk/test_lazy.py")  # mlsdk/_lazy.py
    assert not ok("sdk/test_memctrl_timers.py")  # another package's module
    assert not ok("sdk/test_transfers.py") and not ok("hdl/test_memctl.py")
    assert not ok("sdk/nowhere/test_cache.py")  # a folder that mirrors nothing


# -- private attributes ---------------------------------------------------------------------------

PRIVATE_READS = {
    # test file -> {attribute: why the test may touch it}
    "sdk/test_lazy.py": {
        "_EXPORTS": "the package's table of lazy names, which the test holds equal to __all__"},
    "sdk/device/test_rtl_waves_reader.py": {
        "_generated": "Amaranth's Module (not the kit's) keeps its state machines only there",
        "_mark": "the command-track hook RtlDevice.execute calls, driven alone (no simulator)"},
}


def _root(node: ast.expr) -> ast.expr:
    """The name an attribute chain starts from (``a`` of ``a.b[0].c()._d``, ``getattr(a,
    ...)``)."""
    while True:
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        elif isinstance(node, ast.Call):
            getattr_call = isinstance(node.func, ast.Name) and node.func.id == "getattr"
            node = node.args[0] if getattr_call and node.args else node.func
        else:
            return node


def _foreign(tree: ast.Module) -> set[str]:
    """Names the file binds to other projects (``import torch``, ``aten = torch.ops.aten``)."""
    ours = tuple(f"{p}" for p in ("mlsdk", "mncore_compiler", "mncore_hdl"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names
                         if not a.name.startswith(ours))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and not node.module.startswith(ours):
            names.update(a.asname or a.name for a in node.names)
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(root := _root(node.value), ast.Name) \
                and root.id in names:
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _private_reads(source: str) -> list[tuple[str, int]]:
    """``(attribute, line)`` of each private attribute the code touches on an object that is
    not its own (``self``, ``cls``) and not another project's."""
    tree = ast.parse(source)
    foreign = _foreign(tree) | {"self", "cls"}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                and not node.attr.endswith("__"):
            root = _root(node.value)
            if not (isinstance(root, ast.Name) and root.id in foreign):
                found.append((node.attr, node.lineno))
    return sorted(found, key=lambda f: f[1])


def test_tests_touch_no_private_attribute_of_the_kit():
    bad, used = [], set()
    for path in sorted(TESTS.rglob("*.py")):
        name = str(path.relative_to(TESTS))
        allowed = PRIVATE_READS.get(name, {})
        for attr, line in _private_reads(path.read_text()):
            if attr in allowed:
                used.add((name, attr))
            else:
                bad.append(f"tests/{name}:{line} .{attr}")
    assert not bad, ("tests touching private attributes (use public names, or give the class a "
                     "documented accessor): " + ", ".join(bad))
    stale = sorted({(n, a) for n, attrs in PRIVATE_READS.items() for a in attrs} - used)
    assert not stale, f"PRIVATE_READS entries no test needs any more: {stale}"


def test_the_private_scan_finds_each_form():
    source = (
        "import torch\n"
        "from torch import nn\n"
        "import mlsdk\n"
        "from mlsdk.device import functional\n"
        "aten = torch.ops.aten\n"
        "class Double:\n"
        "    def f(self):\n"
        "        return self._own\n"  # a test double's own state: fine
        "def test(device, ctx):\n"
        "    torch._foreach_add, aten._safe_softmax, nn._x\n"  # another project's: fine
        "    device._views\n"
        "    ctx.registry._entry('w').copies\n"
        "    getattr(device, 'x')._y\n"
        "    mlsdk._EXPORTS, functional._private\n"
        "    device._execute = None\n"
        "    device.__class__\n")
    assert _private_reads(source) == [("_views", 11), ("_entry", 12), ("_y", 13),
                                      ("_EXPORTS", 14), ("_private", 14), ("_execute", 15)]
