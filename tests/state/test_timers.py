"""Timer service on every registered backend: order, de-duplication, deletion, callbacks that
register or delete timers, processing time, many timers behind a small cache, snapshots.

The expected firing order is computed here from the documented rule (timestamp, then key
group, key bytes and namespace bytes), not by asking a backend.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statekit import KEY_SERIALIZER, MIN_TIMESTAMP, Timer, TimerTarget, available_backends, key_group_for

MAX_PAR = 128


def small_cache(backend_name: str, size: int) -> dict:
    """Config that gives the backend a timer cache of ``size`` when it has one."""
    return {"options": {"rocksdb.timer_cache_size": size}} if backend_name == "rocksdb" else {}


def firing_key(ts: int, key, ns) -> tuple:
    """Documented firing order: timestamp, key group, serialized key, serialized namespace."""
    return ts, key_group_for(key, MAX_PAR), KEY_SERIALIZER.dumps(key), KEY_SERIALIZER.dumps(ns)


class Recorder(TimerTarget):
    """Records fired timers with the backend's current key at callback time; optional hooks."""

    def __init__(self, backend) -> None:
        self.backend = backend
        self.fired: list[tuple] = []
        self.on_fire = None

    def _record(self, domain: str, timer: Timer) -> None:
        self.fired.append((domain, timer.timestamp, timer.key, timer.namespace, self.backend.get_current_key()))
        if self.on_fire is not None:
            self.on_fire(domain, timer)

    def on_event_time(self, timer: Timer) -> None:
        self._record("event", timer)

    def on_processing_time(self, timer: Timer) -> None:
        self._record("processing", timer)


def register(backend, svc, key, ns, ts, domain="event") -> None:
    backend.set_current_key(key)
    if domain == "event":
        svc.register_event_time_timer(ns, ts)
    else:
        svc.register_processing_time_timer(ns, ts)


@pytest.fixture
def timers(backend):
    rec = Recorder(backend)
    return backend, backend.timer_service("t", rec), rec


def test_fires_in_timestamp_order_with_current_key_set(timers):
    backend, svc, rec = timers
    rng = random.Random(7)
    regs = {(rng.randrange(1000), f"k{rng.randrange(20)}", rng.choice([None, "a", ("w", 1)])) for _ in range(300)}
    for ts, key, ns in rng.sample(sorted(regs, key=repr), len(regs)):
        register(backend, svc, key, ns, ts)
    assert svc.num_event_time_timers() == len(regs)
    fired = svc.advance_watermark(500)
    due = sorted((r for r in regs if r[0] <= 500), key=lambda r: firing_key(*r))
    assert fired == len(due)
    assert [(ts, k, ns) for _, ts, k, ns, _ in rec.fired] == due
    assert all(cur == key for _, _, key, _, cur in rec.fired)
    assert svc.current_watermark() == 500
    assert svc.num_event_time_timers() == len(regs) - len(due)
    rec.fired.clear()
    svc.advance_watermark(10_000)
    rest = sorted((r for r in regs if r[0] > 500), key=lambda r: firing_key(*r))
    assert [(ts, k, ns) for _, ts, k, ns, _ in rec.fired] == rest
    assert backend.num_entries() == 0


def test_registering_twice_keeps_one(timers):
    backend, svc, rec = timers
    for _ in range(3):
        register(backend, svc, "u", "ns", 10)
    register(backend, svc, "u", "other", 10)
    assert svc.num_event_time_timers() == 2
    svc.advance_watermark(10)
    assert [(t[1], t[3]) for t in rec.fired] == [(10, "ns"), (10, "other")]


def test_delete_timer(timers):
    backend, svc, rec = timers
    register(backend, svc, "u", "a", 5)
    register(backend, svc, "u", "b", 5)
    register(backend, svc, "v", "a", 6)
    backend.set_current_key("u")
    svc.delete_event_time_timer("a", 5)
    svc.delete_event_time_timer("a", 99)          # absent: no-op
    svc.delete_processing_time_timer("b", 5)      # other domain: no-op
    assert svc.num_event_time_timers() == 2
    svc.advance_watermark(100)
    assert [(t[2], t[3]) for t in rec.fired] == [("u", "b"), ("v", "a")]


def test_watermark_fires_only_due_timers_and_is_inclusive(timers):
    backend, svc, rec = timers
    assert svc.current_watermark() == MIN_TIMESTAMP
    for ts in (10, 20, 30):
        register(backend, svc, "u", None, ts)
    assert svc.advance_watermark(19) == 1
    assert svc.advance_watermark(20) == 1
    assert [t[1] for t in rec.fired] == [10, 20]
    assert [t.timestamp for t in svc.event_time_timers()] == [30]


