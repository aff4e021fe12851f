"""``merge_namespaces`` of list, reducing and aggregating state: target first, then the sources in order,
through the state's own reduce or merge function; sources cleared, other keys untouched.
"""

from __future__ import annotations

import pytest

from statekit import AggregatingStateDescriptor, ReducingStateDescriptor

from .aggregates import Average
from .kinds import MERGING, descriptor

__all__ = [
    "test_merge_order_target_then_sources_in_order",
    "test_merge_into_empty_target",
    "test_merge_skips_missing_and_empty_sources",
    "test_merge_with_no_sources_or_all_missing_leaves_target",
    "test_merge_source_equal_to_target_is_ignored",
    "test_merge_of_a_source_equal_in_python_to_the_target",
    "test_merge_only_touches_current_key",
    "test_merge_keeps_current_namespace",
    "test_merge_reducing_uses_reduce_function",
    "test_merge_aggregating_uses_merge_of_accumulators",
]


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
