"""bench/user_logic.py's plain AggregateFunction and ProcessWindowFunction (SumAndCount, SessionRow) on
``state_layout="table"`` through ``run_keyed``: a first run in this application, then a second one in a
new interpreter (its own SparkSession, Python workers never reused) restoring the sessions left open,
every output exactly a plain-Python reference."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
from pyspark import cloudpickle

from bench.user_logic import SessionRow, SumAndCount
from statekit.operators import EventTimeSessionWindows, WindowOperator
from statekit.operators.packed_records import PackedRecords
from statekit.spark import run_keyed
from tests.spark.test_vector_aggregate_spark import GAP, INPUT_SCHEMA, records, write
from tests.test_readme import ROOT

pytestmark = pytest.mark.spark
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import this test module

RESULT_SCHEMA = "user_id STRING, window_start BIGINT, window_end BIGINT, sum_value BIGINT, count BIGINT"
DELAY = 5_000


def factory() -> WindowOperator:
    """The bench's plain session logic on the session table."""
    return WindowOperator(EventTimeSessionWindows.with_gap(GAP), function=SumAndCount(), window_function=SessionRow(),
                          state_layout="table")


def reference(recs: list[tuple]) -> list[tuple]:
    """Sessions (records at most GAP apart) per key: (user, start, last + GAP, sum, count)."""
    by_key: dict[str, list] = {}
    for k, ts, v in sorted(recs, key=lambda r: r[1]):
        by_key.setdefault(k, []).append((ts, v))
    out = []
    for k, rows in by_key.items():
        session = [rows[0]]
        for row in rows[1:] + [None]:
            if row is not None and row[0] - session[-1][0] <= GAP:
                session.append(row)
                continue
            out.append((k, session[0][0], session[-1][0] + GAP, sum(v for _, v in session), len(session)))
            session = [row]
    return sorted(out)


RUN = '''
import sys
from statekit.spark import spark_session
from tests.spark.test_packed_records_spark import run

spark = spark_session("local[2]", {"spark.python.worker.reuse": "false", "spark.ui.enabled": "false",
                                   "spark.python.daemon.module": "pyspark.daemon"})
run(spark, *sys.argv[1:4], final=True)
'''


def run(spark: Any, inp: str, out: str, ckpt: str, final: bool = False) -> Any:
    """The job over the parquet files in ``inp``, as a stream (the older file first), on the rocksdb backend."""
    df = spark.readStream.schema(INPUT_SCHEMA).option("maxFilesPerTrigger", 1).parquet(inp)
    return run_keyed(df, key="k", time="ts", columns=["value"], operator_factory=factory, result_schema=RESULT_SCHEMA,
                     output=out, checkpoint=ckpt, partitions=2, config={"backend": "rocksdb"}, watermark_delay=DELAY,
                     final=final)


def test_plain_aggregate_on_the_table_through_run_keyed_resumed_in_a_new_interpreter(spark, tmp_path):
    assert isinstance(factory().function, PackedRecords)
    recs = records()
    first, second = recs[:150], recs[150:]
    expected = reference(recs)
    assert set(reference(first)) - set(expected)  # sessions open across the restore
    inp, out, ckpt = tmp_path / "in", tmp_path / "out", tmp_path / "ckpt"
    inp.mkdir()
    write(first[:100], inp / "part-0.parquet", 1_700_000_000)  # two epochs: the second fires sessions
    write(first[100:], inp / "part-1.parquet", 1_700_000_001)
    summary = run(spark, str(inp), str(out), str(ckpt))
    assert summary.total("late") == 0 and summary.total("invalid") == 0
    fired_first = sorted(tuple(r) for r in spark.read.parquet(str(out)).drop("epoch").collect())
    assert fired_first and set(fired_first) < set(expected)
    write(second, inp / "part-2.parquet", 1_700_000_002)
    r = subprocess.run([sys.executable, "-c", RUN, str(inp), str(out), str(ckpt)], capture_output=True, text=True,
                       timeout=300, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-4000:]
    got = sorted(tuple(r) for r in spark.read.parquet(str(out)).drop("epoch").collect())
    assert got == expected
