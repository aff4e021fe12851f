"""Serialization: what cannot be stored fails at write time naming the state and leaves it unchanged; what
can round-trips with its exact types; reads and writes never alias stored state.
"""

from __future__ import annotations

import json
import math

import pytest

from statekit import (AggregatingStateDescriptor, ListStateDescriptor, MapStateDescriptor, ReducingStateDescriptor,
                      SerializationError, ValueStateDescriptor)

from .aggregates import AppendInPlace, Concat
from .kinds import KINDS, msgpack_round_trip, ttl

__all__ = [
    "test_unserializable_value_fails_at_write_naming_state_and_type",
    "test_serialization_errors_leave_state_unchanged",
    "test_unserializable_map_key_is_rejected",
    "test_unserializable_aggregate_accumulator_is_rejected",
    "test_a_namespace_that_cannot_be_serialized_is_an_error_naming_its_owner",
    "test_values_round_trip_with_types",
    "test_nan_value_round_trips",
    "test_keys_and_namespaces_round_trip_with_types",
    "test_custom_serializer_is_used",
    "test_values_read_or_written_never_alias_stored_state",
]


class Opaque:
    pass


@pytest.mark.parametrize("kind", KINDS)
def test_unserializable_value_fails_at_write_naming_state_and_type(backend, kind):
    backend.set_current_key("u")
    d = {"value": ValueStateDescriptor("my-value"), "list": ListStateDescriptor("my-list"),
         "map": MapStateDescriptor("my-map"), "reducing": ReducingStateDescriptor("my-reducing", lambda a, b: b),
         "aggregating": AggregatingStateDescriptor("my-aggregating", Concat())}[kind]
    st = backend.get_state(d)
    bad = Opaque()
    with pytest.raises(SerializationError) as err:
        if kind == "value":
            st.update(bad)
        elif kind == "map":
            st.put("k", bad)
        else:
            st.add(bad)
    assert d.name in str(err.value)
    assert "Opaque" in str(err.value)
    assert backend.num_entries() == 0


def test_serialization_errors_leave_state_unchanged(backend):
    backend.set_current_key("u")
    v = backend.get_state(ValueStateDescriptor("v"))
    lst = backend.get_state(ListStateDescriptor("l"))
    v.update(1)
    lst.add(1)
    for attempt in (lambda: v.update({1, 2}), lambda: lst.add_all([2, Opaque()]), lambda: lst.update([Opaque()]),
                    lambda: v.update(2 ** 64), lambda: lst.add([1, Opaque()])):
        with pytest.raises(SerializationError):
            attempt()
    assert v.value() == 1
    assert lst.get() == [1]


def test_unserializable_map_key_is_rejected(backend):
    backend.set_current_key("u")
    m = backend.get_state(MapStateDescriptor("my-map"))
    for bad in (Opaque(), [1]):
        with pytest.raises(SerializationError, match="my-map"):
            m.put(bad, 1)
    assert m.is_empty()


def test_unserializable_aggregate_accumulator_is_rejected(backend):
    class Bad(Concat):
        def add(self, value, accumulator):
            return Opaque()

    backend.set_current_key("u")
    st = backend.get_state(AggregatingStateDescriptor("bad-agg", Bad()))
    with pytest.raises(SerializationError, match="bad-agg"):
        st.add("x")
    assert st.get() is None


def test_a_namespace_that_cannot_be_serialized_is_an_error_naming_its_owner(make_backend):
    """A state's or a timer service's namespace that cannot be serialized: SerializationError naming the
    state or service and the namespace, and nothing stored under it."""
    from statekit import SerializationError

    b = make_backend()
    b.set_current_key("k")
    tm = b.timer_service("clock", None)
    with pytest.raises(SerializationError, match=r"timer service 'clock': namespace .*object.* cannot be serialized"):
        tm.register_event_time_timer(object(), 5)
    assert tm.num_event_time_timers() == 0
    if b.name == "rocksdb":  # the heap keeps Python objects: it serializes namespaces only in snapshots
        st = b.get_state(ValueStateDescriptor("v"))
        with pytest.raises(SerializationError, match=r"state 'v': namespace .*object.* cannot be serialized"):
            st.set_current_namespace(object())
    b.close()


VALUES = [0, -1, 2 ** 63 - 1, -(2 ** 63), 2 ** 64 - 1, 1.5, float("inf"), -0.0, "", "ünï©ødé", b"", b"\x00\xff",
          True, False, ("a", 1), (), ((1, 2), (3, (4,))), [1, [2, [3]]], [("t", 1)], {"a": 1, "b": [1, 2]},
          {1: "int-key", (1, 2): "tuple-key"}, {"nested": {"x": (1, b"y")}}, [None, 1.0, "s"]]


