"""The typed logical snapshot: its writer and reader are inverse on the serialized form, and what it refuses
(another format, max_parallelism, a state's kind or version differing between sources) is refused with the
messages restores have always given; the unhashable-key reason reads as it did."""

from __future__ import annotations

import pytest

from statekit import (InvalidKeyError, ListStateDescriptor, StateConfig, StateError, ValueStateDescriptor,
                      create_backend, unhashable_reason)
from statekit.logical_snapshot import LogicalSnapshot, read_logical
from statekit.testing.contract.kinds import msgpack_round_trip


def _snapshot(version: int = 1, kind: str = "value") -> dict:
    b = create_backend(StateConfig(backend="heap", max_parallelism=8))
    desc = (ValueStateDescriptor("s") if kind == "value" else ListStateDescriptor("s")).with_version(version)
    for key in ("a", (1, "t"), 7):
        b.set_current_key(key)
        st = b.get_state(desc)
        st.update(key) if kind == "value" else st.add(key)
    b.timer_service("t", None).register_event_time_timer(None, 5)
    snap = msgpack_round_trip(b.snapshot_logical())
    b.close()
    return snap


def test_reader_and_writer_are_inverse():
    raw = _snapshot()
    snap = read_logical(raw)
    assert isinstance(snap, LogicalSnapshot) and snap.key_groups == range(8)
    assert snap.states["s"].meta.kind == "value" and len(snap.states["s"].entries) == 3
    assert snap.timers["t"].event == [[5, 7, None]]
    assert snap.to_dict() == raw and list(snap.to_dict()) == list(raw)


def test_refusals_keep_their_messages():
    b = create_backend(StateConfig(backend="heap", max_parallelism=8))
    with pytest.raises(StateError, match=r"a logical snapshot of format 2; this statekit reads format 1 \(the "
                                         r"'snapshot' mark of statekit.snapshot_header\)"):
        b.restore_logical({**_snapshot(), "format": 2})
    with pytest.raises(StateError, match="snapshot has max_parallelism 16, this backend 8: key groups cannot be mapped"):
        b.restore_logical({**_snapshot(), "max_parallelism": 16})
    with pytest.raises(StateError, match="state 's' is value in one snapshot and list in another"):
        b.restore_logical([_snapshot(), _snapshot(kind="list")])
    with pytest.raises(StateError, match="state 's' is at version 1 in one snapshot and 2 in another"):
        b.restore_logical([_snapshot(), _snapshot(version=2)])
    assert b.num_entries() == 0  # nothing of a refused restore was kept
    b.restore_logical([_snapshot(), _snapshot()])
    with pytest.raises(StateError, match="restore_logical needs an empty backend"):
        b.restore_logical(_snapshot())
    b.close()


@pytest.mark.parametrize("change,message", [
    (lambda r: r.pop("states"), "a logical snapshot has no field 'states'"),
    (lambda r: r.update(max_parallelism="8"), "a logical snapshot: field 'max_parallelism' is str, expected int"),
    (lambda r: r.update(key_groups=[0]), r"a logical snapshot's key_groups is \[0\], expected \[start, stop\]"),
    (lambda r: r["states"]["s"].update(entries={}), "state 's' of a logical snapshot: field 'entries' is dict"),
    (lambda r: r["states"]["s"].update(ttl=1), "state 's' of a logical snapshot: field 'ttl' is int, expected bool"),
    (lambda r: r["states"].update(s=[]), "state 's' of a logical snapshot is list, expected a map"),
    (lambda r: r["timers"]["t"].pop("event"), "timer service 't' of a logical snapshot has no field 'event'"),
    (lambda r: r["timers"]["t"].update(watermark=True), "field 'watermark' is bool, expected int"),
], ids=["no-states", "max-par-text", "key-groups", "entries", "ttl", "section", "timers", "watermark"])
def test_a_malformed_snapshot_is_refused_naming_the_field_and_nothing_is_kept(change, message):
    raw = _snapshot()
    change(raw)
    b = create_backend(StateConfig(backend="heap", max_parallelism=8))
    with pytest.raises(StateError, match=message):
        b.restore_logical([_snapshot(), raw])
    assert b.num_entries() == 0
    b.close()


def test_unhashable_key_reason_is_one():
    b = create_backend(StateConfig(backend="heap"))
    with pytest.raises(InvalidKeyError) as e:
        b.set_current_key([1])
    refused = b.resolve_keys(["ok", [1]])[1]
    shown = "key [1] of type list is not hashable (use a tuple, not a list)"
    assert str(e.value) == str(refused[1]) == unhashable_reason([1], shown=True) == shown
    assert unhashable_reason({}) == "key of type dict is not hashable (use a tuple, not a list)"
    b.close()
