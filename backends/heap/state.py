"""Heap state classes: one dict per state keyed by (key, namespace) identities (``key_identity``), no
wrappers on the hot path.

Cells are the user's values; with TTL a value-like cell is ``(value, ts)``, a list holds
``(element, ts)`` pairs and a map ``{user_key: (value, ts)}``. Every write also records the
cell in ``_dirty`` so that an incremental snapshot can ship just what changed.
"""


from __future__ import annotations

from operator import itemgetter
from typing import Any, Callable, Iterator

from statekit.cell_rules import ABSENT, NamespaceMerging
from statekit import key_identity, key_of_identity, KeyedStateBackend, InternalKeyedState, InternalKvState, InternalMergingState, SerializationError, StateDescriptor, NO_KEY, MsgpackSerializer


_INT_MIN, _INT_MAX = -(1 << 63), (1 << 64) - 1
_MSGPACK_TRUSTED = frozenset((int, str, float, bool, bytes))
"""Types msgpack always encodes (ints only within 64 bits), checked inline on the per-record write paths:
values of these types are written without calling the check (a state's ``_trusted``), and so are they
when writes are not checked at all."""


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
        self._trusted = _MSGPACK_TRUSTED if msgpack_checked or not validate else frozenset()
        if not validate:
            self._check = _noop
        elif msgpack_checked:
            self._check = ser.check
        else:
            self._check = ser.dumps

    # -- scoping -------------------------------------------------------------------------------
    def _set_key(self, key: Any, key_group: int, key_bytes: bytes) -> None:
        self._ck = (key_identity(key), self._ns)

    def set_current_namespace(self, namespace: Any) -> None:
        ns = self._ns = key_identity(namespace)  # 1, 1.0 and True are three namespaces, as they serialize
        self._ck = (self._ck[0], ns)

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
            cell = table.get(ck, ABSENT)
            if cell is not ABSENT:
                removed += self._purge(ck, cell, now)
        return removed

    # -- snapshots -----------------------------------------------------------------------------
    def _cell_out(self, cell: Any) -> Any:
        return [cell[0], cell[1]] if self._ttl is not None else cell

    def _cell_in(self, cell: Any) -> Any:
        return (cell[0], cell[1]) if self._ttl is not None else cell

    def _export(self) -> Iterator[tuple[int, Any, Any, Any]]:
        keys, namespaces, cells = self._columns()
        return zip(self._backend.key_groups_of(keys), keys, namespaces, cells)

    def _columns(self) -> tuple[list, list, list]:
        """Every cell as three columns, built in C: keys, namespaces and cells as snapshots hold them."""
        table = self._table
        if not table:
            return [], [], []
        idents, spaces = list(map(itemgetter(0), table)), list(map(itemgetter(1), table))
        keys = idents if tuple not in set(map(type, idents)) else list(map(key_of_identity, idents))  # plain keys: themselves
        namespaces = spaces if tuple not in set(map(type, spaces)) else list(map(key_of_identity, spaces))
        return keys, namespaces, list(map(self._cell_out, table.values()))

    def _import(self, key_group: int, key: Any, namespace: Any, cell: Any) -> None:
        ck = (key_identity(key), key_identity(namespace))
        self._table[ck] = self._cell_in(cell)
        self._dirty.add(ck)

    def _entry_count(self) -> int:
        return len(self._table)

    def _take_dirty(self) -> set[tuple]:
        dirty, self._dirty = self._dirty, set()
        return dirty

    def _cell(self, ck: tuple) -> Any:
        return self._table.get(ck, ABSENT)

    def _stored(self, ck: tuple, cell: Any) -> None:
        """Set (or, with ABSENT, delete) the entry of ``ck``, marked dirty when it changes."""
        if cell is not ABSENT:
            self._table[ck] = cell
            self._dirty.add(ck)
        elif self._table.pop(ck, ABSENT) is not ABSENT:
            self._dirty.add(ck)


class HeapMergingState(HeapState, InternalMergingState, NamespaceMerging):
    """``merge_namespaces`` (the rule in ``statekit.cell_rules``) over the state's dict."""

    __slots__ = ()
    merge_namespaces = NamespaceMerging.merge_namespaces  # InternalMergingState's abstract one precedes it in the MRO

    def _cell_keys(self) -> Callable[[Any], tuple]:
        self._backend.get_current_key()  # raises without a current key
        ident = self._ck[0]
        return lambda namespace: (ident, key_identity(namespace))
