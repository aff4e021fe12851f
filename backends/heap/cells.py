"""Heap value, reducing and aggregating state: one value per (key, namespace) cell."""

from __future__ import annotations

from itertools import repeat
from typing import Any, Sequence

from statekit import PLAIN_KEY_TYPES, key_identity, detached, AggregatingState, ReducingState, ValueState, ResolvedKey
from statekit.cell_rules import ABSENT, AggregatingCellRules, CellRules, ReducingCellRules
from statekit.detach import IMMUTABLE_SCALARS

from .state import _INT_MAX, _INT_MIN, _MSGPACK_TRUSTED, HeapMergingState, HeapState


class HeapCellState(HeapState, CellRules):
    """The cell rules (TTL-visible reads) over the heap's dict entries."""

    __slots__ = ()


class HeapValueState(HeapCellState, ValueState):
    """Without TTL, ``value`` and ``update`` of an immutable scalar reach the dict in their own frame (a
    per-record path), ``value`` without even a type test while the state has held nothing else (``_shared``);
    anything else goes through ``detached`` and ``update_internal``."""

    __slots__ = ("_default", "_direct", "_shared")

    def __init__(self, backend, descriptor, validate):
        super().__init__(backend, descriptor, validate)
        self._default = descriptor.default
        self._direct = self._ttl is None and self._trusted == _MSGPACK_TRUSTED
        """``update`` stores msgpack's own scalars (ints within 64 bits) as they are: no TTL, and they need no check."""
        self._shared = self._ttl is None and type(self._default) in IMMUTABLE_SCALARS
        """No TTL, and the default and every value stored so far are immutable scalars: ``value`` hands out what
        the dict holds, without a test. Cleared for good by the first other value stored (``_put``, ``_import``)."""

    def get_internal(self) -> Any:
        if self._ttl is None:
            return self._table.get(self._ck, self._default)
        return self._visible(self._ck, self._default)

    def value(self) -> Any:
        if self._shared:
            return self._table.get(self._ck, self._default)
        if self._ttl is None:
            value = self._table.get(self._ck, self._default)
            return value if type(value) in IMMUTABLE_SCALARS else detached(value)
        return detached(self._visible(self._ck, self._default))

    def update(self, value: Any) -> None:
        if self._direct:
            t = type(value)
            if (_INT_MIN <= value <= _INT_MAX) if t is int else t in _MSGPACK_TRUSTED:
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
        if t not in IMMUTABLE_SCALARS:
            self._shared = False
        if self._ttl is None:
            self._table[ck] = value
        else:
            self._accessed()
            self._table[ck] = (value, self._clock())
        self._dirty.add(ck)

    def _import(self, key_group: int, key: Any, namespace: Any, cell: Any) -> None:
        """A restored (or migrated) cell may hold a mutable value: reads then test what they hand out."""
        if type(cell) not in IMMUTABLE_SCALARS:
            self._shared = False
        super()._import(key_group, key, namespace, cell)

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
