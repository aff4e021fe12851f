"""Every committed epoch is recovered or refused, and a job rolls back to a retained epoch on purpose
(statekit issue 35): a driver record lost after its epoch completed is rebuilt from the output's metrics
line; a record lost with its metrics line, or a newest epoch missing a partition's state, is refused before
anything runs, naming the epoch and the way out; ``statekit checkpoint rollback`` rewinds Spark's checkpoint
(its compacted file-source log too), the output, the state and the driver's records, and the rerun equals
the reference. The issue's scenario runs each step on a checkpoint as a new ``statekit sessionize`` process
(the first run, which restores nothing, runs in the shared session)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from checkpoint_workload import MAX_PAR, Job
from statekit import StateConfig, create_backend
from statekit.checkpoint import CheckpointStore
from statekit.checkpoint.errors import CorruptCheckpointError
from statekit.cli import main
from statekit.jobs import sessionize
from statekit.spark.recovery import EpochMismatchError
from statekit.spark.spark_checkpoint import SparkCheckpoint
from tests.spark_support import DELAY, GAP, StagedInput, metrics, output_rows, staged_input, statekit_process, succeeded

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _sessionize(s: StagedInput, backend: str = "rocksdb", final: bool = False) -> subprocess.CompletedProcess:
    """One run of the job over what ``s.inp`` holds, as a new process with fresh Python workers."""
    return statekit_process("sessionize", "--input", str(s.inp), "--output", str(s.out), "--key", "user_id", "--time",
                "ts_ms", "--gap", GAP, "--watermark-delay", DELAY, "--agg", "sum:value", "--agg", "count", "--backend", backend,
                "--partitions", "2", "--master", "local[2]", "--conf", "spark.python.worker.reuse=false",
                "--conf", "spark.ui.enabled=false", *(["--final"] if final else []))


def _run(spark, s: StagedInput, final: bool, backend: str = "rocksdb"):
    """One run of the job over what ``s.inp`` holds, in the shared session."""
    return sessionize(spark, input=str(s.inp), output=str(s.out), key="user_id", time="ts_ms", gap=GAP,
                      watermark_delay=DELAY, aggs=["sum:value", "count"], backend=backend, partitions=2, final=final)


def _published(out: Path) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in out.rglob("epoch=*") if "_checkpoint" not in p.parts)


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_a_record_lost_after_its_epoch_completed_is_rebuilt(spark, tmp_path, backend):
    """The issue: 4 of 8 files, no --final; the newest driver record deleted (its state, output, metrics line
    and Spark's commit stay); the other 4 files with --final. It exited 0 with ~15% of the sessions missing:
    the next batch ran as the lost epoch and its state commit kept the first attempt's manifest."""
    s = staged_input(spark, tmp_path, 1200, 25, seed=31, files=8)
    for i in range(4):
        s.add(i)
    _run(spark, s, final=False, backend=backend)
    record = s.out / "_checkpoint" / "_driver" / "epoch=3.json"
    assert sorted(p.name for p in record.parent.glob("epoch=*")) == [f"epoch={e}.json" for e in range(4)]
    record.unlink()
    for i in range(4, 8):
        s.add(i)
    r = succeeded(_sessionize(s, backend, final=True))
    assert "the driver's record of epoch 3 was lost after the epoch completed" in r.stderr and "rebuilt it" in r.stderr
    assert output_rows(spark, s.out) == s.reference
    assert [m["epoch"] for m in metrics(s.out)] == list(range(9))
    assert [m["batch_id"] for m in metrics(s.out)] == [*range(8), None]  # each batch read once


def test_a_record_lost_with_its_metrics_line_is_refused_then_rolled_back(spark, tmp_path):
    """Record and metrics line of epoch 3 both lost: only Spark's commit log knows batch 3 ran. The rerun is
    refused before it processes anything, naming the epoch, the batch and the rollback; after a rollback to an
    earlier epoch the batches after it are read again and the sessions equal the reference."""
    s = staged_input(spark, tmp_path, 1200, 25, seed=37, files=8)
    for i in range(4):
        s.add(i)
    _run(spark, s, final=False)
    ck = s.out / "_checkpoint"
    (ck / "_driver" / "epoch=3.json").unlink()
    log = s.out / "_metrics.jsonl"
    log.write_text("".join(x + "\n" for x in log.read_text().splitlines() if json.loads(x)["epoch"] != 3))
    for i in range(4, 8):
        s.add(i)
    before = _published(s.out)
    r = _sessionize(s, final=True)
    assert r.returncode == 2, (r.stdout[-2000:], r.stderr[-4000:])
    assert f"Spark's checkpoint {ck / '_spark'} committed batch 3, but the driver's newest record is epoch 2" in r.stderr
    assert "the record of epoch 3 (_driver/epoch=3.json) and its metrics line" in r.stderr
    assert f"statekit checkpoint rollback {ck} --to-epoch 2" in r.stderr and "Traceback" not in r.stderr
    assert _published(s.out) == before and [m["epoch"] for m in metrics(s.out)] == [0, 1, 2]  # nothing new
    assert not (ck / "_spark" / "offsets" / "4").exists()  # Spark planned nothing

    rolled = succeeded(statekit_process("checkpoint", "rollback", str(ck), "--to-epoch", "1"))
    assert f"checkpoint {ck} rolled back to epoch 1 (Spark batch 1)" in rolled.stdout
    assert "2 offsets and 2 commits removed" in rolled.stdout and "2 epoch directories" in rolled.stdout
    assert "1 metrics lines removed" in rolled.stdout and "1 epoch records" in rolled.stdout
    assert _published(s.out) == ["epoch=0", "epoch=1"]
    succeeded(_sessionize(s, final=True))
    assert output_rows(spark, s.out) == s.reference
    assert [(m["epoch"], m["batch_id"]) for m in metrics(s.out)] == [*((e, e) for e in range(8)), (8, None)]


def test_a_newest_epoch_missing_a_partitions_manifest_is_refused_before_processing(spark, tmp_path):
    s = staged_input(spark, tmp_path, 900, 20, seed=43, files=3)
    s.add(0)
    s.add(1)
    _run(spark, s, final=False)
    ck = s.out / "_checkpoint"
    (ck / "sessionize" / "kg=64-127" / "epoch=1" / "manifest.json").unlink()
    s.add(2)
    with pytest.raises(EpochMismatchError, match=(
            rf"checkpoint {re.escape(str(ck))}: the state of epoch 1, the newest the driver recorded, has no committed manifest for "
            r"partition 1 \(sessionize/kg=64-127, retained epochs \[0\]\): its state was deleted\. Ways out: roll "
            rf"back to epoch 0, the newest one retained whole \(statekit checkpoint rollback {re.escape(str(ck))} --to-epoch 0")):
        _run(spark, s, final=True)
    assert [m["epoch"] for m in metrics(s.out)] == [0, 1] and not (ck / "_spark" / "offsets" / "2").exists()
    assert main(["checkpoint", "rollback", str(ck), "--to-epoch", "0"]) == 0
    again = _run(spark, s, final=True)
    assert [m["epoch"] for m in again.epochs] == [1, 2, 3]
    assert output_rows(spark, s.out) == s.reference


def test_rollback_before_spark_compacted_its_source_log(spark, tmp_path, capsys, monkeypatch):
    """12 files: Spark's file source compacts its log at batch 9. Spark drops the plain files a compact file
    holds once they are older than its retention (``minBatchesToRetain`` of the source's own batches, which
    run behind the query's when a source has no new files in some batches); the test drops those of batches
    0-8 as Spark would. A rollback to epoch 4 must drop 9.compact and write batches 0-4 back from it; an
    interrupted rollback refuses runs until it is run again; the rerun reads files 5-11 again, exactly once."""
    s = staged_input(spark, tmp_path, 1200, 25, seed=47, files=12)
    for i in range(12):
        s.add(i)
    spark.conf.set("spark.statekit.retain", "20")
    try:
        first = _run(spark, s, final=False)
        assert [m["epoch"] for m in first.epochs] == list(range(12))
        ck = s.out / "_checkpoint"
        log = ck / "_spark" / "sources" / "0"
        assert {p.name for p in log.iterdir() if not p.name.startswith(".")} == {*map(str, range(9)), "9.compact", "10", "11"}
        for b in range(9):
            (log / str(b)).unlink()
            (log / f".{b}.crc").unlink()
        assert main(["checkpoint", "rollback", str(ck), "--to-epoch", "12"]) == 2
        assert (f"checkpoint {ck}: epoch 12 cannot be restarted from: the driver holds no record of it; epochs a "
                f"rollback can restart from: {list(range(12))}") in capsys.readouterr().err

        def interrupted(*_):  # after Spark's checkpoint and the output were rolled back
            raise OSError("interrupted")

        with monkeypatch.context() as m:
            m.setattr(CheckpointStore, "rollback", interrupted)
            with pytest.raises(OSError):
                main(["checkpoint", "rollback", str(ck), "--to-epoch", "4"])
        with pytest.raises(EpochMismatchError, match=re.escape(f"checkpoint {ck}: a rollback to epoch 4 was interrupted; "
                                                               f"finish it before a run: statekit checkpoint rollback {ck} --to-epoch 4")):
            _run(spark, s, final=True)
        assert main(["checkpoint", "rollback", str(ck), "--to-epoch", "4"]) == 0
        report = capsys.readouterr().out  # what the interrupted attempt left: the state and the driver's records
        assert "14 manifests" in report and "7 epoch records" in report and "0 offsets" in report, report
        assert sorted(p.name for p in log.iterdir() if not p.name.startswith(".")) == ["0", "1", "2", "3", "4"]
        assert (log / "0").read_text().splitlines()[0] == "v1" and '"batchId":0}' in (log / "0").read_text()

        second = _run(spark, s, final=True)
    finally:
        spark.conf.unset("spark.statekit.retain")
    assert [m["epoch"] for m in second.epochs] == list(range(5, 13)) and second.total("records") == 700
    assert output_rows(spark, s.out) == s.reference
    assert [(m["epoch"], m["batch_id"]) for m in metrics(s.out)] == [*((e, e) for e in range(12)), (12, None)]


def _log(directory: Path, name: str, batches: list[int]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"path": f"file:///in/part-{b}.csv", "timestamp": b, "batchId": b}) for b in batches]
    (directory / name).write_text("\n".join(["v1", *lines]))


