"""RocksDB value, reducing and aggregating state: one value per (key, namespace) cell."""

from __future__ import annotations

from itertools import repeat
from typing import Any, Callable, Sequence

import numpy as np

from statekit import detached, AggregatingState, InternalMergingState, MsgpackSerializer, ReducingState, ResolvedKey, ValueState
from statekit.cell_rules import ABSENT, AggregatingCellRules, CellRules, MergingCellRules, NamespaceMerging, ReducingCellRules

from .db import Closed
from .keys import STAMP_SIZE, stamp, stamp_of
from .key_order import key_order, read_in_order, write_in_order
from .read_cache import ReadCache
from .state import _MISS, RocksDBState

_BYTES_OR_NONE = frozenset((bytes, type(None)))


class RocksDBCellState(RocksDBState, CellRules):
    """One value per cell; the overlay holds the objects written this epoch."""

    __slots__ = ("_cache", "_check", "_msgpack")

    def __init__(self, backend, descriptor, family, write_buffer) -> None:
        super().__init__(backend, descriptor, family, write_buffer)
        self._cache = ReadCache(backend._read_cache_entries, backend._read_cache_bytes)
        ser = descriptor.serializer
        self._msgpack = type(ser) is MsgpackSerializer
        self._check = ser.check if self._msgpack else ser.dumps

    def _validated(self, value: Any) -> Any:
        try:
            self._check(value)
        except Exception as e:
            self._fail(value, e)
        return value

    def _cell(self, ck: bytes) -> Any:
        """The cell under ``ck`` from the overlay, else the read cache, else RocksDB (then cached)."""
        cell = self._ov.get(ck, _MISS)
        if cell is _MISS:
            cell = self._cache.hit(ck, _MISS)
            if cell is _MISS:
                raw = self._db.get(ck)
                if raw is None:
                    cell = ABSENT
                    self._cache.put(ck, cell, 0)
                else:
                    cell = self._decode(raw)
                    self._cache.put(ck, cell, len(raw))
        return cell

    def _decode(self, raw: bytes) -> Any:
        if self._ttl is None:
            return self._loads(raw)
        return (self._loads(raw[STAMP_SIZE:]), stamp_of(raw))

    def clear(self) -> None:
        self._stored(self._ck, ABSENT)

    def _write_overlay(self, batch: Any) -> None:
        """The overlay's cells into ``batch`` in key order (``write_in_order``), then into the read cache in the
        overlay's own order (a pass over many objects in another order than they were made costs more than a sort)."""
        ov, dumps = self._ov, self._dumps
        cks, cells = list(ov), list(ov.values())
        if self._ttl is None:
            raws = [None if cell is ABSENT else dumps(cell) for cell in cells]
        else:
            raws = [None if cell is ABSENT else stamp(cell[1]) + dumps(cell[0]) for cell in cells]
        write_in_order(batch, self._cfh, cks, raws)
        self._cache.put_many(cks, cells, [0 if raw is None else len(raw) for raw in raws])

    def _cell_out(self, ck, entries):
        return self._value_out(entries[0][1])

    def _cell_in(self, ck, cell):
        self._validated(cell[0] if self._ttl is not None else cell)
        return (cell[0], cell[1]) if self._ttl is not None else cell

    def _release(self, closed: Closed) -> None:
        super()._release(closed)
        self._cache = closed


class RocksDBMergingCellState(RocksDBCellState, MergingCellRules, InternalMergingState):
    """``merge_namespaces`` (the rule in ``statekit.cell_rules``) over RocksDB cells."""

    __slots__ = ()
    merge_namespaces = NamespaceMerging.merge_namespaces  # InternalMergingState's abstract one may precede it in the MRO

    def _cell_keys(self) -> Callable[[Any], bytes]:
        kp, ns_bytes = self._key_prefix(), self._ns_bytes
        return lambda namespace: kp + ns_bytes(namespace)


