"""Scoping: a state cell belongs to one key and one namespace, whichever key is current when the state
is made, and nothing is read or written without a current key.
"""

from __future__ import annotations

import pytest

from statekit import NoCurrentKeyError, ValueStateDescriptor

from .kinds import EMPTY, KINDS, MERGING, descriptor, msgpack_round_trip, read, read_one, write

__all__ = [
    "test_key_isolation",
    "test_namespace_isolation",
    "test_namespace_survives_key_change",
    "test_namespace_is_per_state",
    "test_state_created_after_set_current_key_sees_the_key",
    "test_states_in_other_namespaces_follow_key_changes",
    "test_no_current_key_error",
    "test_no_current_key_error_on_clear_of_empty_state",
    "test_no_current_key_error_on_merge",
    "test_namespaces_equal_in_python_but_serialized_apart_are_apart",
]


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
