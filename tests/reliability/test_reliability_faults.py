"""Faults at the checkpoint level, on every backend: each is injected into a session-window job run
per epoch through the CheckpointStore; the committed state stays restorable and a restart
(restore + continue) gives output identical to an uninterrupted run."""

from __future__ import annotations

import random
import shutil
import threading
from pathlib import Path

import pytest

from statekit.operators import Output
from reliability_support import (OP, flaky_filesystem, flip_byte, make_job, random_epochs, session_operator,
                                 uninterrupted, use_filesystem, windows_of)
from statekit.checkpoint import (CheckpointError, CheckpointStore, CheckpointUnavailableError, CorruptCheckpointError,
                                 RetryPolicy, Storage)

EPOCHS = random_epochs(random.Random(21), 6, 30, ["a", "b", "c", ("d", 1), 5, 6], disorder=40, delay=5)
FAULT_AT = 3


@pytest.fixture
def expected(backend_name, tmp_path) -> dict:
    return uninterrupted(tmp_path, backend_name, EPOCHS)


def run(job, start: int = 0, stop: int = len(EPOCHS)) -> None:
    for e in range(start, stop):
        job.run_epoch(e, *EPOCHS[e])


def test_upload_failing_once_is_retried_with_backoff(backend_name, tmp_path, expected, monkeypatch):
    sleeps: list = []
    job = make_job(tmp_path, backend_name, retry=RetryPolicy(attempts=3, backoff_ms=10, sleep=sleeps.append))
    run(job, 0, FAULT_AT)
    flaky = flaky_filesystem({"write"}, failures=2)
    use_filesystem(job.store, flaky)
    run(job, FAULT_AT)
    assert flaky.handler.injected == 2 and sleeps == [0.01, 0.02]
    assert job.results == expected
    job.close()


def test_upload_failing_past_the_retries_keeps_the_previous_epoch(backend_name, tmp_path, expected):
    job = make_job(tmp_path, backend_name, retry=RetryPolicy(attempts=2, backoff_ms=0))
    run(job, 0, FAULT_AT)
    use_filesystem(job.store, flaky_filesystem({"write"}, failures=2))
    with pytest.raises(CheckpointUnavailableError) as err:
        job.run_epoch(FAULT_AT, *EPOCHS[FAULT_AT])
    assert str(job.store.storage.uri) in str(err.value) and "write" in str(err.value)
    assert "after 2 attempts" in str(err.value) and f"epoch={FAULT_AT}" in str(err.value)
    assert job.store.epochs(OP, job.ranges()[0]) == list(range(FAULT_AT))
    job.restart()  # the task is retried on a new worker: restore the last committed epoch, re-run
    run(job, FAULT_AT)
    assert job.results == expected
    job.close()


def test_crash_after_files_before_manifest(backend_name, tmp_path, expected, monkeypatch):
    job = make_job(tmp_path, backend_name)
    run(job, 0, FAULT_AT)

    def crash(self, rel, data, tmp_rel):
        raise OSError("injected crash before the manifest")

    monkeypatch.setattr(Storage, "commit", crash)
    with pytest.raises(OSError, match="injected"):
        job.run_epoch(FAULT_AT, *EPOCHS[FAULT_AT])
    monkeypatch.undo()
    part = job.ranges()[0]
    assert job.store.epochs(OP, part) == list(range(FAULT_AT))
    assert any(f"epoch={FAULT_AT}/" in f.path for f in job.store.storage.list_files(OP))  # files, no manifest
    run(job, FAULT_AT)  # same worker retries: the kept backend changed, so it is restored first
    assert job.results == expected
    job.close()


def test_corrupt_snapshot_file_is_named_and_an_earlier_epoch_restores(backend_name, tmp_path, expected):
    job = make_job(tmp_path, backend_name, retain=3)
    run(job, 0, FAULT_AT + 1)
    part = job.ranges()[0]
    m = job.store.manifest(OP, part, FAULT_AT)
    victim = max((f for f in m.files if f.epoch == FAULT_AT), key=lambda f: f.size)
    flip_byte(Path(job.store.storage.full_path(victim.path)))
    job.restart()
    with pytest.raises(CorruptCheckpointError) as err:
        job.run_epoch(FAULT_AT + 1, *EPOCHS[FAULT_AT + 1])
    assert f"epoch {FAULT_AT}" in str(err.value) and victim.path in str(err.value)
    # on request: back to the epoch before, forget the corrupt one, replay the input from there
    job.store.rollback(OP, FAULT_AT - 1)
    job.restart()
    job.committed = FAULT_AT - 1
    run(job, FAULT_AT)
    assert job.results == expected
    job.close()


