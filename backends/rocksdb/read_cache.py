"""A bounded LRU of deserialized cells, built on OrderedDict so hits and inserts stay in C.

Bounded twice: by entries, and by the serialized size of what it holds (a proxy for memory that
keeps a state of large values from filling the worker). A cell larger than a sixteenth of the
byte budget is not cached at all. (cachetools' LRUCache costs three Python-level calls per
insert; on the per-record path of value get+update that was a third of the layer's time.)
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any


class ReadCache(OrderedDict):
    """LRU map of cell key -> cell; ``hit`` refreshes recency, ``put`` inserts and evicts."""

    def __init__(self, maxsize: int, max_bytes: int) -> None:
        super().__init__()
        self.maxsize = maxsize
        self.max_bytes = max_bytes
        self.max_cell = max_bytes // 16
        self.bytes = 0
        self._sizes: dict[bytes, int] = {}

    def hit(self, key: bytes, default: Any) -> Any:
        """The cached cell (marked most recently used), or ``default``."""
        cell = self.get(key, default)
        if cell is not default:
            self.move_to_end(key)
        return cell

    def put(self, key: bytes, cell: Any, size: int) -> None:
        """Insert or refresh ``key`` (``size``: its serialized bytes); evicts the least recently used
        beyond the bounds. A cell too large to cache drops an older cached version of it."""
        sizes = self._sizes
        if size > self.max_cell:
            if key in sizes:
                del self[key]
                self.bytes -= sizes.pop(key)
            return
        self.bytes += size - sizes.get(key, 0)
        sizes[key] = size
        self[key] = cell
        self.move_to_end(key)

    def trim(self) -> None:
        """Evict the least recently used cells until both bounds hold."""
        sizes = self._sizes
        while len(self) > self.maxsize or self.bytes > self.max_bytes:
            key, _ = self.popitem(last=False)
            self.bytes -= sizes.pop(key)
