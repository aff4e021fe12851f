"""The per-epoch write overlay: every state's pending changes, written as ONE RocksDB WriteBatch.

States keep their changes in an overlay dict keyed by cell key (reads look there first, so
they always see their own writes). ``WriteBuffer.write`` turns all overlays into one batch at
epoch end (``backend.flush``) or earlier when one overlay outgrows ``rocksdb.write_batch_size``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .db import RocksDBStore


class ListDelta:
    """Pending change of one list cell: drop the stored elements (``cleared``), then append ``appended``."""

    __slots__ = ("cleared", "appended")

    def __init__(self, cleared: bool, appended: list[bytes]) -> None:
        self.cleared = cleared
        self.appended = appended


class MapDelta:
    """Pending change of one map cell: drop stored entries (``cleared``), then apply ``entries``
    (user-key bytes -> value bytes, or None for a removal)."""

    __slots__ = ("cleared", "entries")

    def __init__(self, cleared: bool, entries: dict[bytes, bytes | None]) -> None:
        self.cleared = cleared
        self.entries = entries


class WriteBuffer:
    """Owns the list sequence counter and writes the overlays of all registered states."""

    __slots__ = ("store", "limit", "sequence", "_states")

    def __init__(self, store: "RocksDBStore", limit: int) -> None:
        self.store = store
        self.limit = limit
        self.sequence = store.load_sequence()
        self._states: list[Any] = []

    def register(self, state: Any) -> None:
        self._states.append(state)

    def next_sequence(self, count: int) -> int:
        """Reserve ``count`` list-element sequence numbers; returns the first."""
        first = self.sequence
        self.sequence = first + count
        return first

    def write(self) -> None:
        """Write every pending change as one batch and empty the overlays."""
        dirty = [st for st in self._states if st._ov]
        if not dirty:
            return
        batch = self.store.new_batch()
        for st in dirty:
            st._write_overlay(batch)
        self.store.write(batch, self.sequence)
        for st in dirty:
            st._ov.clear()
