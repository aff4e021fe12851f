"""Checkpoint store on every backend: round trips, stop/restore/continue, crashes, corruption,
retention, concurrent attempts, the restore fast path and cross-backend restores."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from checkpoint_workload import ALL, MAX_PAR, Job, config, keys_for, normalized
from statekit.testing import BACKENDS
from statekit import (ListStateDescriptor, MapStateDescriptor, StateConfig, StateTtlConfig, ValueStateDescriptor,
                      create_backend)
from statekit.checkpoint import (LOGICAL, NATIVE, CheckpointError, CheckpointStore, CorruptCheckpointError,
                                 NoCheckpointError, Storage)

HALF = range(0, MAX_PAR // 2)


def uninterrupted(name: str, tmp_path: Path, epochs: int, key_groups: range = ALL, rate: float = 0.3):
    b = create_backend(config(name, tmp_path, "ref"), key_groups)
    out: list = []
    job = Job(b, out)
    for e in range(epochs):
        job.run_epoch(e, rate)
    state = normalized(b)
    b.close()
    return state, sorted(map(repr, out))


def test_stop_restore_continue_equals_uninterrupted(backend_name, tmp_path):
    expected_state, expected_out = uninterrupted(backend_name, tmp_path, 8)
    store = CheckpointStore(str(tmp_path / "ckpt"), retain=2, full_every=3)
    out: list = []
    backend = None
    for e in range(8):
        # restart from the checkpoint every third epoch (fresh backend), otherwise keep the backend
        r = store.restore("op", config(backend_name, tmp_path, f"e{e}"), ALL,
                          backend=None if e % 3 == 0 else backend)
        assert r.epoch == (e - 1 if e else None)
        assert r.fast_path == (e % 3 != 0)
        backend = r.backend
        Job(backend, out).run_epoch(e)
        committed = store.commit("op", e, backend, {"watermark": e * 10})
        assert committed.won and committed.manifest.kind == NATIVE
    assert normalized(backend) == expected_state
    assert sorted(map(repr, out)) == expected_out
    backend.close()


def test_restore_every_epoch_from_fresh_backends(backend_name, tmp_path):
    expected_state, expected_out = uninterrupted(backend_name, tmp_path, 6)
    store = CheckpointStore(str(tmp_path / "ckpt"), retain=1)
    out: list = []
    for e in range(6):
        r = store.restore("op", config(backend_name, tmp_path, f"e{e}"), ALL)
        assert r.native == (e > 0) and r.metadata == ([{"e": e - 1}] if e else [])
        Job(r.backend, out).run_epoch(e)
        store.commit("op", e, r.backend, {"e": e})
        if e == 5:
            assert normalized(r.backend) == expected_state
        r.backend.close()
    r = store.restore("op", config(backend_name, tmp_path, "final"), ALL)
    Job(r.backend, [])
    assert normalized(r.backend) == expected_state
    assert sorted(map(repr, out)) == expected_out
    r.backend.close()


def test_every_state_kind_and_timers_round_trip(backend_name, tmp_path):
    store = CheckpointStore(str(tmp_path / "ckpt"))
    b = create_backend(config(backend_name, tmp_path, "src"), HALF)
    job = Job(b, [])
    job.run_epoch(0, rate=1.0)
    key = keys_for(HALF)[0]
    b.set_current_key(key)
    job.timers.register_processing_time_timer(("x", 1), 10 ** 12)
    job.timers.register_event_time_timer(None, 10 ** 12)
    before = normalized(b)
    assert before["timers"]["job"]["event"] and all(before["states"].get(n) for n in ("count", "events", "attrs", "total", "avg"))
    store.commit("op", 0, b)
    r = store.restore("op", config(backend_name, tmp_path, "dst"), HALF)
    job2 = Job(r.backend, [])
    assert normalized(r.backend) == before
    assert r.backend.timer_service("job", None).current_watermark() == 0
    r.backend.set_current_key(key)
    job2.attrs.set_current_namespace(("w", 0))
    b.set_current_key(key)
    job.attrs.set_current_namespace(("w", 0))
    assert job2.attrs.items() == job.attrs.items()
    b.close()
    r.backend.close()


def test_ttl_timestamps_survive_restore(backend_name, tmp_path, clock):
    store = CheckpointStore(str(tmp_path / "ckpt"))
    ttl = StateTtlConfig(100)
    descs = lambda: (ValueStateDescriptor("v").enable_time_to_live(ttl),  # noqa: E731
                     ListStateDescriptor("l").enable_time_to_live(ttl), MapStateDescriptor("m").enable_time_to_live(ttl))
    b = create_backend(config(backend_name, tmp_path, "src"), ALL, time_provider=clock)
    v, lst, m = (b.get_state(d) for d in descs())
    b.set_current_key("k")
    v.update("old")
    lst.add("old")
    m.put("old", 1)
    clock.advance(60)
    lst.add("new")
    m.put("new", 2)
    store.commit("op", 0, b)
    r = store.restore("op", config(backend_name, tmp_path, "dst"), ALL, time_provider=clock)
    v2, l2, m2 = (r.backend.get_state(d) for d in descs())
    r.backend.set_current_key("k")
    assert (v2.value(), l2.get(), sorted(m2.items())) == ("old", ["old", "new"], [("new", 2), ("old", 1)])
    clock.advance(50)  # "old" entries are 110 ms old now, "new" ones 50
    assert (v2.value(), l2.get(), m2.items()) == (None, ["new"], [("new", 2)])
    b.close()
    r.backend.close()


def test_crash_between_files_and_manifest_keeps_previous_epoch(backend_name, tmp_path, monkeypatch):
    store = CheckpointStore(str(tmp_path / "ckpt"))
    b = create_backend(config(backend_name, tmp_path, "src"), ALL)
    job = Job(b, [])
    job.run_epoch(0)
    store.commit("op", 0, b)
    at_epoch0 = normalized(b)
    job.run_epoch(1)

    def crash(self, rel, data, tmp_rel):
        raise OSError("injected crash before the manifest")

    monkeypatch.setattr(Storage, "commit", crash)
    with pytest.raises(OSError, match="injected"):
        store.commit("op", 1, b)
    monkeypatch.undo()
    written = [f.path for f in store.storage.list_files("op") if "/epoch=1/" in f.path]
    assert written and not any(p.endswith("manifest.json") for p in written)  # files, no manifest
    assert store.epochs("op", ALL) == [0]
    r = store.restore("op", config(backend_name, tmp_path, "dst"), ALL)
    Job(r.backend, [])
    assert r.epoch == 0 and normalized(r.backend) == at_epoch0
    # the retry of epoch 1 on the same backend cannot build on the lost attempt: it is self-contained
    retried = store.commit("op", 1, b)
    assert retried.won and retried.manifest.snapshot["incremental"] is False
    at_epoch1 = normalized(b)
    r2 = store.restore("op", config(backend_name, tmp_path, "dst2"), ALL)
    Job(r2.backend, [])
    assert r2.epoch == 1 and normalized(r2.backend) == at_epoch1
    for x in (b, r.backend, r2.backend):
        x.close()


@pytest.mark.parametrize("damage", ["flip", "delete"])
def test_corrupt_or_missing_file_is_named_and_older_epoch_restores(backend_name, tmp_path, damage):
    store = CheckpointStore(str(tmp_path / "ckpt"), retain=3)
    b = create_backend(config(backend_name, tmp_path, "src"), ALL)
    job = Job(b, [])
    job.run_epoch(0)
    store.commit("op", 0, b)
    at_epoch0 = normalized(b)
    job.run_epoch(1, rate=0.05)
    m = store.commit("op", 1, b).manifest
    victim = max((f for f in m.files if f.epoch == 1), key=lambda f: f.size)
    path = Path(store.storage.full_path(victim.path))
    if damage == "flip":
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x40
        path.write_bytes(bytes(data))
    else:
        path.unlink()
    with pytest.raises(CorruptCheckpointError) as err:
        store.restore("op", config(backend_name, tmp_path, "dst"), ALL)
    assert "epoch 1" in str(err.value) and victim.path in str(err.value)
    assert ("corrupt" if damage == "flip" else "missing") in str(err.value)
    r = store.restore("op", config(backend_name, tmp_path, "old"), ALL, epoch=0)
    Job(r.backend, [])
    assert normalized(r.backend) == at_epoch0
    with pytest.raises(NoCheckpointError, match="epoch 7"):
        store.restore("op", config(backend_name, tmp_path, "none"), ALL, epoch=7)
    b.close()
    r.backend.close()


def test_corrupt_manifest_is_named(backend_name, tmp_path):
    store = CheckpointStore(str(tmp_path / "ckpt"))
    b = create_backend(config(backend_name, tmp_path, "src"), ALL)
    Job(b, []).run_epoch(0)
    m = store.commit("op", 0, b).manifest
    path = Path(store.storage.full_path(m.path))
    path.write_text(path.read_text().replace('"epoch": 0', '"epoch": 9'))
    with pytest.raises(CorruptCheckpointError, match="epoch=0/manifest.json"):
        store.restore("op", config(backend_name, tmp_path, "dst"), ALL)
    b.close()


def test_retention_never_breaks_a_retained_epoch(backend_name, tmp_path):
    retain = 2
    store = CheckpointStore(str(tmp_path / "ckpt"), retain=retain, full_every=4)
    b = create_backend(config(backend_name, tmp_path, "src"), ALL)
    job = Job(b, [])
    states = {}
    for e in range(11):
        job.run_epoch(e, rate=0.05 if e else 1.0)
        store.commit("op", e, b)
        states[e] = normalized(b)
        epochs = store.epochs("op", ALL)
        assert epochs == list(range(max(0, e - retain + 1), e + 1))
        for kept in epochs:  # every retained epoch restores exactly, after this epoch's GC
            r = store.restore("op", config(backend_name, tmp_path, f"r{e}-{kept}"), ALL, epoch=kept)
            Job(r.backend, [])
            assert normalized(r.backend) == states[kept]
            r.backend.close()
    retained = [store.manifest("op", ALL, e) for e in store.epochs("op", ALL)]
    referenced = {f.path for m in retained for f in m.files} | {m.path for m in retained}
    stored = {f.path for f in store.storage.list_files("op")}
    assert referenced <= stored
    # only files newer than the second-newest manifest may be unreferenced (none here)
    assert stored == referenced
    # the retained epochs really share files written by earlier, no longer retained epochs
    assert any(f.epoch < retained[0].epoch for m in retained for f in m.files)
    b.close()


def test_two_attempts_race_for_one_epoch(backend_name, tmp_path):
    store = CheckpointStore(str(tmp_path / "ckpt"), retain=2)
    seed = create_backend(config(backend_name, tmp_path, "seed"), ALL)
    Job(seed, []).run_epoch(0)
    store.commit("op", 0, seed)
    seed.close()
    attempts = []
    for tag in ("a", "b"):
        r = store.restore("op", config(backend_name, tmp_path, tag), ALL)
        Job(r.backend, []).run_epoch(1)
        attempts.append(r.backend)
    expected = normalized(attempts[0])
    assert normalized(attempts[1]) == expected
    barrier = threading.Barrier(2)
    results: list = [None, None]

    def attempt(i: int) -> None:
        barrier.wait()
        results[i] = store.commit("op", 1, attempts[i])

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    final = store.manifest("op", ALL, 1)
    assert final.attempt in {r.manifest.attempt for r in results}
    assert any(r.won for r in results)
    for f in final.files:
        assert store.storage.info(f.path) is not None
    r = store.restore("op", config(backend_name, tmp_path, "check"), ALL)
    Job(r.backend, [])
    assert r.epoch == 1 and normalized(r.backend) == expected
    for x in attempts + [r.backend]:
        x.close()


def test_losing_attempt_keeps_the_winner_and_drops_its_files(backend_name, tmp_path, monkeypatch):
    store = CheckpointStore(str(tmp_path / "ckpt"))
    a = create_backend(config(backend_name, tmp_path, "a"), ALL)
    b = create_backend(config(backend_name, tmp_path, "b"), ALL)
    for x in (a, b):
        Job(x, []).run_epoch(0)
    real = CheckpointStore._commit_manifest
    calls = []

    def b_commits_first(self, manifest):
        if not calls:  # attempt a paused between its files and its manifest: attempt b commits now
            calls.append(manifest.attempt)
            won_b = store.commit("op", 0, b)
            assert won_b.won
        return real(self, manifest)

    monkeypatch.setattr(CheckpointStore, "_commit_manifest", b_commits_first)
    lost = store.commit("op", 0, a)
    assert not lost.won and lost.manifest.attempt != calls[0]
    assert a.checkpoint_base is None and b.checkpoint_base is not None
    assert not [f for f in store.storage.list_files("op") if calls[0] in f.path]
    r = store.restore("op", config(backend_name, tmp_path, "c"), ALL)
    Job(r.backend, [])
    assert normalized(r.backend) == normalized(a)
    # a retry of an already committed epoch keeps the committed snapshot
    again = store.commit("op", 0, a)
    assert not again.won and again.manifest.attempt == lost.manifest.attempt
    for x in (a, b, r.backend):
        x.close()


def test_fast_path_only_when_the_backend_still_equals_the_snapshot(backend_name, tmp_path):
    store = CheckpointStore(str(tmp_path / "ckpt"))
    cfg = config(backend_name, tmp_path, "src")
    b = create_backend(cfg, ALL)
    job = Job(b, [])
    job.run_epoch(0)
    store.commit("op", 0, b)
    committed = normalized(b)
    r = store.restore("op", cfg, ALL, backend=b)
    assert r.fast_path and r.backend is b
    job.run_epoch(1)  # a failed attempt of epoch 1 changed the state, then the task is retried
    r = store.restore("op", config(backend_name, tmp_path, "retry"), ALL, backend=b)
    assert not r.fast_path and r.backend is not b and b.closed
    Job(r.backend, [])
    assert normalized(r.backend) == committed
    r.backend.close()


@pytest.mark.parametrize("target", BACKENDS)
def test_restore_into_another_backend(backend_name, target, tmp_path):
    store = CheckpointStore(str(tmp_path / "ckpt"), full_every=5)
    b = create_backend(config(backend_name, tmp_path, "src"), ALL)
    job = Job(b, [])
    for e in range(3):
        job.run_epoch(e, rate=0.2)
        store.commit("op", e, b)
    r = store.restore("op", config(target, tmp_path, "dst"), ALL)
    assert r.native == (target == backend_name)
    Job(r.backend, [])
    assert normalized(r.backend) == normalized(b)
    b.close()
    r.backend.close()


def test_logical_snapshots_and_bad_requests(backend_name, tmp_path):
    store = CheckpointStore(str(tmp_path / "ckpt"))
    b = create_backend(config(backend_name, tmp_path, "src"), ALL)
    Job(b, []).run_epoch(0)
    m = store.commit("op", 0, b, logical=True).manifest
    assert m.kind == LOGICAL and [f.role for f in m.files] == ["logical"]
    r = store.restore("op", config(backend_name, tmp_path, "dst"), ALL)
    Job(r.backend, [])
    assert normalized(r.backend) == normalized(b) and not r.native
    with pytest.raises(CheckpointError, match="JSON"):
        store.commit("op", 1, b, {"bad": object()})
    with pytest.raises(CheckpointError, match="operator id"):
        store.commit("../x", 1, b)
    with pytest.raises(CheckpointError, match="max_parallelism"):
        store.restore("op", StateConfig(backend=backend_name, max_parallelism=64,
                                        local_dir=str(tmp_path / "mp")), ALL)
    fresh = store.restore("other", config(backend_name, tmp_path, "fresh"), ALL)
    assert fresh.epoch is None and fresh.backend.num_entries() == 0
    for x in (b, r.backend, fresh.backend):
        x.close()


def test_file_uri_location(backend_name, tmp_path):
    store = CheckpointStore((tmp_path / "ckpt").as_uri())
    b = create_backend(config(backend_name, tmp_path, "src"), ALL)
    Job(b, []).run_epoch(0)
    store.commit("op", 0, b)
    assert (tmp_path / "ckpt" / "op" / "kg=0-31" / "epoch=0" / "manifest.json").exists()
    r = CheckpointStore(str(tmp_path / "ckpt")).restore("op", config(backend_name, tmp_path, "dst"), ALL)
    Job(r.backend, [])
    assert normalized(r.backend) == normalized(b)
    b.close()
    r.backend.close()


def test_object_store_location_commits_by_single_put(backend_name, tmp_path):
    """pyarrow's in-memory mock filesystem stands in for S3: no rename, the manifest is one put."""
    store = CheckpointStore("mock:///ckpt", retain=1)
    assert not store.storage.rename_is_atomic
    b = create_backend(config(backend_name, tmp_path, "src"), ALL)
    job = Job(b, [])
    for e in range(3):
        job.run_epoch(e, rate=0.1)
        store.commit("op", e, b)
    assert store.epochs("op", ALL) == [2]
    assert not [f for f in store.storage.list_files("op") if "/_tmp/" in f.path]
    r = store.restore("op", config(backend_name, tmp_path, "dst"), ALL)
    Job(r.backend, [])
    assert normalized(r.backend) == normalized(b)
    b.close()
    r.backend.close()