def same(a, b) -> bool:
    """Equal with identical types all the way down (1 != 1.0 != True; tuple != list)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return len(a) == len(b) and all(any(same(k, j) and same(v, b[j]) for j in b) for k, v in a.items())
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b and (not isinstance(a, float) or math.copysign(1, a) == math.copysign(1, b))


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_values_round_trip_with_types(make_backend, value):
    src = make_backend()
    src.set_current_key("u")
    v = src.get_state(ValueStateDescriptor("v"))
    lst = src.get_state(ListStateDescriptor("l"))
    m = src.get_state(MapStateDescriptor("m"))
    v.update(value)
    lst.add_all([value, value])
    m.put("k", value)
    assert same(v.value(), value)
    assert all(same(x, value) for x in lst.get()) and len(lst.get()) == 2
    assert same(m.get("k"), value)
    dst = make_backend()
    dst.restore_logical(msgpack_round_trip(src.snapshot_logical()))
    dst.set_current_key("u")
    assert same(dst.get_state(ValueStateDescriptor("v")).value(), value)
    assert all(same(x, value) for x in dst.get_state(ListStateDescriptor("l")).get())
    assert same(dst.get_state(MapStateDescriptor("m")).get("k"), value)


def test_nan_value_round_trips(backend):
    backend.set_current_key("u")
    v = backend.get_state(ValueStateDescriptor("v"))
    v.update(float("nan"))
    assert math.isnan(v.value())


KEYS = ["str", "", 0, -5, 2 ** 63 - 1, 1.25, b"bytes", ("tuple", 1), ("deep", ("er", (1,))), (), "ünï"]


def test_keys_and_namespaces_round_trip_with_types(make_backend):
    src = make_backend()
    st = src.get_state(ValueStateDescriptor("v"))
    namespaces = [None, ("w", 0, 30000), "ns", 7, b"n"]
    for i, key in enumerate(KEYS):
        src.set_current_key(key)
        for j, ns in enumerate(namespaces):
            st.set_current_namespace(ns)
            st.update((i, j))
    snap = msgpack_round_trip(src.snapshot_logical())
    stored = {(e[1], e[2]) for e in snap["states"]["v"]["entries"]}
    assert len(stored) == len(KEYS) * len(namespaces)
    for key, ns in stored:
        assert any(same(key, k) for k in KEYS) and any(same(ns, n) for n in namespaces)
        hash((key, ns))
    dst = make_backend()
    dst.restore_logical(snap)
    rst = dst.get_state(ValueStateDescriptor("v"))
    for i, key in enumerate(KEYS):
        dst.set_current_key(key)
        for j, ns in enumerate(namespaces):
            rst.set_current_namespace(ns)
            assert same(rst.value(), (i, j))


def test_custom_serializer_is_used(make_backend):
    class Json:
        calls = 0

        def dumps(self, value):
            Json.calls += 1
            return json.dumps(value).encode()

        def loads(self, data):
            return json.loads(data)

    src = make_backend()
    src.set_current_key("u")
    st = src.get_state(ValueStateDescriptor("v", serializer=Json()))
    st.update({"a": [1, 2]})
    assert st.value() == {"a": [1, 2]}
    with pytest.raises(SerializationError, match="'v'.*bytes|bytes.*'v'"):
        st.update(b"not json")
    assert Json.calls >= 1
    dst = make_backend()
    dst.restore_logical(src.snapshot_logical())
    dst.set_current_key("u")
    assert dst.get_state(ValueStateDescriptor("v", serializer=Json())).value() == {"a": [1, 2]}


def _extend_list(a: list, b: list) -> list:
    return a + b


def _keep_last(a: list, b: list) -> list:
    """A reduce function handing back its argument itself."""
    return b


@pytest.mark.parametrize("ttl_on", [False, True])
def test_values_read_or_written_never_alias_stored_state(backend, ttl_on):
    """Mutating what a read returned, or what was written, never changes state; on every state kind."""
    def desc(d):
        return d.enable_time_to_live(ttl()) if ttl_on else d

    backend.set_current_key("k")
    value = backend.get_state(desc(ValueStateDescriptor("v")))
    lst = backend.get_state(desc(ListStateDescriptor("l")))
    mp = backend.get_state(desc(MapStateDescriptor("m")))
    red = backend.get_state(desc(ReducingStateDescriptor("r", _extend_list)))
    agg = backend.get_state(desc(AggregatingStateDescriptor("a", AppendInPlace())))
    written = {"x": [1]}
    value.update(written)
    lst.add(written)
    mp.put("k", written)
    red.add([1])
    agg.add(1)
    written["x"].append("after the write")
    reads = [value.value(), lst.get()[0], mp.get("k"), mp.values()[0], mp.items()[0][1]]
    for r in reads:
        assert r == {"x": [1]}
        r["x"].append("mutated by the reader")
    assert [value.value(), lst.get()[0], mp.get("k")] == [{"x": [1]}] * 3
    first = red.get()
    first.append("mutated")
    assert red.get() == [1]
    result = agg.get()
    agg.add(2)
    assert result == [1] and agg.get() == [1, 2]
    last = backend.get_state(desc(ReducingStateDescriptor("last", _keep_last)))
    last.add([0])
    second = [1]
    last.add(second)
    second.append("after the write")
    assert last.get() == [1]
