"""Session windows through Spark equal Spark's own ``session_window``; invalid and late input goes to
side outputs with reasons and counts; committed state is readable as a DataFrame."""

from __future__ import annotations

import functools
import json
import os
import re

import pytest

from statekit import key_group_representatives
from statekit.clickstream import sessionize_reference
from statekit.jobs import sessionize
from statekit.spark import InputError, read_state_df
from tests.spark_support import DELAY, GAP, clickstream, output_rows, spark_sessions, write_input

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    clicks = clickstream()
    d = write_input(clicks, tmp_path_factory.mktemp("input"), files=3)
    return clicks, d


@pytest.mark.parametrize("partitions", [1, pytest.param(2, marks=pytest.mark.lowest_pyspark), 4])
@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_sessions_equal_spark_session_window(spark, sample, tmp_path, backend, partitions):
    clicks, d = sample
    summary = sessionize(spark, input=str(d), output=str(tmp_path / "out"), key="user_id", time="ts_ms", gap=GAP,
                         watermark_delay=DELAY, aggs=["sum:value", "count"], backend=backend, partitions=partitions,
                         final=True)
    got = output_rows(spark, tmp_path / "out")
    assert got == spark_sessions(spark, d)
    assert got == sessionize_reference(clicks, 30_000)
    assert [m["epoch"] for m in summary.epochs] == [0, 1, 2, 3] and summary.epochs[-1]["final"]
    assert summary.total("records_in") == len(clicks) and summary.total("late") == 0
    assert all(m["partitions"] == partitions for m in summary.epochs)
    metrics = [json.loads(line) for line in (tmp_path / "out" / "_metrics.jsonl").read_text().splitlines()]
    assert [m["results"] for m in metrics] == [m["results"] for m in summary.epochs]
    assert metrics[-1]["state_entries"] == 0 or backend == "rocksdb"  # rocksdb counts are estimates


def test_invalid_and_late_rows_go_to_side_outputs(spark, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    (d / "part-00000.csv").write_text("user_id,ts_ms,value\na,100000,1\n,100500,2\nb,abc,3\nc,1.5,4\n"
                                      "d,99999999999999999999,5\ne,4611686018427387905,1\na,101000,6\n")
    (d / "part-00001.csv").write_text("user_id,ts_ms,value\na,500000,7\n")
    (d / "part-00002.csv").write_text("user_id,ts_ms,value\na,50000,8\nb,200000,9\n")
    for i, f in enumerate(sorted(d.iterdir())):  # Spark's file source takes files oldest first
        os.utime(f, (1_000_000 + i, 1_000_000 + i))
    out = tmp_path / "out"
    summary = sessionize(spark, input=str(d), output=str(out), key="user_id", time="ts_ms", gap="30s",
                         aggs=["sum:value", "count", "min:value", "max:value", "avg:value"], partitions=2, final=True)
    invalid = sorted((tuple(r) for r in spark.read.parquet(str(out / "_invalid")).select("user_id", "ts_ms", "reason")
                      .collect()), key=str)
    assert invalid == sorted([(None, "100500", "null key"), ("b", "abc", "unparsable time: 'abc' (ISO-8601 with a date, or a number in ms; text without a zone in UTC)"),
                              ("c", "1.5", "time is not a whole number of ms: 1.5 (epoch seconds? pass --time-unit s)"), ("d", "99999999999999999999", "time out of range [-2**62, 2**62] ms"),
                              ("e", "4611686018427387905", "time out of range [-2**62, 2**62] ms")],
                             key=str)
    late = [tuple(r) for r in spark.read.parquet(str(out / "_late")).select("user_id", "ts_ms", "value").collect()]
    assert late == [("a", "50000", 8)]
    assert [m["invalid"] for m in summary.epochs] == [5, 0, 0, 0] and summary.total("late") == 1
    rows = sorted(tuple(r) for r in spark.read.parquet(str(out)).select(
        "user_id", "window_start", "window_end", "sum_value", "count", "min_value", "max_value", "avg_value").collect())
    assert rows == [("a", 100000, 131000, 7, 2, 1, 6, 3.5), ("a", 500000, 530000, 7, 1, 7, 7, 7.0),
                    ("b", 200000, 230000, 9, 1, 9, 9, 9.0)]


@pytest.mark.parametrize("layout", ["table", "cells"])
def test_committed_state_as_dataframe(spark, sample, tmp_path, layout):
    """Open sessions read back from the checkpoint: the table's pages (the default layout) as
    ``[[key, start, end, accumulator], ...]`` per key group, or a cell per key (``--state-layout cells``)."""
    clicks, d = sample
    out = tmp_path / "out"
    sessionize(spark, input=str(d), output=str(out), key="user_id", time="ts_ms", gap=GAP, watermark_delay=DELAY,
               aggs=["sum:value", "count"], backend="heap" if layout == "table" else "rocksdb",
               partitions=2, state_layout=None if layout == "table" else layout)  # no final: sessions stay open
    df = read_state_df(spark, str(out / "_checkpoint"), "sessionize", "session-table" if layout == "table" else "sessions")
    assert set(df.columns) == {"key_group", "key", "namespace", "value", "ttl_timestamp"}
    rows = df.collect()
    opened = {(r[0], r[1], r[2]) for r in sessionize_reference(clicks, 30_000)} - {tuple(r[:3]) for r in output_rows(spark, out)}
    assert opened and all(r["namespace"] is None for r in rows)
    if layout == "table":  # a page per key group, under the group's representative key
        assert {r["key"] for r in rows} <= set(map(str, key_group_representatives(128)))  # keys as text
        stored = {(k, s, e) for r in rows for k, s, e, _ in json.loads(r["value"])}
    else:  # one value per key: [timer, start, end, [sum, count], ...], the open sessions next to their accumulators
        stored = {(r["key"], v[i], v[i + 1]) for r in rows for v in [json.loads(r["value"])] for i in range(1, len(v), 3)}
    assert stored == opened


def test_the_reader_takes_a_glob_and_checks_a_streams_files_are_in_name_order_resumed_or_not(spark, tmp_path):
    clicks = clickstream(900, 20)
    d = write_input(clicks, tmp_path / "in", files=3)  # modification times one second apart in name order
    (d / "README.md").write_text("# clicks\n")
    later = tmp_path / "part-00002.csv"
    (d / "part-00002.csv").rename(later)  # arrives after the first run
    run = functools.partial(sessionize, spark, input=f"{d}/*.csv", output=str(tmp_path / "out"), key="user_id",
                            time="ts_ms", gap=GAP, watermark_delay=DELAY, aggs=["sum:value", "count"])
    with pytest.raises(InputError, match=re.escape(f"input {d} holds 2 .csv files and 1 other (README.md)")):
        run(input=str(d))
    first = (d / "part-00000.csv").stat().st_mtime
    os.utime(d / "part-00001.csv", (first, first))
    with pytest.raises(InputError, match=r"part-00000.csv \(.+\) and part-00001.csv \(.+\) have the same modification"):
        run()
    assert not (tmp_path / "out").exists()  # refused before anything ran
    os.utime(d / "part-00001.csv", (first + 1, first + 1))
    assert run().total("records_in") == 600
    later.rename(d / "part-00002.csv")
    os.utime(d / "part-00000.csv", (first + 1, first + 1))  # files read already: their times no longer count
    summary = run(final=True)
    assert summary.total("records_in") == 300 and summary.total("late") == 0
    assert output_rows(spark, tmp_path / "out") == sessionize_reference(clicks, 30_000)
