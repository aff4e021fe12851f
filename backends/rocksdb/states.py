"""RocksDB state classes: reads see overlay, then read cache, then RocksDB; writes go to the overlay.

Value, reducing and aggregating state keep the *objects* written this epoch in the overlay
(serialized once, when the overlay is written) and a bounded LRU of deserialized cells read
from or written to RocksDB; the cache is refreshed only from the overlay's write or from a
RocksDB read of a cell not in the overlay, so it is never stale. List and map state keep
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
from typing import Any, Callable, Iterable, Iterator

from statekit import (detached, KeyedStateBackend, KEY_SERIALIZER, NO_KEY, AggregatingState, InternalKeyedState, InternalKvState, InternalMergingState, ListState, MapState,
                      MsgpackSerializer, NoCurrentKeyError, ReducingState, SerializationError, StateDescriptor,
                      ValueState)

from .db import Closed
from .keys import SEQ_SIZE, STAMP_SIZE, decode_cell, decode_user_key, scan, stamp, stamp_of
from .read_cache import ReadCache
from .write_buffer import ListDelta, MapDelta, WriteBuffer


_MISS = object()
_ABSENT = object()
"""No value: in the overlay a pending delete, in the read cache a cell known not to exist."""
_NS_CACHE_LIMIT = 1 << 14


class RocksDBState(InternalKeyedState, InternalKvState):
    """Scoping (cached cell-key bytes), overlay, TTL sweep and snapshot plumbing of all kinds."""

    __slots__ = ("_name", "_db", "_cfh", "_ov", "_wb", "_limit", "_dumps", "_loads", "_kgp", "_kp", "_nsb",
                 "_ns_cache", "_ck", "_ttl", "_ttl_ms", "_clock", "_cleanup_n", "_cursor", "_pass_start")

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
        self._ns_cache: dict[Any, bytes] = {}
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

    def _ns_bytes(self, namespace: Any) -> bytes:
        cache = self._ns_cache
        nsb = cache.get(namespace)
        if nsb is None:
            try:
                nsb = KEY_SERIALIZER.dumps(namespace)
            except SerializationError as e:
                raise SerializationError(f"state '{self._name}': namespace {namespace!r} cannot be serialized: {e}") from None
            if len(cache) >= _NS_CACHE_LIMIT:
                cache.clear()
            cache[namespace] = nsb
        return nsb

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
            self._ov[ck] = _ABSENT
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
        self._wb.write()
        return sum(1 for _ in self._groups(self._start(None)))

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
        self._ns_cache = {}


# ---------------------------------------------------------------------------------------------
# value, reducing, aggregating: one stored value per cell, cached deserialized
# ---------------------------------------------------------------------------------------------

class RocksDBCellState(RocksDBState):
    """One value per cell; the overlay holds the objects written this epoch."""

    __slots__ = ("_cache", "_check")

    def __init__(self, backend, descriptor, family, write_buffer) -> None:
        super().__init__(backend, descriptor, family, write_buffer)
        self._cache = ReadCache(backend._read_cache_entries, backend._read_cache_bytes)
        ser = descriptor.serializer
        self._check = ser.check if type(ser) is MsgpackSerializer else ser.dumps

    def _validated(self, value: Any) -> Any:
        try:
            self._check(value)
        except Exception as e:
            self._fail(value, e)
        return value

    def _cell(self, ck: bytes) -> Any:
        """The cell (value, or (value, ts) with TTL) under ``ck``, or _ABSENT."""
        cell = self._ov.get(ck, _MISS)
        if cell is _MISS:
            cell = self._cache.hit(ck, _MISS)
            if cell is _MISS:
                raw = self._db.get(ck)
                cache = self._cache
                if raw is None:
                    cell = _ABSENT
                    cache.put(ck, cell, 0)
                else:
                    cell = self._decode(raw)
                    cache.put(ck, cell, len(raw))
                cache.trim()
        return cell

    def _decode(self, raw: bytes) -> Any:
        if self._ttl is None:
            return self._loads(raw)
        return (self._loads(raw[STAMP_SIZE:]), stamp_of(raw))

    def _live(self, ck: bytes, cell: tuple) -> tuple[bool, Any]:
        """(visible, value) of a TTL cell; deletes it when expired, refreshes it on read."""
        value, ts = cell
        now = self._clock()
        if ts + self._ttl_ms <= now:
            self._stored(ck, _ABSENT)
            return self._ttl.return_expired, value
        if self._ttl.refresh_on_read:
            self._stored(ck, (value, now))
        return True, value

    def clear(self) -> None:
        self._stored(self._ck, _ABSENT)

    def _write_overlay(self, batch: Any) -> None:
        h = self._cfh
        cache = self._cache
        dumps = self._dumps
        ttl = self._ttl is not None
        put = cache.put
        for ck, cell in self._ov.items():
            if cell is _ABSENT:
                batch.delete(ck, h)
                put(ck, cell, 0)
                continue
            raw = stamp(cell[1]) + dumps(cell[0]) if ttl else dumps(cell)
            batch.put(ck, raw, h)
            put(ck, cell, len(raw))
        cache.trim()

    def _cell_out(self, ck, entries):
        return self._value_out(entries[0][1])

    def _cell_in(self, ck, cell):
        self._validated(cell[0] if self._ttl is not None else cell)
        return (cell[0], cell[1]) if self._ttl is not None else cell

    def _release(self, closed: Closed) -> None:
        super()._release(closed)
        self._cache = closed


class RocksDBMergingCellState(RocksDBCellState, InternalMergingState):
    """``merge_namespaces`` in Flink's order: sources merged among themselves, then into the target."""

    __slots__ = ()

    @abstractmethod
    def _merge_cells(self, a: Any, b: Any) -> Any:
        """Combine two cells (``b`` after ``a``)."""

    def merge_namespaces(self, target: Any, sources: Iterable[Any]) -> None:
        kp = self._key_prefix()
        merged = _MISS
        for src in sources:
            if src == target:
                continue
            sck = kp + self._ns_bytes(src)
            cell = self._cell(sck)
            if cell is _ABSENT:
                continue
            self._stored(sck, _ABSENT)
            merged = cell if merged is _MISS else self._merge_cells(merged, cell)
        if merged is _MISS:
            return
        tck = kp + self._ns_bytes(target)
        current = self._cell(tck)
        self._stored(tck, merged if current is _ABSENT else self._merge_cells(current, merged))


