"""`statekit bench all --quick` end to end: every part writes JSON with every figure (unit and numbers),
the machine and the parameters, a Markdown table and a plot; sessions checked where a part writes them. No
timing asserts."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from statekit.bench import PARTS
from statekit.bench.open_sessions import ROLES as OPEN_SESSIONS_ROLES
from statekit.bench.spark import QUICK
from statekit.bench.spark_runs import FLOOR

pytestmark = pytest.mark.slow  # the bench's own smoke run: a Spark application per run of spark, open-sessions, bootstrap

SIZES = f"{QUICK['events']:,} events, {QUICK['users'][0]:,} users"
SPARK_TAGS = [f"({SIZES})", f"(plain, {SIZES})", f"(vectorized, {SIZES})"]
"""The built-in path's figures and the user logic's, plain and vectorized (``run_keyed``, ``bench/user_logic.py``),
at the quick sizes."""
EXPECTED = {
    "ops": [
        *(name for op in ("value get+update (set_current_key per op)", "value get+update (cold: first pass, new keys)",
                          "list add", "map put+get", "aggregating add")
          for name in (op, f"{op}: rocksdb vs raw rocksdict")),
        "value get+update (key already set)", "merge_namespaces (2 list windows)",
        *(f"scaling {n:,} keys: {what}" for n in (1_000, 10_000, 100_000)
          for what in ("insert", "random get+update", "peak RSS", "memory per key")),
        "heap keys per GiB of RSS",
    ],
    "timers": [*(f"{what} {n:,} timers" for n in (10_000, 100_000) for what in ("register", "fire")),
               "peak RSS, 10,000 timers", "peak RSS, 100,000 timers", "rocksdb RSS growth 10,000 -> 100,000 timers"],
    "windows": ["session windows", "peak RSS",
                *(f"{how}, {keys} keys" for how in ("record path", "engine, records", "engine, columns", "table, columns")
                  for keys in ("1,000", "10,000"))],
    "snapshots": ["full snapshot bytes (10,000 keys)", "full snapshot time (10,000 keys)",
                  "restore time, full (10,000 keys)",
                  *(f"{b} {what} @{pct} changed (10,000 keys), mean" for b in ("heap", "rocksdb")
                    for pct in ("1%", "10%", "100%") for what in ("snapshot bytes", "snapshot time"))],
    "memory": [f"{fig}, {layout} layout, {n} open sessions" for n in ("20,000", "60,000") for layout in ("table", "cells")
               for fig in ("peak RSS through the epochs", "RSS after the last epoch",
                           "peak RSS with the final watermark", "epochs")],
    "spark": [f"{fig} vs {base} {tag}" for tag in SPARK_TAGS
              for base in ("spark session_window", "transformWithStateInPandas")
              for fig in ("events/s", "sessions", "peak RSS driver JVM", "peak RSS Python workers",
                          "peak RSS driver Python", "peak RSS whole process tree")]
             + [f"events/s vs {FLOOR} ({SIZES})"],
    "open-sessions": [f"{fig}, each backend's default layout, 20,000 open sessions"
                      for fig in ("seconds", "sessions written", "peak RSS whole process tree",
                                  *(f"peak RSS {label}" for label in OPEN_SESSIONS_ROLES.values()))],
    "bootstrap": [f"{fig}, 20,000 open sessions" for fig in (
        "seconds", "speedup of bootstrap over replay", "peak RSS whole process tree", "checkpoint MiB",
        "resume seconds (--final on the next input)", "sessions after the resume")],
}
"""Figures each part must report in quick mode (a part may report more)."""


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bench")
    script = Path(sys.executable).with_name("statekit")  # the venv's console script
    cmd = [str(script), "bench"] if script.exists() else [sys.executable, "-m", "bench"]
    subprocess.run([*cmd, "all", "--quick", "--out", str(out)], check=True, timeout=900)
    return out


def _number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _tws_missing() -> bool:
    """transformWithStateInPandas needs pandas and protobuf; without them the bench skips it."""
    from statekit.bench.spark_runs import tws_unavailable

    return tws_unavailable() is not None


@pytest.mark.parametrize("part", list(PARTS))
def test_part_report(out_dir: Path, part: str) -> None:
    data = json.loads((out_dir / f"{part}.json").read_text())
    assert data["part"] == part
    machine = data["machine"]
    assert machine["cores"] >= 1 and machine["memory_gib"] > 0 and machine["python"]
    assert machine["versions"]["statekit"] and machine["versions"]["pyspark"]
    assert data["params"]
    figures = {f["name"]: f for f in data["figures"]}
    expected = [n for n in EXPECTED[part] if not ("transformWithStateInPandas" in n and _tws_missing())]
    missing = [n for n in expected if n not in figures]
    assert not missing, f"{part}: figures missing: {missing}"
    for name, f in figures.items():
        assert f["unit"], f"{part}/{name}: no unit"
        values = [f[k] for k in ("heap", "rocksdb", "baseline") if f[k] is not None]
        assert values and all(_number(v) for v in values), f"{part}/{name}: values {values}"
        if f["baseline"] is not None:
            assert f["baseline_name"], f"{part}/{name}: baseline without a name"
        if part in ("windows", "spark") or name.startswith("scaling"):
            assert _number(f["heap"]) and _number(f["rocksdb"]), f"{part}/{name}: both backends expected"
    assert (out_dir / f"{part}.md").read_text().count("\n|") >= len(expected)
    assert (out_dir / f"{part}.png").stat().st_size > 0


def test_spark_sessions_agree(out_dir: Path) -> None:
    """Every Spark variant, the plain Python aggregate's included, produced the reference sessions, and the
    floor wrote every event it read (differences are reported in the notes)."""
    data = json.loads((out_dir / "spark.json").read_text())
    for f in data["figures"]:
        if f["name"].startswith(f"events/s vs {FLOOR}"):  # the floor counts its input: every event checked
            assert "counted every event" in f["notes"] and "DIFFERS" not in f["notes"], f["notes"]
        if f["name"].startswith("sessions vs"):
            assert "DIFFERS" not in f["notes"], f["notes"]
            assert f["heap"] == f["rocksdb"] == f["baseline"]


def test_open_sessions_each_once(out_dir: Path) -> None:
    """Quick open-sessions (statekit on RocksDB and Spark's session_window): every user's session written exactly
    once, the input files kept in the output directory for the next run."""
    data = json.loads((out_dir / "open-sessions.json").read_text())
    [written] = [f for f in data["figures"] if f["name"].startswith("sessions written")]
    assert written["rocksdb"] == written["baseline"] == 20_000
    assert written["notes"].count("every user's session exactly once") == 2, written["notes"]
    assert not data["failures"]
    assert (out_dir / "open-sessions-data" / "users-20k-epoch-10k" / "done.json").exists()


def test_scale_applies_to_the_spark_part_only(tmp_path):
    from statekit.bench.runner import run_parts

    with pytest.raises(SystemExit, match="spark part only"):
        run_parts(["windows"], True, tmp_path, "large")
    with pytest.raises(SystemExit, match="--state-layout cells applies to the spark part only"):
        run_parts(["windows"], True, tmp_path, state_layout="cells")
