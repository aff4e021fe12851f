"""Heap value, reducing and aggregating state: one value per (key, namespace) cell."""

from __future__ import annotations

from itertools import repeat
from typing import Any, Sequence

from statekit import PLAIN_KEY_TYPES, key_identity, detached, AggregatingState, ReducingState, ValueState, ResolvedKey
from statekit.cell_rules import ABSENT, AggregatingCellRules, CellRules, ReducingCellRules
from statekit.detach import IMMUTABLE_SCALARS

from .state import _INT_MAX, _INT_MIN, HeapMergingState, HeapState


class HeapCellState(HeapState, CellRules):
    """The cell rules (TTL-visible reads) over the heap's dict entries."""

    __slots__ = ()


class HeapValueState(HeapCellState, ValueState):
    """Without TTL, ``value`` and ``update`` of an immutable scalar reach the dict in their own frame (a
    per-record path); anything else goes through ``detached`` and ``update_internal``."""

    __slots__ = ("_default", "_direct")

    def __init__(self, backend, descriptor, validate):
        super().__init__(backend, descriptor, validate)
        self._default = descriptor.default
        self._direct = self._trusted if self._ttl is None else frozenset()
        """Types ``update`` stores as they are: immutable, needing no check, and only without TTL."""

    def get_internal(self) -> Any:
        if self._ttl is None:
            return self._table.get(self._ck, self._default)
        return self._visible(self._ck, self._default)

    def value(self) -> Any:
        if self._ttl is None:
            value = self._table.get(self._ck, self._default)
            return value if type(value) in IMMUTABLE_SCALARS else detached(value)
        return detached(self._visible(self._ck, self._default))

    def update(self, value: Any) -> None:
        t = type(value)
        if t in self._direct and (t is not int or _INT_MIN <= value <= _INT_MAX):
            ck = self._ck
            self._table[ck] = value
            self._dirty.add(ck)
            return
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
        if self._ttl is None:
            return list(map(self._table.get, self._cell_keys(keys), repeat(self._default, len(keys))))
        visible, default = self._visible, self._default
        return [visible(ck, default) for ck in self._cell_keys(keys)]

    def _cell_keys(self, keys: Sequence[ResolvedKey]) -> list[tuple]:
        """The dict keys of the cells of ``keys`` in the current namespace."""
        ns, idents = self._ns, [k[0] for k in keys]
        if not set(map(type, idents)) <= PLAIN_KEY_TYPES:  # plain keys are their own identities
            idents = list(map(key_identity, idents))
        return list(zip(idents, repeat(ns, len(idents))))

    def update_internal_many(self, keys: Sequence[ResolvedKey], values: Sequence[Any]) -> None:
        ns, table, dirty = self._ns, self._table, self._dirty
        if self._ttl is None and len(keys) == len(values):
            present = set(map(type, values))
            types = present - {type(None)}
            if types <= self._trusted and int not in types:  # nothing to check: one dict update, the clears apart
                cks = self._cell_keys(keys)
                if types == present:
                    table.update(zip(cks, values))
                    dirty.update(cks)
                    return
                gone = [ck for ck, value in zip(cks, values) if value is None]
                kept = [(ck, value) for ck, value in zip(cks, values) if value is not None]
                table.update(kept)
                dirty.update([ck for ck, _ in kept])
                dirty.update([ck for ck in gone if table.pop(ck, ABSENT) is not ABSENT])
                return
        for k, value in zip(keys, values, strict=True):
            ck = (key_identity(k[0]), ns)
            if value is not None:
                self._put(ck, value)
            elif table.pop(ck, ABSENT) is not ABSENT:
                dirty.add(ck)


class HeapReducingState(ReducingCellRules, HeapMergingState, HeapCellState, ReducingState):
    __slots__ = ("_reduce",)

    def __init__(self, backend, descriptor, validate):
        super().__init__(backend, descriptor, validate)
        self._reduce = descriptor.reduce_function

    def get(self) -> Any:
        if self._ttl is None:
            return detached(self._table.get(self._ck))
        return detached(self._visible(self._ck, None))

    def add(self, value: Any) -> None:
        ck = self._ck
        table = self._table
        if self._ttl is None:
            cell = table.get(ck, ABSENT)
            new = value if cell is ABSENT else self._reduce(cell, value)
            t = type(new)
            if t not in self._trusted or (t is int and not _INT_MIN <= new <= _INT_MAX):
                new = detached(self._validated(new))
            table[ck] = new
        else:
            current = self.get()
            new = value if current is None else self._reduce(current, value)
            table[ck] = (detached(self._validated(new)), self._clock())
        self._dirty.add(ck)


class HeapAggregatingState(AggregatingCellRules, HeapMergingState, HeapCellState, AggregatingState):
    __slots__ = ("_agg",)

    def __init__(self, backend, descriptor, validate):
        super().__init__(backend, descriptor, validate)
        self._agg = descriptor.agg_function

    def add(self, value: Any) -> None:
        """The shared rule; without TTL the dict entry is read and written inline (a per-record path)."""
        if self._ttl is not None:
            AggregatingCellRules.add(self, value)  # not super(): cheaper, and the rule is this one
            return
        ck = self._ck
        agg = self._agg
        acc = self._table.get(ck, ABSENT)
        acc = agg.add(value, agg.create_accumulator() if acc is ABSENT else acc)
        self._table[ck] = self._validated(acc)
        self._dirty.add(ck)
