"""Bad input and an unavailable checkpoint location through Spark, on both backends: every bad row
lands in ``_invalid/`` with its reason and is counted, valid-but-odd rows (negative, duplicate,
out-of-order times, huge values, empty files) give the reference's sessions, a far-future time
cannot flush every window, and a checkpoint location that is down is retried, then named."""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import date
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from statekit.checkpoint import CheckpointError, CheckpointUnavailableError
from statekit.cli import main
from statekit.clickstream import Click, sessionize_reference
from statekit.jobs import sessionize
from statekit.spark import InputError
from tests.spark_support import clickstream, output_rows

pytestmark = pytest.mark.spark
GAP_MS = 30_000
CENTURY_MS = 100 * 365 * 24 * 3600 * 1000


def write_files(directory: Path, tables: list[pa.Table]) -> Path:
    """One parquet file per table, modification times in name order (Spark's file source reads oldest first)."""
    directory.mkdir(parents=True)
    for i, t in enumerate(tables):
        p = directory / f"part-{i:05d}.parquet"
        pq.write_table(t, p)
        os.utime(p, (1_000_000 + i, 1_000_000 + i))
    return directory


def clicks_table(clicks: list[Click], key_type: pa.DataType = pa.string()) -> pa.Table:
    return pa.table({"user_id": pa.array([c.user_id for c in clicks], key_type), "ts_ms": pa.array([c.ts_ms for c in clicks], pa.int64()),
                     "value": pa.array([c.value for c in clicks], pa.int64())})


def run(spark, input_dir: Path, out: Path, backend: str = "rocksdb", **kw):
    kw.setdefault("aggs", ["sum:value", "count"])
    return sessionize(spark, input=str(input_dir), output=str(out), key="user_id", time="ts_ms", gap=GAP_MS,
                      backend=backend, partitions=2, final=True, **kw)


def invalid_rows(spark, out: Path) -> list[tuple]:
    return sorted((tuple(r) for r in spark.read.parquet(str(out / "_invalid")).select("user_id", "ts_ms", "reason").collect()),
                  key=repr)


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_mixed_bad_rows_are_refused_and_the_rest_matches_the_reference(spark, tmp_path, backend):
    clicks = clickstream(1500, 30, seed=5)
    now = int(time.time() * 1000)
    odd = [Click("neg", -5000, 1), Click("neg", -4000, 2),           # before 1970: valid
           Click("dup", 10_000, 3), Click("dup", 10_000, 3),         # duplicates: both count
           *(Click("ooo", clicks[-1].ts_ms + dt, 1) for dt in (90_000, 70_000, 80_000))]  # out of order, in one epoch
    bad = {("x", None): "null time", (None, 5_000): "null key",
           ("far", now + CENTURY_MS): "time ahead of the clock", ("edge", (1 << 62) + 1): "time out of range"}
    bad_table = pa.table({"user_id": pa.array([k for k, _ in bad], pa.string()),
                          "ts_ms": pa.array([t for _, t in bad], pa.int64()), "value": pa.array([1] * len(bad), pa.int64())})
    third = len(clicks) // 3
    tables = [clicks_table(clicks[:third] + odd[:4]), pa.concat_tables([clicks_table(clicks[third:2 * third]), bad_table]),
              clicks_table([]),                                       # an empty file: an epoch with no records
              clicks_table(clicks[2 * third:] + odd[4:])]
    d = write_files(tmp_path / "in", tables)
    summary = run(spark, d, tmp_path / "out", backend, watermark_delay=10_000)

    got = invalid_rows(spark, tmp_path / "out")
    assert [(k, t) for k, t, _ in got] == sorted(bad, key=repr)
    for k, t, reason in got:
        assert reason.startswith(bad[(k, t)]), (k, t, reason)
    epochs = summary.epochs
    assert [m["invalid"] for m in epochs] == [0, len(bad), 0, 0, 0] and summary.total("future") == 1
    assert epochs[2]["records_in"] == 0 and not epochs[2]["final"]  # the empty file committed as an epoch
    assert summary.total("late") == 0
    rows = output_rows(spark, tmp_path / "out")
    assert rows == sessionize_reference(clicks + odd, GAP_MS)
    assert sum(r[4] for r in rows) == summary.total("records") == len(clicks) + len(odd)  # nothing lost
    assert summary.total("records_in") == sum(t.num_rows for t in tables) == summary.total("records") + summary.total("invalid")