def test_callback_registers_timers_firing_in_the_same_advance(timers):
    backend, svc, rec = timers
    register(backend, svc, "u", "start", 10)

    def chain(domain, timer):
        if timer.namespace == "start" and len(rec.fired) == 1:
            svc.register_event_time_timer("same-ts", 10)     # same timestamp: fires in this advance
            svc.register_event_time_timer("next", 15)        # still <= watermark
            svc.register_event_time_timer("later", 50)       # after the watermark
            svc.register_event_time_timer("start", 12)       # the firing (key, namespace) again, later
    rec.on_fire = chain
    svc.advance_watermark(20)
    assert [(t[1], t[3]) for t in rec.fired] == [(10, "start"), (10, "same-ts"), (12, "start"), (15, "next")]
    assert [(t.timestamp, t.namespace) for t in svc.event_time_timers()] == [(50, "later")]


def test_callback_deletes_a_due_timer(timers):
    backend, svc, rec = timers
    register(backend, svc, "u", "a", 10)
    register(backend, svc, "u", "b", 12)
    register(backend, svc, "v", "c", 11)

    def delete_b(domain, timer):
        if timer.namespace == "a":
            svc.delete_event_time_timer("b", 12)       # current key is "u" here
    rec.on_fire = delete_b
    svc.advance_watermark(100)
    assert [t[3] for t in rec.fired] == ["a", "c"]


def test_processing_time_is_a_separate_domain(timers):
    backend, svc, rec = timers
    register(backend, svc, "u", "e", 5, "event")
    register(backend, svc, "u", "p", 5, "processing")
    register(backend, svc, "u", "p2", 7, "processing")
    assert svc.advance_processing_time(6) == 1
    assert rec.fired == [("processing", 5, "u", "p", "u")]
    assert svc.current_processing_time() == 6
    assert svc.num_event_time_timers() == 1 and svc.num_processing_time_timers() == 1
    svc.advance_watermark(5)
    assert rec.fired[-1][0] == "event"


def test_services_are_independent(backend):
    r1, r2 = Recorder(backend), Recorder(backend)
    s1, s2 = backend.timer_service("one", r1), backend.timer_service("two", r2)
    register(backend, s1, "u", None, 1)
    register(backend, s2, "u", None, 2)
    assert backend.timer_service("one", None) is s1
    s1.advance_watermark(10)
    assert [t[1] for t in r1.fired] == [1] and r2.fired == []
    assert s2.num_event_time_timers() == 1


def test_many_timers_small_cache(backend_name, make_backend):
    backend = make_backend(**small_cache(backend_name, 16))
    rec = Recorder(backend)
    svc = backend.timer_service("t", rec)
    rng = random.Random(3)
    n = 100_000
    keys = [f"k{i}" for i in range(500)]
    regs = set()
    for i in range(n):
        ts, key = rng.randrange(1_000_000), keys[i % 500]
        regs.add((ts, key, None))
        backend.set_current_key(key)
        svc.register_event_time_timer(None, ts)
    assert svc.num_event_time_timers() == len(regs)
    expected = sorted(regs, key=lambda r: firing_key(*r))
    for wm in (1_000, 250_000, 600_000, 1_000_000):
        svc.advance_watermark(wm)
    assert len(rec.fired) == len(expected)
    assert [(ts, k, ns) for _, ts, k, ns, _ in rec.fired] == expected
    assert svc.num_event_time_timers() == 0


def test_inserts_below_and_above_the_cached_range_while_firing(backend_name, make_backend):
    backend = make_backend(**small_cache(backend_name, 4))
    rec = Recorder(backend)
    svc = backend.timer_service("t", rec)
    for ts in range(0, 400, 10):
        register(backend, svc, "u", None, ts)

    def meddle(domain, timer):
        ts = timer.timestamp
        if ts % 20 == 0 and ts < 300:
            svc.register_event_time_timer("low", ts + 1)       # just after the head: inside the cache
            svc.register_event_time_timer("high", ts + 305)    # far above the cached range
        if ts == 100:
            svc.delete_event_time_timer(None, 110)             # a cached timer
            svc.delete_event_time_timer(None, 390)             # a timer only in storage
    rec.on_fire = meddle
    svc.advance_watermark(1_000)
    fired = [(t[1], t[3]) for t in rec.fired]
    expected = {(ts, None) for ts in range(0, 400, 10)} - {(110, None), (390, None)}
    expected |= {(ts + 1, "low") for ts in range(0, 300, 20)} | {(ts + 305, "high") for ts in range(0, 300, 20)}
    assert fired == sorted(expected, key=lambda r: firing_key(r[0], "u", r[1]))


