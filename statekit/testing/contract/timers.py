"""Timers: bulk registration, deletion and taking due timers equal one call per key, in firing order; timer
namespaces are told apart by their serialized bytes.
"""

from __future__ import annotations

import pytest

from statekit import MAX_TIMESTAMP, MIN_TIMESTAMP

__all__ = [
    "test_bulk_timers_equal_one_call_per_key",
    "test_bulk_timers_with_any_timestamps_equal_one_call_per_key",
    "test_due_timers_come_with_their_keys_resolved",
    "test_timer_namespaces_equal_in_python_but_serialized_apart_are_apart",
]


def test_bulk_timers_equal_one_call_per_key(make_backend):
    """``register_event_time_timers``/``delete_event_time_timers`` and ``take_due_event_time``: the
    same timers as one call per key, taken due in firing order without firing."""
    class Recorder:
        def __init__(self):
            self.fired = []

        def on_event_time(self, timer):
            self.fired.append(timer)

        def on_processing_time(self, timer):
            raise AssertionError("no processing-time timers here")

    one, many = make_backend(), make_backend()
    rec = Recorder()
    t1, tm = one.timer_service("t", rec), many.timer_service("t", Recorder())
    keys = ["a", "b", 3, (4, "x"), "e"]
    times = [50, 10, 30, 10, 70]
    for k, t in zip(keys, times):
        one.set_current_key(k)
        t1.register_event_time_timer("ns", t)
    resolved, _ = many.resolve_keys(keys)
    tm.register_event_time_timers(resolved, "ns", times)
    one.set_current_key("e")
    t1.delete_event_time_timer("ns", 70)
    tm.delete_event_time_timers(resolved[4:], "ns", [70])
    assert list(tm.event_time_timers()) == list(t1.event_time_timers())
    due = tm.take_due_event_time(40)
    t1.advance_watermark(40)
    assert due == rec.fired and [t.timestamp for t in due] == [10, 10, 30]
    assert tm.current_watermark() == 40 and list(tm.event_time_timers()) == list(t1.event_time_timers())
    with pytest.raises(ValueError, match="int64"):
        tm.register_event_time_timers(resolved[:1], "ns", [1.5])


def test_bulk_timers_with_any_timestamps_equal_one_call_per_key(make_backend):
    """Bulk registration and deletion over the whole int64 range, duplicates and re-registrations
    included (``fresh``/``present`` promised whenever they hold), then every timer taken due in firing
    order: as one call per key, with as many entries."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(ops=st.lists(st.tuples(st.booleans(), st.lists(st.tuples(st.sampled_from(["a", "b", 3, (4, "x")]),
                                                                       st.integers(MIN_TIMESTAMP, MAX_TIMESTAMP) | st.integers(-5, 5)),
                                                             max_size=8)), max_size=6),
           watermarks=st.lists(st.integers(-6, 6) | st.just(MAX_TIMESTAMP), min_size=1, max_size=3))
    def check(ops, watermarks):
        one, many = make_backend(), make_backend()
        t1, tm = one.timer_service("t", None), many.timer_service("t", None)
        for add, pairs in ops:
            resolved, _ = many.resolve_keys([k for k, _ in pairs])
            times = [t for _, t in pairs]
            existing, distinct = {(t.key, t.timestamp) for t in t1.event_time_timers()}, len(set(pairs)) == len(pairs)
            if add:  # fresh / present: the caller's promise, made when it holds (a queue may skip its checks)
                tm.register_event_time_timers(resolved, "ns", times, fresh=distinct and not set(pairs) & existing)
            else:
                tm.delete_event_time_timers(resolved, "ns", times, present=distinct and set(pairs) <= existing)
            for k, t in pairs:
                one.set_current_key(k)
                (t1.register_event_time_timer if add else t1.delete_event_time_timer)("ns", t)
        assert list(tm.event_time_timers()) == list(t1.event_time_timers())
        assert many.num_entries() == one.num_entries()
        for wm in sorted(watermarks):
            expected = [t for t in t1.event_time_timers() if t.timestamp <= wm]
            assert tm.take_due_event_time(wm) == t1.take_due_event_time(wm) == expected
        assert list(tm.event_time_timers()) == list(t1.event_time_timers())
        assert many.num_entries() == one.num_entries()
        one.close()
        many.close()

    check()


def test_due_timers_come_with_their_keys_resolved(make_backend):
    """``take_due_event_time_scoped``: the due timers ``take_due_event_time`` takes, each with its key
    resolved as ``resolve_keys`` resolves it, whatever the keys and namespaces (one or several)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    keys_ = st.one_of(st.integers(-(1 << 63), (1 << 64) - 1), st.text(max_size=4), st.binary(max_size=3),
                      st.tuples(st.integers(-3, 3), st.text(max_size=2)))
    namespaces_ = st.one_of(st.none(), st.integers(-2, 2), st.booleans(), st.sampled_from([0.0, -0.0, 1.0]),
                            st.text(max_size=2), st.tuples(st.integers(0, 2)))

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(timers=st.lists(st.tuples(keys_, namespaces_, st.integers(-5, 5)), max_size=30),
           watermarks=st.lists(st.integers(-6, 6), min_size=1, max_size=3))
    def check(timers, watermarks):
        scoped, plain = make_backend(), make_backend()
        ts, tp = scoped.timer_service("t", None), plain.timer_service("t", None)
        for key, namespace, t in timers:
            for b, svc in ((scoped, ts), (plain, tp)):
                b.set_current_key(key)
                svc.register_event_time_timer(namespace, t)
        for wm in sorted(watermarks):
            due, resolved = ts.take_due_event_time_scoped(wm)
            assert due == tp.take_due_event_time(wm)
            expected, refused = plain.resolve_keys([t.key for t in due])
            assert not refused and repr(resolved) == repr(expected)
            assert ts.current_watermark() == wm
        scoped.close()
        plain.close()

    check()


def test_timer_namespaces_equal_in_python_but_serialized_apart_are_apart(make_backend):
    """``1``, ``True`` and ``1.0`` (and ``0.0`` and ``-0.0``) are equal in Python but serialize apart:
    timers under them are distinct timers that fire with their own namespace, whatever was registered first."""
    b = make_backend()
    tm = b.timer_service("t", None)
    b.set_current_key("k")
    spaces = [1, True, 1.0, 0.0, -0.0, 1]
    for ns in spaces:
        tm.register_event_time_timer(ns, 5)
    tm.delete_event_time_timer(True, 5)
    due = tm.take_due_event_time(5)
    got = sorted((type(t.namespace).__name__, repr(t.namespace)) for t in due)
    assert got == [("float", "-0.0"), ("float", "0.0"), ("float", "1.0"), ("int", "1")]
    b.close()
