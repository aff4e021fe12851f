"""Per-epoch sinks with foreachBatch's contract: Spark's own writers (a parquet path, a catalog table) and
Delta Lake, through a replayed epoch (the sink wrote, then the run died before the epoch committed) and a
restarted query: every session exactly once."""

from __future__ import annotations

import os
import sys
import time

import pytest
from pyspark import cloudpickle

from statekit.jobs import sessionize
from statekit.spark import DeltaSink, EpochSink
from tests.spark_support import COLUMNS, clickstream, spark_sessions, write_input

pytestmark = pytest.mark.spark
cloudpickle.register_pickle_by_value(sys.modules[__name__])


class Crash(RuntimeError):
    pass


class CrashOnceAfter(EpochSink):
    """Writes through ``inner``, then fails once at ``epoch``: the epoch is written but not committed."""

    def __init__(self, inner, epoch: int) -> None:
        self.inner, self.epoch, self.crashed = inner, epoch, False
        self.calls: list[int] = []

    def write(self, results, epoch_id):
        self.calls.append(epoch_id)
        self.inner(results, epoch_id) if callable(self.inner) else self.inner.write(results, epoch_id)
        if epoch_id == self.epoch and not self.crashed:
            self.crashed = True
            raise Crash(f"crash after writing epoch {epoch_id}")


def _run_until_done(spark, inp, out, sink, **kw):
    """A run that dies after the sink wrote epoch 1, then a restarted one with the same checkpoint."""
    args = dict(input=str(inp), output=str(out), key="user_id", time="ts_ms", gap="30s", watermark_delay="10s",
                aggs=["sum:value", "count"], backend="heap", partitions=2, final=True, **kw)
    with pytest.raises(Exception, match="crash after writing epoch 1"):
        sessionize(spark, sink=sink, **args)
    sessionize(spark, sink=sink, **args)


@pytest.fixture
def staged(spark, tmp_path):
    clicks = clickstream(1200, 25, seed=31)
    d = write_input(clicks, tmp_path / "staged", files=3)
    for i, f in enumerate(sorted(d.iterdir())):
        os.utime(f, (time.time() + i, time.time() + i))
    return d, spark_sessions(spark, d)


def test_spark_writers_get_each_epoch_once(spark, tmp_path, staged):
    inp, reference = staged
    target = tmp_path / "copy"
    spark.sql("CREATE TABLE IF NOT EXISTS sk_sessions (user_id STRING, window_start BIGINT, window_end BIGINT, "
              "sum_value BIGINT, count BIGINT, epoch INT) USING parquet PARTITIONED BY (epoch) "
              f"LOCATION '{tmp_path / 'warehouse'}'")
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")

    def write(df, epoch_id):  # idempotent per epoch: a replay overwrites what the epoch wrote before
        from pyspark.sql import functions as F

        df.write.mode("overwrite").parquet(str(target / f"epoch={epoch_id}"))
        df.withColumn("epoch", F.lit(epoch_id)).write.insertInto("sk_sessions", overwrite=True)

    sink = CrashOnceAfter(write, epoch=1)
    _run_until_done(spark, inp, tmp_path / "out", sink)
    assert sink.calls.count(1) == 2  # replayed with the same epoch id
    copied = sorted(tuple(r) for r in spark.read.parquet(str(target)).select(*COLUMNS).collect())
    table = sorted(tuple(r) for r in spark.table("sk_sessions").select(*COLUMNS).collect())
    spark.sql("DROP TABLE sk_sessions")
    assert copied == reference and table == reference


def test_delta_sink_writes_each_epoch_once(spark, tmp_path, staged):
    from deltalake import DeltaTable

    inp, reference = staged
    delta = tmp_path / "delta"
    sink = CrashOnceAfter(DeltaSink(str(delta)), epoch=1)
    _run_until_done(spark, inp, tmp_path / "out", sink)
    assert sink.calls.count(1) == 2
    rows = DeltaTable(str(delta)).to_pandas()[COLUMNS]
    assert sorted(map(tuple, rows.itertuples(index=False))) == [tuple(r) for r in reference]
    assert DeltaTable(str(delta)).transaction_version("statekit") == max(sink.calls)


def test_output_format_delta_from_the_cli(spark, tmp_path, staged):
    from deltalake import DeltaTable

    from statekit.cli import main

    inp, reference = staged
    out = tmp_path / "sessions"
    argv = ["sessionize", "--input", str(inp), "--output", str(out), "--output-format", "delta", "--key", "user_id",
            "--time", "ts_ms", "--gap", "30s", "--watermark-delay", "10s", "--agg", "sum:value", "--agg", "count",
            "--backend", "rocksdb", "--partitions", "2", "--final"]
    assert main(argv) == 0
    assert main(argv) == 0  # a rerun on the same checkpoint adds nothing
    rows = DeltaTable(str(out)).to_pandas()[COLUMNS]
    assert sorted(map(tuple, rows.itertuples(index=False))) == [tuple(r) for r in reference]


def test_side_outputs_reach_the_sink(spark, tmp_path):
    from statekit.operators import EventTimeSessionWindows, WindowOperator
    from statekit.spark import FunctionSink, run_keyed
    from statekit.testing.contract import SumCount

    class ValueSum(SumCount):
        def add(self, row, acc):
            return super().add(row[0], acc)

    got: dict = {"results": [], "invalid": [], "late": []}

    def results(df, epoch_id):
        got["results"] += [tuple(r) + (epoch_id,) for r in df.collect()]

    def side(tag, df, epoch_id):
        got[tag] += [(r["k"], r["reason"], epoch_id) for r in df.collect()]

    rows = [("a", 1_000, 5), (None, 2_000, 1), ("a", 2_000, 7), ("b", 3_000, 1)]
    df = spark.createDataFrame(rows, "k STRING, ts BIGINT, value BIGINT")
    run_keyed(df, key="k", time="ts", columns=["value"], output=str(tmp_path / "out"), partitions=1,
              operator_factory=lambda: WindowOperator(EventTimeSessionWindows.with_gap(100), function=ValueSum()),
              result_schema="total BIGINT, n BIGINT", sink=FunctionSink(results, side))
    assert sorted(got["results"]) == [(1, 1, 1), (5, 1, 1), (7, 1, 1)]  # fired by the final epoch (1)
    assert got["invalid"] == [(None, "null key", 0)] and got["late"] == []
