"""RocksDB list state."""

from __future__ import annotations

from typing import Any, Iterable

from statekit import InternalMergingState, ListState

from .keys import SEQ_SIZE, STAMP_SIZE, scan, stamp, stamp_of
from .write_buffer import ListDelta
from .state import RocksDBState


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
        tck = kp + self._ns_bytes(target)
        moved: list[bytes] = []
        for src in sources:
            sck = kp + self._ns_bytes(src)
            if sck == tck:  # the target's own cell (by its bytes: a source 1 is not a target True)
                continue
            elems = self._elements(sck)
            if elems:
                moved.extend(elems)
                self._stored(sck, ListDelta(True, []))
        if not moved:
            return
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