def _json_lines(path: Path, lines: list[str], mtime: int) -> None:
    path.write_text("".join(x + "\n" for x in lines))
    os.utime(path, (mtime, mtime))


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_text_times_and_missing_fields_in_json_are_refused_with_reasons(spark, tmp_path, backend):
    """json input (times read as text): every text-time class in one stream, both backends."""
    clicks = clickstream(900, 20, seed=21)
    now = int(time.time() * 1000)
    odd = [Click("neg", -5000, 1), Click("neg", -4000, 2), Click("dup", 10_000, 3), Click("dup", 10_000, 3),
           Click("ws", 123, 4),                                                    # " 123 ": int() strips blanks
           *(Click("ooo", clicks[-1].ts_ms + dt, 1) for dt in (90_000, 70_000, 80_000))]
    odd_lines = [json.dumps({"user_id": c.user_id, "ts_ms": c.ts_ms, "value": c.value}) for c in odd]
    odd_lines[4] = '{"user_id": "ws", "ts_ms": " 123 ", "value": 4}'
    # (json line, key, time as text, expected reason prefix)
    bad = [('{"ts_ms": 5000, "value": 1}', None, "5000", "null key"),                 # key field missing
           ('{"user_id": null, "ts_ms": 5001, "value": 1}', None, "5001", "null key"),
           ('{"user_id": "no-time", "value": 1}', "no-time", None, "null time"),     # time field missing
           ('{"user_id": "null-time", "ts_ms": null, "value": 1}', "null-time", None, "null time"),
           ('{"user_id": "text", "ts_ms": "abc", "value": 1}', "text", "abc", "unparsable time"),
           ('{"user_id": "fraction", "ts_ms": 1.5, "value": 1}', "fraction", "1.5", "time is not a whole number of ms"),
           ('{"user_id": "half-ms", "ts_ms": 2000.5, "value": 1}', "half-ms", "2000.5", "time is not a whole number of ms"),
           ('{"user_id": "exponent", "ts_ms": 1e-3, "value": 1}', "exponent", "1e-3", "time is not a whole number of ms"),
           ('{"user_id": "no-date", "ts_ms": "12:00", "value": 1}', "no-date", "12:00", "time has no date: '12:00'"),
           ('{"user_id": "bool", "ts_ms": true, "value": 1}', "bool", "true", "unparsable time"),
           ('{"user_id": "huge", "ts_ms": 99999999999999999999, "value": 1}', "huge", "99999999999999999999",
            "time out of range [-2**62, 2**62] ms"),
           ('{"user_id": "edge", "ts_ms": 4611686018427387905, "value": 1}', "edge", "4611686018427387905",
            "time out of range [-2**62, 2**62] ms"),
           (json.dumps({"user_id": "far", "ts_ms": now + CENTURY_MS, "value": 1}), "far", str(now + CENTURY_MS),
            "time ahead of the clock: "),
           ('{"user_id": "broken", "ts_ms": ', None, None, "json record not readable as the columns' types")]
    third = len(clicks) // 3
    rows = lambda cs: [json.dumps({"user_id": c.user_id, "ts_ms": c.ts_ms, "value": c.value}) for c in cs]  # noqa: E731
    d = tmp_path / "in"
    d.mkdir()
    _json_lines(d / "part-00000.json", rows(clicks[:third]) + odd_lines[:5], 1_000_000)
    _json_lines(d / "part-00001.json", rows(clicks[third:2 * third]) + [b[0] for b in bad], 1_000_001)
    (d / "part-00002.json").write_text("")                                            # empty file: an empty epoch
    os.utime(d / "part-00002.json", (1_000_002, 1_000_002))
    _json_lines(d / "part-00003.json", rows(clicks[2 * third:]) + odd_lines[5:], 1_000_003)
    out = tmp_path / "out"
    summary = run(spark, d, out, backend, watermark_delay=10_000)

    got = invalid_rows(spark, out)
    assert len(got) == len(bad), got
    expected = sorted(bad, key=lambda b: repr((b[1], b[2])))
    for (k, t, reason), (line, ek, et, prefix) in zip(got, expected):
        assert (k, t) == (ek, et) and reason is not None and reason.startswith(prefix), (line, k, t, reason)
    assert [m["invalid"] for m in summary.epochs] == [0, len(bad), 0, 0, 0] and summary.total("future") == 1
    assert summary.epochs[2]["records_in"] == 0 and not summary.epochs[2]["final"]
    assert summary.total("late") == 0
    sessions = output_rows(spark, out)
    assert sessions == sessionize_reference(clicks + odd, GAP_MS)
    valid_in = len(clicks) + len(odd)
    assert sum(r[4] for r in sessions) == summary.total("records") == valid_in  # nothing lost
    assert summary.total("records_in") == valid_in + len(bad) == summary.total("records") + summary.total("late") \
        + summary.total("invalid")


