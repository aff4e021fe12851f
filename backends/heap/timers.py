"""Heap timer queue: a binary heap of sort keys plus a dict index for de-duplication and deletion.

The queue also records which timers were added or removed since the last ``take_changes``, so an
incremental snapshot ships the timer changes of an epoch rather than every timer.
"""

from __future__ import annotations

from collections import deque
from heapq import heapify, heappop, heappush
from itertools import repeat
from operator import itemgetter
from typing import Iterator

from statekit import Timer, TimerQueue
from statekit.timers import due_bound


class HeapTimerQueue(TimerQueue):
    """Deletes lazily: a removed key stays in the heap until it surfaces or the heap is compacted."""

    __slots__ = ("_heap", "_index", "_changes")

    def __init__(self) -> None:
        self._heap: list[bytes] = []
        self._index: dict[bytes, Timer] = {}
        self._changes: dict[bytes, Timer | None] = {}

    def add(self, sort_key: bytes, timer: Timer) -> bool:
        if sort_key in self._index:
            return False
        self._index[sort_key] = timer
        self._changes[sort_key] = timer
        heappush(self._heap, sort_key)
        return True

    def remove(self, sort_key: bytes) -> bool:
        if self._index.pop(sort_key, None) is None:
            return False
        self._changes[sort_key] = None
        self._compact()
        return True

    def _compact(self) -> None:
        """Rebuild the heap once removed keys make up more than half of it."""
        if len(self._heap) > 2 * len(self._index) + 64:
            self._heap = list(self._index)
            heapify(self._heap)

    def add_many(self, sort_keys, timers, *, fresh: bool = False) -> None:
        """Fresh timers enter the index in one ``dict.update`` and the heap in one C loop (or one
        ``heapify`` when they outnumber it); otherwise each is checked against the index first."""
        index, changes, heap = self._index, self._changes, self._heap
        if len(sort_keys) != len(timers):
            raise ValueError(f"{len(sort_keys)} sort keys but {len(timers)} timers")
        if not fresh:
            for sort_key, timer in zip(sort_keys, timers):
                if sort_key not in index:
                    index[sort_key] = changes[sort_key] = timer
                    heappush(heap, sort_key)
            return
        index.update(zip(sort_keys, timers))
        changes.update(zip(sort_keys, timers))
        if len(sort_keys) > len(heap):
            heap += sort_keys
            heapify(heap)
        else:
            deque(map(heappush, repeat(heap), sort_keys), maxlen=0)

    def remove_many(self, sort_keys, *, present: bool = False) -> None:
        """Present timers leave the index in one C loop; otherwise each is looked up first."""
        index, changes = self._index, self._changes
        if present:
            deque(map(index.pop, sort_keys, repeat(None)), maxlen=0)
            changes.update(dict.fromkeys(sort_keys))
        else:
            for sort_key in sort_keys:
                if index.pop(sort_key, None) is not None:
                    changes[sort_key] = None
        self._compact()

    def poll_until_keyed(self, timestamp: int) -> tuple[list[bytes], list[Timer]]:
        """Pops the heap while its head is due (removed keys still in the heap are skipped)."""
        bound = due_bound(timestamp)
        heap, index, changes = self._heap, self._index, self._changes
        due, keys = [], []
        while heap and (bound is None or heap[0] < bound):
            sort_key = heappop(heap)
            timer = index.pop(sort_key, None)
            if timer is not None:
                changes[sort_key] = None
                due.append(timer)
                keys.append(sort_key)
        return keys, due

    def _head(self) -> bytes | None:
        heap, index = self._heap, self._index
        while heap:
            head = heap[0]
            if head in index:
                return head
            heappop(heap)
        return None

    def peek(self) -> Timer | None:
        head = self._head()
        return None if head is None else self._index[head]

    def poll(self) -> Timer | None:
        head = self._head()
        if head is None:
            return None
        heappop(self._heap)
        self._changes[head] = None
        return self._index.pop(head)

    def __len__(self) -> int:
        return len(self._index)

    def __iter__(self) -> Iterator[Timer]:
        index = self._index
        return iter([index[k] for k in sorted(index)])

    def columns(self) -> tuple[list, list, list]:
        """Timestamps, keys and namespaces of every timer, in no particular order (a snapshot's)."""
        timers = self._index.values()
        return tuple(list(map(itemgetter(i), timers)) for i in range(3))

    def clear(self) -> None:
        for k in self._index:
            self._changes[k] = None
        self._heap.clear()
        self._index.clear()

    def change_count(self) -> int:
        """Timers added or removed since the last ``take_changes``."""
        return len(self._changes)

    def take_changes(self) -> dict[bytes, Timer | None]:
        """Timers added (sort key -> timer) and removed (sort key -> None) since the last call."""
        changes, self._changes = self._changes, {}
        return changes
