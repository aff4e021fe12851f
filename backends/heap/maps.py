"""Heap map state."""

from __future__ import annotations

from typing import Any

from statekit import detached, MapState, SerializationError, KEY_SERIALIZER
from statekit.cell_rules import ABSENT

from .state import HeapState


class HeapMapState(HeapState, MapState):
    __slots__ = ()

    def _purge(self, ck, cell, now):
        ttl_ms = self._ttl_ms
        dead = [k for k, e in cell.items() if e[1] + ttl_ms <= now]
        for k in dead:
            del cell[k]
        if dead:
            if not cell:
                del self._table[ck]
            self._dirty.add(ck)
        return len(dead)

    def _live_map(self) -> dict | None:
        """The current cell, TTL-checked: expired entries are deleted (and hidden unless visible)."""
        ck = self._ck
        if self._ttl is None:
            return self._table.get(ck)
        self._accessed()
        cell = self._table.get(ck)
        if cell is None:
            return None
        now = self._clock()
        if self._ttl.return_expired:
            visible = {k: e for k, e in cell.items()}
        else:
            visible = None
        self._purge(ck, cell, now)
        if self._ttl.refresh_on_read and cell:
            for k in cell:
                cell[k] = (cell[k][0], now)
            self._dirty.add(ck)
        if visible is not None:
            return visible
        return cell or None

    def _live_entry(self, key: Any) -> Any:
        """The value under ``key`` or ABSENT; with TTL, only this entry is expired or refreshed."""
        ck = self._ck
        if self._ttl is None:
            cell = self._table.get(ck)
            return ABSENT if cell is None else cell.get(key, ABSENT)
        self._accessed()
        cell = self._table.get(ck)
        e = ABSENT if cell is None else cell.get(key, ABSENT)
        if e is ABSENT:
            return e
        now = self._clock()
        if e[1] + self._ttl_ms <= now:
            del cell[key]
            if not cell:
                del self._table[ck]
            self._dirty.add(ck)
            return e[0] if self._ttl.return_expired else ABSENT
        if self._ttl.refresh_on_read:
            cell[key] = (e[0], now)
            self._dirty.add(ck)
        return e[0]

    def get(self, key: Any) -> Any:
        value = self._live_entry(key)
        return None if value is ABSENT else detached(value)

    def put(self, key: Any, value: Any) -> None:
        self._check_user_key(key)
        self._store({key: detached(self._validated(value))})

    def put_all(self, mapping: dict) -> None:
        mapping = dict(mapping)
        for k, v in mapping.items():
            self._check_user_key(k)
            mapping[k] = detached(self._validated(v))
        if mapping:
            self._store(mapping)

    def _store(self, entries: dict) -> None:
        """Write validated ``entries`` (a dict the caller owns) into the current cell: one access, one timestamp."""
        if self._ttl is not None:
            self._accessed()
            now = self._clock()
            entries = {k: (v, now) for k, v in entries.items()}
        ck = self._ck
        cell = self._table.get(ck)
        if cell is None:
            self._table[ck] = entries
        else:
            cell.update(entries)
        self._dirty.add(ck)

    def remove(self, key: Any) -> None:
        ck = self._ck
        if self._ttl is not None:
            self._accessed()
        cell = self._table.get(ck)
        if cell is not None and cell.pop(key, ABSENT) is not ABSENT:
            if not cell:
                del self._table[ck]
            self._dirty.add(ck)

    def contains(self, key: Any) -> bool:
        return self._live_entry(key) is not ABSENT

    def keys(self) -> list:
        cell = self._live_map()
        return list(cell) if cell else []

    def values(self) -> list:
        cell = self._live_map()
        if not cell:
            return []
        return [detached(v) for v in cell.values()] if self._ttl is None else [detached(e[0]) for e in cell.values()]

    def items(self) -> list:
        cell = self._live_map()
        if not cell:
            return []
        return ([(k, detached(v)) for k, v in cell.items()] if self._ttl is None
                else [(k, detached(e[0])) for k, e in cell.items()])

    def is_empty(self) -> bool:
        return not self._live_map()

    def _check_user_key(self, key: Any) -> None:
        try:
            hash(key)
            KEY_SERIALIZER.check(key)
        except Exception as e:
            raise SerializationError(f"state '{self._name}': map key {key!r} of type {type(key).__name__} "
                                     f"is not a hashable, serializable value: {e}") from None

    def _cell_out(self, cell):
        if self._ttl is None:
            return dict(cell)
        return {k: [e[0], e[1]] for k, e in cell.items()}

    def _cell_in(self, cell):
        if self._ttl is None:
            return dict(cell)
        return {k: (e[0], e[1]) for k, e in cell.items()}