def test_nan_keys_and_unhashable_keys_are_refused(spark, tmp_path):
    # a double key column and a double time column in one run: NaN/null keys; fractional, NaN, infinite,
    # null and out-of-range float times refused; integer-valued and negative float times are valid
    nan, inf = float("nan"), float("inf")
    rows = [(1.5, 1000.0, "valid"), (1.5, 2000.0, "valid"), (1.5, -3000.0, "valid"),
            (2.5, 1500.5, "time is not a whole number of ms: 1500.5 (epoch seconds? pass --time-unit s)"),
            (2.5, nan, "time is not a finite number: nan"), (2.5, inf, "time is not a finite number: inf"),
            (2.5, None, "null time"),
            (2.5, 1e19, "time out of range [-2**62, 2**62] ms"),
            (nan, 1000.0, "NaN key"), (None, 3000.0, "null key"), (nan, 1500.5, "NaN key")]  # both bad: the key's reason
    d1 = write_files(tmp_path / "float", [pa.table({"user_id": pa.array([r[0] for r in rows], pa.float64()),
                                                    "ts_ms": pa.array([r[1] for r in rows], pa.float64()),
                                                    "value": pa.array(range(1, len(rows) + 1), pa.int64())})])
    s = run(spark, d1, tmp_path / "out1", mode="batch")
    got = sorted((r.value, r.reason) for r in spark.read.parquet(str(tmp_path / "out1" / "_invalid")).collect())
    assert got == [(i, r[2]) for i, r in enumerate(rows, 1) if r[2] != "valid"]
    assert output_rows(spark, tmp_path / "out1") == [(1.5, -3000, 32000, 6, 3)]
    assert s.total("invalid") == len(rows) - 3 and s.total("records") == 3

    d2 = write_files(tmp_path / "list", [pa.table({"user_id": pa.array([[1, 2], None], pa.list_(pa.int64())),
                                                   "ts_ms": pa.array([1000, 2000], pa.int64()),
                                                   "value": pa.array([1, 2], pa.int64())})])
    s = run(spark, d2, tmp_path / "out2", mode="batch")
    reasons = sorted(r.reason for r in spark.read.parquet(str(tmp_path / "out2" / "_invalid")).collect())
    assert reasons == ["null key", "unhashable key"] and s.total("records") == 0


