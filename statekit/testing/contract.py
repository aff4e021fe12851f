"""The keyed-state contract every backend must meet, run once per registered backend.

A third-party backend registered under the ``statekit.backends`` entry point runs it in its own CI
with a test module holding two lines::

    pytest_plugins = ["statekit.testing.fixtures"]
    from statekit.testing.contract import *  # noqa: F401,F403

Every test takes the ``backend``/``make_backend`` fixtures, parametrized over every registered
backend (``STATEKIT_TEST_BACKENDS=name,name`` narrows them).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import msgpack
import pytest

from statekit import (KEY_SERIALIZER, MAX_TIMESTAMP, MIN_TIMESTAMP, AggregateFunction, AggregatingStateDescriptor, InvalidKeyError, KeyGroupError,
                      ListStateDescriptor, MapStateDescriptor, NoCurrentKeyError, ReducingStateDescriptor,
                      SerializationError, StateConfig, StateDescriptorError, StateError, StateMigrationError,
                      StateTtlConfig,
                      StateVisibility, UpdateType, ValueStateDescriptor, backend_class,
                      create_backend, key_group_for, key_groups_for_partition, partition_for_key_group,
                      stable_hash)


TTL = 100
NEVER = StateVisibility.NEVER_RETURN_EXPIRED
RETURN = StateVisibility.RETURN_EXPIRED_IF_NOT_CLEANED_UP
ON_WRITE = UpdateType.ON_CREATE_AND_WRITE
ON_READ = UpdateType.ON_READ_AND_WRITE


class Concat(AggregateFunction):
    """Order-revealing aggregate: the accumulator is the list of inputs, the result a string."""

    def create_accumulator(self):
        return []

    def add(self, value, accumulator):
        return accumulator + [value]

    def merge(self, acc_a, acc_b):
        return acc_a + acc_b

    def get_result(self, accumulator):
        return "".join(accumulator)


class SumCount(AggregateFunction):
    """(sum, count) of int values."""

    def create_accumulator(self):
        return (0, 0)

    def add(self, value, accumulator):
        return (accumulator[0] + value, accumulator[1] + 1)

    def merge(self, acc_a, acc_b):
        return (acc_a[0] + acc_b[0], acc_a[1] + acc_b[1])

    def get_result(self, accumulator):
        return accumulator


class Average(SumCount):
    def get_result(self, accumulator):
        return accumulator[0] / accumulator[1]


def concat_strings(a: str, b: str) -> str:
    return a + b


def ttl(update_type=ON_WRITE, visibility=NEVER, **kw) -> StateTtlConfig:
    return StateTtlConfig(TTL, update_type=update_type, visibility=visibility, **kw)


def descriptor(kind: str, name: str | None = None):
    """A descriptor of ``kind``; reducing concatenates strings and aggregating uses ``Concat``."""
    name = name or kind
    return {"value": lambda: ValueStateDescriptor(name, default="dflt"),
            "list": lambda: ListStateDescriptor(name),
            "map": lambda: MapStateDescriptor(name),
            "reducing": lambda: ReducingStateDescriptor(name, concat_strings),
            "aggregating": lambda: AggregatingStateDescriptor(name, Concat())}[kind]()


KINDS = ["value", "list", "map", "reducing", "aggregating"]
MERGING = ["list", "reducing", "aggregating"]


def write(st, kind: str, token: str) -> None:
    """Put one observable element into a state of ``kind``."""
    if kind == "value":
        st.update(token)
    elif kind == "map":
        st.put(token, token.upper())
    else:
        st.add(token)


def read(st, kind: str):
    """The state's content in a comparable form; None/[]/{}/default mean empty."""
    if kind == "value":
        return st.value()
    if kind == "map":
        return dict(st.items())
    return st.get()


EMPTY = {"value": "dflt", "list": [], "map": {}, "reducing": None, "aggregating": None}


def key_in_group_range(groups: range, max_parallelism: int = 128, prefix: str = "k") -> str:
    return next(f"{prefix}{i}" for i in range(100_000) if key_group_for(f"{prefix}{i}", max_parallelism) in groups)


# ---------------------------------------------------------------------------------------------
# Value, list, map, reducing, aggregating: every method
# ---------------------------------------------------------------------------------------------

def test_value_state_methods(backend):
    backend.set_current_key("u1")
    count = backend.get_state(ValueStateDescriptor("count", default=0))
    assert count.value() == 0
    count.update(count.value() + 1)
    count.update(count.value() + 1)
    assert count.value() == 2
    count.clear()
    assert count.value() == 0
    count.update(5)
    count.update(None)
    assert count.value() == 0
    assert backend.num_entries() == 0


def test_value_state_without_default_is_none(backend):
    backend.set_current_key("u1")
    v = backend.get_state(ValueStateDescriptor("v"))
    assert v.value() is None
    v.update(0)
    assert v.value() == 0
    v.update(False)
    assert v.value() is False


def test_list_state_methods(backend):
    backend.set_current_key("u1")
    lst = backend.get_state(ListStateDescriptor("events"))
    assert lst.get() == []
    lst.add(1)
    lst.add_all([2, 3])
    assert lst.get() == [1, 2, 3]
    lst.add_all([])
    assert lst.get() == [1, 2, 3]
    lst.add_all(iter((4, 5)))
    assert lst.get() == [1, 2, 3, 4, 5]
    lst.update([9, 8])
    assert lst.get() == [9, 8]
    lst.update([])
    assert lst.get() == []
    assert backend.num_entries() == 0
    lst.add_all([1])
    lst.clear()
    assert lst.get() == []
    assert backend.num_entries() == 0


def test_list_get_returns_a_copy(backend):
    backend.set_current_key("u1")
    lst = backend.get_state(ListStateDescriptor("events"))
    lst.add_all([1, 2])
    got = lst.get()
    got.append(3)
    assert lst.get() == [1, 2]


def test_list_add_all_is_empty_noop_on_empty_state(backend):
    backend.set_current_key("u1")
    lst = backend.get_state(ListStateDescriptor("events"))
    lst.add_all([])
    assert lst.get() == []
    assert backend.num_entries() == 0


def test_map_state_methods(backend):
    backend.set_current_key("u1")
    m = backend.get_state(MapStateDescriptor("m"))
    assert m.is_empty()
    assert m.get("a") is None
    assert not m.contains("a")
    assert m.keys() == [] and m.values() == [] and m.items() == []
    m.put("a", 1)
    m.put_all({"b": 2, ("t", 1): [3]})
    assert not m.is_empty()
    assert m.get("a") == 1 and m.get(("t", 1)) == [3]
    assert m.contains("b") and not m.contains("zz")
    assert set(m.keys()) == {"a", "b", ("t", 1)}
    assert sorted(map(repr, m.values())) == sorted(map(repr, [1, 2, [3]]))
    assert dict(m.items()) == {"a": 1, "b": 2, ("t", 1): [3]}
    m.put("a", 10)
    assert m.get("a") == 10
    m.remove("a")
    m.remove("never-there")
    assert m.get("a") is None and not m.contains("a")
    assert dict(m.items()) == {"b": 2, ("t", 1): [3]}
    m.remove("b")
    m.remove(("t", 1))
    assert m.is_empty()
    assert backend.num_entries() == 0
    m.put_all({"x": 1, "y": 2})
    m.clear()
    assert m.is_empty() and m.items() == []
    assert backend.num_entries() == 0


def test_map_state_stores_none_values_distinctly_from_missing(backend):
    backend.set_current_key("u1")
    m = backend.get_state(MapStateDescriptor("m"))
    m.put("a", None)
    assert m.contains("a")
    assert m.get("a") is None
    assert dict(m.items()) == {"a": None}


def test_reducing_state_methods(backend):
    backend.set_current_key("u1")
    r = backend.get_state(ReducingStateDescriptor("sum", lambda a, b: a + b))
    assert r.get() is None
    r.add(3)
    assert r.get() == 3
    r.add(4)
    assert r.get() == 7
    r.clear()
    assert r.get() is None
    assert backend.num_entries() == 0


def test_reducing_state_argument_order(backend):
    backend.set_current_key("u1")
    r = backend.get_state(descriptor("reducing"))
    for t in "abc":
        r.add(t)
    assert r.get() == "abc"


