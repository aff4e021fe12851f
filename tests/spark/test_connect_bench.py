"""`statekit bench spark --remote URL`: the same runs and report on Spark Connect sessions (issue 36), smoke size,
on the shared Connect server."""

from __future__ import annotations

import json

import pytest

from statekit.bench.runner import run_parts

pytestmark = pytest.mark.spark


def test_remote_applies_to_the_spark_part_only(tmp_path):
    with pytest.raises(SystemExit, match="--remote sc://localhost:1 applies to the spark part only"):
        run_parts(["windows"], True, tmp_path, remote="sc://localhost:1")


def test_bench_spark_on_connect_reports_every_variant_on_the_reference(connect_spark, tmp_path):
    written = run_parts(["spark"], True, tmp_path, remote=connect_spark.url)
    assert written["spark"]["json"].name == "spark-connect.json"
    data = json.loads(written["spark"]["json"].read_text())
    assert data["params"]["master"] == connect_spark.url and data["params"]["session"].startswith("Spark Connect")
    sessions = [f for f in data["figures"] if f["name"].startswith("sessions vs")]
    assert sessions
    for f in sessions:
        assert "DIFFERS" not in f["notes"] and "not compared" not in f["notes"], f["notes"]
        assert f["heap"] == f["rocksdb"] == f["baseline"] and f["heap"]