@pytest.mark.parametrize("column,values,reason", [
    ("user_id", pa.array([[("a", 1)], None], pa.map_(pa.string(), pa.int64())), "unhashable key"),
    ("user_id", pa.array([{"a": 1}, None], pa.struct([("a", pa.int64())])), "unhashable key"),
    ("user_id", pa.array([Decimal("1.50"), None], pa.decimal128(10, 2)),
     "unserializable key: cannot serialize object of type Decimal"),
    ("user_id", pa.array([date(2024, 1, 1), None], pa.date32()), "unserializable key: cannot serialize object of type date"),
], ids=["map-key", "struct-key", "decimal-key", "date-key"])
def test_spark_column_types_that_cannot_be_keys_or_times(spark, tmp_path, column, values, reason):
    """Spark column types the router cannot use as a state key or an event time: each row is refused with a
    reason naming the problem (the null row: null key / null time), counted, and nothing reaches the state."""
    cols = {"user_id": pa.array(["a", "b"], pa.string()), "ts_ms": pa.array([1000, 2000], pa.int64()),
            "value": pa.array([1, 2], pa.int64()), column: values}
    d = write_files(tmp_path / "in", [pa.table(cols)])
    s = run(spark, d, tmp_path / "out", backend="heap", mode="batch")
    got = sorted((r.value, r.reason) for r in spark.read.parquet(str(tmp_path / "out" / "_invalid")).collect())
    null_reason = "null key" if column == "user_id" else "null time"
    assert [v for v, _ in got] == [1, 2] and got[0][1].startswith(reason) and got[1][1] == null_reason, got
    assert s.total("invalid") == 2 and s.total("records") == 0 and s.total("records_in") == 2
    assert spark.read.parquet(str(tmp_path / "out")).count() == 0



def test_a_time_column_of_a_type_that_holds_no_time_is_refused_before_running(spark, tmp_path):
    """A boolean time column holds no time: refused up front, naming the column, its type and what is read."""
    d = write_files(tmp_path / "in", [pa.table({"user_id": pa.array(["a", "b"], pa.string()),
                                                "ts_ms": pa.array([True, None], pa.bool_()),
                                                "value": pa.array([1, 2], pa.int64())})])
    with pytest.raises(InputError, match=r"time column 'ts_ms' has type boolean: statekit reads TIMESTAMP"):
        run(spark, d, tmp_path / "out", backend="heap", mode="batch")
    assert not (tmp_path / "out").exists()


def test_a_null_in_a_timestamp_time_column_goes_to_invalid_with_its_reason(spark, tmp_path):
    """A Spark TIMESTAMP time column is read as it is (it was refused before statekit took timestamps): its
    null goes to ``_invalid/`` as "null time", and the session's bounds come back as timestamps."""
    d = write_files(tmp_path / "in", [pa.table({"user_id": pa.array(["a", "b"], pa.string()),
                                                "ts_ms": pa.array([1000, None], pa.timestamp("ms", tz="UTC")),
                                                "value": pa.array([1, 2], pa.int64())})])
    s = run(spark, d, tmp_path / "out", backend="heap", mode="batch")
    assert invalid_rows(spark, tmp_path / "out") == [("b", None, "null time")] and s.total("invalid") == 1
    table = pa.concat_tables(pq.read_table(f) for f in sorted((tmp_path / "out").glob("epoch=*/*.parquet")))
    kind = table.schema.field("window_start").type
    assert pa.types.is_timestamp(kind) and kind.unit == "us" and kind.tz is not None
    start = table.column("window_start").cast(pa.int64()).to_pylist()
    assert table.column("user_id").to_pylist() == ["a"] and start == [1000 * 1000]


