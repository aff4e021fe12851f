"""RocksDB native snapshots: shared SST files uploaded once, stale local copies replaced, export."""

from __future__ import annotations

import gc
import os

import pytest

from checkpoint_workload import MAX_PAR, Job, normalized
from statekit import StateConfig, StateError, ValueStateDescriptor, create_backend
from statekit.checkpoint import CheckpointStore

ALL = range(MAX_PAR)


def cfg(path) -> StateConfig:
    return StateConfig(backend="rocksdb", max_parallelism=MAX_PAR, local_dir=str(path))


def test_unchanged_sst_files_are_referenced_not_uploaded(tmp_path):
    store = CheckpointStore(str(tmp_path / "ckpt"), retain=5)
    b = create_backend(cfg(tmp_path / "db"), ALL)
    v = b.get_state(ValueStateDescriptor("v"))
    for k in range(5000):
        b.set_current_key(k)
        v.update(k)
    first = store.commit("op", 0, b).manifest
    b.set_current_key(1)
    v.update(-1)
    second = store.commit("op", 1, b).manifest
    old = {f.name: f for f in first.files_with_role("sst")}
    reused = [f for f in second.files_with_role("sst") if f.epoch == 0]
    assert reused and all(old[f.name] == f for f in reused)
    assert second.snapshot["incremental"] and second.written_bytes() < first.written_bytes() / 4
    shared = [f for f in store.storage.list_files("op") if "/shared/" in f.path]
    assert len(shared) == len({f.path for m in (first, second) for f in m.files_with_role("sst")})
    b.close()


def test_a_restore_takes_the_timer_count_from_the_snapshot(tmp_path, monkeypatch):
    """A snapshot carries each timer queue's count, so a restore does not scan every timer to count them; the
    count is exact after fires and new timers, the live database keeps no copy of it, and a queue reopened on
    a local directory (no snapshot) still counts its timers."""
    store = CheckpointStore(str(tmp_path / "ckpt"), retain=5)
    local = tmp_path / "db"
    local.mkdir()  # kept after close: reopened below without a snapshot
    b = create_backend(StateConfig(backend="rocksdb", max_parallelism=MAX_PAR, local_dir=str(local),
                                   options={"rocksdb.timer_cache_size": 2}), ALL)
    svc = b.timer_service("t", None)
    for i in range(50):
        b.set_current_key(f"k{i}")
        svc.register_event_time_timer(None, 100 + i)
    svc.take_due_event_time(119)  # 20 fired: 30 left
    store.commit("op", 0, b)
    b.set_current_key("late")
    svc.register_event_time_timer(None, 500)
    store.commit("op", 1, b)
    timers = list(svc.event_time_timers())
    assert len(timers) == 31 and b.num_entries() == 31
    b.close()

    from statekit.backends.rocksdb import timers as rocksdb_timers
    scans = []
    real_scan = rocksdb_timers.scan_from
    monkeypatch.setattr(rocksdb_timers, "scan_from", lambda *a: scans.append(a) or real_scan(*a))
    for epoch, count in ((0, 30), (1, 31)):
        r = store.restore("op", StateConfig(backend="rocksdb", max_parallelism=MAX_PAR), ALL, epoch=epoch)
        restored = r.backend.timer_service("t", None)
        assert not scans and restored.num_event_time_timers() == count
        assert list(restored.event_time_timers()) == timers[:count]  # every timer, and nothing else
        scans.clear()
        r.backend.close()
    reopened = create_backend(cfg(local), ALL)
    assert reopened.timer_service("t", None).num_event_time_timers() == 31 and scans  # counted: no snapshot here
    reopened.close()


def test_restore_replaces_a_stale_local_copy(tmp_path):
    store = CheckpointStore(str(tmp_path / "ckpt"))
    local = tmp_path / "db"
    local.mkdir()  # an existing directory: the backend keeps it after close
    b = create_backend(cfg(local), ALL)
    job = Job(b, [])
    job.run_epoch(0)
    store.commit("op", 0, b)
    committed = normalized(b)
    job.run_epoch(1)  # progress that was never committed
    b.close()
    del b, job
    gc.collect()
    assert os.path.exists(local / "CURRENT")
    r = store.restore("op", cfg(local), ALL)
    Job(r.backend, [])
    assert r.native and normalized(r.backend) == committed
    r.backend.close()


def test_restore_refuses_a_local_dir_that_is_not_a_database(tmp_path):
    store = CheckpointStore(str(tmp_path / "ckpt"))
    b = create_backend(cfg(tmp_path / "db"), ALL)
    Job(b, []).run_epoch(0)
    store.commit("op", 0, b)
    other = tmp_path / "precious"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    with pytest.raises(StateError, match="not a RocksDB database"):
        store.restore("op", cfg(other), ALL)
    assert (other / "notes.txt").read_text() == "keep me"
    b.close()


def test_restored_directory_is_removed_on_close(tmp_path):
    store = CheckpointStore(str(tmp_path / "ckpt"))
    b = create_backend(cfg(tmp_path / "db"), ALL)
    Job(b, []).run_epoch(0)
    store.commit("op", 0, b)
    r = store.restore("op", cfg(tmp_path / "restored"), ALL)
    assert os.path.exists(tmp_path / "restored" / "CURRENT")
    r.backend.close()
    assert not os.path.exists(tmp_path / "restored")
    b.close()


def test_state_entries_count_the_cells_left_not_keys_overwritten_or_deleted(tmp_path, monkeypatch):
    """A snapshot's state entries (the run's ``state`` metric) are the cells the state holds: after each epoch
    restored, overwrote every key and the last cleared them all (a final epoch), 0, where RocksDB's estimate still
    counted the keys of older SST files. Above the counting limit the estimate stands, said to be one."""
    store = CheckpointStore(str(tmp_path / "ckpt"), retain=2)
    b = create_backend(cfg(tmp_path / "db"), ALL)
    counts = []
    for epoch in range(6):
        v = b.get_state(ValueStateDescriptor("v"))
        for k in range(100):
            b.set_current_key(k)
            v.update(epoch)
            if epoch == 5:
                v.clear()
        stats = store.commit("op", epoch, b).manifest.stats
        counts.append((stats["states"]["v"], stats["states_estimated"]))
        b.close()
        b = store.restore("op", cfg(tmp_path / "db"), ALL, epoch=epoch).backend
    assert counts == [(100, False)] * 5 + [(0, False)]
    monkeypatch.setattr("statekit.backends.rocksdb.snapshot.EXACT_COUNT_LIMIT", 10)
    v = b.get_state(ValueStateDescriptor("v"))
    for k in range(100):
        b.set_current_key(k)
        v.update(k)
    stats = store.commit("op", 6, b).manifest.stats
    assert stats["states_estimated"] and stats["states"]["v"] > 10
    b.close()


@pytest.mark.parametrize("recorded", [(0).to_bytes(8, "big"), b"\x01"])
def test_a_snapshots_timer_count_that_cannot_be_true_is_refused(tmp_path, recorded):
    """A count of 0 over stored timers would leave them unfired forever; a count that is not eight bytes is no
    count: either is a corrupt checkpoint, refused as it opens, not trusted."""
    from rocksdict import Options, Rdict

    from statekit.backends.rocksdb.timers import _SIZE_KEY, RocksDBTimerQueue

    db = Rdict(str(tmp_path / "db"), Options(raw_mode=True))
    db.put(b"\x00\x00timer", b"x")
    db.put(_SIZE_KEY, recorded)
    with pytest.raises(StateError, match="as its timer count, and holds timers: the checkpoint is corrupt"):
        RocksDBTimerQueue(db, None, 4)
    db.close()