class RocksDBValueState(RocksDBCellState, ValueState):
    __slots__ = ("_default",)

    def __init__(self, backend, descriptor, family, write_buffer) -> None:
        super().__init__(backend, descriptor, family, write_buffer)
        self._default = descriptor.default

    def get_internal(self) -> Any:
        ck = self._ck
        if self._ttl is not None:
            return self._visible(ck, self._default)
        cell = self._ov.get(ck, _MISS)
        if cell is _MISS:
            cell = self._cache.hit(ck, _MISS)
            if cell is _MISS:
                cell = self._cell(ck)
        return self._default if cell is ABSENT else cell

    def value(self) -> Any:
        return detached(self.get_internal())

    def update(self, value: Any) -> None:
        self.update_internal(detached(value))  # the overlay and the read cache never share the caller's object

    def get_internal_many(self, keys: Sequence[ResolvedKey]) -> list:
        """What RocksDB holds is not put in the read cache: a batch is an epoch's read before its write back,
        whose cells enter the cache as they are written (caching both evicted the cells a watermark fires
        next; measured 5% of a bench-like workload's CPU)."""
        kgp, nsb, default = self._kgp, self._nsb, self._default
        cks = [kgp[kg] + kb + nsb for _, kg, kb in keys]
        if self._ttl is not None:
            visible = self._visible
            return [visible(ck, default) for ck in cks]
        out = list(map(self._ov.get, cks, repeat(_MISS)))
        unseen = [i for i, cell in enumerate(out) if cell is _MISS]
        if unseen:
            unseen_cks = [cks[i] for i in unseen]
            for i, cell in zip(unseen, self._cache.hits(unseen_cks, _MISS)):
                out[i] = cell
            misses = [i for i in unseen if out[i] is _MISS]
            if misses:
                miss_cks = [cks[i] for i in misses]
                raws = self._read(miss_cks)
                loads = self._loads
                for i, raw in zip(misses, raws):
                    out[i] = ABSENT if raw is None else loads(raw)
        return [default if cell is ABSENT else cell for cell in out]

    def _read(self, cks: list[bytes]) -> list[bytes | None]:
        """RocksDB's value (or None) of each cell key: one point lookup each, in key order (measured
        twice as fast as random order at 500k keys; rocksdict's list multi-get is slower than both)."""
        order = key_order(cks)
        raws = np.empty(len(cks), object)
        raws[order] = read_in_order(self._db, [cks[i] for i in order.tolist()])
        return raws.tolist()

    def update_internal_many(self, keys: Sequence[ResolvedKey], values: Sequence[Any]) -> None:
        kgp, nsb, check, ov = self._kgp, self._nsb, self._check, self._ov
        ttl = self._ttl is not None
        if not ttl and self._msgpack and len(keys) == len(values) and set(map(type, values)) <= _BYTES_OR_NONE:
            # nothing to check (msgpack encodes any bytes): one dict update in C, clears as ABSENT
            values = [ABSENT if value is None else value for value in values]
            ov.update(zip([kgp[kg] + kb + nsb for _, kg, kb in keys], values))
            if len(ov) > self._limit:
                self._wb.write()
            return
        for (_, kg, kb), value in zip(keys, values, strict=True):
            ck = kgp[kg] + kb + nsb
            if value is None:
                entry = ABSENT
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


class RocksDBReducingState(ReducingCellRules, RocksDBMergingCellState, ReducingState):
    __slots__ = ("_reduce",)

    def __init__(self, backend, descriptor, family, write_buffer) -> None:
        super().__init__(backend, descriptor, family, write_buffer)
        self._reduce = descriptor.reduce_function

    def get(self) -> Any:
        ck = self._ck
        if self._ttl is None:
            cell = self._cell(ck)
            return None if cell is ABSENT else detached(cell)
        return detached(self._visible(ck, None))

    def add(self, value: Any) -> None:
        ck = self._ck
        if self._ttl is None:
            cell = self._cell(ck)
            self._stored(ck, self._validated(detached(value if cell is ABSENT else self._reduce(cell, value))))
        else:
            current = self.get()
            new = value if current is None else self._reduce(current, value)
            self._stored(ck, (self._validated(detached(new)), self._clock()))


class RocksDBAggregatingState(AggregatingCellRules, RocksDBMergingCellState, AggregatingState):
    __slots__ = ("_agg",)

    def __init__(self, backend, descriptor, family, write_buffer) -> None:
        super().__init__(backend, descriptor, family, write_buffer)
        self._agg = descriptor.agg_function