class RocksDBValueState(RocksDBCellState, ValueState):
    __slots__ = ("_default",)

    def __init__(self, backend, descriptor, family, write_buffer) -> None:
        super().__init__(backend, descriptor, family, write_buffer)
        self._default = descriptor.default

    def get_internal(self) -> Any:
        ck = self._ck
        if self._ttl is not None:
            self._accessed()
            cell = self._cell(ck)
            if cell is _ABSENT:
                return self._default
            visible, value = self._live(ck, cell)
            return value if visible else self._default
        cell = self._ov.get(ck, _MISS)
        if cell is _MISS:
            cell = self._cache.hit(ck, _MISS)
            if cell is _MISS:
                cell = self._cell(ck)
        return self._default if cell is _ABSENT else cell

    def value(self) -> Any:
        return detached(self.get_internal())

    def update(self, value: Any) -> None:
        self.update_internal(detached(value))  # the overlay and the read cache never share the caller's object

    def update_internal(self, value: Any) -> None:
        if value is None:
            self.clear()
            return
        try:
            self._check(value)
        except Exception as e:
            self._fail(value, e)
        if self._ttl is None:
            ov = self._ov
            ov[self._ck] = value
            if len(ov) > self._limit:
                self._wb.write()
        else:
            self._accessed()
            self._stored(self._ck, (value, self._clock()))


class RocksDBReducingState(RocksDBMergingCellState, ReducingState):
    __slots__ = ("_reduce",)

    def __init__(self, backend, descriptor, family, write_buffer) -> None:
        super().__init__(backend, descriptor, family, write_buffer)
        self._reduce = descriptor.reduce_function

    def _merge_cells(self, a, b):
        if self._ttl is None:
            return self._validated(self._reduce(a, b))
        return (self._validated(self._reduce(a[0], b[0])), self._clock())

    def get(self) -> Any:
        ck = self._ck
        if self._ttl is None:
            cell = self._cell(ck)
            return None if cell is _ABSENT else detached(cell)
        self._accessed()
        cell = self._cell(ck)
        if cell is _ABSENT:
            return None
        visible, value = self._live(ck, cell)
        return detached(value) if visible else None

    def add(self, value: Any) -> None:
        ck = self._ck
        if self._ttl is None:
            cell = self._cell(ck)
            self._stored(ck, self._validated(detached(value) if cell is _ABSENT else self._reduce(cell, value)))
        else:
            current = self.get()
            new = detached(value) if current is None else self._reduce(current, value)
            self._stored(ck, (self._validated(new), self._clock()))