def test_aggregating_state_methods(backend):
    backend.set_current_key("u1")
    avg = backend.get_state(AggregatingStateDescriptor("avg", Average()))
    assert avg.get() is None
    avg.add(1)
    avg.add(2)
    assert avg.get() == 1.5
    avg.clear()
    assert avg.get() is None
    avg.add(10)
    assert avg.get() == 10.0
    cat = backend.get_state(descriptor("aggregating"))
    for t in "xyz":
        cat.add(t)
    assert cat.get() == "xyz"


def test_get_state_returns_same_state_for_same_name(backend):
    a = backend.get_state(ValueStateDescriptor("x"))
    b = backend.get_state(ValueStateDescriptor("x", default=3))
    assert a is b
    assert set(backend.registered_states()) == {"x"}


@pytest.mark.parametrize("kind", KINDS)
def test_descriptor_conflict_same_name_other_kind(backend, kind):
    backend.get_state(descriptor(kind, "shared"))
    for other in KINDS:
        if other != kind:
            with pytest.raises(StateDescriptorError, match="shared"):
                backend.get_state(descriptor(other, "shared"))


# ---------------------------------------------------------------------------------------------
# Scoping: keys, namespaces, current key
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_key_isolation(backend, kind):
    st = backend.get_state(descriptor(kind))
    for key in ("a", "b", 7, ("t", 1)):
        backend.set_current_key(key)
        write(st, kind, f"{key}".replace(" ", ""))
    for key in ("a", "b", 7, ("t", 1)):
        backend.set_current_key(key)
        token = f"{key}".replace(" ", "")
        expected = {"value": token, "list": [token], "map": {token: token.upper()},
                    "reducing": token, "aggregating": token}[kind]
        assert read(st, kind) == expected
    backend.set_current_key("nobody")
    assert read(st, kind) == EMPTY[kind]


@pytest.mark.parametrize("kind", KINDS)
def test_namespace_isolation(backend, kind):
    backend.set_current_key("u1")
    st = backend.get_state(descriptor(kind))
    write(st, kind, "d")
    st.set_current_namespace(("w", 0, 30000))
    assert read(st, kind) == EMPTY[kind]
    write(st, kind, "w")
    st.set_current_namespace(("w", 30000, 60000))
    assert read(st, kind) == EMPTY[kind]
    st.set_current_namespace(None)
    assert read(st, kind) == read_one(kind, "d")
    st.set_current_namespace(("w", 0, 30000))
    assert read(st, kind) == read_one(kind, "w")
    st.clear()
    assert read(st, kind) == EMPTY[kind]
    st.set_current_namespace(None)
    assert read(st, kind) == read_one(kind, "d")


def read_one(kind: str, token: str):
    """What ``read`` returns after ``write(st, kind, token)`` on an empty state."""
    return {"value": token, "list": [token], "map": {token: token.upper()},
            "reducing": token, "aggregating": token}[kind]


def test_namespace_survives_key_change(backend):
    st = backend.get_state(descriptor("list"))
    st.set_current_namespace("ns")
    backend.set_current_key("a")
    st.add("x")
    backend.set_current_key("b")
    st.add("y")
    st.set_current_namespace(None)
    assert st.get() == []
    st.set_current_namespace("ns")
    assert st.get() == ["y"]
    backend.set_current_key("a")
    assert st.get() == ["x"]


def test_namespace_is_per_state(backend):
    backend.set_current_key("u")
    a = backend.get_state(ValueStateDescriptor("a"))
    b = backend.get_state(ValueStateDescriptor("b"))
    a.set_current_namespace("n1")
    a.update(1)
    b.update(2)
    a.set_current_namespace(None)
    assert a.value() is None
    b.set_current_namespace("n1")
    assert b.value() is None


def test_state_created_after_set_current_key_sees_the_key(backend):
    backend.set_current_key("late")
    v = backend.get_state(ValueStateDescriptor("v"))
    v.update("x")
    backend.set_current_key("other")
    assert v.value() is None
    backend.set_current_key("late")
    assert v.value() == "x"
    assert backend.get_current_key() == "late"


def test_states_in_other_namespaces_follow_key_changes(backend):
    st = backend.get_state(descriptor("list"))
    other = backend.get_state(descriptor("value"))
    st.set_current_namespace(("w", 1))
    for key in ("a", "b", "a"):
        backend.set_current_key(key)
        st.add(key)
        other.update(key)
    assert st.get() == ["a", "a"] and other.value() == "a"
    backend.set_current_key("b")
    assert st.get() == ["b"] and other.value() == "b"
    st.set_current_namespace(None)
    assert st.get() == []


@pytest.mark.parametrize("kind", KINDS)
def test_no_current_key_error(backend, kind):
    st = backend.get_state(descriptor(kind))
    with pytest.raises(NoCurrentKeyError):
        read(st, kind)
    with pytest.raises(NoCurrentKeyError):
        write(st, kind, "x")
    with pytest.raises(NoCurrentKeyError):
        backend.get_current_key()
    assert backend.num_entries() == 0


@pytest.mark.parametrize("kind", KINDS)
def test_no_current_key_error_on_clear_of_empty_state(backend, kind):
    st = backend.get_state(descriptor(kind))
    with pytest.raises(NoCurrentKeyError):
        st.clear()


@pytest.mark.parametrize("kind", MERGING)
def test_no_current_key_error_on_merge(backend, kind):
    st = backend.get_state(descriptor(kind))
    with pytest.raises(NoCurrentKeyError):
        st.merge_namespaces("t", ["a"])


# ---------------------------------------------------------------------------------------------
# merge_namespaces
# ---------------------------------------------------------------------------------------------

def fill(st, kind: str, ns, tokens: str) -> None:
    st.set_current_namespace(ns)
    for t in tokens:
        st.add(t)


MERGED = {"list": list, "reducing": "".join, "aggregating": "".join}


@pytest.mark.parametrize("kind", MERGING)
def test_merge_order_target_then_sources_in_order(backend, kind):
    backend.set_current_key("u")
    st = backend.get_state(descriptor(kind))
    fill(st, kind, "T", "tu")
    fill(st, kind, "A", "a")
    fill(st, kind, "B", "bc")
    fill(st, kind, "C", "d")
    st.merge_namespaces("T", ["B", "A", "C"])
    st.set_current_namespace("T")
    assert st.get() == MERGED[kind]("tubcad")
    for ns in "ABC":
        st.set_current_namespace(ns)
        assert st.get() == ([] if kind == "list" else None)
    assert backend.state_entry_counts()[kind] == 1


@pytest.mark.parametrize("kind", MERGING)
def test_merge_into_empty_target(backend, kind):
    backend.set_current_key("u")
    st = backend.get_state(descriptor(kind))
    fill(st, kind, "A", "a")
    fill(st, kind, "B", "b")
    st.merge_namespaces(("w", 0, 10), ["A", "B"])
    st.set_current_namespace(("w", 0, 10))
    assert st.get() == MERGED[kind]("ab")
    assert backend.num_entries() == 1


@pytest.mark.parametrize("kind", MERGING)
def test_merge_skips_missing_and_empty_sources(backend, kind):
    backend.set_current_key("u")
    st = backend.get_state(descriptor(kind))
    fill(st, kind, "T", "t")
    fill(st, kind, "A", "a")
    st.set_current_namespace("E")
    if kind == "list":
        st.add("x")
        st.update([])
    st.merge_namespaces("T", ["missing", "E", "A", "missing2"])
    st.set_current_namespace("T")
    assert st.get() == MERGED[kind]("ta")
    assert backend.num_entries() == 1


@pytest.mark.parametrize("kind", MERGING)
def test_merge_with_no_sources_or_all_missing_leaves_target(backend, kind):
    backend.set_current_key("u")
    st = backend.get_state(descriptor(kind))
    fill(st, kind, "T", "t")
    st.merge_namespaces("T", [])
    st.merge_namespaces("T", ["nope"])
    st.merge_namespaces("empty-target", ["nope"])
    st.set_current_namespace("T")
    assert st.get() == MERGED[kind]("t")
    st.set_current_namespace("empty-target")
    assert st.get() == ([] if kind == "list" else None)
    assert backend.num_entries() == 1


