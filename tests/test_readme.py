"""The README's examples run as written, each in a fresh interpreter (their asserts check the results)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SECTIONS = ["Using the state layer", "Window operators", "Running on Spark"]


def example(section: str) -> str:
    """The first python block under the README heading ``section``."""
    text = README.read_text()
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", body, re.S).group(1)


@pytest.mark.parametrize("section", SECTIONS)
def test_readme_example_runs(section, tmp_path):
    r = subprocess.run([sys.executable, "-c", example(section)], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
