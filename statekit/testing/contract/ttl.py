"""TTL on every kind (manual clock): a cell or element expires at its last stamped access plus the TTL, as the
update type and visibility say; list elements and map entries expire one by one.
"""

from __future__ import annotations

import pytest

from statekit import StateConfig, StateTtlConfig, ValueStateDescriptor, create_backend

from .kinds import EMPTY, KINDS, NEVER, ON_READ, ON_WRITE, RETURN, TTL, read, read_one, ttl_state, write

__all__ = [
    "test_ttl_expires_at_last_access_plus_ttl",
    "test_ttl_on_create_and_write_read_does_not_refresh",
    "test_ttl_on_read_and_write_read_refreshes",
    "test_ttl_write_refreshes",
    "test_ttl_write_after_expiry_starts_fresh",
    "test_ttl_return_expired_if_not_cleaned_up",
    "test_ttl_list_expires_per_element",
    "test_ttl_expired_elements_really_deleted_on_read",
    "test_ttl_list_return_expired_then_gone",
    "test_ttl_list_read_refresh",
    "test_ttl_list_update_stamps_all_elements",
    "test_ttl_map_expires_per_entry",
    "test_ttl_map_return_expired_then_gone",
    "test_ttl_map_read_refreshes_only_the_entry_read",
    "test_ttl_map_iteration_refreshes_all_entries",
    "test_ttl_default_clock_is_wall_clock",
]


@pytest.mark.parametrize("kind", KINDS)
def test_ttl_expires_at_last_access_plus_ttl(backend, clock, kind):
    """Live until last write + TTL, expired from then on; the read that meets it (never-return-expired)
    returns nothing and deletes it."""
    st = ttl_state(backend, kind, visibility=NEVER)
    write(st, kind, "a")
    clock.advance(TTL - 1)
    assert read(st, kind) == read_one(kind, "a")
    clock.advance(1)
    assert backend.num_entries() == 1
    assert read(st, kind) == EMPTY[kind]
    assert backend.num_entries() == 0


@pytest.mark.parametrize("kind", KINDS)
def test_ttl_on_create_and_write_read_does_not_refresh(backend, clock, kind):
    st = ttl_state(backend, kind, update_type=ON_WRITE)
    write(st, kind, "a")
    clock.advance(60)
    assert read(st, kind) == read_one(kind, "a")
    clock.advance(40)
    assert read(st, kind) == EMPTY[kind]


@pytest.mark.parametrize("kind", KINDS)
def test_ttl_on_read_and_write_read_refreshes(backend, clock, kind):
    st = ttl_state(backend, kind, update_type=ON_READ)
    write(st, kind, "a")
    clock.advance(60)
    assert read(st, kind) == read_one(kind, "a")
    clock.advance(60)
    assert read(st, kind) == read_one(kind, "a")
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


@pytest.mark.parametrize("kind", KINDS)
def test_ttl_write_after_expiry_starts_fresh(backend, clock, kind):
    """An expired cell is not merged into by the next write (a reduce, an aggregate, a list append)."""
    st = ttl_state(backend, kind)
    write(st, kind, "a")
    clock.advance(TTL)
    write(st, kind, "b")
    assert read(st, kind) == read_one(kind, "b")


@pytest.mark.parametrize("kind", KINDS)
def test_ttl_return_expired_if_not_cleaned_up(backend, clock, kind):
    st = ttl_state(backend, kind, visibility=RETURN)
    write(st, kind, "a")
    clock.advance(TTL + 5)
    assert backend.num_entries() == 1
    assert read(st, kind) == read_one(kind, "a")
    assert backend.num_entries() == 0
    assert read(st, kind) == EMPTY[kind]


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


def elements(st, kind: str) -> list:
    """A list's elements or a map's entry keys, as the state reads them."""
    return st.get() if kind == "list" else st.keys()


def stored_elements(cell, kind: str) -> list:
    """The same from a snapshot's cell: list elements are (value, stamp) pairs, map entries are keyed by name."""
    return [e[0] for e in cell] if kind == "list" else list(cell)


@pytest.mark.parametrize("kind", ["list", "map"])
def test_ttl_expired_elements_really_deleted_on_read(backend, clock, kind):
    """The read that skips an expired list element or map entry deletes it from storage, not only from its result."""
    st = ttl_state(backend, kind, cleanup_in_snapshot=False)
    write(st, kind, "old")
    clock.advance(60)
    write(st, kind, "new")
    clock.advance(60)
    assert elements(st, kind) == ["new"]
    [entry] = backend.snapshot_logical()["states"][f"ttl-{kind}"]["entries"]
    assert stored_elements(entry[3], kind) == ["new"]


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


def test_ttl_default_clock_is_wall_clock(backend_name, tmp_path):
    b = create_backend(StateConfig(backend=backend_name, local_dir=str(tmp_path)))
    try:
        b.set_current_key("u")
        st = b.get_state(ValueStateDescriptor("v").enable_time_to_live(StateTtlConfig(60_000)))
        st.update(1)
        assert st.value() == 1
    finally:
        b.close()