@pytest.mark.parametrize("kind", MERGING)
def test_merge_source_equal_to_target_is_ignored(backend, kind):
    backend.set_current_key("u")
    st = backend.get_state(descriptor(kind))
    fill(st, kind, "T", "t")
    fill(st, kind, "A", "a")
    st.merge_namespaces("T", ["T", "A", "T"])
    st.set_current_namespace("T")
    assert st.get() == MERGED[kind]("ta")
    assert backend.num_entries() == 1


SERIALIZED_APART = [1, True, 1.0, 0.0, -0.0, (1, 2), (True, 2), None]
"""Namespaces equal in Python (1 == True == 1.0, 0.0 == -0.0, (1, 2) == (True, 2)) that serialize apart."""


@pytest.mark.parametrize("kind", KINDS)
def test_namespaces_equal_in_python_but_serialized_apart_are_apart(make_backend, kind):
    """Each of ``SERIALIZED_APART`` is its own cell, whichever was used first, in the backend and through a
    snapshot restored into a backend that meets the namespaces in the opposite order."""
    src = make_backend()
    st = src.get_state(descriptor(kind))
    src.set_current_key("k")
    for i, ns in enumerate(SERIALIZED_APART):
        st.set_current_namespace(ns)
        write(st, kind, f"t{i}")
    assert src.state_entry_counts()[kind] == len(SERIALIZED_APART)
    snap = msgpack_round_trip(src.snapshot_logical())
    assert sorted(repr(e[2]) for e in snap["states"][kind]["entries"]) == sorted(map(repr, SERIALIZED_APART))
    dst = make_backend()
    dst.restore_logical(snap)
    for b in (src, dst):
        st = b.get_state(descriptor(kind))
        b.set_current_key("k")
        for i, ns in reversed(list(enumerate(SERIALIZED_APART))):
            st.set_current_namespace(ns)
            assert read(st, kind) == read_one(kind, f"t{i}"), (b, ns)
    src.close()
    dst.close()


@pytest.mark.parametrize("kind", MERGING)
def test_merge_of_a_source_equal_in_python_to_the_target(backend, kind):
    """A source ``1`` merged into a target ``True`` is another namespace (they serialize apart): merged
    and cleared, not skipped as the target itself."""
    backend.set_current_key("u")
    st = backend.get_state(descriptor(kind))
    fill(st, kind, True, "t")
    fill(st, kind, 1, "a")
    fill(st, kind, 1.0, "b")
    st.merge_namespaces(True, [1, True, 1.0])
    st.set_current_namespace(True)
    assert st.get() == MERGED[kind]("tab")
    for ns in (1, 1.0):
        st.set_current_namespace(ns)
        assert st.get() == ([] if kind == "list" else None)
    assert backend.num_entries() == 1


@pytest.mark.parametrize("kind", MERGING)
def test_merge_only_touches_current_key(backend, kind):
    st = backend.get_state(descriptor(kind))
    for key in ("k1", "k2"):
        backend.set_current_key(key)
        fill(st, kind, "A", key[-1])
        fill(st, kind, "T", "t")
    backend.set_current_key("k1")
    st.merge_namespaces("T", ["A"])
    backend.set_current_key("k2")
    st.set_current_namespace("A")
    assert st.get() == MERGED[kind]("2")
    st.set_current_namespace("T")
    assert st.get() == MERGED[kind]("t")
    backend.set_current_key("k1")
    assert st.get() == MERGED[kind]("t1")


@pytest.mark.parametrize("kind", MERGING)
def test_merge_keeps_current_namespace(backend, kind):
    backend.set_current_key("u")
    st = backend.get_state(descriptor(kind))
    fill(st, kind, "A", "a")
    fill(st, kind, "X", "x")
    st.merge_namespaces("T", ["A"])
    assert st.get() == MERGED[kind]("x")


def test_merge_reducing_uses_reduce_function(backend):
    backend.set_current_key("u")
    st = backend.get_state(ReducingStateDescriptor("max", max))
    for ns, vals in (("T", [3]), ("A", [9, 1]), ("B", [4])):
        st.set_current_namespace(ns)
        for v in vals:
            st.add(v)
    st.merge_namespaces("T", ["A", "B"])
    st.set_current_namespace("T")
    assert st.get() == 9


def test_merge_aggregating_uses_merge_of_accumulators(backend):
    backend.set_current_key("u")
    st = backend.get_state(AggregatingStateDescriptor("avg", Average()))
    for ns, vals in (("T", [1]), ("A", [2, 3]), ("B", [10])):
        st.set_current_namespace(ns)
        for v in vals:
            st.add(v)
    st.merge_namespaces("T", ["A", "B"])
    st.set_current_namespace("T")
    assert st.get() == 4.0
    st.add(4)
    assert st.get() == 4.0


# ---------------------------------------------------------------------------------------------
# TTL (manual clock)
# ---------------------------------------------------------------------------------------------

def ttl_state(backend, kind: str, **kw):
    d = descriptor(kind, f"ttl-{kind}")
    d.enable_time_to_live(ttl(**kw))
    backend.set_current_key("u")
    return backend.get_state(d)


@pytest.mark.parametrize("kind", ["value", "reducing", "aggregating"])
def test_ttl_expires_at_last_access_plus_ttl(backend, clock, kind):
    st = ttl_state(backend, kind)
    write(st, kind, "a")
    clock.advance(TTL - 1)
    assert read(st, kind) == "a"
    clock.advance(1)
    assert read(st, kind) == EMPTY[kind]
    assert backend.num_entries() == 0


@pytest.mark.parametrize("kind", ["value", "reducing", "aggregating"])
def test_ttl_on_create_and_write_read_does_not_refresh(backend, clock, kind):
    st = ttl_state(backend, kind, update_type=ON_WRITE)
    write(st, kind, "a")
    clock.advance(60)
    assert read(st, kind) == "a"
    clock.advance(40)
    assert read(st, kind) == EMPTY[kind]


@pytest.mark.parametrize("kind", ["value", "reducing", "aggregating"])
def test_ttl_on_read_and_write_read_refreshes(backend, clock, kind):
    st = ttl_state(backend, kind, update_type=ON_READ)
    write(st, kind, "a")
    clock.advance(60)
    assert read(st, kind) == "a"
    clock.advance(60)
    assert read(st, kind) == "a"
    clock.advance(TTL)
    assert read(st, kind) == EMPTY[kind]
    assert backend.num_entries() == 0


@pytest.mark.parametrize("update_type", [ON_WRITE, ON_READ])
def test_ttl_write_refreshes(backend, clock, update_type):
    st = ttl_state(backend, "value", update_type=update_type)
    st.update("a")
    clock.advance(80)
    st.update("b")
    clock.advance(80)
    assert st.value() == "b"


def test_ttl_reducing_add_after_expiry_starts_fresh(backend, clock):
    st = ttl_state(backend, "reducing")
    st.add("a")
    clock.advance(TTL)
    st.add("b")
    assert st.get() == "b"


def test_ttl_aggregating_add_after_expiry_starts_fresh(backend, clock):
    st = ttl_state(backend, "aggregating")
    st.add("a")
    clock.advance(TTL)
    st.add("b")
    assert st.get() == "b"


@pytest.mark.parametrize("kind", ["value", "reducing", "aggregating"])
def test_ttl_return_expired_if_not_cleaned_up(backend, clock, kind):
    st = ttl_state(backend, kind, visibility=RETURN)
    write(st, kind, "a")
    clock.advance(TTL + 5)
    assert backend.num_entries() == 1
    assert read(st, kind) == "a"
    assert backend.num_entries() == 0
    assert read(st, kind) == EMPTY[kind]


def test_ttl_never_return_expired_deletes_on_read(backend, clock):
    st = ttl_state(backend, "value", visibility=NEVER)
    st.update("a")
    clock.advance(TTL)
    assert backend.num_entries() == 1
    assert st.value() == "dflt"
    assert backend.num_entries() == 0