OPS = st.lists(st.one_of(
    st.tuples(st.just("reg"), st.integers(0, 60), st.sampled_from(["a", "b", 3]), st.sampled_from([None, "x", 2])),
    st.tuples(st.just("del"), st.integers(0, 60), st.sampled_from(["a", "b", 3]), st.sampled_from([None, "x", 2])),
    st.tuples(st.just("wm"), st.integers(0, 70)),
    st.tuples(st.just("peek")),
), max_size=80)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, cache=st.integers(1, 5))
def test_random_operations_match_a_sorted_set(backend_name, new_factory, ops, cache):
    """A sorted-set reference model; small caches make refills, evictions and partial caches common."""
    with new_factory(backend_name) as factory:
        backend = factory(**small_cache(backend_name, cache))
        rec = Recorder(backend)
        svc = backend.timer_service("t", rec)
        model: set[tuple] = set()
        wm = MIN_TIMESTAMP
        for op in ops:
            if op[0] == "reg":
                _, ts, key, ns = op
                register(backend, svc, key, ns, ts)
                model.add((ts, key, ns))
            elif op[0] == "del":
                _, ts, key, ns = op
                backend.set_current_key(key)
                svc.delete_event_time_timer(ns, ts)
                model.discard((ts, key, ns))
            elif op[0] == "wm":
                wm = max(wm, op[1])
                due = sorted((t for t in model if t[0] <= wm), key=lambda t: firing_key(*t))
                rec.fired.clear()
                svc.advance_watermark(wm)
                assert [(ts, k, ns) for _, ts, k, ns, _ in rec.fired] == due
                model -= set(due)
            assert [tuple(t) for t in svc.event_time_timers()] == sorted(model, key=lambda t: firing_key(*t))
            assert svc.num_event_time_timers() == len(model)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_backends_fire_identically(new_factory, ops):
    """The same operations on every backend (RocksDB with a 2-timer cache) fire the same timers."""
    runs = []
    for name in available_backends():
        with new_factory(name) as factory:
            backend = factory(**small_cache(name, 2))
            rec = Recorder(backend)
            svc = backend.timer_service("t", rec)
            for op in ops:
                if op[0] == "reg":
                    register(backend, svc, op[2], op[3], op[1])
                elif op[0] == "del":
                    backend.set_current_key(op[2])
                    svc.delete_event_time_timer(op[3], op[1])
                elif op[0] == "wm":
                    svc.advance_watermark(op[1])
            runs.append((rec.fired, list(svc.event_time_timers())))
    assert all(r == runs[0] for r in runs[1:])


@pytest.mark.parametrize("target", available_backends())
def test_timers_survive_snapshot_and_restore(backend_name, make_backend, target):
    src = make_backend(**small_cache(backend_name, 3))
    svc = src.timer_service("t", Recorder(src))
    for i in range(40):
        register(src, svc, f"k{i % 7}", i % 3, 100 + i * 5)
        register(src, svc, f"k{i % 5}", "p", 1000 + i, "processing")
    svc.advance_watermark(150)
    svc.advance_processing_time(1010)
    before_event = list(svc.event_time_timers())
    before_proc = list(svc.processing_time_timers())
    snap = src.snapshot_logical()
    assert [tuple(t) for t in snap["timers"]["t"]["event"]] == [tuple(t) for t in before_event]

    dst = make_backend(backend=target, **small_cache(target, 2))
    dst.restore_logical(snap)
    rec = Recorder(dst)
    restored = dst.timer_service("t", rec)
    assert restored.current_watermark() == 150 and restored.current_processing_time() == 1010
    assert list(restored.event_time_timers()) == before_event
    assert list(restored.processing_time_timers()) == before_proc
    restored.advance_watermark(10_000)
    restored.advance_processing_time(10_000)
    assert [t[1:4] for t in rec.fired if t[0] == "event"] == [tuple(t) for t in before_event]
    assert [t[1:4] for t in rec.fired if t[0] == "processing"] == [tuple(t) for t in before_proc]
    assert dst.num_entries() == 0


def test_restore_keeps_only_own_key_groups(backend_name, make_backend):
    src = make_backend()
    svc = src.timer_service("t", Recorder(src))
    keys = [f"k{i}" for i in range(60)]
    for i, k in enumerate(keys):
        register(src, svc, k, None, i)
    snap = src.snapshot_logical()
    lower = make_backend(key_groups=range(0, 64))
    lower.restore_logical(snap)
    got = [t.key for t in lower.timer_service("t", None).event_time_timers()]
    assert sorted(got) == sorted(k for k in keys if key_group_for(k, MAX_PAR) < 64)


