"""The installed package: one import name, and the layers of the README checked as import contracts."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel pip builds from a copy of this checkout (the same build as `pip install .`; a copy, because
    setuptools reuses a ``build/`` folder left by an earlier build, which may hold packages no longer listed)."""
    out, source = tmp_path_factory.mktemp("wheel"), tmp_path_factory.mktemp("source") / "statekit"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".venv*", "build", ".git", "__pycache__", "*.egg-info",
                                                                ".pytest_cache", ".hypothesis", "tests", "docs"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)],
                   check=True, capture_output=True, text=True)
    (path,) = out.glob("statekit-*.whl")
    return path


@pytest.fixture(scope="module")
def unpacked(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(target)
    return target


def test_statekit_is_the_only_top_level_name(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    top = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert top == {"statekit"}
    for sub in ("operators", "backends/heap", "backends/rocksdb", "bench"):
        assert f"statekit/{sub}/__init__.py" in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    with zipfile.ZipFile(wheel) as z:
        text = z.read(entry_points).decode()
    assert "statekit.backends.heap:HeapKeyedStateBackend" in text
    assert "statekit.backends.rocksdb:RocksDBKeyedStateBackend" in text


def test_every_source_package_and_data_file_is_in_the_wheel(wheel: Path) -> None:
    """A package or a data file added to the tree but not to pyproject's lists would be missing from an install."""
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    where = {"statekit": "statekit", "operators": "statekit/operators", "backends": "statekit/backends",
             "bench": "statekit/bench"}
    missing = []
    for folder, installed in where.items():
        for path in (ROOT / folder).rglob("*"):
            if "__pycache__" in path.parts or not path.is_file() or path.suffix in (".pyc",):
                continue
            if path.suffix == ".py" and not (path.parent / "__init__.py").exists():
                continue
            name = f"{installed}/{path.relative_to(ROOT / folder).as_posix()}"
            if name not in names:
                missing.append(name)
    assert not missing, f"not in the wheel: {missing}"


def test_import_contracts_hold_on_the_installed_layout(unpacked: Path) -> None:
    """pyproject.toml's [tool.importlinter] contracts: layers, independence, no cycles, pyspark only in statekit.spark."""
    lint = Path(sys.executable).with_name("lint-imports")
    r = subprocess.run([str(lint), str(ROOT / "pyproject.toml"), "--no-cache"], cwd=unpacked,
                       env={"PYTHONPATH": str(unpacked), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout


def test_bench_without_its_extra_says_what_to_install() -> None:
    code = ("import sys; sys.modules['psutil'] = None; sys.modules['matplotlib'] = None\n"
            "from statekit.cli import main; main(['bench', 'ops', '--quick'])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode != 0
    assert "pip install 'statekit[bench]'" in r.stderr
