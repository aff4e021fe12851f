"""Heap value, reducing and aggregating state: one value per (key, namespace) cell."""

from __future__ import annotations

from typing import Any, Sequence

from statekit import PLAIN_KEY_TYPES, key_identity, detached, AggregatingState, ReducingState, ValueState, ResolvedKey


_INT_MIN, _INT_MAX = -(1 << 63), (1 << 64) - 1


def _noop(value: Any) -> None:
    return None
from .state import _MISSING
from .state import HeapMergingState
from .state import HeapState


class HeapValueState(HeapState, ValueState):
    __slots__ = ("_default",)

    def __init__(self, backend, descriptor, validate):
        super().__init__(backend, descriptor, validate)
        self._default = descriptor.default

    def get_internal(self) -> Any:
        if self._ttl is None:
            return self._table.get(self._ck, self._default)
        self._accessed()
        ck = self._ck
        cell = self._table.get(ck)
        if cell is None:
            return self._default
        visible, value = self._live(ck, cell)
        return value if visible else self._default

    def value(self) -> Any:
        return detached(self.get_internal())

    def update(self, value: Any) -> None:
        self.update_internal(detached(value))

    def update_internal(self, value: Any) -> None:
        if value is None:
            self.clear()
            return
        self._put(self._ck, value)

    def _put(self, ck: tuple, value: Any) -> None:
        t = type(value)
        if t not in self._trusted or (t is int and not _INT_MIN <= value <= _INT_MAX):
            self._validated(value)
        if self._ttl is None:
            self._table[ck] = value
        else:
            self._accessed()
            self._table[ck] = (value, self._clock())
        self._dirty.add(ck)

    def get_internal_many(self, keys: Sequence[ResolvedKey]) -> list:
        ns, default, table = self._ns, self._default, self._table
        if self._ttl is None:
            get = table.get
            return [get((k[0] if type(k[0]) in PLAIN_KEY_TYPES else key_identity(k[0]), ns), default) for k in keys]
        out = []
        for k in keys:
            self._accessed()
            ck = (key_identity(k[0]), ns)
            cell = table.get(ck)
            if cell is None:
                out.append(default)
                continue
            visible, value = self._live(ck, cell)
            out.append(value if visible else default)
        return out

    def update_internal_many(self, keys: Sequence[ResolvedKey], values: Sequence[Any]) -> None:
        ns, table, dirty = self._ns, self._table, self._dirty
        for k, value in zip(keys, values, strict=True):
            ck = (key_identity(k[0]), ns)
            if value is not None:
                self._put(ck, value)
            elif table.pop(ck, _MISSING) is not _MISSING:
                dirty.add(ck)


class HeapReducingState(HeapMergingState, ReducingState):
    __slots__ = ("_reduce",)

    def __init__(self, backend, descriptor, validate):
        super().__init__(backend, descriptor, validate)
        self._reduce = descriptor.reduce_function

    def _merge_cells(self, a, b):
        if self._ttl is None:
            return self._validated(self._reduce(a, b))
        return (self._validated(self._reduce(a[0], b[0])), self._clock())

    def get(self) -> Any:
        ck = self._ck
        if self._ttl is None:
            return detached(self._table.get(ck))
        self._accessed()
        cell = self._table.get(ck)
        if cell is None:
            return None
        visible, value = self._live(ck, cell)
        return detached(value) if visible else None

    def add(self, value: Any) -> None:
        ck = self._ck
        table = self._table
        if self._ttl is None:
            cell = table.get(ck, _MISSING)
            new = value if cell is _MISSING else self._reduce(cell, value)
            t = type(new)
            if t not in self._trusted or (t is int and not _INT_MIN <= new <= _INT_MAX):
                new = detached(self._validated(new))
            table[ck] = new
        else:
            current = self.get()
            new = value if current is None else self._reduce(current, value)
            table[ck] = (detached(self._validated(new)), self._clock())
        self._dirty.add(ck)


class HeapAggregatingState(HeapMergingState, AggregatingState):
    __slots__ = ("_agg",)

    def __init__(self, backend, descriptor, validate):
        super().__init__(backend, descriptor, validate)
        self._agg = descriptor.agg_function

    def _merge_cells(self, a, b):
        if self._ttl is None:
            return self._validated(self._agg.merge(a, b))
        return (self._validated(self._agg.merge(a[0], b[0])), self._clock())

    def _accumulator(self) -> Any:
        ck = self._ck
        if self._ttl is None:
            return self._table.get(ck, _MISSING)
        self._accessed()
        cell = self._table.get(ck, _MISSING)
        if cell is _MISSING:
            return _MISSING
        visible, acc = self._live(ck, cell)
        return acc if visible else _MISSING

    def get(self) -> Any:
        acc = self._accumulator()
        return None if acc is _MISSING else detached(self._agg.get_result(acc))

    def add(self, value: Any) -> None:
        ck = self._ck
        agg = self._agg
        if self._ttl is None:
            acc = self._table.get(ck, _MISSING)
        else:
            acc = self._accumulator()
        acc = agg.add(value, agg.create_accumulator() if acc is _MISSING else acc)
        self._validated(acc)
        self._table[ck] = acc if self._ttl is None else (acc, self._clock())
        self._dirty.add(ck)
