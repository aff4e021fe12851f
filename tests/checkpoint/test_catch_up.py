"""Catching up: a backend kept from an earlier epoch of a partition (a Spark worker that ran it some
epochs ago) is brought forward in place to a later committed snapshot instead of being restored,
when the backend can (the heap applies the changelog deltas written since). The result must equal a
fresh restore of that snapshot, cells, TTL timestamps, timers and clocks included, and it must keep
snapshotting as deltas; anything else (a full snapshot in between, a changed backend, RocksDB) takes
the restore."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from checkpoint_workload import ALL, config
from statekit import ListStateDescriptor, MapStateDescriptor, StateTtlConfig, TimerTarget, ValueStateDescriptor
from statekit.checkpoint import CheckpointStore

KEYS = [f"k{i}" for i in range(12)] + [1, 2, (3, "x")]


class NoTimers(TimerTarget):
    def on_event_time(self, timer):
        raise AssertionError("no timer fires in these tests")

    def on_processing_time(self, timer):
        raise AssertionError("no timer fires in these tests")


def open_states(backend):
    ttl = StateTtlConfig(10_000)
    value = ValueStateDescriptor("v")
    value.enable_time_to_live(ttl)
    return (backend.get_state(value), backend.get_state(ListStateDescriptor("l")),
            backend.get_state(MapStateDescriptor("m")), backend.timer_service("t", NoTimers()))


def mutate(backend, rng: random.Random, epoch: int) -> None:
    """Random puts, deletes and timer changes, and a later watermark."""
    v, l, m, timers = open_states(backend)
    for _ in range(rng.randint(1, 12)):
        key = rng.choice(KEYS)
        backend.set_current_key(key)
        op = rng.randrange(6)
        if op == 0:
            v.update(f"{key}@{epoch}")
        elif op == 1:
            v.clear()
        elif op == 2:
            l.add(epoch)
        elif op == 3:
            m.put(rng.choice("ab"), epoch)
        elif op == 4:
            timers.register_event_time_timer("w", 1_000 + rng.randrange(4))
        else:
            timers.delete_event_time_timer("w", 1_000 + rng.randrange(4))
            l.clear()
    timers.restore_time(epoch * 10, epoch)


def restore(store: CheckpointStore, name: str, tmp_path, tag: str, **kwargs):
    """``store.restore`` at a fixed clock (TTL timestamps stay visible)."""
    return store.restore("op", config(name, tmp_path, tag), ALL, time_provider=lambda: 0, **kwargs)


def snapshot_of(backend) -> dict:
    snap = backend.snapshot_logical()
    for s in snap["states"].values():
        s["entries"].sort(key=repr)
    for t in snap["timers"].values():
        for domain in ("event", "processing"):
            t[domain].sort(key=repr)
    return snap


def test_a_kept_heap_backend_catches_up_as_a_restore_would(tmp_path):
    examples = iter(range(10_000))

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(seed=st.integers(0, 2 ** 32), behind=st.integers(1, 3), ahead=st.integers(1, 3))
    def check(seed, behind, ahead):
        n = next(examples)
        rng = random.Random(seed)
        store = CheckpointStore(str(tmp_path / f"ckpt{n}"), retain=20, full_every=20, max_changelog_fraction=100)
        writer = restore(store, "heap", tmp_path, f"w{n}").backend
        kept = None
        for e in range(behind + ahead):
            mutate(writer, rng, e)
            store.commit("op", e, writer)
            if e == behind - 1:  # another worker took the partition here
                kept = restore(store, "heap", tmp_path, f"k{n}").backend
                open_states(kept)
        last = behind + ahead - 1
        r = restore(store, "heap", tmp_path, f"k{n}", epoch=last, backend=kept)
        assert r.caught_up and r.backend is kept and not r.fast_path
        fresh = restore(store, "heap", tmp_path, f"f{n}", epoch=last).backend
        open_states(fresh)
        assert snapshot_of(kept) == snapshot_of(fresh)
        # it goes on as the partition's backend: the next snapshot is a delta on the chain, and a restore equals it
        mutate(kept, rng, last + 1)
        committed = store.commit("op", last + 1, kept)
        assert committed.manifest.snapshot["incremental"]
        again = restore(store, "heap", tmp_path, f"g{n}").backend
        open_states(again)
        assert snapshot_of(again) == snapshot_of(kept)
        for b in (writer, kept, fresh, again):
            b.close()

    check()


@pytest.mark.parametrize("why", ["full snapshot in between", "changed since", "rocksdb"])
def test_what_cannot_catch_up_is_restored(tmp_path, why):
    name = "rocksdb" if why == "rocksdb" else "heap"
    store = CheckpointStore(str(tmp_path / "ckpt"), retain=20, full_every=2 if why.startswith("full") else 20,
                            max_changelog_fraction=100)
    rng = random.Random(7)
    writer = restore(store, name, tmp_path, "w").backend
    mutate(writer, rng, 0)
    store.commit("op", 0, writer)
    kept = restore(store, name, tmp_path, "k").backend
    open_states(kept)
    for e in (1, 2):
        mutate(writer, rng, e)
        store.commit("op", e, writer)
    if why == "changed since":
        mutate(kept, rng, 9)
    r = restore(store, name, tmp_path, "k2", epoch=2, backend=kept)
    assert not r.caught_up and not r.fast_path and r.backend is not kept
    open_states(r.backend)
    assert snapshot_of(r.backend) == snapshot_of(writer)
    r.backend.close()
    writer.close()
