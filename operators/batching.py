"""Grouping an epoch's records per key, keeping each key's records in arrival order."""

from __future__ import annotations

from typing import Any, Iterable


def group_by_key(records: Iterable[tuple[Any, Any, int | None]]) -> dict[Any, list[tuple[Any, int | None]]]:
    """``{key: [(value, timestamp), ...]}`` with keys in order of first appearance."""
    groups: dict[Any, list] = {}
    get = groups.get
    for key, value, ts in records:
        g = get(key)
        if g is None:
            groups[key] = [(value, ts)]
        else:
            g.append((value, ts))
    return groups
