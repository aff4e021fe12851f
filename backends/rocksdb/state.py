"""RocksDB state classes: reads see overlay, then read cache, then RocksDB; writes go to the overlay.

Value, reducing and aggregating state keep the *objects* written this epoch in the overlay
(serialized once, when the overlay is written) and a bounded LRU of deserialized cells read
from or written to RocksDB (a batched read, ``get_internal_many``, is left to the write back that follows
it); the cache is refreshed only from the overlay's write or from a RocksDB read of a cell not in the
overlay, so it is never stale (``ABSENT`` there: in the overlay a
pending delete, in the cache a cell known not to exist). List and map state keep
per-cell deltas of element/entry bytes (see ``write_buffer``): ``add`` appends bytes without
reading, ``merge_namespaces`` moves element bytes without decoding them.

TTL: stored values carry their last-access time; a read that meets an expired cell, element
or entry deletes it, and ``cleanup_incremental=N`` sweeps N cells per state access and per
``flush()`` with a cursor over the state's column family in key order (restarting once per call
at the end). Like the heap backend's pass over the cells that existed when it began, a pass
skips, without counting them, cells written since it began (every stamp >= its start). A sweep
first writes the state's pending overlay so that it sees every cell: with
``cleanup_incremental`` each access of a TTL state costs a small WriteBatch and one seek.
"""


from __future__ import annotations

from abc import abstractmethod
from typing import Any, Callable, Iterator

from statekit import KeyedStateBackend, KEY_SERIALIZER, NO_KEY, NamespaceBytes, InternalKeyedState, InternalKvState, NoCurrentKeyError, SerializationError, StateDescriptor
from statekit.cell_rules import ABSENT

from .db import Closed
from .keys import STAMP_SIZE, decode_cell, scan, stamp, stamp_of
from .write_buffer import WriteBuffer


_MISS = object()


