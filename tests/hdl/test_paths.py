"""mncore_hdl.paths: the checkout, the build folder, and that nothing else in the tree works
out where it sits from its own file's location."""

from __future__ import annotations

import re

import pytest
from mncore_hdl import paths
from mncore_hdl.paths import repo_root

ROOT = repo_root()
_OWN_LOCATION = re.compile(r"Path\(__file__\)[.\w()]*?(\.parents\b|\.parent\.parent\b)")


def test_only_the_paths_modules_work_out_the_tree_from_their_own_file():
    found = []
    for folder in ("sdk", "compiler", "hdl", "sim", "bench", "scripts", "examples", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name == "paths.py" and path.parent.name in ("mlsdk", "mncore_hdl"):
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if _OWN_LOCATION.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "use mlsdk.paths / mncore_hdl.paths instead:\n" + "\n".join(found)


def test_the_checkout_is_the_folder_with_pyproject_and_sim(tmp_path):
    assert paths.checkout() == ROOT and (ROOT / "pyproject.toml").is_file()
    site = tmp_path / "site-packages"
    site.mkdir()
    assert paths.checkout(site) is None  # an installed package has no checkout


def test_repo_root_names_what_an_installed_package_lacks(monkeypatch):
    monkeypatch.setattr(paths, "CHECKOUT", None)
    with pytest.raises(RuntimeError, match=r"needs a source checkout .*installed package"):
        repo_root()


def test_the_build_folder_follows_the_setting(monkeypatch, tmp_path):
    monkeypatch.setenv("MNCORE_BUILD_DIR", str(tmp_path / "b"))
    assert paths.build_root() == (tmp_path / "b").resolve()
    monkeypatch.delenv("MNCORE_BUILD_DIR")
    assert paths.build_root() == ROOT / "build"