def test_local_rocksdb_directory_deleted_under_a_running_backend(tmp_path):
    expected = uninterrupted(tmp_path, "rocksdb", EPOCHS)
    job = make_job(tmp_path, "rocksdb")
    run(job, 0, FAULT_AT)
    (kept,) = job.kept.values()
    shutil.rmtree(kept.local_dir)
    run(job, FAULT_AT)
    assert kept.closed and kept not in job.kept.values()
    assert job.results == expected
    job.close()


def test_snapshot_of_a_backend_whose_directory_vanished_is_a_checkpoint_error(tmp_path):
    job = make_job(tmp_path, "rocksdb")
    run(job, 0, 1)
    (kept,) = job.kept.values()
    out = Output()
    op = session_operator()
    op.open(kept, out)
    op.process_batch(EPOCHS[1][0])
    shutil.rmtree(kept.local_dir)
    with pytest.raises(CheckpointError, match="epoch 1 partition .*rocksdb backend failed"):
        job.store.commit(OP, 1, kept, op.snapshot_metadata())
    job.close()


def test_location_unavailable_for_a_while_then_back(backend_name, tmp_path, expected):
    sleeps: list = []
    job = make_job(tmp_path, backend_name, retry=RetryPolicy(attempts=4, backoff_ms=100, multiplier=2,
                                                            max_backoff_ms=250, sleep=sleeps.append))
    run(job, 0, FAULT_AT)
    job.restart()
    flaky = flaky_filesystem({"info", "list", "read"}, failures=3)
    use_filesystem(job.store, flaky)
    run(job, FAULT_AT)
    assert flaky.handler.injected == 3 and sleeps == [0.1, 0.2, 0.25]
    assert job.results == expected
    job.close()


def test_location_down_for_good_is_a_clear_error(backend_name, tmp_path):
    job = make_job(tmp_path, backend_name, retry=RetryPolicy(attempts=3, backoff_ms=0))
    run(job, 0, 1)
    job.restart()
    use_filesystem(job.store, flaky_filesystem({"info", "list", "read", "write", "move"}, failures=10 ** 6))
    with pytest.raises(CheckpointUnavailableError, match=r"checkpoint location .*: list '.*sessions' failed after 3 attempts"):
        job.run_epoch(1, *EPOCHS[1])
    job.close()


def test_two_attempts_of_the_same_epoch_at_once(backend_name, tmp_path, expected):
    job = make_job(tmp_path, backend_name)
    run(job, 0, FAULT_AT)
    job.close()
    twins = [make_job(tmp_path, backend_name, name) for name in ("twin-a", "twin-b")]
    for twin in twins:  # both attempts work on the same checkpoint
        twin.store = CheckpointStore(job.store.storage.uri, retain=3)
        twin.committed = FAULT_AT - 1
    barrier = threading.Barrier(2)
    errors: list = []

    def attempt(twin) -> None:
        try:
            barrier.wait()
            twin.run_epoch(FAULT_AT, *EPOCHS[FAULT_AT])
        except BaseException as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=attempt, args=(t,)) for t in twins]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert twins[0].results[FAULT_AT] == twins[1].results[FAULT_AT] == expected[FAULT_AT]
    for twin in twins:
        twin.close()
    job.restart()
    job.committed = FAULT_AT
    run(job, FAULT_AT + 1)
    assert {e: job.results[e] for e in range(FAULT_AT)} | {FAULT_AT: twins[0].results[FAULT_AT]} | {
        e: job.results[e] for e in range(FAULT_AT + 1, len(EPOCHS))} == expected
    job.close()


def test_failed_epoch_on_a_kept_backend_is_rolled_back_by_restore(backend_name, tmp_path, expected):
    job = make_job(tmp_path, backend_name)
    run(job, 0, FAULT_AT)
    (kept,) = job.kept.values()
    op, out = session_operator(), Output()
    op.open(kept, out)
    op.process_batch(EPOCHS[FAULT_AT][0][:10])  # half an epoch, then the task dies
    run(job, FAULT_AT)
    assert kept.closed  # not taken as the committed state
    assert job.results == expected
    assert windows_of(out.records) == []
    job.close()
