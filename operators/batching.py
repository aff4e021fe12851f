"""Grouping an epoch's records per key, keeping each key's records in arrival order."""

from __future__ import annotations

from typing import Any, Callable, Iterable

from statekit import PLAIN_KEY_TYPES, key_identity, unhashable_reason

from .invalid import MAX_EVENT_TIMESTAMP, MIN_EVENT_TIMESTAMP, error, timestamp_problem

Record = tuple[Any, Any, int | None]
OnInvalid = Callable[[Record, str, str], None]


def _raise(record: Record, field: str, reason: str) -> None:
    raise error(record, field, reason)


def group_by_key(records: Iterable[Record], on_invalid: OnInvalid = _raise,
                 event_time: bool = False) -> dict[Any, list[Record]]:
    """``{identity: [(key, value, timestamp), ...]}`` with keys in order of first appearance, grouped by
    ``key_identity`` (1 and True are two keys); the record tuples themselves are kept (no per-record
    allocation). Records with an unhashable key, or with
    ``event_time`` a bad timestamp, go to ``on_invalid(record, field, reason)`` (default: raise
    InvalidRecordError) before any state is touched."""
    groups: dict[Any, list] = {}
    get = groups.get
    lo, hi = MIN_EVENT_TIMESTAMP, MAX_EVENT_TIMESTAMP
    for rec in records:
        if event_time:
            ts = rec[2]
            if type(ts) is not int or not lo <= ts <= hi:
                on_invalid(rec, "timestamp", timestamp_problem(ts))
                continue
        key = rec[0]
        if type(key) not in PLAIN_KEY_TYPES:
            try:
                key = key_identity(key)
            except TypeError:
                on_invalid(rec, "key", unhashable_reason(rec[0]))
                continue
        try:
            g = get(key)
        except TypeError:
            on_invalid(rec, "key", unhashable_reason(rec[0]))
            continue
        if g is None:
            groups[key] = [rec]
        else:
            g.append(rec)
    return groups