class RocksDBAggregatingState(RocksDBMergingCellState, AggregatingState):
    __slots__ = ("_agg",)

    def __init__(self, backend, descriptor, family, write_buffer) -> None:
        super().__init__(backend, descriptor, family, write_buffer)
        self._agg = descriptor.agg_function

    def _merge_cells(self, a, b):
        if self._ttl is None:
            return self._validated(self._agg.merge(a, b))
        return (self._validated(self._agg.merge(a[0], b[0])), self._clock())

    def _accumulator(self) -> Any:
        ck = self._ck
        if self._ttl is None:
            return self._cell(ck)
        self._accessed()
        cell = self._cell(ck)
        if cell is _ABSENT:
            return cell
        visible, acc = self._live(ck, cell)
        return acc if visible else _ABSENT

    def get(self) -> Any:
        acc = self._accumulator()
        return None if acc is _ABSENT else detached(self._agg.get_result(acc))

    def add(self, value: Any) -> None:
        agg = self._agg
        acc = self._accumulator()
        acc = self._validated(agg.add(value, agg.create_accumulator() if acc is _ABSENT else acc))
        self._stored(self._ck, acc if self._ttl is None else (acc, self._clock()))


# ---------------------------------------------------------------------------------------------
# list: one stored entry per element, cell key + 8-byte sequence number
# ---------------------------------------------------------------------------------------------

class RocksDBListState(RocksDBState, InternalMergingState, ListState):
    """Elements under per-element keys; the overlay holds a ``ListDelta`` of element bytes per cell."""

    __slots__ = ()

    def _cell_key(self, key: bytes) -> bytes:
        return key[:-SEQ_SIZE]

    def _elements(self, ck: bytes) -> list[bytes]:
        """Stored element bytes of cell ``ck`` in order, overlay applied."""
        d = self._ov.get(ck)
        if d is not None and d.cleared:
            return list(d.appended)
        elems = [v for _, v in scan(self._db, ck)]
        if d is not None:
            elems.extend(d.appended)
        return elems

    def get(self) -> list:
        ck = self._ck
        loads = self._loads
        if self._ttl is None:
            return [loads(b) for b in self._elements(ck)]
        self._accessed()
        elems = self._elements(ck)
        if not elems:
            return []
        now = self._clock()
        ttl_ms = self._ttl_ms
        live = [b for b in elems if stamp_of(b) + ttl_ms > now]
        out = [loads(b[STAMP_SIZE:]) for b in (elems if self._ttl.return_expired else live)]
        refresh = self._ttl.refresh_on_read
        if refresh:
            head = stamp(now)
            live = [head + b[STAMP_SIZE:] for b in live]
        if refresh or len(live) != len(elems):
            self._stored(ck, ListDelta(True, live))
        return out

    def _append(self, encoded: list[bytes]) -> None:
        ck = self._ck
        d = self._ov.get(ck)
        if d is None:
            self._stored(ck, ListDelta(False, encoded))
        else:
            d.appended.extend(encoded)

    def add(self, value: Any) -> None:
        try:
            b = self._dumps(value)
        except Exception as e:
            self._fail(value, e)
        if self._ttl is not None:
            self._accessed()
            b = stamp(self._clock()) + b
        ov = self._ov
        ck = self._ck
        d = ov.get(ck)
        if d is None:
            ov[ck] = ListDelta(False, [b])
            if len(ov) > self._limit:
                self._wb.write()
        else:
            d.appended.append(b)

    def _encode_all(self, values: Iterable[Any]) -> list[bytes]:
        """``values`` as stored element bytes: all encoded first (a failed write changes nothing), stamped with TTL."""
        encoded = [self._encode(v) for v in values]
        if self._ttl is not None:
            self._accessed()
            head = stamp(self._clock())
            encoded = [head + b for b in encoded]
        return encoded

    def add_all(self, values: Iterable[Any]) -> None:
        encoded = self._encode_all(values)
        if encoded:
            self._append(encoded)

    def update(self, values: Iterable[Any]) -> None:
        self._stored(self._ck, ListDelta(True, self._encode_all(values)))

    def clear(self) -> None:
        self._stored(self._ck, ListDelta(True, []))

    def merge_namespaces(self, target: Any, sources: Iterable[Any]) -> None:
        kp = self._key_prefix()
        moved: list[bytes] = []
        for src in sources:
            if src == target:
                continue
            sck = kp + self._ns_bytes(src)
            elems = self._elements(sck)
            if elems:
                moved.extend(elems)
                self._stored(sck, ListDelta(True, []))
        if not moved:
            return
        tck = kp + self._ns_bytes(target)
        d = self._ov.get(tck)
        if d is None:
            self._stored(tck, ListDelta(False, moved))
        else:
            d.appended.extend(moved)

    def _write_overlay(self, batch: Any) -> None:
        h = self._cfh
        wb = self._wb
        for ck, d in self._ov.items():
            if d.cleared:
                self._clear_stored(batch, ck)
            appended = d.appended
            if appended:
                seq = wb.next_sequence(len(appended))
                for i, b in enumerate(appended, seq):
                    batch.put(ck + i.to_bytes(SEQ_SIZE, "big"), b, h)

    def _purge(self, ck, entries, now):
        ttl_ms = self._ttl_ms
        live = [v for _, v in entries if stamp_of(v) + ttl_ms > now]
        if len(live) == len(entries):
            return 0
        self._ov[ck] = ListDelta(True, live)
        return len(entries) - len(live)

    def _cell_out(self, ck, entries):
        return [self._value_out(v) for _, v in entries]

    def _cell_in(self, ck, cell):
        return ListDelta(True, [self._value_in(e) for e in cell])


