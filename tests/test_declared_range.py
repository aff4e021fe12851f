"""The pyspark range pyproject.toml declares is the range CI tests: ``.ci/run`` runs the smoke set (tests marked
``lowest_pyspark``) again on the declared lower bound, and that set holds the docs' examples and a sessionize
run on every backend the project ships."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CI = ROOT / ".ci" / "run"
MARKER = "lowest_pyspark"
README_EXAMPLES = "tests/test_readme.py::test_examples_run[README.md]"
SESSIONIZE = re.compile(r"^tests/spark/test_spark_sessionize\.py::test_sessions_equal_spark_session_window\[(\w+)-")


def declared_pyspark() -> str:
    """pyproject.toml's pyspark dependency, as written there."""
    (line,) = [d for d in PYPROJECT["project"]["dependencies"] if Requirement(d).name == "pyspark"]
    return line


def ci_commands() -> list[str]:
    """``.ci/run``'s commands, a backslash-continued line joined into one."""
    return [c.strip() for c in CI.read_text().replace("\\\n", " ").splitlines() if c.strip() and not c.startswith("#")]


def test_ci_runs_the_smoke_set_on_the_declared_lower_bound():
    (lower,) = [Version(s.version) for s in Requirement(declared_pyspark()).specifier if s.operator == ">="]
    pinned = [(c, m.group(1)) for c in ci_commands() for m in re.finditer(r"pyspark==([\w.]+)", c)]
    assert len(pinned) == 1, f".ci/run should pin pyspark once, for the smoke set; pins: {pinned}"
    command, version = pinned[0]
    assert Version(version) == lower, \
        f".ci/run tests pyspark {version}, pyproject.toml declares {declared_pyspark()}: " \
        f"pin .ci/run to the declared lower bound, or move the bound to the version tested"
    venv = re.search(r"python3 -m venv (\S+)", command)
    assert venv and f"{venv.group(1)}/bin/python -m pytest -m {MARKER}" in command, \
        f".ci/run installs pyspark {version} but does not run the {MARKER} tests with it: {command!r}"


def test_the_smoke_set_holds_the_readme_and_a_sessionize_run_per_backend():
    listed = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                             "-m", MARKER, "tests/test_readme.py", "tests/spark/test_spark_sessionize.py"],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert listed.returncode == 0, listed.stdout[-3000:] + listed.stderr[-3000:]
    ids = listed.stdout.splitlines()
    assert README_EXAMPLES in ids, f"the README's examples are not marked {MARKER}"
    shipped = set(PYPROJECT["project"]["entry-points"]["statekit.backends"])
    assert {m.group(1) for i in ids if (m := SESSIONIZE.match(i))} == shipped, \
        f"the {MARKER} tests should sessionize on each backend of {sorted(shipped)}: {ids}"


def test_docs_name_the_declared_range():
    assert f"`{declared_pyspark()}`" in (ROOT / "docs" / "spark.md").read_text(), \
        "docs/spark.md's supported versions should quote pyproject.toml's pyspark range"
