"""The driver's files without Spark: staged files become an epoch's part files as a whole, a replayed
epoch replaces what an earlier attempt published, metrics lines are per epoch, and the epoch log
keeps an epoch's intent for its replays."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from statekit.spark.epochs import EpochLog, EpochRecord
from statekit.spark.output_dir import STAGING, OutputDir


def table(*values: int) -> pa.Table:
    return pa.table({"x": pa.array(values, pa.int64())})


def published(root, sub: str = "") -> dict[str, list[int]]:
    d = root / f"{sub}epoch=0"
    return {p.name: pq.read_table(p).column("x").to_pylist() for p in sorted(d.glob("*.parquet"))} if d.exists() else {}


def test_staged_files_are_published_as_the_epoch_and_a_replay_replaces_them(tmp_path):
    out = pickle.loads(pickle.dumps(OutputDir(str(tmp_path))))  # tasks get it pickled
    first = {0: out.stage(0, "r-p0-a", table(1, 2)), 1: out.stage(0, "r-p1-a", table(3))}
    out.stage(0, "r-p1-failed", table(99))  # an attempt that failed: never published
    out.publish(0, first)
    assert published(tmp_path) == {"part-00000.parquet": [1, 2], "part-00001.parquet": [3]}
    replay = {0: out.stage(0, "r-p0-b", table(1, 2))}  # e.g. the replay ran with one partition
    out.publish(0, replay)
    out.drop_staging(0)
    assert published(tmp_path) == {"part-00000.parquet": [1, 2]}
    assert not (tmp_path / STAGING / "epoch=0").exists()
    out.stage(1, "r-p0-a", table(4))  # an attempt of the next epoch, stopped before it published
    out.record_metrics({"epoch": 0})  # the epoch's last file: no empty staging directory is left behind
    assert [p.name for p in (tmp_path / STAGING).iterdir()] == ["epoch=1"]
    out.drop_staging(1)
    out.record_metrics({"epoch": 1})
    assert not (tmp_path / STAGING).exists()


def test_publishing_nothing_removes_an_earlier_attempts_side_output(tmp_path):
    out = OutputDir(str(tmp_path))
    out.publish(0, {0: out.stage(0, "l-p0-a", table(7))}, "_late/")
    assert published(tmp_path, "_late/") == {"part-00000.parquet": [7]}
    out.publish(0, {}, "_late/")
    assert not (tmp_path / "_late" / "epoch=0").exists()


def test_metrics_keep_one_line_per_epoch(tmp_path):
    out = OutputDir(str(tmp_path))
    assert out.metrics() == []
    out.record_metrics({"epoch": 1, "n": 1})
    out.record_metrics({"epoch": 0, "n": 2})
    out.record_metrics({"epoch": 1, "n": 3})  # a replay of epoch 1
    assert out.metrics() == [{"epoch": 0, "n": 2}, {"epoch": 1, "n": 3}]
    assert len((tmp_path / "_metrics.jsonl").read_text().splitlines()) == 2


def test_epoch_log_keeps_an_epochs_intent_for_its_replays_until_commit(tmp_path):
    log = EpochLog(str(tmp_path))
    assert log.last() is None
    assert log.intent(0, {"time_limit": 10}) == {"time_limit": 10}
    assert log.intent(0, {"time_limit": 99}) == {"time_limit": 10}  # a replay decides the same
    log.commit(EpochRecord(0, -5, 20, 3, False, 2, "op"))
    assert log.last() == EpochRecord(0, -5, 20, 3, False, 2, "op")
    assert log.last().next_watermark(15) == 5 and log.last().next_watermark(30) == -5  # never decreases
    assert log.intent(1, {"time_limit": 50}) == {"time_limit": 50}
    assert not (tmp_path / "_driver" / "intent=0.json").exists()


def test_a_staging_file_written_in_pieces_is_staged_whole_and_only_when_put(tmp_path, monkeypatch):
    """A task's results go to a local file a step at a time: staged as one file once put; a file not put
    (the attempt failed) stages nothing; neither leaves its local file behind."""
    import tempfile

    local = tmp_path / "local"
    local.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(local))
    out = OutputDir(str(tmp_path / "out"))
    with out.staging_file(0, "r-p0-a", table().schema) as staged:
        for piece in (table(1, 2), table(), table(3)):
            staged.write(piece)
        assert not (tmp_path / "out" / STAGING).exists()  # nothing staged before the put
        rel = staged.put()
    with pytest.raises(RuntimeError, match="the attempt failed"):
        with out.staging_file(0, "r-p1-a", table().schema) as failed:
            failed.write(table(99))
            raise RuntimeError("the attempt failed")
    assert sorted(p.name for p in (tmp_path / "out" / STAGING / "epoch=0").iterdir()) == ["r-p0-a.parquet"]
    assert list(local.iterdir()) == []
    out.publish(0, {0: rel})
    assert published(tmp_path / "out") == {"part-00000.parquet": [1, 2, 3]}
