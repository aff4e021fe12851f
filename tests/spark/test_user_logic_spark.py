"""A user's own session logic through ``run_keyed``: the doc's VectorAggregate and WindowBatchFunction
(docs/window-operators.md), and bench/user_logic.py's plain AggregateFunction and ProcessWindowFunction on
``state_layout="table"``. Each makes a first run in this application, then a second one in a new
interpreter (its own SparkSession, Python workers never reused) restoring the sessions left open; every
output is exactly a plain-Python reference."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark import cloudpickle

from statekit.bench.user_logic import SessionRow, SumAndCount
from statekit.operators import EventTimeSessionWindows, WindowOperator
from statekit.operators.aggregates.packed_records import PackedRecords
from statekit.spark import run_keyed
from tests.operators.test_vector_aggregate import SessionReport, SessionStats
from tests.test_readme import ROOT

pytestmark = pytest.mark.spark
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import this test module

INPUT_SCHEMA = "k STRING, ts BIGINT, value BIGINT"
GAP, DELAY = 20_000, 5_000


def vectorized() -> WindowOperator:
    """The doc's sessions: SessionStats, reported by SessionReport (classes pickled by value)."""
    stats = SessionStats()
    return WindowOperator(EventTimeSessionWindows.with_gap(GAP), function=stats,
                          window_function=SessionReport(stats.result_names()))


def plain_on_the_table() -> WindowOperator:
    """The bench's plain session logic on the session table."""
    return WindowOperator(EventTimeSessionWindows.with_gap(GAP), function=SumAndCount(), window_function=SessionRow(),
                          state_layout="table")


def _report(k: str, session: list[tuple[int, int]]) -> tuple:
    values = [v for _, v in session]
    return (k, session[0][0], len(values), sum(values) / len(values), float(values[-1] - values[0]))


def _row(k: str, session: list[tuple[int, int]]) -> tuple:
    return (k, session[0][0], session[-1][0] + GAP, sum(v for _, v in session), len(session))


CASES: dict[str, tuple[Callable[[], WindowOperator], str, Callable[[str, list], tuple]]] = {
    "vectorized": (vectorized, "user STRING, start BIGINT, count BIGINT, mean DOUBLE, drift DOUBLE", _report),
    "plain-table": (plain_on_the_table,
                    "user_id STRING, window_start BIGINT, window_end BIGINT, sum_value BIGINT, count BIGINT", _row),
}
"""Each case's operator factory, result schema and its output of one session (key, [(ts, value), ...])."""


def records(n: int = 300, keys: int = 12, seed: int = 5) -> list[tuple]:
    """(k, ts, value), times increasing: the second half comes after the first."""
    rng = random.Random(seed)
    return [(f"u{rng.randrange(keys)}", 1_000 * i + rng.randrange(500), rng.randrange(-50, 100)) for i in range(n)]


def reference(recs: list[tuple], output: Callable[[str, list], tuple]) -> list[tuple]:
    """``output`` of each session (records at most GAP apart) per key, sorted."""
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
            out.append(output(k, session))
            session = [row]
    return sorted(out)


RUN = '''
import sys
from statekit.spark import spark_session
from tests.spark.test_user_logic_spark import run

spark = spark_session("local[2]", {"spark.python.worker.reuse": "false", "spark.ui.enabled": "false",
                                   "spark.python.daemon.module": "pyspark.daemon"})
run(spark, *sys.argv[1:5], final=True)
'''


def run(spark: Any, case: str, inp: str, out: str, ckpt: str, final: bool = False) -> Any:
    """``case``'s job over the parquet files in ``inp``, as a stream (the older file first), on the rocksdb backend."""
    factory, result_schema, _ = CASES[case]
    df = spark.readStream.schema(INPUT_SCHEMA).option("maxFilesPerTrigger", 1).parquet(inp)
    return run_keyed(df, key="k", time="ts", columns=["value"], operator_factory=factory, result_schema=result_schema,
                     output=out, checkpoint=ckpt, partitions=2, config={"backend": "rocksdb"}, watermark_delay=DELAY,
                     final=final)


def write(recs: list[tuple], path: Path, mtime: int) -> None:
    pq.write_table(pa.table(dict(zip(["k", "ts", "value"], map(list, zip(*recs))))), path)
    os.utime(path, (mtime, mtime))


def test_the_plain_aggregate_is_packed_for_the_table():
    assert isinstance(plain_on_the_table().function, PackedRecords)


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_user_logic_through_run_keyed_resumed_in_a_new_interpreter(spark, tmp_path, case):
    recs = records()
    first, second = recs[:150], recs[150:]
    expected = reference(recs, CASES[case][2])
    assert set(reference(first, CASES[case][2])) - set(expected)  # sessions open across the restore
    inp, out, ckpt = tmp_path / "in", tmp_path / "out", tmp_path / "ckpt"
    inp.mkdir()
    write(first[:100], inp / "part-0.parquet", 1_700_000_000)  # two epochs: the second fires sessions
    write(first[100:], inp / "part-1.parquet", 1_700_000_001)
    summary = run(spark, case, str(inp), str(out), str(ckpt))
    assert summary.total("late") == 0 and summary.total("invalid") == 0
    fired_first = sorted(tuple(r) for r in spark.read.parquet(str(out)).drop("epoch").collect())
    assert fired_first and set(fired_first) < set(expected)
    write(second, inp / "part-2.parquet", 1_700_000_002)
    r = subprocess.run([sys.executable, "-c", RUN, case, str(inp), str(out), str(ckpt)], capture_output=True, text=True,
                       timeout=300, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-4000:]
    got = sorted(tuple(r) for r in spark.read.parquet(str(out)).drop("epoch").collect())
    assert got == expected
