"""List state: ``get``/``add``/``add_all``/``update``/``clear``; reads are copies, empty lists store nothing."""

from __future__ import annotations

from statekit import ListStateDescriptor

__all__ = [
    "test_list_state_methods",
    "test_list_get_returns_a_copy",
    "test_list_add_all_is_empty_noop_on_empty_state",
]


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
