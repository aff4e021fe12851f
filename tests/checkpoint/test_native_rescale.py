"""Native RocksDB rescaling (``backends.rocksdb.rescale``) against the logical path: state of every kind and
timers of both domains, 2 -> 3 and 3 -> 1 partitions, read back equal; and what it refuses or falls back from."""

from __future__ import annotations

import operator
import random

import pytest

from statekit import (AggregateFunction, AggregatingStateDescriptor, ListStateDescriptor, MapStateDescriptor,
                      ReducingStateDescriptor, StateConfig, StateTtlConfig, TimerTarget, ValueStateDescriptor,
                      create_backend, key_groups_for_partition)
from statekit.checkpoint import CheckpointStore
from statekit.backends.rocksdb.keys import scan_from

MAX_PAR = 64
KEYS = [f"k{i}" for i in range(150)] + list(range(50)) + [("t", i) for i in range(10)]
NAMESPACES = [None, "w1", 7]


class Avg(AggregateFunction):
    def create_accumulator(self):
        return [0, 0]

    def add(self, value, acc):
        return [acc[0] + value, acc[1] + 1]

    def get_result(self, acc):
        return acc[0] / acc[1]

    def merge(self, a, b):
        return [a[0] + b[0], a[1] + b[1]]


class Fired(TimerTarget):
    def __init__(self):
        self.fired = []

    def on_event_time(self, timer):
        self.fired.append(("event", tuple(timer)))

    def on_processing_time(self, timer):
        self.fired.append(("processing", tuple(timer)))


def ttl():
    return StateTtlConfig(1000)


def descriptors():
    return [ValueStateDescriptor("v"), ListStateDescriptor("l"), MapStateDescriptor("m"),
            ReducingStateDescriptor("r", operator.add), AggregatingStateDescriptor("a", Avg()),
            ValueStateDescriptor("tv").enable_time_to_live(ttl()), ListStateDescriptor("tl").enable_time_to_live(ttl()),
            MapStateDescriptor("tm").enable_time_to_live(ttl())]


class Clock:
    def __init__(self, now):
        self.now = now

    def __call__(self):
        return self.now


def write(backend, rng, clock):
    """Random state of every kind and timers of two services in both domains for the backend's keys."""
    states = {d.name: backend.get_state(d) for d in descriptors()}
    services = [backend.timer_service(name, Fired()) for name in ("s1", "s2")]
    for key in KEYS:
        if backend.key_group_of(key) not in backend.key_groups or rng.random() < 0.2:
            continue
        backend.set_current_key(key)
        for ns in rng.sample(NAMESPACES, rng.randint(1, 3)):
            clock.now = rng.randint(0, 1500)
            for st in states.values():
                st.set_current_namespace(ns)
            states["v"].update([key, ns, rng.random()])
            states["tv"].update(rng.randint(0, 9))
            for _ in range(rng.randint(0, 3)):
                states["l"].add(rng.randint(0, 99))
                states["tl"].add(str(rng.random()))
                states["m"].put(rng.choice(["a", 1, ("x", 2)]), rng.random())
                states["tm"].put(rng.randint(0, 5), "x")
                states["r"].add(rng.randint(1, 9))
                states["a"].add(rng.randint(1, 9))
            for svc in services:
                if rng.random() < 0.7:
                    svc.register_event_time_timer(ns, rng.randint(-5, 200))
                if rng.random() < 0.5:
                    svc.register_processing_time_timer(ns, rng.randint(0, 300))
    services[0].advance_watermark(rng.randint(0, 20))
    services[1].advance_processing_time(rng.randint(0, 20))
    backend.flush()


def read(backend, clock):
    """Every state read and every timer of ``backend`` (reads at a time some TTL'd entries expired by)."""
    clock.now = 1800
    states = [backend.get_state(d) for d in descriptors()]
    cells = {}
    for key in KEYS:
        if backend.key_group_of(key) not in backend.key_groups:
            continue
        backend.set_current_key(key)
        for ns in NAMESPACES:
            row = []
            for st in states:
                st.set_current_namespace(ns)
                got = st.value() if hasattr(st, "value") else st.get() if not hasattr(st, "items") else sorted(
                    map(repr, st.items()))
                row.append(repr(got))
            cells[(repr(key), repr(ns))] = row
    timers = {}
    for name in ("s1", "s2"):
        svc = backend.timer_service(name, Fired())
        timers[name] = (sorted(map(repr, svc.event_time_timers())), sorted(map(repr, svc.processing_time_timers())),
                        svc.num_event_time_timers(), svc.num_processing_time_timers(),
                        svc.current_watermark(), svc.current_processing_time())
    return cells, timers


def fire(backend):
    """Advance every clock past every timer: the timers fired, in order."""
    out = []
    for name in ("s1", "s2"):
        target = Fired()
        svc = backend.timer_service(name, target)
        svc.advance_watermark(10_000)
        svc.advance_processing_time(10_000)
        out.append(target.fired)
        assert svc.num_event_time_timers() == svc.num_processing_time_timers() == 0
    return out


