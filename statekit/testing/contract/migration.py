"""State schema evolution: a restored state stored at an older version is migrated once, on every kind and with
TTL timestamps kept; a version change without a migration, or a failing one, is refused naming state and versions.
"""

from __future__ import annotations

import pytest

from statekit import StateMigrationError, ValueStateDescriptor

from .kinds import (EMPTY, KINDS, TTL, check_content, descriptor, msgpack_round_trip, populate, read, restored_value,
                    ttl)

__all__ = [
    "test_restore_migrates_every_kind_from_an_older_version",
    "test_restore_migrates_ttl_state_keeping_timestamps",
    "test_version_change_without_migration_is_refused_naming_both_versions",
    "test_failing_migration_names_state_key_and_versions",
]


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