def test_max_ahead_from_spark_conf_and_the_cli_flag(spark, tmp_path, capsys):
    now = int(time.time() * 1000)
    hour = 3600 * 1000
    clicks = [Click("a", now - hour, 1), Click("a", now + hour // 2, 2), Click("b", now + 2 * hour, 3)]
    d = write_files(tmp_path / "in", [clicks_table(clicks)])
    spark.conf.set("spark.statekit.max_ahead", "1h")
    try:
        s = run(spark, d, tmp_path / "conf", mode="batch")
    finally:
        spark.conf.unset("spark.statekit.max_ahead")
    [(key, ts, reason)] = invalid_rows(spark, tmp_path / "conf")
    assert (key, ts) == ("b", now + 2 * hour) and reason.startswith("time ahead of the clock: ")
    assert reason.endswith("(max_ahead 1h)") and s.total("future") == 1 == s.total("invalid")
    assert output_rows(spark, tmp_path / "conf") == sessionize_reference(clicks[:2], GAP_MS)
    base = ["sessionize", "--input", str(d), "--key", "user_id", "--time", "ts_ms", "--gap", "30s",
            "--agg", "sum:value", "--agg", "count", "--partitions", "2", "--mode", "batch"]
    assert main([*base, "--output", str(tmp_path / "cli-1h"), "--max-ahead", "1h"]) == 0
    assert "1 invalid" in capsys.readouterr().out
    assert main([*base, "--output", str(tmp_path / "cli-none"), "--max-ahead", "none"]) == 0  # no limit: all valid
    assert "3 records" in (out := capsys.readouterr().out) and "0 invalid" in out
    assert output_rows(spark, tmp_path / "cli-none") == sessionize_reference(clicks, GAP_MS)
    assert main([*base, "--output", str(tmp_path / "cli-bad"), "--max-ahead", "soon"]) == 2
    assert "--max-ahead: cannot parse duration 'soon'" in capsys.readouterr().err


def test_far_future_record_does_not_flush_open_windows(spark, tmp_path):
    clicks = clickstream(1200, 20, seed=9)
    far = [Click(clicks[0].user_id, int(time.time() * 1000) + CENTURY_MS, 1)]
    d = write_files(tmp_path / "in", [clicks_table(clicks[:300]), clicks_table(clicks[300:600] + far),
                                      clicks_table(clicks[600:900]), clicks_table(clicks[900:])])
    guarded = run(spark, d, tmp_path / "guarded", watermark_delay=10_000)
    assert guarded.total("late") == 0 and guarded.total("future") == 1
    assert output_rows(spark, tmp_path / "guarded") == sessionize_reference(clicks, GAP_MS)
    watermarks = [m["watermark"] for m in guarded.epochs[:-1]]
    assert all(w is None or w < clicks[-1].ts_ms for w in watermarks)

    # without the limit, the user sees the jump: the watermark leaps a century after the next epoch, every
    # open window fires then, and the rows of the epochs after are late, counted and side-output
    unguarded = run(spark, d, tmp_path / "unguarded", watermark_delay=10_000, max_ahead="none")
    assert unguarded.total("future") == 0 and unguarded.epochs[2]["watermark"] > far[0].ts_ms - 20_000
    late = spark.read.parquet(str(tmp_path / "unguarded" / "_late")).collect()
    assert len(late) == unguarded.total("late") == 300
    assert all(r.reason.startswith("late: behind watermark") for r in late)


def test_a_10_mib_value_passes_through_state_and_output(spark, tmp_path):
    big = "v" * (10 << 20)
    table = pa.table({"user_id": ["a", "a", "b"], "ts_ms": pa.array([1000, 2000, 1000], pa.int64()),
                      "value": pa.array([1, 2, 3], pa.int64()), "payload": ["small", big, "tiny"]})
    d = write_files(tmp_path / "in", [table])
    run(spark, d, tmp_path / "out", mode="batch", aggs=["count", "max:payload"])
    rows = {r.user_id: r.max_payload for r in spark.read.parquet(str(tmp_path / "out")).collect()}
    assert rows == {"a": big, "b": "tiny"}


def test_an_input_directory_without_data_files_is_an_error_naming_it(spark, tmp_path):
    d = tmp_path / "empty"
    d.mkdir()
    (d / "_SUCCESS").write_text("")
    with pytest.raises(InputError, match=f"input directory {d}.* has no data files"):
        run(spark, d, tmp_path / "out")


def _break(checkpoint: Path) -> Path:
    """Make the checkpoint location unusable: its directory moved away and a plain file in its place."""
    away = checkpoint.with_name(checkpoint.name + ".away")
    checkpoint.rename(away)
    checkpoint.write_text("not a directory")
    return away


def _repair(checkpoint: Path, away: Path) -> None:
    checkpoint.unlink()
    away.rename(checkpoint)


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_checkpoint_location_down_for_good_then_for_a_while(spark, tmp_path, backend):
    clicks = clickstream(1200, 25, seed=3)
    d1 = write_files(tmp_path / "in1", [clicks_table(clicks[:600])])
    d2 = write_files(tmp_path / "in2", [clicks_table(clicks[600:])])
    ck, out = tmp_path / "ck", tmp_path / "out"

    def go(d: Path, mode: str):  # stream: the first half, its sessions left open; batch: the rest, then final
        return sessionize(spark, input=str(d), output=str(out), key="user_id", time="ts_ms", gap=GAP_MS,
                          aggs=["sum:value", "count"], backend=backend, partitions=2, mode=mode, checkpoint=str(ck))

    first = go(d1, "stream")
    assert first.total("records") == 600
    away = _break(ck)  # down for good: a clear error naming the location after the retries (sessionize reads the job first)
    with pytest.raises(CheckpointUnavailableError, match=f"checkpoint location '{ck}': read '_job/job.json' failed after 5 attempts"):
        go(d2, "batch")
    timer = threading.Timer(1.0, _repair, (ck, away))  # down for a while: retried with backoff until it is back
    timer.start()
    t0 = time.monotonic()
    second = go(d2, "batch")
    timer.join()
    assert time.monotonic() - t0 > 1.0
    assert output_rows(spark, out) == sessionize_reference(clicks, GAP_MS)  # no duplicates, no loss
    epochs = [json.loads(x)["epoch"] for x in (out / "_metrics.jsonl").read_text().splitlines()]
    assert epochs == list(range(len(first.epochs) + len(second.epochs)))


def test_checkpoint_location_failing_on_the_executors_mid_stream(spark, tmp_path):
    """The operator's part of the checkpoint becomes unusable after epoch 0 (replaced by a plain file, from the
    driver's progress callback): the driver's own records stay reachable, so the failure hits the Python workers
    restoring epoch 0 for epoch 1. Expected: each task retries with backoff, Spark retries the tasks, then the run
    fails naming the location and the operation; the location back, a rerun on the same checkpoint replays
    epoch 1 and the output equals the reference (no duplicates, no loss)."""
    clicks = clickstream(1200, 25, seed=17)
    d = write_files(tmp_path / "in", [clicks_table(clicks[i:i + 400]) for i in range(0, 1200, 400)])
    ck, out = tmp_path / "ck", tmp_path / "out"
    operator_dir = ck / "sessionize"
    moved: list[Path] = []

    def break_after_epoch_0(m: dict) -> None:
        if m["epoch"] == 0:
            moved.append(_break(operator_dir))

    with pytest.raises(Exception, match=f"checkpoint location '{ck}': list 'sessionize' failed after 5 attempts"):
        run(spark, d, out, checkpoint=str(ck), watermark_delay=10_000, progress=break_after_epoch_0)
    assert [json.loads(x)["epoch"] for x in (out / "_metrics.jsonl").read_text().splitlines()] == [0]
    assert not (out / "epoch=1").exists()
    _repair(operator_dir, moved[0])
    again = run(spark, d, out, checkpoint=str(ck), watermark_delay=10_000)
    assert [m["epoch"] for m in again.epochs] == [1, 2, 3] and again.epochs[-1]["final"]
    assert output_rows(spark, out) == sessionize_reference(clicks, GAP_MS)
    assert again.total("records") == 800 and again.total("late") == 0


def test_output_with_epochs_but_an_empty_checkpoint_is_refused(spark, tmp_path):
    d = write_files(tmp_path / "in", [clicks_table(clickstream(300, 10, seed=2))])
    run(spark, d, tmp_path / "out", mode="batch", checkpoint=str(tmp_path / "ck"))
    with pytest.raises(CheckpointError, match="holds epoch 1 but checkpoint .*other is empty"):
        run(spark, d, tmp_path / "out", mode="batch", checkpoint=str(tmp_path / "other"))
