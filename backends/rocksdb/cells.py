"""RocksDB value, reducing and aggregating state: one value per (key, namespace) cell."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, Iterable, Sequence

from statekit import detached, AggregatingState, InternalMergingState, MsgpackSerializer, ReducingState, ResolvedKey, ValueState

from .db import Closed
from .keys import STAMP_SIZE, stamp, stamp_of
from .read_cache import ReadCache
from .state import _MISS, _ABSENT
from .state import RocksDBState


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

    def get_internal_many(self, keys: Sequence[ResolvedKey]) -> list:
        kgp, nsb, default = self._kgp, self._nsb, self._default
        cks = [kgp[kg] + kb + nsb for _, kg, kb in keys]
        if self._ttl is not None:
            out = []
            for ck in cks:
                self._accessed()
                cell = self._cell(ck)
                if cell is _ABSENT:
                    out.append(default)
                    continue
                visible, value = self._live(ck, cell)
                out.append(value if visible else default)
            return out
        ov, cache = self._ov, self._cache
        out: list = []
        misses: list[int] = []
        for ck in cks:
            cell = ov.get(ck, _MISS)
            if cell is _MISS:
                cell = cache.hit(ck, _MISS)
                if cell is _MISS:
                    misses.append(len(out))
            out.append(default if cell is _ABSENT else cell)
        if misses:
            # one point lookup per miss: rocksdict's list multi-get measured slower than a loop of gets
            get, loads, put = self._db.get, self._loads, cache.put
            for i in misses:
                ck = cks[i]
                raw = get(ck)
                if raw is None:
                    put(ck, _ABSENT, 0)
                    out[i] = default
                else:
                    out[i] = cell = loads(raw)
                    put(ck, cell, len(raw))
            cache.trim()
        return out

    def update_internal_many(self, keys: Sequence[ResolvedKey], values: Sequence[Any]) -> None:
        kgp, nsb, check, ov = self._kgp, self._nsb, self._check, self._ov
        ttl = self._ttl is not None
        for (_, kg, kb), value in zip(keys, values, strict=True):
            ck = kgp[kg] + kb + nsb
            if value is None:
                entry = _ABSENT
            else:
                try:
                    check(value)
                except Exception as e:
                    self._fail(value, e)
                if ttl:
                    self._accessed()
                entry = (value, self._clock()) if ttl else value
            ov[ck] = entry
        if len(ov) > self._limit:
            self._wb.write()

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