def cfg(tmp_path, name, clock=None):
    return StateConfig(backend="rocksdb", max_parallelism=MAX_PAR, local_dir=str(tmp_path / name))


def commit_partitions(store, tmp_path, parallelism, seed):
    rng = random.Random(seed)
    for p in range(parallelism):
        clock = Clock(0)
        b = create_backend(cfg(tmp_path, f"src{p}"), key_groups_for_partition(p, parallelism, MAX_PAR), clock)
        write(b, rng, clock)
        store.commit("op", 0, b)
        b.close()


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("before,after", [(2, 3), (3, 1), (1, 2)])
def test_native_rescale_reads_as_the_logical_path(tmp_path, seed, before, after):
    store = CheckpointStore(str(tmp_path / "ckpt"))
    commit_partitions(store, tmp_path, before, seed)
    for p in range(after):
        kgs = key_groups_for_partition(p, after, MAX_PAR)
        clock = Clock(1800)
        native = store.restore("op", cfg(tmp_path, f"n{p}"), kgs, time_provider=clock)
        assert native.native and len(native.sources) >= 1
        sources = store.covering("op", kgs)
        logical = create_backend(cfg(tmp_path, f"l{p}"), kgs, clock)
        logical.restore_logical([store.logical_snapshot(s) for s in sources])
        expected = read(logical, clock)
        assert expected[0] and read(native.backend, clock) == expected
        # a snapshot of the rescaled backend restores to the same (timer counts included)
        store.commit("op", 1, native.backend)
        native.backend.close()
        again = store.restore("op", cfg(tmp_path, f"a{p}"), kgs, time_provider=clock)
        assert read(again.backend, clock) == expected
        assert fire(again.backend) == fire(logical)
        again.backend.close()
        logical.close()


def test_unknown_column_family_falls_back_to_the_logical_path(tmp_path):
    store = CheckpointStore(str(tmp_path / "ckpt"))
    rng = random.Random(3)
    for p in range(2):
        clock = Clock(0)
        b = create_backend(cfg(tmp_path, f"src{p}"), key_groups_for_partition(p, 2, MAX_PAR), clock)
        write(b, rng, clock)
        if p == 1:
            b._store.family("unknown")[0].put(b"x", b"y")
        store.commit("op", 0, b)
        b.close()
    for p in range(3):
        kgs = key_groups_for_partition(p, 3, MAX_PAR)
        clock = Clock(1800)
        r = store.restore("op", cfg(tmp_path, f"n{p}"), kgs, time_provider=clock)
        assert r.native == (len(r.sources) == 1 and r.sources[0].key_groups == kgs) or all(
            s.key_groups.start < 32 for s in r.sources)
        logical = create_backend(cfg(tmp_path, f"l{p}"), kgs, clock)
        logical.restore_logical([store.logical_snapshot(s) for s in r.sources])
        assert read(r.backend, clock) == read(logical, clock)
        r.backend.close()
        logical.close()


def test_entries_outside_a_sources_range_are_not_copied(tmp_path):
    """A source database holding key groups outside its recorded range (a hostile checkpoint) adds nothing."""
    store = CheckpointStore(str(tmp_path / "ckpt"))
    for p in range(2):
        kgs = key_groups_for_partition(p, 2, MAX_PAR)
        b = create_backend(cfg(tmp_path, f"src{p}"), kgs)
        v = b.get_state(ValueStateDescriptor("v"))
        for key in KEYS:
            if b.key_group_of(key) in kgs:
                b.set_current_key(key)
                v.update(p)
        # a stray cell in the other partition's key groups, written under the raw layout
        stray = (40 if p == 0 else 5).to_bytes(2, "big") + b"\xa5stray\xc0"
        b.flush()
        b._store.family("state:v")[0].put(stray, b"\x63")
        b.timer_service("s", Fired())
        store.commit("op", 0, b)
        b.close()
    for p in range(3):
        kgs = key_groups_for_partition(p, 3, MAX_PAR)
        r = store.restore("op", cfg(tmp_path, f"n{p}"), kgs)
        assert r.native
        v = r.backend.get_state(ValueStateDescriptor("v"))
        r.backend.flush()
        stored = [k for k, _ in scan_from(r.backend._store.family("state:v")[0], None)]
        assert stored and all(int.from_bytes(k[:2], "big") in kgs for k in stored)
        got = set()
        for key in KEYS:
            if r.backend.key_group_of(key) in kgs:
                r.backend.set_current_key(key)
                got.add((key, v.value()))
        assert len(got) == len(stored)
        assert got == {(k, 0 if r.backend.key_group_of(k) < 32 else 1) for k in KEYS if r.backend.key_group_of(k) in kgs}
        r.backend.close()