# ---------------------------------------------------------------------------------------------
# map: one stored entry per user key, cell key + msgpack(user key)
# ---------------------------------------------------------------------------------------------

class RocksDBMapState(RocksDBState, MapState):
    """Entries under per-user-key keys; the overlay holds a ``MapDelta`` per cell.

    ``get``/``contains`` are point lookups (with TTL they expire or refresh only that entry);
    ``keys``/``values``/``items``/``is_empty`` read the whole cell and, with TTL, expire or
    refresh all its entries, like the heap backend.
    """

    __slots__ = ()

    def _cell_key(self, key: bytes) -> bytes:
        return key[:decode_cell(key)[3]]

    def _user_key(self, key: Any) -> bytes:
        try:
            hash(key)
            return KEY_SERIALIZER.dumps(key)
        except Exception as e:
            raise SerializationError(f"state '{self._name}': map key {key!r} of type {type(key).__name__} "
                                     f"is not a hashable, serializable value: {e}") from None

    def _delta(self, ck: bytes) -> MapDelta:
        """The pending delta of cell ``ck``, created empty if needed (a full overlay is written
        *before* the new delta joins it, so the caller's changes to it are never lost)."""
        ov = self._ov
        d = ov.get(ck)
        if d is None:
            if len(ov) >= self._limit:
                self._wb.write()
            d = ov[ck] = MapDelta(False, {})
        return d

    def _entries(self, ck: bytes) -> dict[bytes, bytes]:
        """User-key bytes -> stored value bytes of cell ``ck``, overlay applied."""
        d = self._ov.get(ck)
        if d is not None and d.cleared:
            out = {}
        else:
            n = len(ck)
            out = {k[n:]: v for k, v in scan(self._db, ck)}
        if d is not None:
            for ukb, vb in d.entries.items():
                if vb is None:
                    out.pop(ukb, None)
                else:
                    out[ukb] = vb
        return out

    def _live_map(self) -> dict[bytes, bytes]:
        """The current cell's entries (value bytes without stamps), TTL-checked like the heap backend."""
        ck = self._ck
        if self._ttl is None:
            return self._entries(ck)
        self._accessed()
        cell = self._entries(ck)
        if not cell:
            return cell
        now = self._clock()
        ttl_ms = self._ttl_ms
        visible = {k: v[STAMP_SIZE:] for k, v in cell.items()} if self._ttl.return_expired else None
        dead = [k for k, v in cell.items() if stamp_of(v) + ttl_ms <= now]
        refresh = self._ttl.refresh_on_read and len(dead) < len(cell)
        if dead or refresh:
            entries = self._delta(ck).entries
            for k in dead:
                del cell[k]
                entries[k] = None
            if refresh:
                head = stamp(now)
                for k, v in cell.items():
                    entries[k] = head + v[STAMP_SIZE:]
        if visible is not None:
            return visible
        return {k: v[STAMP_SIZE:] for k, v in cell.items()}

    def _lookup(self, ukb: bytes) -> bytes | None:
        """Stored value bytes of one user key (no TTL), or None."""
        ck = self._ck
        d = self._ov.get(ck)
        if d is not None:
            vb = d.entries.get(ukb, _MISS)
            if vb is not _MISS:
                return vb
            if d.cleared:
                return None
        return self._db.get(ck + ukb)

    def _live_entry(self, key: Any) -> bytes | None:
        """Value bytes (no stamp) under ``key``, or None; with TTL only this entry is expired or refreshed."""
        ukb = KEY_SERIALIZER.dumps(key)
        if self._ttl is None:
            return self._lookup(ukb)
        self._accessed()
        vb = self._lookup(ukb)
        if vb is None:
            return None
        now = self._clock()
        if stamp_of(vb) + self._ttl_ms <= now:
            self._delta(self._ck).entries[ukb] = None
            return vb[STAMP_SIZE:] if self._ttl.return_expired else None
        if self._ttl.refresh_on_read:
            self._delta(self._ck).entries[ukb] = stamp(now) + vb[STAMP_SIZE:]
        return vb[STAMP_SIZE:]

    def get(self, key: Any) -> Any:
        vb = self._live_entry(key)
        return None if vb is None else self._loads(vb)

    def contains(self, key: Any) -> bool:
        return self._live_entry(key) is not None

    def put(self, key: Any, value: Any) -> None:
        self._put_encoded({self._user_key(key): self._encode(value)})

    def put_all(self, mapping: dict) -> None:
        encoded = {self._user_key(k): self._encode(v) for k, v in dict(mapping).items()}
        if encoded:
            self._put_encoded(encoded)

    def _put_encoded(self, encoded: dict[bytes, bytes]) -> None:
        """Write validated entries into the current cell: one access, one timestamp."""
        if self._ttl is not None:
            self._accessed()
            head = stamp(self._clock())
            encoded = {k: head + v for k, v in encoded.items()}
        self._delta(self._ck).entries.update(encoded)

    def remove(self, key: Any) -> None:
        if self._ttl is not None:
            self._accessed()
        self._delta(self._ck).entries[self._user_key(key)] = None

    def keys(self) -> list:
        return [KEY_SERIALIZER.loads(k) for k in self._live_map()]

    def values(self) -> list:
        loads = self._loads
        return [loads(v) for v in self._live_map().values()]

    def items(self) -> list:
        loads = self._loads
        return [(KEY_SERIALIZER.loads(k), loads(v)) for k, v in self._live_map().items()]

    def is_empty(self) -> bool:
        return not self._live_map()

    def clear(self) -> None:
        self._stored(self._ck, MapDelta(True, {}))

    def _write_overlay(self, batch: Any) -> None:
        h = self._cfh
        for ck, d in self._ov.items():
            if d.cleared:
                self._clear_stored(batch, ck)
            for ukb, vb in d.entries.items():
                if vb is None:
                    batch.delete(ck + ukb, h)
                else:
                    batch.put(ck + ukb, vb, h)

    def _purge(self, ck, entries, now):
        ttl_ms = self._ttl_ms
        n = len(ck)
        dead = {k[n:]: None for k, v in entries if stamp_of(v) + ttl_ms <= now}
        if dead:
            self._ov[ck] = MapDelta(False, dead)
        return len(dead)

    def _cell_out(self, ck, entries):
        n = len(ck)
        return {decode_user_key(k, n): self._value_out(v) for k, v in entries}

    def _cell_in(self, ck, cell):
        return MapDelta(True, {self._user_key(k): self._value_in(v) for k, v in dict(cell).items()})


KINDS: dict[str, type[RocksDBState]] = {
    "value": RocksDBValueState, "list": RocksDBListState, "map": RocksDBMapState,
    "reducing": RocksDBReducingState, "aggregating": RocksDBAggregatingState,
}