class RocksDBState(InternalKeyedState, InternalKvState):
    """Scoping (cached cell-key bytes), overlay, TTL sweep and snapshot plumbing of all kinds."""

    __slots__ = ("_name", "_db", "_cfh", "_ov", "_wb", "_limit", "_dumps", "_loads", "_kgp", "_kp", "_nsb",
                 "_ns_bytes", "_ck", "_ttl", "_ttl_ms", "_clock", "_cleanup_n", "_cursor", "_pass_start")

    def __init__(self, backend: KeyedStateBackend, descriptor: StateDescriptor, family: tuple[Any, Any],
                 write_buffer: WriteBuffer) -> None:
        self._name = descriptor.name
        self._db, self._cfh = family
        self._ov: dict[bytes, Any] = {}
        self._wb = write_buffer
        self._limit = write_buffer.limit
        ser = descriptor.serializer
        self._dumps: Callable[[Any], bytes] = ser.dumps
        self._loads: Callable[[bytes], Any] = ser.loads
        self._kgp = backend._kg_prefixes
        self._kp: bytes | None = None
        self._nsb = KEY_SERIALIZER.dumps(None)
        self._ns_bytes = NamespaceBytes(f"state '{self._name}'")
        """A namespace's bytes, cached by identity."""
        self._ck: Any = NO_KEY
        ttl = descriptor.ttl_config
        self._ttl = ttl
        self._ttl_ms = ttl.ttl_ms if ttl is not None else 0
        self._clock = backend.time_provider
        self._cleanup_n = ttl.cleanup_incremental if ttl is not None else 0
        self._cursor: bytes | None = None
        self._pass_start = 0
        write_buffer.register(self)

    # -- scoping -------------------------------------------------------------------------------
    def _set_key(self, key: Any, key_group: int, key_bytes: bytes) -> None:
        kp = self._kgp[key_group] + key_bytes
        self._kp = kp
        self._ck = kp + self._nsb

    def set_current_namespace(self, namespace: Any) -> None:
        nsb = self._ns_bytes(namespace)
        self._nsb = nsb
        kp = self._kp
        self._ck = NO_KEY if kp is None else kp + nsb

    def _key_prefix(self) -> bytes:
        kp = self._kp
        if kp is None:
            raise NoCurrentKeyError("keyed state accessed before set_current_key()")
        return kp

    def _fail(self, value: Any, error: Exception) -> None:
        raise SerializationError(f"state '{self._name}': cannot serialize value of type {type(value).__name__}: "
                                 f"{error}") from None

    def _encode(self, value: Any) -> bytes:
        try:
            return self._dumps(value)
        except Exception as e:
            self._fail(value, e)

    def _stored(self, ck: bytes, entry: Any) -> None:
        """Put ``entry`` in the overlay; write all overlays when this one is full."""
        ov = self._ov
        ov[ck] = entry
        if len(ov) > self._limit:
            self._wb.write()

    # -- overlay and RocksDB -------------------------------------------------------------------
    @abstractmethod
    def _write_overlay(self, batch: Any) -> None:
        """Add this state's pending changes to ``batch`` (the overlay is cleared by the caller)."""

    def _cell_key(self, key: bytes) -> bytes:
        """The cell key a stored key belongs to."""
        return key

    def _groups(self, it: Any) -> Iterator[tuple[bytes, list[tuple[bytes, bytes]]]]:
        """(cell key, its stored (key, value) pairs) for consecutive cells from ``it``'s position."""
        while it.valid():
            k = it.key()
            cell = self._cell_key(k)
            entries = []
            while True:
                entries.append((k, it.value()))
                it.next()
                if not it.valid():
                    break
                k = it.key()
                if not k.startswith(cell):
                    break
            yield cell, entries

    def _clear_stored(self, batch: Any, ck: bytes) -> None:
        """Delete every stored key of cell ``ck`` in ``batch``."""
        h = self._cfh
        for k, _ in scan(self._db, ck):
            batch.delete(k, h)

    # -- TTL sweep -----------------------------------------------------------------------------
    def _purge(self, ck: bytes, entries: list[tuple[bytes, bytes]], now: int) -> int:
        """Delete what of one stored cell has expired at ``now`` (via the overlay); returns how many items."""
        if stamp_of(entries[0][1]) + self._ttl_ms <= now:
            self._ov[ck] = ABSENT
            return 1
        return 0

    def _accessed(self) -> None:
        """Incremental cleanup: each access to a TTL state first checks ``cleanup_incremental`` cells."""
        if self._cleanup_n:
            self._cleanup_expired(self._cleanup_n)

    def _cleanup_expired(self, budget: int) -> int:
        """Check up to ``budget`` cells from the cursor on; at the end start over once."""
        if self._ttl is None:
            return 0
        if self._ov:
            self._wb.write()
        now = self._clock()
        restarted = self._cursor is None
        if restarted:
            self._pass_start = now
        it = self._start(self._cursor)
        ov = self._ov
        removed = 0
        while True:
            for ck, entries in self._groups(it):
                if min(stamp_of(v) for _, v in entries) >= self._pass_start:
                    continue
                removed += self._purge(ck, entries, now)
                budget -= 1
                if budget <= 0:
                    break
            if budget <= 0:
                self._cursor = it.key() if it.valid() else None
                break
            self._cursor = None
            if restarted:
                break
            restarted = True
            self._pass_start = now
            it = self._start(None)
        if len(ov) > self._limit:
            self._wb.write()
        return removed

    # -- snapshots -----------------------------------------------------------------------------
    @abstractmethod
    def _cell_out(self, ck: bytes, entries: list[tuple[bytes, bytes]]) -> Any:
        """The logical snapshot cell of stored entries."""

    @abstractmethod
    def _cell_in(self, ck: bytes, cell: Any) -> Any:
        """The overlay entry replacing cell ``ck`` with a logical snapshot cell."""

    def _value_out(self, raw: bytes) -> Any:
        if self._ttl is None:
            return self._loads(raw)
        return [self._loads(raw[STAMP_SIZE:]), stamp_of(raw)]

    def _value_in(self, cell: Any) -> bytes:
        if self._ttl is None:
            return self._encode(cell)
        return stamp(cell[1]) + self._encode(cell[0])

    def _export(self) -> Iterator[tuple[int, Any, Any, Any]]:
        self._wb.write()
        for ck, entries in self._groups(self._start(None)):
            kg, key, ns, _ = decode_cell(ck)
            yield kg, key, ns, self._cell_out(ck, entries)

    def _import(self, key_group: int, key: Any, namespace: Any, cell: Any) -> None:
        ck = self._kgp[key_group] + KEY_SERIALIZER.dumps(key) + KEY_SERIALIZER.dumps(namespace)
        self._stored(ck, self._cell_in(ck, cell))

    def _entry_count(self) -> int:
        count = self._count_up_to(None)
        assert count is not None
        return count

    def _count_up_to(self, limit: int | None) -> int | None:
        """The stored cells, counted by a scan of the keys; None once there are more than ``limit``."""
        self._wb.write()
        count = 0
        for _ in self._groups(self._start(None)):
            count += 1
            if limit is not None and count > limit:
                return None
        return count

    def _start(self, key: bytes | None) -> Any:
        """A RocksDB iterator at ``key`` (None: the first key)."""
        it = self._db.iter()
        if key is None:
            it.seek_to_first()
        else:
            it.seek(key)
        return it

    def _release(self, closed: Closed) -> None:
        """Drop overlay, caches and the column family; later use raises StateError."""
        self._ov = closed
        self._db = closed
        self._cfh = closed
        self._ns_bytes = NamespaceBytes(f"state '{self._name}'")
