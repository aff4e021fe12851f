"""A bounded LRU of deserialized cells, built on OrderedDict so hits and inserts stay in C.

(cachetools' LRUCache costs three Python-level calls per insert; on the per-record path of
value get+update that was a third of the layer's time.)
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any


class ReadCache(OrderedDict):
    """LRU map of cell key -> cell; ``hit`` refreshes recency, ``put`` inserts and evicts."""

    def __init__(self, maxsize: int) -> None:
        super().__init__()
        self.maxsize = maxsize

    def hit(self, key: bytes, default: Any) -> Any:
        """The cached cell (marked most recently used), or ``default``."""
        cell = self.get(key, default)
        if cell is not default:
            self.move_to_end(key)
        return cell

    def put(self, key: bytes, cell: Any) -> None:
        """Insert or refresh ``key``; evicts the least recently used beyond ``maxsize``."""
        self[key] = cell
        self.move_to_end(key)
        if len(self) > self.maxsize:
            self.popitem(last=False)
