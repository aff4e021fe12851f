"""Grouping an epoch's records per key, keeping each key's records in arrival order."""

from __future__ import annotations

from typing import Any, Iterable


def group_by_key(records: Iterable[tuple[Any, Any, int | None]]) -> dict[Any, list[tuple[Any, Any, int | None]]]:
    """``{key: [(key, value, timestamp), ...]}`` with keys in order of first appearance; the record
    tuples themselves are kept (no per-record allocation)."""
    groups: dict[Any, list] = {}
    get = groups.get
    for rec in records:
        g = get(rec[0])
        if g is None:
            groups[rec[0]] = [rec]
        else:
            g.append(rec)
    return groups
