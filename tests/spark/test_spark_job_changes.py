"""A changed job on an existing checkpoint, each run a new application: what state cannot carry is refused
before anything runs (checkpoint and output untouched); what it can carry is carried and reported."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.spark_support import output_rows, staged_input

pytestmark = pytest.mark.spark


def _sessionize(inp: Path, out: Path, *extra: str, final: bool = False) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "statekit.cli", "sessionize", "--input", str(inp), "--output", str(out),
            "--key", "user_id", "--time", "ts_ms", "--gap", "30s", "--watermark-delay", "10s",
            "--master", "local[2]", "--trigger", "available-now", "--conf", "spark.ui.enabled=false", *extra]
    return subprocess.run(argv + (["--final"] if final else []), capture_output=True, text=True, timeout=300)


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_refused_and_carried_changes(spark, tmp_path):
    staged = staged_input(spark, tmp_path, 1500, 30, seed=21, files=3)
    inp, out, add, reference = staged.inp, staged.out, staged.add, staged.reference

    aggs = ["--agg", "sum:value", "--agg", "count"]
    add(0)
    first = _sessionize(inp, out, *aggs, "--backend", "rocksdb", "--partitions", "2")
    assert first.returncode == 0, first.stderr[-3000:]
    before = _tree(out)

    add(1)
    refused = _sessionize(inp, out, *aggs, "--agg", "max:value", "--backend", "rocksdb", "--partitions", "2")
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert "Traceback" not in refused.stderr and "Py4J" not in refused.stderr
    msg = refused.stderr
    assert "operator state layout" in msg and '["max", 2]' in msg and "result schema" in msg
    assert "new checkpoint" in msg and "--final" in msg and "--migrate-state" in msg
    assert _tree(out) == before  # checkpoint (under the output) and output untouched

    carried = _sessionize(inp, out, *aggs, "--backend", "heap", "--partitions", "3")
    assert carried.returncode == 0, carried.stderr[-3000:]
    add(2)
    last = _sessionize(inp, out, *aggs, "--backend", "heap", "--partitions", "3", final=True)
    assert last.returncode == 0, last.stderr[-3000:]
    assert output_rows(spark, out) == reference
    metrics = [json.loads(line) for line in (out / "_metrics.jsonl").read_text().splitlines()]
    changes = [m["job_changes"] for m in metrics if m.get("job_changes")]
    assert changes == [['backend: "rocksdb" -> "heap"', "partitions: 2 -> 3"]]
