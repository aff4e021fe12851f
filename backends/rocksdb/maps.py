"""RocksDB map state."""

from __future__ import annotations

from typing import Any

from statekit import KEY_SERIALIZER, MapState, SerializationError

from .keys import STAMP_SIZE, decode_cell, decode_user_key, scan, stamp, stamp_of
from .write_buffer import MapDelta
from .state import _MISS
from .state import RocksDBState


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
