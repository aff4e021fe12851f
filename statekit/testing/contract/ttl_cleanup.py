"""TTL cleanup: incremental cleanup on flush and on access, cleanup in snapshots, and stored timestamps
that survive a snapshot and restore.
"""

from __future__ import annotations

import pytest

from statekit import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor

from .kinds import EMPTY, KINDS, TTL, read, read_one, ttl, ttl_state, write

__all__ = [
    "test_ttl_incremental_cleanup_on_flush_checks_n_per_state",
    "test_ttl_incremental_cleanup_keeps_live_entries",
    "test_ttl_incremental_cleanup_on_read_access",
    "test_ttl_incremental_cleanup_on_write_access",
    "test_ttl_incremental_cleanup_on_list_and_map_access",
    "test_ttl_incremental_cleanup_list_and_map_elements",
    "test_ttl_without_incremental_cleanup_keeps_unread_entries",
    "test_ttl_cleanup_in_snapshot_drops_expired",
    "test_ttl_cleanup_in_snapshot_after_incremental_progress",
    "test_ttl_snapshot_keeps_expired_without_cleanup_in_snapshot",
    "test_ttl_timestamps_survive_restore",
]


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
