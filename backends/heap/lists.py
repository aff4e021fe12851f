"""Heap list state."""

from __future__ import annotations

from typing import Any, Iterable

from statekit import detached, ListState

from .state import _INT_MAX, _INT_MIN, HeapMergingState


class HeapListState(HeapMergingState, ListState):
    __slots__ = ()

    def _merge_cells(self, a: list, b: list) -> list:
        a.extend(b)
        return a

    def _purge(self, ck, cell, now):
        ttl_ms = self._ttl_ms
        keep = [e for e in cell if e[1] + ttl_ms > now]
        removed = len(cell) - len(keep)
        if removed:
            if keep:
                self._table[ck] = keep
            else:
                del self._table[ck]
            self._dirty.add(ck)
        return removed

    def get(self) -> list:
        ck = self._ck
        if self._ttl is None:
            cell = self._table.get(ck)
            return [] if cell is None else [detached(e) for e in cell]
        self._accessed()
        cell = self._table.get(ck)
        if cell is None:
            return []
        now = self._clock()
        ttl_ms = self._ttl_ms
        live = [e for e in cell if e[1] + ttl_ms > now]
        out = [detached(e[0]) for e in (cell if self._ttl.return_expired else live)]
        if self._ttl.refresh_on_read:
            live = [(e[0], now) for e in live]
        if len(live) != len(cell) or self._ttl.refresh_on_read:
            if live:
                self._table[ck] = live
            else:
                self._table.pop(ck, None)
            self._dirty.add(ck)
        return out

    def add(self, value: Any) -> None:
        t = type(value)
        if t not in self._trusted or (t is int and not _INT_MIN <= value <= _INT_MAX):
            value = detached(self._validated(value))
        ck = self._ck
        if self._ttl is None:
            elem = value
        else:
            self._accessed()
            elem = (value, self._clock())
        cell = self._table.get(ck)
        if cell is None:
            self._table[ck] = [elem]
        else:
            cell.append(elem)
        self._dirty.add(ck)

    def _elements(self, values: Iterable[Any]) -> list:
        """``values`` as stored elements: all validated first (a failed write changes nothing), stamped with TTL."""
        values = [detached(self._validated(v)) for v in values]
        if self._ttl is not None:
            self._accessed()
            now = self._clock()
            values = [(v, now) for v in values]
        return values

    def add_all(self, values: Iterable[Any]) -> None:
        values = self._elements(values)
        if not values:
            return
        ck = self._ck
        cell = self._table.get(ck)
        if cell is None:
            self._table[ck] = values
        else:
            cell.extend(values)
        self._dirty.add(ck)

    def update(self, values: Iterable[Any]) -> None:
        values = self._elements(values)
        if not values:
            self.clear()
            return
        ck = self._ck
        self._table[ck] = values
        self._dirty.add(ck)

    def _cell_out(self, cell):
        return [[e[0], e[1]] for e in cell] if self._ttl is not None else list(cell)

    def _cell_in(self, cell):
        return [(e[0], e[1]) for e in cell] if self._ttl is not None else list(cell)
