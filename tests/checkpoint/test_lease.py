"""One writer per checkpoint: the lease refuses a second holder naming the first, is free once released,
expired or left by a dead process of this host, and fences a holder that lost it (``checkpoint.lease``)."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import signal
import subprocess
import sys
import time

import pytest

from statekit.checkpoint import CheckpointError, CheckpointLease, LeaseHeldError, LeaseLostError, Storage, fence
from statekit.checkpoint.lease import LEASE_DIR


def _lease_files(ck) -> list[str]:
    return sorted(p.name for p in (ck / LEASE_DIR).glob("lease-*.json"))


def test_a_second_holder_is_refused_naming_the_first(tmp_path):
    first = CheckpointLease(str(tmp_path), timeout_seconds=60)
    assert first.acquire("run A") == 1
    with pytest.raises(LeaseHeldError) as err:
        CheckpointLease(str(tmp_path)).acquire("run B")
    text = str(err.value)
    assert str(tmp_path) in text and "run A" in text and f"pid {os.getpid()}" in text and "host " in text
    first.check()  # still the holder
    first.release()
    assert CheckpointLease(str(tmp_path)).acquire("run B") == 2  # released: free, and the token grows


def test_an_expired_lease_is_taken_over_with_a_log_line_and_fences_its_old_holder(tmp_path, caplog):
    old = CheckpointLease(str(tmp_path), timeout_seconds=0.2)
    old.acquire("stalled run")
    time.sleep(0.4)  # no heartbeat: the lease expires
    with caplog.at_level(logging.WARNING, logger="statekit"):
        new = CheckpointLease(str(tmp_path), timeout_seconds=60)
        assert new.acquire("next run") == 2
    assert any("took over the lease" in r.getMessage() and "stalled run" in r.getMessage() for r in caplog.records)
    with pytest.raises(LeaseLostError, match="token 1.*taken over by next run"):
        old.check()
    with pytest.raises(LeaseLostError):
        old.renew()
    with pytest.raises(LeaseLostError):
        fence(Storage(str(tmp_path)), 1, str(tmp_path))
    fence(Storage(str(tmp_path)), 2, str(tmp_path))  # the new holder commits
    old.release()  # a lost lease is not marked released: the new holder's stays
    with pytest.raises(LeaseHeldError, match="next run"):
        CheckpointLease(str(tmp_path)).acquire("a third")


def test_a_heartbeat_keeps_the_lease_past_its_timeout(tmp_path):
    lease = CheckpointLease(str(tmp_path), timeout_seconds=0.6).held("long run")
    try:
        time.sleep(1.5)
        with pytest.raises(LeaseHeldError, match="long run"):
            CheckpointLease(str(tmp_path)).acquire("intruder")
        lease.check()
    finally:
        lease.release()
    record = json.loads((tmp_path / LEASE_DIR / _lease_files(tmp_path)[-1]).read_text())
    assert record["released"] is True


def test_a_lease_left_by_a_killed_process_of_this_host_is_free_at_once(tmp_path):
    code = ("import sys, time; from statekit.checkpoint import CheckpointLease; "
            "CheckpointLease(sys.argv[1], timeout_seconds=3600).held('killed run'); print('held', flush=True); "
            "time.sleep(600)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(LeaseHeldError, match="killed run"):
            CheckpointLease(str(tmp_path)).acquire("while it lives")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert CheckpointLease(str(tmp_path)).acquire("after it died") == 2


def _contend(path: str, start: float, queue) -> None:
    while time.time() < start:
        pass
    try:
        queue.put(CheckpointLease(path).acquire(f"contender {os.getpid()}"))
    except LeaseHeldError:
        queue.put(0)
    time.sleep(1)  # alive while the others look: a dead holder's lease would be free


def test_of_processes_racing_for_a_free_lease_exactly_one_wins(tmp_path):
    ctx = multiprocessing.get_context("fork")
    for round_ in range(5):
        path = str(tmp_path / f"ck{round_}")
        queue, start = ctx.Queue(), time.time() + 0.3
        procs = [ctx.Process(target=_contend, args=(path, start, queue)) for _ in range(4)]
        for p in procs:
            p.start()
        tokens = sorted(queue.get(timeout=30) for _ in procs)
        for p in procs:
            p.join()
        assert tokens == [0, 0, 0, 1], tokens
        assert _lease_files(tmp_path / f"ck{round_}") == ["lease-00000000000000000001.json"]


def test_old_lease_files_are_pruned_and_a_foreign_lease_file_is_refused_by_name(tmp_path):
    for i in range(8):
        lease = CheckpointLease(str(tmp_path))
        lease.acquire(f"run {i}")
        lease.release()
    names = _lease_files(tmp_path)
    assert names[-1] == "lease-00000000000000000008.json" and len(names) <= 5
    (tmp_path / LEASE_DIR / "lease-00000000000000000009.json").write_text("not json")
    with pytest.raises(CheckpointError, match="lease-00000000000000000009.json is not a statekit lease"):
        CheckpointLease(str(tmp_path)).acquire("next")


def test_an_unusable_timeout_is_refused():
    with pytest.raises(CheckpointError, match="lease timeout"):
        CheckpointLease("/tmp/x", timeout_seconds=0)