def check_step(svc, backend_name: str, times: list[int], target: int, limit: int) -> None:
    """``event_time_step(target, limit)`` with timers at ``times`` (sorted): RocksDB steps just before the first
    timer past the limit (at it when every earlier one shares its time), the whole way when few are due; the
    heap, holding every timer in memory, takes the whole way."""
    step = svc.event_time_step(target, limit)
    if backend_name == "heap" or len(times) <= limit or times[limit] > target:
        assert step == target
    else:
        assert step == (times[limit] - 1 if times[0] < times[limit] else times[limit]), (times, limit)
        assert len([t for t in times if t <= step]) <= limit or times[0] == times[limit], (times, step)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cache=st.integers(1, 4), rounds=st.lists(st.tuples(
    st.lists(st.tuples(st.integers(0, 60), st.sampled_from(["a", "b", "c", 7])), max_size=12),
    st.lists(st.tuples(st.integers(0, 60), st.sampled_from(["a", "b", "c", 7])), max_size=4),
    st.integers(-1, 70)), min_size=1, max_size=6), limit=st.integers(0, 4))
def test_timers_taken_due_in_bulk_behind_a_small_cache(backend_name, make_backend, cache, rounds, limit):
    """Rounds of registrations and deletions (below, inside and past the cached head), then every
    timer due at a rising watermark taken in one call (RocksDB: the cache's head and a scan past it, each
    removed with a range delete): the documented firing order, none twice, and exactly the rest left. Before
    each take, the watermark's way cut into steps of at most a few due timers (``event_time_step``), and
    the first step's timers taken as they are found (``take_event_time_step_scoped``)."""
    backend = make_backend(**small_cache(backend_name, cache))
    svc = backend.timer_service("t", None)
    model: set[tuple] = set()
    wm = -1
    for adds, deletes, step in rounds:
        for ts, key in adds:
            backend.set_current_key(key)
            svc.register_event_time_timer("ns", ts)
            model.add((ts, key, "ns"))
        for ts, key in deletes:
            backend.set_current_key(key)
            svc.delete_event_time_timer("ns", ts)
            model.discard((ts, key, "ns"))
        for n in (0, 1, 3):
            check_step(svc, backend_name, sorted(t for t, _, _ in model), max(step, wm + 1), n)
        first = svc.event_time_step(max(step, wm + 1), limit)
        taken, due, resolved = svc.take_event_time_step_scoped(max(step, wm + 1), limit)
        expected = sorted((t for t in model if t[0] <= first), key=lambda t: firing_key(*t))
        assert taken == first == svc.current_watermark() and [tuple(t) for t in due] == expected
        assert resolved == [(t.key, key_group_for(t.key, MAX_PAR), KEY_SERIALIZER.dumps(t.key)) for t in due]
        model -= set(expected)
        wm = max(wm, step, first)
        due = sorted((t for t in model if t[0] <= wm), key=lambda t: firing_key(*t))
        assert [tuple(t) for t in svc.take_due_event_time(wm)] == due
        model -= set(due)
        assert svc.num_event_time_timers() == len(model)
        assert [tuple(t) for t in svc.event_time_timers()] == sorted(model, key=lambda t: firing_key(*t))
    backend.close()


@settings(max_examples=100, deadline=None)
@given(timers=st.lists(st.tuples(st.integers(MIN_TIMESTAMP, (1 << 63) - 1), st.integers(0, 127),
                                 st.one_of(st.text(max_size=5), st.integers(-(1 << 63), (1 << 64) - 1), st.binary(max_size=4),
                                           st.tuples(st.integers(-(1 << 63), (1 << 63) - 1), st.text(max_size=3))),
                                 st.one_of(st.none(), st.text(max_size=3), st.tuples(st.integers(0, 9), st.integers(0, 9)))),
                       max_size=20))
def test_timers_decode_in_bulk_as_one_at_a_time(timers):
    from statekit.timers import decode_timer, decode_timers, timer_sort_key

    keys = [timer_sort_key(ts, kg, KEY_SERIALIZER.dumps(k), KEY_SERIALIZER.dumps(ns)) for ts, kg, k, ns in timers]
    assert decode_timers(keys) == [decode_timer(k)[0] for k in keys] == [Timer(ts, k, ns) for ts, _, k, ns in timers]
