"""Exactly-once through Spark: a task failing mid-epoch (raise or Python worker exit, before or after
its snapshot commit), a query failing and restarted from its checkpoint, a stop and a restart with
more input and another partition count: the output equals an uninterrupted run's, row for row."""

from __future__ import annotations

import json
import shutil

import pytest

from statekit.jobs import sessionize
from statekit.spark import FAULT_ENV
from tests.spark_support import DELAY, GAP, clickstream, output_rows, spark_sessions, write_input

pytestmark = pytest.mark.spark
FILES = 4


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    d = write_input(clickstream(4000, 80, seed=11), tmp_path_factory.mktemp("input"), files=FILES)
    return d


def run(spark, input_dir, out, partitions=2, final=True, backend="rocksdb"):
    return sessionize(spark, input=str(input_dir), output=str(out), key="user_id", time="ts_ms", gap=GAP,
                      watermark_delay=DELAY, aggs=["sum:value", "count"], backend=backend, partitions=partitions,
                      final=final)


@pytest.fixture(scope="module")
def uninterrupted(spark, sample, tmp_path_factory):
    out = tmp_path_factory.mktemp("uninterrupted") / "out"
    run(spark, sample, out)
    rows = output_rows(spark, out)
    assert rows == spark_sessions(spark, sample)
    return rows, _per_epoch(spark, out)


def _per_epoch(spark, out):
    """{epoch: sorted rows}: which epoch closed which session must not change either."""
    df = spark.read.parquet(str(out))
    return {e: sorted(tuple(r)[:-1] for r in df.where(df.epoch == e).collect()) for e in range(FILES + 1)}


@pytest.mark.parametrize("fault", ["epoch=1,partition=0,action=raise,when=after-commit",
                                   "epoch=2,partition=1,action=exit,when=before-commit",
                                   "epoch=4,partition=1,action=exit,when=after-commit",
                                   "epoch=4,partition=0,action=raise,when=after-commit"])  # final: its host ended
def test_task_failing_on_first_attempt(spark, sample, uninterrupted, tmp_path, monkeypatch, fault):
    monkeypatch.setenv(FAULT_ENV, fault)
    summary = run(spark, sample, tmp_path / "out")
    assert len(list((tmp_path / "out" / "_checkpoint" / "_faults").iterdir())) >= 1  # it did fail once
    assert output_rows(spark, tmp_path / "out") == uninterrupted[0]
    assert _per_epoch(spark, tmp_path / "out") == uninterrupted[1]
    assert [m["epoch"] for m in summary.epochs] == list(range(FILES + 1))


def test_query_failing_then_restarted_from_checkpoint(spark, sample, uninterrupted, tmp_path, monkeypatch):
    out = tmp_path / "out"
    monkeypatch.setenv(FAULT_ENV, "epoch=2,partition=0,action=raise,when=after-commit,always=1")
    with pytest.raises(Exception, match="injected fault at epoch 2"):
        run(spark, sample, out)
    metrics = [json.loads(x)["epoch"] for x in (out / "_metrics.jsonl").read_text().splitlines()]
    assert metrics == [0, 1]  # epoch 2's state was committed by partition 0, its output was not
    monkeypatch.delenv(FAULT_ENV)
    summary = run(spark, sample, out)
    assert [m["epoch"] for m in summary.epochs] == [2, 3, 4]  # resumed: batches 0 and 1 are not read again
    assert output_rows(spark, out) == uninterrupted[0]
    assert _per_epoch(spark, out) == uninterrupted[1]


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_stop_and_restart_with_more_files_and_other_partitions(spark, sample, uninterrupted, tmp_path, backend):
    growing, out = tmp_path / "in", tmp_path / "out"
    growing.mkdir()
    files = sorted(sample.iterdir())
    for f in files[:2]:
        shutil.copy2(f, growing / f.name)
    first = run(spark, growing, out, partitions=2, final=False, backend=backend)  # available-now, windows stay open
    assert [m["epoch"] for m in first.epochs] == [0, 1]
    for f in files[2:]:
        shutil.copy2(f, growing / f.name)
    second = run(spark, growing, out, partitions=3, final=True, backend=backend)
    assert [m["epoch"] for m in second.epochs] == [2, 3, 4] and second.epochs[0]["rescaled_from"] == 2
    assert output_rows(spark, out) == uninterrupted[0]
    third = run(spark, growing, out, partitions=1, final=True, backend=backend)  # nothing new: nothing to do
    assert third.epochs == [] and output_rows(spark, out) == uninterrupted[0]
