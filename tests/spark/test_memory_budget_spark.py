"""The heap backend past its memory budget (issue 46): a run fails before its epoch commits, with an error naming
memory, spark.statekit.memory_budget and --backend rocksdb, exit non-zero; the committed epochs stay as they were
and a rerun on the RocksDB backend resumes them exactly. Within the budget a heap run passes, and the epochs'
metrics carry the state's bytes."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import pytest

from statekit.cli import main
from statekit.jobs import sessionize
from statekit.memory_budget import BUDGET_SETTING, default_budget
from statekit.spark.epochs import EpochLog
from statekit.spark.executor_memory import executor_budget, executor_memory, memory_metrics
from statekit.spark.output_dir import OutputDir
from tests.spark_support import DELAY, GAP, output_rows, staged_input

pytestmark = pytest.mark.spark


@contextmanager
def budget(spark, value: str) -> Iterator[None]:
    """``spark.statekit.memory_budget`` for one run of the shared session."""
    spark.conf.set(BUDGET_SETTING, value)
    try:
        yield
    finally:
        spark.conf.unset(BUDGET_SETTING)


def test_heap_past_its_budget_fails_before_committing_and_rocksdb_resumes(spark, tmp_path, capsys):
    staged = staged_input(spark, tmp_path, events=3000, keys=60, seed=11, files=2)
    checkpoint = str(staged.out / "_checkpoint")
    args = dict(input=str(staged.inp), output=str(staged.out), key="user_id", time="ts_ms", gap=GAP,
                watermark_delay=DELAY, aggs=["sum:value", "count"], partitions=2, fmt="csv")
    staged.add(0)
    with budget(spark, "8g"):  # enough: the heap run passes
        first = sessionize(spark, backend="heap", **args)
    assert first.epochs and all(m["state_bytes"] > 0 and m["memory_warning"] is None for m in first.epochs)
    assert [m["state_bytes"] for m in OutputDir(str(staged.out)).metrics()] == [m["state_bytes"] for m in first.epochs]
    committed = EpochLog(checkpoint).last().epoch

    staged.add(1)
    argv = ["sessionize", "--input", str(staged.inp), "--output", str(staged.out), "--key", "user_id", "--time",
            "ts_ms", "--gap", GAP, "--watermark-delay", DELAY, "--agg", "sum:value", "--agg", "count",
            "--partitions", "2", "--backend", "heap", "--conf", f"{BUDGET_SETTING}=1m"]
    try:
        assert main(argv) == 2
    finally:
        spark.conf.unset(BUDGET_SETTING)  # the CLI set it on the shared session
    err = capsys.readouterr().err
    assert "out of memory budget" in err and f"{BUDGET_SETTING}=1m per executor" in err
    assert "--backend rocksdb" in err and "not committed" in err
    assert EpochLog(checkpoint).last().epoch == committed  # nothing of the failed epoch was committed

    rest = sessionize(spark, backend="rocksdb", final=True, **args)
    assert rest.epochs[0]["epoch"] == committed + 1
    assert output_rows(spark, staged.out) == staged.reference  # every session exactly once


def test_the_executors_budget_and_the_metrics_fields(spark):
    assert executor_memory(spark) is None  # a local master: the machine's memory, not the JVM heap, bounds it
    assert executor_budget(spark, None) == default_budget(None)
    assert executor_budget(spark, "3g") == 3 << 30
    stats = [{"state_process": "h:1", "state_bytes": 10, "memory_warning": None},
             {"state_process": "h:1", "state_bytes": 12, "memory_warning": "past 80%"},
             {"state_process": "h:2", "state_bytes": 5, "memory_warning": None}]
    assert memory_metrics(stats) == {"state_bytes": 17, "memory_warning": "past 80%"}  # a process counted once