def _offsets(root: Path, batch: int, log_offset: int) -> None:
    (root / "offsets").mkdir(parents=True, exist_ok=True)
    (root / "offsets" / str(batch)).write_text(f'v1\n{{"batchWatermarkMs":0}}\n{{"logOffset":{log_offset}}}')


def test_rewind_keeps_an_earlier_compact_file_and_names_a_malformed_one(tmp_path):
    """Between two compact files: 9.compact stays, 19.compact goes, the plain files 10-15 Spark dropped are
    written back from it, and Hadoop's checksum files go with their files. A compact file that is not Spark's
    is refused naming it."""
    root = tmp_path / "spark"
    src = root / "sources" / "0"
    _log(src, "9.compact", list(range(10)))
    _log(src, "19.compact", list(range(20)))
    for b in (16, 17, 18, 20):
        _log(src, str(b), [b])
    (src / ".19.compact.crc").write_bytes(b"crc")
    for b in range(21):
        _offsets(root, b, b)
        (root / "commits").mkdir(exist_ok=True)
        (root / "commits" / str(b)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    done = SparkCheckpoint(str(root)).rewind(15)
    assert (done.offsets, done.commits, done.source_files, done.rewritten) == (5, 5, 5, 6)
    assert sorted(p.name for p in src.iterdir()) == ["10", "11", "12", "13", "14", "15", "9.compact"]
    assert (src / "12").read_text() == "v1\n" + json.dumps({"path": "file:///in/part-12.csv", "timestamp": 12, "batchId": 12})
    assert sorted(int(p.name) for p in (root / "offsets").iterdir()) == list(range(16))
    again = SparkCheckpoint(str(root)).rewind(15)  # idempotent
    assert (again.offsets, again.commits, again.source_files, again.rewritten) == (0, 0, 0, 0)

    (src / "15.compact").write_text('v1\n{"path": "x", "batchId": "fifteen"}')  # not Spark's
    for b in range(10, 15):
        (src / str(b)).unlink()
    with pytest.raises(CorruptCheckpointError, match=re.escape(f"Spark's checkpoint {root}: sources/0/15.compact: line 2 "
                                                               f"is not a file entry with a batchId")):
        SparkCheckpoint(str(root)).rewind(12)


def test_a_corrupt_or_missing_state_file_names_the_rollback_command(tmp_path):
    """The errors of a damaged snapshot file name the way out: the rollback command with the checkpoint."""
    ck = str(tmp_path / "ck")
    store = CheckpointStore(ck)
    backend = create_backend(StateConfig(backend="heap", max_parallelism=MAX_PAR), range(MAX_PAR))
    job = Job(backend, [])
    for e in range(2):
        job.run_epoch(e)
        manifest = store.commit("op", e, backend).manifest
    backend.close()
    victim = Path(store.storage.full_path(max((f for f in manifest.files if f.epoch == 1), key=lambda f: f.size).path))
    way_out = (f"roll the job back to an earlier retained epoch: statekit checkpoint rollback {ck} --to-epoch <epoch "
               f"before 1> (statekit inspect {ck} lists the retained epochs)")
    for damage in ("flip", "delete"):
        if damage == "flip":
            victim.write_bytes(bytes([victim.read_bytes()[0] ^ 0x40]) + victim.read_bytes()[1:])
        else:
            victim.unlink()
        with pytest.raises(CorruptCheckpointError, match=("is corrupt" if damage == "flip" else "is missing")) as err:
            store.restore("op", StateConfig(backend="heap", max_parallelism=MAX_PAR), range(MAX_PAR))
        assert str(err.value).endswith(way_out)


def test_rewind_keeps_a_kafka_sources_initial_offsets(tmp_path):
    """A Kafka source beside a file source: rewinding to batch 0 drops later offsets and commits and trims only the
    file source's log; rewinding to no batch at all keeps the Kafka source's initial offsets (a zero byte, then v1),
    so a rerun starts from the same offsets, and empties the file source's log."""
    root = tmp_path / "spark"
    kafka = root / "sources" / "1"
    kafka.mkdir(parents=True)
    (kafka / "0").write_bytes(b'\0v1\n{"clicks":{"0":0,"1":0}}')
    for b in range(3):
        _log(root / "sources" / "0", str(b), [b])
        (root / "offsets").mkdir(exist_ok=True)
        (root / "offsets" / str(b)).write_text(f'v1\n{{"batchWatermarkMs":0}}\n{{"logOffset":{b}}}\n'
                                               f'{{"clicks":{{"0":{b * 10},"1":{b * 7}}}}}')
        (root / "commits").mkdir(exist_ok=True)
        (root / "commits" / str(b)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    done = SparkCheckpoint(str(root)).rewind(0)
    assert (done.offsets, done.commits, done.source_files) == (2, 2, 2)
    assert sorted(p.name for p in kafka.iterdir()) == ["0"]
    done = SparkCheckpoint(str(root)).rewind(-1)
    assert (done.offsets, done.commits, done.source_files) == (1, 1, 1)
    assert (kafka / "0").read_bytes().startswith(b"\0v1\n")
    assert list((root / "sources" / "0").iterdir()) == []
