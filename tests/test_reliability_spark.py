"""Bad input and an unavailable checkpoint location through Spark, on both backends: every bad row
lands in ``_invalid/`` with its reason and is counted, valid-but-odd rows (negative, duplicate,
out-of-order times, huge values, empty files) give the reference's sessions, a far-future time
cannot flush every window, and a checkpoint location that is down is retried, then named."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from statekit.checkpoint import CheckpointError, CheckpointUnavailableError
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


def test_nan_keys_and_unhashable_keys_are_refused(spark, tmp_path):
    d1 = write_files(tmp_path / "float", [pa.table({"user_id": pa.array([1.5, float("nan"), None, 1.5], pa.float64()),
                                                    "ts_ms": pa.array([1000, 2000, 3000, 4000], pa.int64()),
                                                    "value": pa.array([1, 2, 3, 4], pa.int64())})])
    s = run(spark, d1, tmp_path / "out1", mode="batch")
    assert sorted((t, r) for _, t, r in invalid_rows(spark, tmp_path / "out1")) == [(2000, "NaN key"), (3000, "null key")]
    assert output_rows(spark, tmp_path / "out1") == [(1.5, 1000, 34000, 5, 2)] and s.total("invalid") == 2

    d2 = write_files(tmp_path / "list", [pa.table({"user_id": pa.array([[1, 2], None], pa.list_(pa.int64())),
                                                   "ts_ms": pa.array([1000, 2000], pa.int64()),
                                                   "value": pa.array([1, 2], pa.int64())})])
    s = run(spark, d2, tmp_path / "out2", mode="batch")
    reasons = sorted(r.reason for r in spark.read.parquet(str(tmp_path / "out2" / "_invalid")).collect())
    assert reasons == ["null key", "unhashable key"] and s.total("records") == 0


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
    away = _break(ck)  # down for good: a clear error naming the location after the retries
    with pytest.raises(CheckpointUnavailableError, match=f"checkpoint location '{ck}': list '_driver' failed after 5 attempts"):
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


def test_output_with_epochs_but_an_empty_checkpoint_is_refused(spark, tmp_path):
    d = write_files(tmp_path / "in", [clicks_table(clickstream(300, 10, seed=2))])
    run(spark, d, tmp_path / "out", mode="batch", checkpoint=str(tmp_path / "ck"))
    with pytest.raises(CheckpointError, match="holds epoch 1 but checkpoint .*other is empty"):
        run(spark, d, tmp_path / "out", mode="batch", checkpoint=str(tmp_path / "other"))
