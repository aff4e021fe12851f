"""A bounded cache of deserialized cells in two generations of plain dicts, so that whole batches
of reads and writes enter it in C (``dict.update``) instead of one LRU step per cell.

New and refreshed cells go to the young generation; when it would pass half of either bound
(entries, or serialized bytes: a proxy for memory that keeps a state of large values from filling
the worker), it becomes the old generation and the previous old one is dropped. Lookups see the
young generation first, so an old entry is never read over a newer one. A cell larger than a
sixteenth of the byte budget is not cached, and drops any cached version of itself.
"""

from __future__ import annotations

from itertools import repeat
from typing import Any, Sequence

_MISS = object()


class ReadCache:
    """Cell key -> cell, at most ``maxsize`` entries and ``max_bytes`` serialized bytes."""

    __slots__ = ("maxsize", "max_bytes", "max_cell", "_half", "_half_bytes", "_two", "_young", "_old",
                 "_young_bytes", "_old_bytes")

    def __init__(self, maxsize: int, max_bytes: int) -> None:
        self.maxsize = maxsize
        self.max_bytes = max_bytes
        self.max_cell = max_bytes // 16
        self._half = max(1, maxsize // 2)
        self._half_bytes = max(1, max_bytes // 2)
        self._two = 2 * self._half <= maxsize  # room for an old generation (not with one entry)
        self._young: dict[bytes, Any] = {}
        self._old: dict[bytes, Any] = {}
        self._young_bytes = self._old_bytes = 0

    def __len__(self) -> int:
        """Entries held (a key in both generations counts twice)."""
        return len(self._young) + len(self._old)

    @property
    def bytes(self) -> int:
        """Serialized bytes of what the cache holds (an upper bound: a refreshed cell counts again)."""
        return self._young_bytes + self._old_bytes

    def cells(self) -> list[Any]:
        """Every cell held, newest generation first."""
        return [*self._young.values(), *self._old.values()]

    def hit(self, key: bytes, default: Any) -> Any:
        """The cached cell of ``key``, or ``default``."""
        cell = self._young.get(key, _MISS)
        return self._old.get(key, default) if cell is _MISS else cell

    def hits(self, keys: Sequence[bytes], default: Any) -> list[Any]:
        """``hit`` of many keys."""
        found = list(map(self._young.get, keys, repeat(_MISS)))
        old = self._old
        if old:
            for i in [i for i, cell in enumerate(found) if cell is _MISS]:
                found[i] = old.get(keys[i], default)
        elif default is not _MISS:
            found = [default if cell is _MISS else cell for cell in found]
        return found

    def put(self, key: bytes, cell: Any, size: int) -> None:
        """Insert or refresh ``key`` (``size``: its serialized bytes)."""
        self.put_many([key], [cell], [size])

    def put_many(self, keys: Sequence[bytes], cells: Sequence[Any], sizes: Sequence[int]) -> None:
        """Insert or refresh distinct keys; those too large to cache drop out of it."""
        if not keys:
            return
        if max(sizes) > self.max_cell:
            small = [i for i, size in enumerate(sizes) if size <= self.max_cell]
            for i, size in enumerate(sizes):
                if size > self.max_cell:
                    self._young.pop(keys[i], None)
                    self._old.pop(keys[i], None)
            keys, cells, sizes = [keys[i] for i in small], [cells[i] for i in small], [sizes[i] for i in small]
            if not keys:
                return
        total = sum(sizes)
        if len(keys) > self._half or total > self._half_bytes:
            self._young, self._old = {}, {}  # the batch alone fills a generation: keep its newest part
            self._young_bytes = self._old_bytes = 0
            take = self._fitting(sizes)
            if not take:
                return
            keys, cells, total = keys[-take:], cells[-take:], sum(sizes[-take:])
        elif len(self._young) + len(keys) > self._half or self._young_bytes + total > self._half_bytes:
            self._old, self._old_bytes = (self._young, self._young_bytes) if self._two else ({}, 0)
            self._young, self._young_bytes = {}, 0
        self._young.update(zip(keys, cells))
        self._young_bytes += total

    def _fitting(self, sizes: Sequence[int]) -> int:
        """How many of the last ``sizes`` fit one generation."""
        budget, n = self._half_bytes, 0
        for size in reversed(sizes[-self._half:]):
            budget -= size
            if budget < 0:
                break
            n += 1
        return n