def test_ttl_list_expires_per_element(backend, clock):
    st = ttl_state(backend, "list")
    st.add("a")
    clock.advance(50)
    st.add_all(["b", "c"])
    clock.advance(50)
    assert st.get() == ["b", "c"]
    clock.advance(49)
    st.add("d")
    assert st.get() == ["b", "c", "d"]
    clock.advance(1)
    assert st.get() == ["d"]
    clock.advance(TTL)
    assert st.get() == []
    assert backend.num_entries() == 0


def test_ttl_list_elements_really_deleted_on_read(backend, clock):
    st = ttl_state(backend, "list", cleanup_in_snapshot=False)
    st.add("old")
    clock.advance(60)
    st.add("new")
    clock.advance(60)
    assert st.get() == ["new"]
    [entry] = backend.snapshot_logical()["states"]["ttl-list"]["entries"]
    assert [e[0] for e in entry[3]] == ["new"]


def test_ttl_list_return_expired_then_gone(backend, clock):
    st = ttl_state(backend, "list", visibility=RETURN)
    st.add("a")
    clock.advance(50)
    st.add("b")
    clock.advance(50)
    assert st.get() == ["a", "b"]
    assert st.get() == ["b"]


def test_ttl_list_read_refresh(backend, clock):
    st = ttl_state(backend, "list", update_type=ON_READ)
    st.add("a")
    clock.advance(60)
    st.add("b")
    assert st.get() == ["a", "b"]
    clock.advance(60)
    assert st.get() == ["a", "b"]
    clock.advance(TTL)
    assert st.get() == []


def test_ttl_list_update_stamps_all_elements(backend, clock):
    st = ttl_state(backend, "list")
    st.add("a")
    clock.advance(60)
    st.update(["x", "y"])
    clock.advance(60)
    assert st.get() == ["x", "y"]


def test_ttl_map_expires_per_entry(backend, clock):
    st = ttl_state(backend, "map")
    st.put("a", 1)
    clock.advance(50)
    st.put_all({"b": 2, "c": 3})
    clock.advance(50)
    assert st.get("a") is None
    assert not st.contains("a")
    assert set(st.keys()) == {"b", "c"}
    assert sorted(st.values()) == [2, 3]
    assert dict(st.items()) == {"b": 2, "c": 3}
    assert not st.is_empty()
    st.put("b", 20)
    clock.advance(50)
    assert dict(st.items()) == {"b": 20}
    clock.advance(TTL)
    assert st.is_empty()
    assert st.items() == []
    assert backend.num_entries() == 0


def test_ttl_map_return_expired_then_gone(backend, clock):
    st = ttl_state(backend, "map", visibility=RETURN)
    st.put("a", 1)
    clock.advance(50)
    st.put("b", 2)
    clock.advance(50)
    assert st.get("a") == 1
    assert st.get("a") is None
    assert dict(st.items()) == {"b": 2}


def test_ttl_map_read_refreshes_only_the_entry_read(backend, clock):
    st = ttl_state(backend, "map", update_type=ON_READ)
    st.put_all({"a": 1, "b": 2})
    clock.advance(60)
    assert st.get("a") == 1
    clock.advance(60)
    assert st.get("a") == 1
    assert st.get("b") is None
    assert dict(st.items()) == {"a": 1}


def test_ttl_map_iteration_refreshes_all_entries(backend, clock):
    st = ttl_state(backend, "map", update_type=ON_READ)
    st.put_all({"a": 1, "b": 2})
    clock.advance(60)
    assert dict(st.items()) == {"a": 1, "b": 2}
    clock.advance(60)
    assert dict(st.items()) == {"a": 1, "b": 2}


def test_ttl_map_entries_really_deleted(backend, clock):
    st = ttl_state(backend, "map", cleanup_in_snapshot=False)
    st.put("old", 1)
    clock.advance(60)
    st.put("new", 2)
    clock.advance(60)
    assert st.keys() == ["new"]
    [entry] = backend.snapshot_logical()["states"]["ttl-map"]["entries"]
    assert set(entry[3]) == {"new"}


def fill_keys(backend, st, n: int) -> None:
    for i in range(n):
        backend.set_current_key(f"k{i}")
        st.update(i)


def test_ttl_incremental_cleanup_on_flush_checks_n_per_state(backend, clock):
    d = ValueStateDescriptor("v").enable_time_to_live(ttl(cleanup_incremental=3))
    st = backend.get_state(d)
    fill_keys(backend, st, 10)
    clock.advance(TTL)
    assert backend.num_entries() == 10
    counts = []
    for _ in range(4):
        backend.flush()
        counts.append(backend.num_entries())
    assert counts == [7, 4, 1, 0]


def test_ttl_incremental_cleanup_keeps_live_entries(backend, clock):
    d = ValueStateDescriptor("v").enable_time_to_live(ttl(cleanup_incremental=100))
    st = backend.get_state(d)
    fill_keys(backend, st, 5)
    clock.advance(50)
    for i in range(5, 10):
        backend.set_current_key(f"k{i}")
        st.update(i)
    clock.advance(50)
    backend.flush()
    assert backend.num_entries() == 5
    for i in range(10):
        backend.set_current_key(f"k{i}")
        assert st.value() == (i if i >= 5 else None)


def test_ttl_incremental_cleanup_on_read_access(backend, clock):
    d = ValueStateDescriptor("v").enable_time_to_live(ttl(cleanup_incremental=3))
    st = backend.get_state(d)
    fill_keys(backend, st, 10)
    clock.advance(TTL)
    backend.set_current_key("k0")
    assert st.value() is None
    assert 10 - 4 <= backend.num_entries() <= 10 - 3
    backend.set_current_key("no-entry")
    before = backend.num_entries()
    assert st.value() is None
    assert backend.num_entries() == before - 3


def test_ttl_incremental_cleanup_on_write_access(backend, clock):
    d = ValueStateDescriptor("v").enable_time_to_live(ttl(cleanup_incremental=3))
    st = backend.get_state(d)
    fill_keys(backend, st, 10)
    clock.advance(TTL)
    backend.set_current_key("fresh")
    st.update("x")
    assert backend.num_entries() == 10 + 1 - 3
    assert st.value() == "x"


def test_ttl_incremental_cleanup_on_list_and_map_access(backend, clock):
    lst = backend.get_state(ListStateDescriptor("l").enable_time_to_live(ttl(cleanup_incremental=2)))
    m = backend.get_state(MapStateDescriptor("m").enable_time_to_live(ttl(cleanup_incremental=2)))
    for i in range(6):
        backend.set_current_key(f"k{i}")
        lst.add(i)
        m.put(i, i)
    clock.advance(TTL)
    backend.set_current_key("fresh")
    lst.add("x")
    m.put("x", 1)
    assert backend.state_entry_counts() == {"l": 5, "m": 5}
    assert lst.get() == ["x"] and m.keys() == ["x"]
    assert backend.state_entry_counts() == {"l": 3, "m": 3}


def test_ttl_incremental_cleanup_list_and_map_elements(backend, clock):
    lst = backend.get_state(ListStateDescriptor("l").enable_time_to_live(ttl(cleanup_incremental=1000)))
    m = backend.get_state(MapStateDescriptor("m").enable_time_to_live(ttl(cleanup_incremental=1000)))
    for i in range(5):
        backend.set_current_key(f"k{i}")
        lst.add("old")
        m.put("old", 1)
    clock.advance(60)
    backend.set_current_key("k0")
    lst.add("new")
    m.put("new", 2)
    clock.advance(60)
    backend.flush()
    assert backend.state_entry_counts() == {"l": 1, "m": 1}
    snap = backend.snapshot_logical()
    [lcell] = [e[3] for e in snap["states"]["l"]["entries"]]
    [mcell] = [e[3] for e in snap["states"]["m"]["entries"]]
    assert [e[0] for e in lcell] == ["new"]
    assert set(mcell) == {"new"}


def test_ttl_without_incremental_cleanup_keeps_unread_entries(backend, clock):
    st = backend.get_state(ValueStateDescriptor("v").enable_time_to_live(ttl()))
    fill_keys(backend, st, 4)
    clock.advance(TTL * 2)
    backend.flush()
    assert backend.num_entries() == 4


