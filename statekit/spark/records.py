"""Map side of an epoch: check each input row, then route it to the partition serving its key group.

A valid row travels as ``(key, row, ts)``; an invalid one as ``(row, reason)`` and ends in the
invalid-records side output; ``(split,)`` marks the end of one map partition's rows. Routing uses statekit's key groups, so a partition always receives
exactly the keys of ``key_groups_for_partition(index, partitions)``.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Iterator

from ..keygroups import key_group_for, partition_for_key_group


TIME_BOUND = 1 << 62  # event times stay well inside int64, so window ends and timers never overflow


def event_time(value: Any) -> tuple[int | None, str | None]:
    """(milliseconds, None) for a valid event time, else (None, reason)."""
    if value is None:
        return None, "null time"
    if isinstance(value, bool):
        return None, "time is a boolean"
    if isinstance(value, int):
        ts = value
    elif isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return None, "time is not an integer"
        ts = int(value)
    elif isinstance(value, str):
        try:
            ts = int(value.strip())
        except ValueError:
            return None, "unparsable time"
    else:
        return None, f"time of type {type(value).__name__}"
    if not -TIME_BOUND <= ts <= TIME_BOUND:
        return None, "time out of range [-2**62, 2**62] ms"
    return ts, None


def key_problem(key: Any) -> str | None:
    """Why ``key`` cannot be a state key (None: it can)."""
    if key is None:
        return "null key"
    if isinstance(key, float) and math.isnan(key):
        return "NaN key"
    try:
        hash(key)
    except TypeError:
        return "unhashable key"
    return None


def route(rows: Iterable[Any], split: int, partitions: int, max_parallelism: int, key_index: int,
          time_index: int) -> Iterator[tuple[int, tuple]]:
    """(partition, record) for each row of map partition ``split``; invalid rows spread by ``split``.
    Ends with a marker ``(split,)`` to every partition: a task that did not receive the markers of
    every map partition has a truncated input (its executor died mid-stream) and must not commit."""
    for r in rows:
        row = tuple(r)
        key = row[key_index]
        reason = key_problem(key)
        ts = None
        if reason is None:
            ts, reason = event_time(row[time_index])
        if reason is None:
            try:
                kg = key_group_for(key, max_parallelism)
            except Exception as e:  # the key serializer names the type it cannot encode
                reason = f"unserializable key: {e}"
        if reason is not None:
            yield split % partitions, (row, reason)
        else:
            yield partition_for_key_group(kg, partitions, max_parallelism), (key, row, ts)
    for p in range(partitions):
        yield p, (split,)
