"""Logical snapshots: every kind round-trips (through bytes, into fewer or more key-group ranges), a snapshot
is a copy, and a restore refuses a non-empty backend, another max parallelism or a changed descriptor.
"""

from __future__ import annotations

import pytest

from statekit import (ListStateDescriptor, StateDescriptorError, StateError, ValueStateDescriptor, key_group_for,
                      key_groups_for_partition)

from .kinds import KINDS, check_content, descriptor, msgpack_round_trip, populate, restored_value, ttl
from .migration import check_migrated

__all__ = [
    "test_snapshot_round_trip_every_kind",
    "test_snapshot_is_a_copy",
    "test_snapshot_rescale_into_other_key_group_ranges",
    "test_restore_rejects_non_empty_backend_and_other_max_parallelism",
    "test_restore_rejects_kind_mismatch_on_registration",
    "test_restore_rejects_ttl_mismatch",
    "test_empty_snapshot_round_trip",
]


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


def test_restore_rejects_ttl_mismatch(make_backend):
    dst = restored_value(make_backend, "a", 1)
    with pytest.raises(StateDescriptorError, match="TTL"):
        dst.get_state(ValueStateDescriptor("v").enable_time_to_live(ttl()))


def test_empty_snapshot_round_trip(make_backend):
    dst = make_backend()
    dst.restore_logical(make_backend().snapshot_logical())
    assert dst.num_entries() == 0