@pytest.mark.parametrize("kind", KINDS)
def test_ttl_cleanup_in_snapshot_drops_expired(backend, clock, kind):
    st = ttl_state(backend, kind, cleanup_in_snapshot=True)
    write(st, kind, "old")
    backend.set_current_key("u2")
    clock.advance(60)
    write(st, kind, "new")
    clock.advance(60)
    entries = backend.snapshot_logical()["states"][f"ttl-{kind}"]["entries"]
    assert [e[1] for e in entries] == ["u2"]


def test_ttl_cleanup_in_snapshot_after_incremental_progress(backend, clock):
    st = backend.get_state(ValueStateDescriptor("v").enable_time_to_live(ttl(cleanup_incremental=2)))
    fill_keys(backend, st, 5)
    backend.flush()
    for i in range(5, 10):
        backend.set_current_key(f"k{i}")
        st.update(i)
    clock.advance(TTL)
    assert backend.snapshot_logical()["states"]["v"]["entries"] == []
    assert backend.num_entries() == 0


@pytest.mark.parametrize("kind", KINDS)
def test_ttl_snapshot_keeps_expired_without_cleanup_in_snapshot(make_backend, clock, kind):
    src = make_backend()
    st = ttl_state(src, kind, cleanup_in_snapshot=False)
    write(st, kind, "old")
    clock.advance(TTL)
    snap = src.snapshot_logical()
    assert [e[1] for e in snap["states"][f"ttl-{kind}"]["entries"]] == ["u"]
    dst = make_backend()
    dst.restore_logical(snap)
    restored = ttl_state(dst, kind, cleanup_in_snapshot=False)
    assert read(restored, kind) == EMPTY[kind]


@pytest.mark.parametrize("kind", KINDS)
def test_ttl_timestamps_survive_restore(make_backend, clock, kind):
    src = make_backend()
    st = ttl_state(src, kind)
    write(st, kind, "a")
    clock.advance(60)
    dst = make_backend()
    dst.restore_logical(src.snapshot_logical())
    restored = ttl_state(dst, kind)
    assert read(restored, kind) == read_one(kind, "a")
    clock.advance(40)
    assert read(restored, kind) == EMPTY[kind]


def test_ttl_config_validation():
    with pytest.raises(ValueError):
        StateTtlConfig(0)
    with pytest.raises(ValueError):
        StateTtlConfig(10, cleanup_incremental=-1)
    with pytest.raises(TypeError):
        ValueStateDescriptor("v").enable_time_to_live(10)


def test_ttl_default_clock_is_wall_clock(backend_name, tmp_path):
    b = create_backend(StateConfig(backend=backend_name, local_dir=str(tmp_path)))
    try:
        b.set_current_key("u")
        st = b.get_state(ValueStateDescriptor("v").enable_time_to_live(StateTtlConfig(60_000)))
        st.update(1)
        assert st.value() == 1
    finally:
        b.close()


# ---------------------------------------------------------------------------------------------
# Key groups
# ---------------------------------------------------------------------------------------------

STABLE_KEYS = ["user-1", 42, -7, ("a", 1), b"\x00raw", 3.25, ("nested", ("t", 2), [1, 2])]


def test_key_group_for_is_stable_across_processes():
    code = ("import json, sys; from statekit import key_group_for\n"
            "keys = [\"user-1\", 42, -7, (\"a\", 1), b\"\\x00raw\", 3.25, (\"nested\", (\"t\", 2), [1, 2])]\n"
            "print(json.dumps([[key_group_for(k, m) for k in keys] for m in (128, 4096, 7)]))")
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [[key_group_for(k, m) for k in STABLE_KEYS] for m in (128, 4096, 7)]


def test_key_group_hashes_serialized_key_bytes():
    for m in (128, 1000, 32768):
        for key in ("user-1", 42, b"raw"):
            assert key_group_for(key, m) == stable_hash(msgpack.packb(key, use_bin_type=True)) % m


def test_key_group_for_in_range_and_spread():
    groups = [key_group_for(f"user-{i}", 128) for i in range(5000)]
    assert min(groups) >= 0 and max(groups) < 128
    counts = [groups.count(g) for g in range(128)]
    assert min(counts) > 0
    assert max(counts) < 3 * 5000 / 128


def test_key_groups_for_partition_matches_flink_formula():
    assert [key_groups_for_partition(p, 3, 128) for p in range(3)] == [range(0, 43), range(43, 86), range(86, 128)]
    assert [key_groups_for_partition(p, 2, 128) for p in range(2)] == [range(0, 64), range(64, 128)]
    assert key_groups_for_partition(0, 1, 128) == range(0, 128)
    assert [key_groups_for_partition(p, 4, 10) for p in range(4)] == [range(0, 3), range(3, 5), range(5, 8), range(8, 10)]


