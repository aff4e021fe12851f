"""Heap state classes: one dict per state keyed by (key, namespace), no wrappers on the hot path.

Cells are the user's values; with TTL a value-like cell is ``(value, ts)``, a list holds
``(element, ts)`` pairs and a map ``{user_key: (value, ts)}``. Every write also records the
cell in ``_dirty`` so that an incremental snapshot can ship just what changed.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, Iterable, Iterator

from statekit import (detached, KeyedStateBackend, AggregatingState, InternalKeyedState, InternalKvState, InternalMergingState, ListState, MapState, ReducingState, SerializationError,
                      StateDescriptor, ValueState, NO_KEY, KEY_SERIALIZER, MsgpackSerializer)


_MISSING = object()
_INT_MIN, _INT_MAX = -(1 << 63), (1 << 64) - 1
_MSGPACK_TRUSTED = frozenset((int, str, float, bool, bytes))
"""Types msgpack always encodes (ints only within 64 bits), checked inline on the per-record write paths."""


def _noop(value: Any) -> None:
    return None


class HeapState(InternalKeyedState, InternalKvState):
    """Storage, scoping, TTL and snapshot plumbing shared by the heap state kinds."""

    TUPLE_SCOPED = True
    __slots__ = ("_backend", "_name", "_table", "_dirty", "_ns", "_ck", "_ttl", "_ttl_ms", "_clock",
                 "_check", "_trusted", "_cleanup_n", "_cursor")

    def __init__(self, backend: KeyedStateBackend, descriptor: StateDescriptor, validate: bool) -> None:
        self._backend = backend
        self._name = descriptor.name
        self._table: dict[tuple, Any] = {}
        self._dirty: set[tuple] = set()
        self._ns: Any = None
        self._ck: tuple = (NO_KEY, None)
        ttl = descriptor.ttl_config
        self._ttl = ttl
        self._ttl_ms = ttl.ttl_ms if ttl is not None else 0
        self._clock = backend.time_provider
        self._cleanup_n = ttl.cleanup_incremental if ttl is not None else 0
        self._cursor: list[tuple] = []
        ser = descriptor.serializer
        msgpack_checked = validate and type(ser) is MsgpackSerializer
        self._trusted = _MSGPACK_TRUSTED if msgpack_checked else frozenset()
        if not validate:
            self._check = _noop
        elif msgpack_checked:
            self._check = ser.check
        else:
            self._check = ser.dumps

    # -- scoping -------------------------------------------------------------------------------
    def _set_key(self, key: Any, key_group: int, key_bytes: bytes) -> None:
        self._ck = (key, self._ns)

    def set_current_namespace(self, namespace: Any) -> None:
        self._ns = namespace
        self._ck = (self._ck[0], namespace)

    def clear(self) -> None:
        ck = self._ck
        table = self._table
        if ck in table:
            del table[ck]
            self._dirty.add(ck)

    def _validated(self, value: Any) -> Any:
        try:
            self._check(value)
        except Exception as e:
            raise SerializationError(f"state '{self._name}': cannot serialize value of type "
                                     f"{type(value).__name__}: {e}") from None
        return value

    # -- TTL -----------------------------------------------------------------------------------
    def _accessed(self) -> None:
        """Incremental cleanup: each access to a TTL state first checks ``cleanup_incremental`` cells."""
        if self._cleanup_n:
            self._cleanup_expired(self._cleanup_n)

    def _live(self, ck: tuple, cell: tuple) -> tuple[bool, Any]:
        """(visible, value) of a value-like TTL cell; deletes it when expired, refreshes on read."""
        value, ts = cell
        now = self._clock()
        if ts + self._ttl_ms <= now:
            if self._table.pop(ck, None) is not None:
                self._dirty.add(ck)
            return self._ttl.return_expired, value
        if self._ttl.refresh_on_read:
            self._table[ck] = (value, now)
            self._dirty.add(ck)
        return True, value

    def _purge(self, ck: tuple, cell: Any, now: int) -> int:
        """Delete what of ``cell`` has expired at ``now``; returns how many items went."""
        if cell[1] + self._ttl_ms <= now:
            del self._table[ck]
            self._dirty.add(ck)
            return 1
        return 0

    def _cleanup_expired(self, budget: int) -> int:
        """Check up to ``budget`` cells, resuming where the last call stopped; when the pass ends
        it starts over once (so a large budget checks every cell)."""
        if self._ttl is None:
            return 0
        table = self._table
        cursor = self._cursor
        restarted = False
        now = self._clock()
        removed = 0
        while budget > 0:
            if not cursor:
                if restarted or not table:
                    break
                cursor = self._cursor = list(table)
                restarted = True
            ck = cursor.pop()
            budget -= 1
            cell = table.get(ck, _MISSING)
            if cell is not _MISSING:
                removed += self._purge(ck, cell, now)
        return removed

    # -- snapshots -----------------------------------------------------------------------------
    def _cell_out(self, cell: Any) -> Any:
        return [cell[0], cell[1]] if self._ttl is not None else cell

    def _cell_in(self, cell: Any) -> Any:
        return (cell[0], cell[1]) if self._ttl is not None else cell

    def _export(self) -> Iterator[tuple[int, Any, Any, Any]]:
        kg_of = self._backend.key_group_of
        for (key, ns), cell in self._table.items():
            yield kg_of(key), key, ns, self._cell_out(cell)

    def _import(self, key_group: int, key: Any, namespace: Any, cell: Any) -> None:
        ck = (key, namespace)
        self._table[ck] = self._cell_in(cell)
        self._dirty.add(ck)

    def _entry_count(self) -> int:
        return len(self._table)

    def _take_dirty(self) -> set[tuple]:
        dirty, self._dirty = self._dirty, set()
        return dirty


class HeapMergingState(HeapState, InternalMergingState):
    """``merge_namespaces`` in Flink's order: sources merged among themselves, then into the target."""

    __slots__ = ()

    @abstractmethod
    def _merge_cells(self, a: Any, b: Any) -> Any:
        """Combine two cells (``b`` after ``a``)."""

    def merge_namespaces(self, target: Any, sources: Iterable[Any]) -> None:
        key = self._backend.get_current_key()
        table, dirty = self._table, self._dirty
        merged = _MISSING
        for src in sources:
            if src == target:
                continue
            sk = (key, src)
            cell = table.pop(sk, _MISSING)
            if cell is _MISSING:
                continue
            dirty.add(sk)
            merged = cell if merged is _MISSING else self._merge_cells(merged, cell)
        if merged is _MISSING:
            return
        tk = (key, target)
        current = table.get(tk, _MISSING)
        table[tk] = merged if current is _MISSING else self._merge_cells(current, merged)
        dirty.add(tk)


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
        t = type(value)
        if t not in self._trusted or (t is int and not _INT_MIN <= value <= _INT_MAX):
            self._validated(value)
        ck = self._ck
        if self._ttl is None:
            self._table[ck] = value
        else:
            self._accessed()
            self._table[ck] = (value, self._clock())
        self._dirty.add(ck)


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
        """The value under ``key`` or _MISSING; with TTL, only this entry is expired or refreshed."""
        ck = self._ck
        if self._ttl is None:
            cell = self._table.get(ck)
            return _MISSING if cell is None else cell.get(key, _MISSING)
        self._accessed()
        cell = self._table.get(ck)
        e = _MISSING if cell is None else cell.get(key, _MISSING)
        if e is _MISSING:
            return e
        now = self._clock()
        if e[1] + self._ttl_ms <= now:
            del cell[key]
            if not cell:
                del self._table[ck]
            self._dirty.add(ck)
            return e[0] if self._ttl.return_expired else _MISSING
        if self._ttl.refresh_on_read:
            cell[key] = (e[0], now)
            self._dirty.add(ck)
        return e[0]

    def get(self, key: Any) -> Any:
        value = self._live_entry(key)
        return None if value is _MISSING else detached(value)

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
        if cell is not None and cell.pop(key, _MISSING) is not _MISSING:
            if not cell:
                del self._table[ck]
            self._dirty.add(ck)

    def contains(self, key: Any) -> bool:
        return self._live_entry(key) is not _MISSING

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
