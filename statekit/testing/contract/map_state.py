"""Map state: every method, and a stored ``None`` value that is not a missing entry."""

from __future__ import annotations

from statekit import MapStateDescriptor

__all__ = [
    "test_map_state_methods",
    "test_map_state_stores_none_values_distinctly_from_missing",
]


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