@pytest.mark.parametrize("max_parallelism", [1, 7, 128, 1000, 32768])
def test_key_groups_for_partition_cover_without_overlap(max_parallelism):
    for parallelism in sorted(p for p in {1, 2, 3, 5, 16, max_parallelism // 3 or 1, max_parallelism}
                              if p <= max_parallelism):
        ranges = [key_groups_for_partition(p, parallelism, max_parallelism) for p in range(parallelism)]
        flat = [g for r in ranges for g in r]
        assert flat == list(range(max_parallelism))
        assert all(len(r) >= 1 for r in ranges)
        assert max(map(len, ranges)) - min(map(len, ranges)) <= 1
        for p, r in enumerate(ranges):
            assert all(partition_for_key_group(g, parallelism, max_parallelism) == p for g in r)


def test_key_groups_for_partition_rejects_bad_arguments():
    for args in [(3, 3, 128), (-1, 3, 128), (0, 0, 128), (0, 129, 128), (0, 1, 0)]:
        with pytest.raises(ValueError):
            key_groups_for_partition(*args)


def test_backend_rejects_keys_outside_its_key_groups(make_backend):
    mine = key_groups_for_partition(0, 2, 128)
    theirs = key_groups_for_partition(1, 2, 128)
    b = make_backend(key_groups=mine)
    inside = key_in_group_range(mine)
    outside = key_in_group_range(theirs)
    b.set_current_key(inside)
    assert b.current_key_group == key_group_for(inside, 128)
    v = b.get_state(ValueStateDescriptor("v"))
    v.update(1)
    with pytest.raises(KeyGroupError, match=str(key_group_for(outside, 128))):
        b.set_current_key(outside)
    with pytest.raises(KeyGroupError):
        b.set_current_key(outside)
    assert b.get_current_key() == inside
    assert v.value() == 1


def test_backend_key_groups_must_be_valid(make_backend):
    for bad in (range(0, 200), range(5, 5), [1, 2, 5]):
        with pytest.raises(KeyGroupError):
            make_backend(key_groups=bad)
    b = make_backend(key_groups=[3, 4, 5])
    assert b.key_groups == range(3, 6)


def test_backend_uses_its_max_parallelism(make_backend):
    b = make_backend(max_parallelism=16, key_groups=key_groups_for_partition(1, 4, 16))
    key = key_in_group_range(range(4, 8), 16)
    b.set_current_key(key)
    assert b.current_key_group == key_group_for(key, 16)


@pytest.mark.parametrize("bad", [None, float("nan"), [1, 2], {"a": 1}, {1, 2}, object(), ("ok", object())],
                         ids=["None", "nan", "list", "dict", "set", "object", "tuple-with-object"])
def test_invalid_keys_are_rejected(backend, bad):
    with pytest.raises(InvalidKeyError):
        backend.set_current_key(bad)
    with pytest.raises(NoCurrentKeyError):
        backend.get_current_key()


# ---------------------------------------------------------------------------------------------
# Serialization: errors at write time, type round trips
# ---------------------------------------------------------------------------------------------

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


def test_value_reads_are_not_aliased_to_storage(backend):
    backend.set_current_key("u")
    v = backend.get_state(ValueStateDescriptor("v"))
    v.update([1, 2])
    got = v.value()
    got.append(3)
    v.update(got)
    assert v.value() == [1, 2, 3]


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


def test_equal_tuple_keys_address_the_same_state(backend):
    st = backend.get_state(ValueStateDescriptor("v"))
    backend.set_current_key(("a", 1))
    st.update("x")
    backend.set_current_key(tuple(["a", 1]))
    assert st.value() == "x"
    backend.set_current_key(("a", 2))
    assert st.value() is None


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


def msgpack_round_trip(snapshot: dict) -> dict:
    """A snapshot through bytes, as a checkpoint store would keep it."""
    from statekit import KEY_SERIALIZER

    return KEY_SERIALIZER.loads(KEY_SERIALIZER.dumps(snapshot))


# ---------------------------------------------------------------------------------------------
# Logical snapshots
# ---------------------------------------------------------------------------------------------

def populate(backend, keys, make=descriptor) -> None:
    """Two namespaces of every kind for each key; content derived from the key."""
    states = {k: backend.get_state(make(k)) for k in KINDS}
    for key in keys:
        backend.set_current_key(key)
        for kind, st in states.items():
            for ns in (None, ("w", 1)):
                st.set_current_namespace(ns)
                write(st, kind, f"{key}-{ns is None}")
                write(st, kind, "z") if kind != "value" else None


def expected_content(kind: str, key, ns):
    token = f"{key}-{ns is None}"
    return {"value": token, "list": [token, "z"], "map": {token: token.upper(), "z": "Z"},
            "reducing": token + "z", "aggregating": token + "z"}[kind]


def check_content(backend, keys, present: bool = True, expected=expected_content, make=descriptor) -> None:
    """Every state of ``populate`` holds ``expected`` (nothing unless ``present``), registered by ``make(kind)``."""
    for kind in KINDS:
        st = backend.get_state(make(kind))
        for key in keys:
            backend.set_current_key(key)
            for ns in (None, ("w", 1)):
                st.set_current_namespace(ns)
                assert read(st, kind) == (expected(kind, key, ns) if present else EMPTY[kind]), (kind, key, ns)


@pytest.mark.parametrize("register_first", [True, False], ids=["registered-before-restore", "pending"])
def test_snapshot_round_trip_every_kind(make_backend, register_first):
    keys = ["a", "b", ("t", 3), 99]
    src = make_backend()
    populate(src, keys)
    snap = msgpack_round_trip(src.snapshot_logical())
    assert snap["max_parallelism"] == 128
    assert set(snap["states"]) == set(KINDS)
    assert {s["kind"] for s in snap["states"].values()} == set(KINDS)
    dst = make_backend()
    if register_first:
        for kind in KINDS:
            dst.get_state(descriptor(kind))
    dst.restore_logical(snap)
    assert dst.num_entries() == len(keys) * 2 * len(KINDS)
    check_content(dst, keys)
    assert dst.state_entry_counts() == src.state_entry_counts()
    check_content(src, keys)


def test_snapshot_is_a_copy(make_backend):
    src = make_backend()
    populate(src, ["a"])
    snap = src.snapshot_logical()
    src.set_current_key("a")
    src.get_state(descriptor("list")).add("later")
    src.get_state(descriptor("map")).put("later", 1)
    dst = make_backend()
    dst.restore_logical(snap)
    check_content(dst, ["a"])


def test_snapshot_rescale_into_other_key_group_ranges(make_backend):
    keys = [f"user-{i}" for i in range(120)] + [("t", i) for i in range(40)]
    src = make_backend()
    populate(src, keys)
    snap = src.snapshot_logical()
    parts = [make_backend(key_groups=key_groups_for_partition(p, 3, 128)) for p in range(3)]
    for part in parts:
        part.restore_logical(snap)
    total = 0
    for p, part in enumerate(parts):
        mine = [k for k in keys if key_group_for(k, 128) in part.key_groups]
        assert mine, "each partition should receive some keys"
        total += len(mine)
        check_content(part, mine)
        assert part.num_entries() == len(mine) * 2 * len(KINDS)
    assert total == len(keys)
    merged = make_backend()
    merged.restore_logical([p.snapshot_logical() for p in parts])
    check_content(merged, keys)
    migrated = make_backend()  # rescaling and migrating at once
    migrated.restore_logical([p.snapshot_logical() for p in parts])
    check_migrated(migrated, keys)


def test_restore_rejects_non_empty_backend_and_other_max_parallelism(make_backend):
    src = make_backend()
    populate(src, ["a"])
    snap = src.snapshot_logical()
    with pytest.raises(StateError):
        src.restore_logical(snap)
    other = make_backend(max_parallelism=64)
    with pytest.raises(StateError, match="max_parallelism"):
        other.restore_logical(snap)


def test_restore_rejects_kind_mismatch_on_registration(make_backend):
    src = make_backend()
    populate(src, ["a"])
    dst = make_backend()
    dst.restore_logical(src.snapshot_logical())
    with pytest.raises(StateDescriptorError, match="value"):
        dst.get_state(ListStateDescriptor("value"))


def restored_value(make_backend, key, value):
    """A backend restored from one holding ``value`` for ``key`` in value state 'v' (nothing registered yet)."""
    src = make_backend()
    src.set_current_key(key)
    src.get_state(ValueStateDescriptor("v")).update(value)
    dst = make_backend()
    dst.restore_logical(src.snapshot_logical())
    return dst


def test_restore_rejects_ttl_mismatch(make_backend):
    dst = restored_value(make_backend, "a", 1)
    with pytest.raises(StateDescriptorError, match="TTL"):
        dst.get_state(ValueStateDescriptor("v").enable_time_to_live(ttl()))


def test_empty_snapshot_round_trip(make_backend):
    dst = make_backend()
    dst.restore_logical(make_backend().snapshot_logical())
    assert dst.num_entries() == 0


# ---------------------------------------------------------------------------------------------
# State schema evolution: versions and migrations
# ---------------------------------------------------------------------------------------------

def bang(version: int, value):
    """A version-1 -> 2 migration that shows it ran: strings get a "!", Concat accumulators a "!" element."""
    assert version == 1, version
    return value + ["!"] if isinstance(value, list) else value + "!"


def migrated_content(kind: str, key, ns):
    token = f"{key}-{ns is None}"
    return {"value": token + "!", "list": [token + "!", "z!"], "map": {token: token.upper() + "!", "z": "Z!"},
            "reducing": token + "z!", "aggregating": token + "z!"}[kind]


def migrated_descriptor(kind: str, with_ttl: bool = False):
    d = descriptor(kind).with_version(2, bang)
    return d.enable_time_to_live(ttl()) if with_ttl else d


def check_migrated(backend, keys, with_ttl: bool = False) -> None:
    check_content(backend, keys, expected=migrated_content, make=lambda kind: migrated_descriptor(kind, with_ttl))


@pytest.mark.parametrize("register_first", [True, False], ids=["registered-before-restore", "pending"])
def test_restore_migrates_every_kind_from_an_older_version(make_backend, register_first):
    keys = ["a", ("t", 3), 99]
    src = make_backend()
    populate(src, keys)
    snap = msgpack_round_trip(src.snapshot_logical())
    assert {s["version"] for s in snap["states"].values()} == {1}
    dst = make_backend()
    if register_first:
        for kind in KINDS:
            dst.get_state(descriptor(kind).with_version(2, bang))
    dst.restore_logical(snap)
    check_migrated(dst, keys)
    again = msgpack_round_trip(dst.snapshot_logical())  # migrated once: version 2 restores as it is
    assert {s["version"] for s in again["states"].values()} == {2}
    third = make_backend()
    third.restore_logical(again)
    check_migrated(third, keys)


def test_restore_migrates_ttl_state_keeping_timestamps(make_backend, clock):
    src = make_backend()
    populate(src, ["a"], make=lambda kind: descriptor(kind).enable_time_to_live(ttl()))
    snap = msgpack_round_trip(src.snapshot_logical())
    dst = make_backend()
    dst.restore_logical(snap)
    check_migrated(dst, ["a"], with_ttl=True)
    clock.advance(TTL)  # the stored timestamps were kept: everything expires on time
    for kind in KINDS:
        st = dst.get_state(migrated_descriptor(kind, with_ttl=True))
        st.set_current_namespace(None)
        assert read(st, kind) == EMPTY[kind]


def test_version_change_without_migration_is_refused_naming_both_versions(make_backend):
    src = make_backend()
    populate(src, ["a"])
    dst = make_backend()
    dst.restore_logical(src.snapshot_logical())
    with pytest.raises(StateMigrationError, match=r"state 'list' is stored at version 1.*version 3 without a migration"):
        dst.get_state(descriptor("list").with_version(3))
    newer = make_backend()
    newer_src = make_backend()
    newer_src.set_current_key("a")
    newer_src.get_state(descriptor("value").with_version(4, bang)).update("x")
    newer.restore_logical(newer_src.snapshot_logical())
    with pytest.raises(StateMigrationError, match=r"state 'value' is stored at version 4, newer than version 2"):
        newer.get_state(descriptor("value").with_version(2, bang))


def test_failing_migration_names_state_key_and_versions(make_backend):
    dst = restored_value(make_backend, "k1", 5)
    with pytest.raises(StateMigrationError, match=r"state 'v', key 'k1': migrating a value from version 1 to 2 failed: TypeError"):
        dst.get_state(ValueStateDescriptor("v").with_version(2, lambda v, x: x + "!"))
    unstorable = restored_value(make_backend, "k2", 5)
    with pytest.raises(StateMigrationError, match=r"state 'v', key 'k2': migrating a value from version 1 to 2 failed"):
        unstorable.get_state(ValueStateDescriptor("v").with_version(2, lambda v, x: {x}))  # a set: not serializable


def test_versions_are_checked_when_declared():
    with pytest.raises(ValueError, match="version must be an int >= 1"):
        ValueStateDescriptor("v").with_version(0)
    with pytest.raises(TypeError, match="migration must be callable"):
        ValueStateDescriptor("v").with_version(2, "upper")


# ---------------------------------------------------------------------------------------------
# Lifecycle and counters
# ---------------------------------------------------------------------------------------------

def test_entry_counts_per_state(backend):
    populate(backend, ["a", "b", "c"])
    assert backend.state_entry_counts() == {k: 6 for k in KINDS}
    assert backend.num_entries() == 30
    backend.set_current_key("a")
    for kind in KINDS:
        backend.get_state(descriptor(kind)).clear()
    assert backend.state_entry_counts() == {k: 5 for k in KINDS}


def test_closed_backend_refuses_new_states(make_backend):
    b = make_backend()
    b.get_state(ValueStateDescriptor("v"))
    b.close()
    with pytest.raises(StateError):
        b.get_state(ValueStateDescriptor("w"))


def test_every_backend_declares_parseable_options(backend_name):
    specs = backend_class(backend_name).OPTIONS
    assert all(s.name.startswith(f"{backend_name}.") for s in specs)
    cfg = StateConfig(backend=backend_name, options={s.name: s.default for s in specs})
    for s in specs:
        assert cfg.get(s.name) == s.default
    env = {f"STATEKIT_{s.name.replace('.', '_').upper()}": str(s.default) for s in specs if s.default is not None}
    env["STATEKIT_BACKEND"] = backend_name
    from_env = StateConfig.from_env(env)
    assert from_env.backend == backend_name
    for s in specs:
        assert from_env.get(s.name) == s.default


def test_heap_without_write_validation_defers_errors_to_snapshot():
    b = create_backend(StateConfig(backend="heap", options={"heap.validate_writes": False}))
    b.set_current_key("u")
    b.get_state(ValueStateDescriptor("v")).update(Opaque())
    with pytest.raises(SerializationError):
        msgpack_round_trip(b.snapshot_logical())
    b.close()


def test_user_interfaces_are_narrow_internal_ones_add_namespaces(backend):
    """As in Flink: users see a kind's operations; operators reach namespaces through the internal interfaces."""
    from statekit import InternalKvState, InternalMergingState, ListState, MapState, State, ValueState

    for user in (State, ValueState, ListState, MapState):
        assert not hasattr(user, "set_current_namespace") and not hasattr(user, "merge_namespaces")
    backend.set_current_key("k")
    for kind in KINDS:
        st = backend.get_state(descriptor(kind))
        assert isinstance(st, InternalKvState)
        assert isinstance(st, InternalMergingState) == (kind in MERGING)


class AppendInPlace(AggregateFunction):
    """An accumulator mutated in place and returned as the result: aliasing shows at once."""

    def create_accumulator(self):
        return []

    def add(self, value, accumulator):
        accumulator.append(value)
        return accumulator

    def merge(self, acc_a, acc_b):
        acc_a.extend(acc_b)
        return acc_a

    def get_result(self, accumulator):
        return accumulator


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


def test_internal_access_hands_the_stored_value_itself(backend):
    """Operators' bookkeeping (Flink's getInternal/updateInternal) skips the copies users get."""
    backend.set_current_key("k")
    st = backend.get_state(ValueStateDescriptor("internal"))
    acc = [1, 2]
    st.update_internal(acc)
    assert st.get_internal() is acc and st.value() == acc and st.value() is not acc
    st.update_internal(None)
    assert st.get_internal() is None


# -- batched access (issue 13): the same as one call per key ------------------------------------

def _batched_ops():
    from hypothesis import strategies as st

    keys = st.lists(st.sampled_from(["a", "b", 1, 2, (3, "x"), "c"]), min_size=0, max_size=5, unique=True)
    value = st.one_of(st.none(), st.integers(-5, 5), st.lists(st.integers(0, 3), max_size=3))
    return st.lists(st.one_of(
        st.tuples(st.just("read"), keys, st.sampled_from([None, "ns"])),
        st.tuples(st.just("write"), keys.flatmap(lambda ks: st.tuples(st.just(ks), st.lists(value, min_size=len(ks), max_size=len(ks)))),
                  st.sampled_from([None, "ns"])),
        st.tuples(st.just("tick"), st.integers(0, 60), st.just(None))), max_size=25)


@pytest.mark.parametrize("ttl", [None, "on-write", "on-read", "return-expired"])
def test_batched_value_access_equals_one_call_per_key(make_backend, clock, ttl):
    """``get_internal_many``/``update_internal_many`` read and write what one call per key would, TTL
    expiry and refresh included; both backends end with the same logical state."""
    from hypothesis import HealthCheck, given, settings

    def descriptor():
        d = ValueStateDescriptor("v", default="dflt")
        if ttl is not None:
            d.enable_time_to_live(StateTtlConfig(TTL, update_type=ON_READ if ttl == "on-read" else ON_WRITE,
                                                 visibility=RETURN if ttl == "return-expired" else NEVER,
                                                 cleanup_incremental=2))
        return d

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(ops=_batched_ops())
    def check(ops):
        one, many = make_backend(), make_backend()
        s1, sm = one.get_state(descriptor()), many.get_state(descriptor())
        for op, arg, ns in ops:
            if op == "tick":
                clock.advance(arg)
                continue
            keys, values = arg if op == "write" else (arg, None)
            s1.set_current_namespace(ns)
            sm.set_current_namespace(ns)
            resolved, refused = many.resolve_keys(keys)
            assert not refused
            if op == "read":
                expected = []
                for k in keys:
                    one.set_current_key(k)
                    expected.append(s1.get_internal())
                assert repr(sm.get_internal_many(resolved)) == repr(expected)
            else:
                for k, v in zip(keys, values):
                    one.set_current_key(k)
                    s1.update_internal(v)
                sm.update_internal_many(resolved, values)
        one.flush()
        many.flush()
        assert repr(_sorted_snapshot(many)) == repr(_sorted_snapshot(one))

    check()


def _sorted_snapshot(backend) -> dict:
    snap = backend.snapshot_logical()
    for s in snap["states"].values():
        s["entries"] = sorted(s["entries"], key=repr)
    return snap["states"]


def test_resolve_keys_refuses_like_set_current_key(backend):
    resolved, refused = backend.resolve_keys(["a", None, float("nan"), ["x"], 7])
    assert [r is None for r in resolved] == [False, True, True, True, False]
    assert sorted(refused) == [1, 2, 3] and all(isinstance(e, InvalidKeyError) for e in refused.values())
    assert "not hashable" in str(refused[3])
    backend.set_current_key("a")
    assert resolved[0] == backend.current_key_scope()
    outside = create_backend(StateConfig(backend=backend.name), key_groups=[key_group_for("a")])
    other = next(k for k in range(100) if key_group_for(k) != key_group_for("a"))
    with pytest.raises(KeyGroupError):
        outside.resolve_keys(["a", other])
    outside.close()


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


def test_bulk_key_resolution_equals_one_key_at_a_time(make_backend):
    """``resolve_keys`` (cold and with a warm cache), ``resolve_key_columns`` and ``key_groups_of`` of many
    keys at once equal ``set_current_key``'s scope and ``key_group_of`` of each key; a key it cannot
    serialize is refused under its index, as ``set_current_key`` refuses it."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    keys_ = st.one_of(st.integers(-(1 << 70), 1 << 70), st.text(max_size=4), st.binary(max_size=3), st.booleans(),
                      st.floats(allow_nan=False, width=32), st.tuples(st.integers(-3, 3), st.text(max_size=2)))

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(keys=st.lists(keys_, max_size=40))
    def check(keys):
        bulk, single, by_column = make_backend(), make_backend(), make_backend()
        for _ in range(2):  # cold, then warm
            resolved, refused = bulk.resolve_keys(keys)
            for i, key in enumerate(keys):
                try:
                    single.set_current_key(key)
                except InvalidKeyError as e:
                    assert resolved[i] is None and str(refused[i]) == str(e)
                    continue
                assert i not in refused and repr(resolved[i]) == repr(single.current_key_scope())
            groups, kbs, refused_columns = by_column.resolve_key_columns(keys)
            assert {i: str(e) for i, e in refused_columns.items()} == {i: str(e) for i, e in refused.items()}
            assert [(g, b) for g, b in zip(groups.tolist(), kbs)] == [
                (-1, b"") if r is None else (r[1], r[2]) for r in resolved]
        serializable = [k for i, k in enumerate(keys) if i not in refused]
        cold = make_backend()
        expected = [key_group_for(k, bulk.max_parallelism) for k in serializable]
        assert cold.key_groups_of(serializable) == bulk.key_groups_of(serializable) == expected
        for b in (bulk, single, cold, by_column):
            b.close()

    check()


def test_key_array_resolution_equals_resolve_key_columns(make_backend):
    """``resolve_key_array`` of an Arrow column of plain keys (strings of every header size, binaries,
    ints of every width) equals ``resolve_key_columns`` of its values, with each key's ``stable_hash``;
    columns it does not take (nulls, uint64, keys too long to hash column-wise) give None, and a key
    outside the backend's key groups raises the KeyGroupError ``set_current_key`` raises."""
    import pyarrow as pa
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    long_text = st.text(max_size=3).map(lambda t: t * 40)  # empty, or past fixstr / the hashed length
    columns = st.one_of(
        st.lists(st.text(max_size=40) | long_text, max_size=30).map(lambda v: pa.array(v, pa.string())),
        st.lists(st.text(max_size=5), max_size=30).map(lambda v: pa.array(v, pa.large_string())),
        st.lists(st.binary(max_size=40), max_size=30).map(lambda v: pa.array(v, pa.binary())),
        st.lists(st.integers(-(1 << 63), (1 << 63) - 1) | st.integers(-300, 300) | st.sampled_from(
            [127, 128, 255, 256, 65535, 65536, (1 << 32) - 1, 1 << 32, -32, -33, -128, -129, -32768, -32769,
             -(1 << 31), -(1 << 31) - 1]), max_size=30).map(lambda v: pa.array(v, pa.int64())),
        st.lists(st.integers(-128, 127), max_size=30).map(lambda v: pa.array(v, pa.int8())),
        st.lists(st.integers(0, (1 << 32) - 1), max_size=30).map(lambda v: pa.array(v, pa.uint32())),
        st.lists(st.integers(0, 5), min_size=1, max_size=5).map(lambda v: pa.array(v, pa.uint64())),
        st.lists(st.text(max_size=3) | st.none(), min_size=1, max_size=5).map(lambda v: pa.array(v, pa.string())),
    )
    backend = make_backend()

    def same(column):
        values = column.to_pylist()
        got = backend.resolve_key_array(column)
        long = any(len(KEY_SERIALIZER.dumps(v)) > 64 for v in values if v is not None)
        if column.null_count or pa.types.is_uint64(column.type) or long:
            assert got is None
            return
        groups, kbs, hashes = got
        want_groups, want_kbs, refused = backend.resolve_key_columns(values)
        assert not refused and groups.tolist() == want_groups.tolist() and kbs.to_pylist() == want_kbs
        assert hashes.tolist() == [stable_hash(b) for b in want_kbs]

    @settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(column=columns, offset=st.integers(0, 3))
    def check(column, offset):
        same(column.slice(min(offset, len(column))))

    check()
    edges = [0, 1, 127, 128, 255, 256, 65535, 65536, (1 << 32) - 1, 1 << 32, (1 << 63) - 1]
    same(pa.array(edges + [-1, -32, -33, -128, -129, -32768, -32769, -(1 << 31), -(1 << 31) - 1, -(1 << 63)]))
    same(pa.array(["x" * n for n in (0, 1, 30, 31, 32, 33, 62)]))
    same(pa.array([b"y" * n for n in (0, 1, 31, 32, 61)]))
    backend.close()
    outside = make_backend(key_groups=[key_group_for("a")])
    other = next(k for k in ["b", "c", "d", "e"] if key_group_for(k) != key_group_for("a"))
    with pytest.raises(KeyGroupError, match=repr(other)):
        outside.resolve_key_array(pa.array(["a", other]))
    outside.close()


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

# -- one key identity (issue 14): the serialized key decides, on every backend ---------------------

LOOKALIKES = [1, 1.0, True, 0.0, -0.0, (1, "a"), (True, "a"), (1.0, "a"), "1", b"1"]
"""Keys that Python's ``==`` mixes up (``1 == 1.0 == True``, ``0.0 == -0.0``) but that serialize apart."""


def test_lookalike_keys_are_separate_keys(make_backend):
    """``1``, ``1.0``, ``True`` (and ``0.0``/``-0.0``, and tuples of them) are distinct keys for every
    state kind, for timers and through a snapshot restored into two key-group ranges."""
    b = make_backend()
    states = {"value": b.get_state(ValueStateDescriptor("v")), "list": b.get_state(ListStateDescriptor("l")),
              "map": b.get_state(MapStateDescriptor("m")),
              "reducing": b.get_state(ReducingStateDescriptor("r", lambda x, y: x + y))}
    svc = b.timer_service("t", None)
    for i, key in enumerate(LOOKALIKES):
        b.set_current_key(key)
        states["value"].update(i)
        states["list"].add(i)
        states["map"].put("k", i)
        states["reducing"].add(i)
        svc.register_event_time_timer("ns", 100 + i)

    def check(backend, keys):
        got = {}
        for key in keys:
            backend.set_current_key(key)
            got[repr(key)] = (backend.get_state(ValueStateDescriptor("v")).value(),
                              backend.get_state(ListStateDescriptor("l")).get(),
                              backend.get_state(MapStateDescriptor("m")).get("k"),
                              backend.get_state(ReducingStateDescriptor("r", lambda x, y: x + y)).get())
        index = {repr(k): i for i, k in enumerate(LOOKALIKES)}  # by repr: list.index would match 1 for True
        assert got == {repr(k): (index[repr(k)], [index[repr(k)]], index[repr(k)], index[repr(k)]) for k in keys}

    check(b, LOOKALIKES)
    assert sorted(repr(t.key) for t in svc.event_time_timers()) == sorted(map(repr, LOOKALIKES))
    resolved, _ = b.resolve_keys(LOOKALIKES)
    assert len({kb for _, _, kb in resolved}) == len(LOOKALIKES)
    assert [repr(v) for v in states["value"].get_internal_many(resolved)] == [repr(i) for i in range(len(LOOKALIKES))]
    snap = b.snapshot_logical()
    assert len(snap["states"]["v"]["entries"]) == len(LOOKALIKES)
    for part in range(2):
        kgs = key_groups_for_partition(part, 2, b.max_parallelism)
        mine = [k for k in LOOKALIKES if key_group_for(k, b.max_parallelism) in kgs]
        restored = make_backend(key_groups=kgs)
        restored.restore_logical(snap)
        check(restored, mine)
        assert restored.num_entries() == len(mine) * 5  # four states and one timer per key
