"""The sessionize job on Spark's ``local-cluster[2,1,1024]`` master: two executor processes, as on a
real cluster. Each run is a subprocess (one SparkContext per process). Output equals Spark's own
session windows, with and without an executor JVM killed mid-epoch on its first attempt; a run without one ends
quiet (no ERROR line or stack trace from Spark shutting down)."""

from __future__ import annotations

import os

import pytest

from statekit.spark import FAULT_ENV
from tests.spark_support import clickstream, metrics, output_rows, spark_sessions, statekit_process, succeeded, write_input

pytestmark = [pytest.mark.spark, pytest.mark.cluster, pytest.mark.slow]
MASTER = "local-cluster[2,1,1024]"


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return write_input(clickstream(4000, 80, seed=3), tmp_path_factory.mktemp("input"), files=4)


def cli(input_dir, out, fault=None, partitions=2):
    env = dict(os.environ)
    env.pop(FAULT_ENV, None)
    if fault:
        env[FAULT_ENV] = fault
    r = succeeded(statekit_process("sessionize", "--input", str(input_dir), "--output", str(out), "--key", "user_id",
                                   "--time", "ts_ms", "--gap", "30s", "--watermark-delay", "10s", "--agg", "sum:value",
                                   "--agg", "count", "--partitions", str(partitions), "--master", MASTER, "--final",
                                   env=env))  # till the JVM's output ends too
    if not fault:  # Spark stopped before the process exits: no executor relaunched and failing as the JVM shuts down
        noise = [line for line in r.stderr.splitlines() if " ERROR " in line or line.startswith(("\tat ", "Caused by"))]
        assert noise == [], r.stderr[-3000:]
    return metrics(out)


@pytest.mark.parametrize("fault", [None, "epoch=2,partition=1,action=kill-executor,when=before-commit"])
def test_local_cluster_matches_spark(spark, sample, tmp_path, fault):
    metrics = cli(sample, tmp_path / "out", fault, partitions=4)
    assert output_rows(spark, tmp_path / "out") == spark_sessions(spark, sample)
    assert [m["epoch"] for m in metrics] == [0, 1, 2, 3, 4]
    parts = ("setup_seconds", "restore_seconds", "process_seconds", "snapshot_seconds")  # the slowest task's
    assert all(m[p] >= 0 for m in metrics for p in parts)
    workers = {w for m in metrics for w in m["workers"]}
    assert len(workers) >= 2, workers  # partitions ran on both executors (several when one was killed)
    if fault:
        # it fired (again in each new stage attempt: after an executor loss attempt numbers restart at 0)
        assert len(list((tmp_path / "out" / "_checkpoint" / "_faults").iterdir())) >= 1
