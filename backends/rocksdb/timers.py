"""RocksDB timer queue: timers in their own column family, the earliest ones cached in memory.

The column family holds every timer under its ``timer_sort_key`` (value empty), so key order
is firing order. Like Flink's RocksDBCachingPriorityQueueSet, a sorted in-memory cache holds
a prefix of that order: the cache holds exactly the timers ``<= bound``, where ``bound is None``
means it holds all of them. peek/poll use only the cache while it is non-empty; when it
runs dry below a bound, it is refilled from RocksDB by seeking *past* the bound, so the
tombstones of already fired timers are never scanned again. Writes go straight to RocksDB
(write-through), so a refill always sees every timer.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import deque
from itertools import dropwhile, islice, repeat, takewhile
from typing import Any, Iterator, Sequence

from rocksdict import WriteBatch

from statekit import StateError, Timer, TimerQueue, decode_timer
from statekit.timers import decode_timers, due_bound, sort_key_timestamp

from .db import Closed
from .keys import scan_from

_END = b"\xff" * 16
"""Greater than every timer sort key (their first byte pair is at most 0xff 0xff and the key group <= 0x7fff)."""
_COMPACT_AT = 1024
_SIZE_KEY = b""
"""Where a snapshot's copy of the column family holds the queue's timer count (before every sort key): written
just before RocksDB's checkpoint and deleted from the live database right after it, so only the checkpoint
keeps it, and a queue opened on that checkpoint takes it (deleting it) instead of counting every timer."""


def _recorded_size(raw: bytes, any_timer: bool) -> int:
    """The timer count a snapshot recorded (``_SIZE_KEY``), refused (StateError) unless it is eight bytes and
    agrees with whether the queue holds a timer at all: a count of 0 over stored timers would never fire them."""
    size = int.from_bytes(raw, "big") if len(raw) == 8 else -1
    if size < 0 or (size > 0) != any_timer:
        raise StateError(f"a restored timer queue records {raw.hex()!r} as its timer count, and "
                         f"{'holds' if any_timer else 'holds no'} timers: the checkpoint is corrupt")
    return size


class RocksDBTimerQueue(TimerQueue):
    """Timers of one (service, domain) in a RocksDB column family with an in-memory head cache."""

    __slots__ = ("_db", "_handle", "_capacity", "_keys", "_lo", "_timers", "_bound", "_size")

    def __init__(self, db: Any, handle: Any, capacity: int) -> None:
        self._db = db
        self._handle = handle
        self._capacity = capacity
        self._keys: list[bytes] = []      # sorted cached sort keys; the live ones are _keys[_lo:]
        self._lo = 0
        self._timers: dict[bytes, Timer] = {}
        size = db.get(_SIZE_KEY)
        if size is None:
            self._size = sum(1 for _ in scan_from(db, None))
        else:
            db.delete(_SIZE_KEY)
            first = db.iter()
            first.seek_to_first()
            self._size = _recorded_size(size, first.valid())
        self._bound: bytes | None = b"" if self._size else None

    # -- cache bookkeeping ---------------------------------------------------------------------
    def _covers(self, sort_key: bytes) -> bool:
        bound = self._bound
        return bound is None or sort_key <= bound

    def _refill(self) -> None:
        """Load the next ``capacity`` timers after the bound (the cache is empty)."""
        keys = self._scan(self._bound, None, self._capacity)
        self._keys = keys
        self._lo = 0
        self._timers = dict(zip(keys, decode_timers(keys)))
        self._bound = keys[-1] if len(keys) == self._capacity and self._any_after(keys[-1]) else None

    # -- TimerQueue ----------------------------------------------------------------------------
    def add(self, sort_key: bytes, timer: Timer) -> bool:
        timers = self._timers
        if self._covers(sort_key):
            if sort_key in timers:
                return False
            self._db.put(sort_key, b"")
            self._size += 1
            keys = self._keys
            insort(keys, sort_key, lo=self._lo)
            timers[sort_key] = timer
            if len(timers) > self._capacity:
                del timers[keys.pop()]
                self._bound = keys[-1]
            return True
        db = self._db
        if db.get(sort_key) is not None:
            return False
        db.put(sort_key, b"")
        self._size += 1
        return True

    def remove(self, sort_key: bytes) -> bool:
        if self._covers(sort_key):
            if self._timers.pop(sort_key, None) is None:
                return False
            keys = self._keys
            i = bisect_left(keys, sort_key, lo=self._lo)
            if i == self._lo:
                self._lo = i + 1
            else:
                del keys[i]
        else:
            if self._db.get(sort_key) is None:
                return False
        self._db.delete(sort_key)
        self._size -= 1
        return True

    def add_many(self, sort_keys: Sequence[bytes], timers: Sequence[Timer], *, fresh: bool = False) -> None:
        """Fresh timers past the cache are written in one WriteBatch, in key order (RocksDB's memtable takes
        sorted keys faster), without the point read that ``add`` checks with."""
        if not fresh:
            super().add_many(sort_keys, timers)
            return
        if len(sort_keys) != len(timers):
            raise ValueError(f"{len(sort_keys)} sort keys but {len(timers)} timers")
        start = 0
        while self._bound is None and start < len(sort_keys):  # the cache holds every timer until it overflows
            self.add(sort_keys[start], timers[start])
            start += 1
        if start:
            sort_keys, timers = sort_keys[start:], timers[start:]
        bound = self._bound
        past = [sort_key for sort_key in sort_keys if sort_key > bound]
        if len(past) < len(sort_keys):
            for sort_key, timer in zip(sort_keys, timers):
                if sort_key <= bound:
                    if self._covers(sort_key):  # the cache knows what it holds (its bound falls as it fills)
                        self.add(sort_key, timer)
                    else:
                        past.append(sort_key)
        if past:
            past.sort()
            batch = WriteBatch(raw_mode=True)
            # the family per write: older rocksdict ignore a batch default
            deque(map(batch.put, past, repeat(b""), repeat(self._handle)), maxlen=0)
            self._size += len(past)
            self._db.write(batch)

    def remove_many(self, sort_keys: Sequence[bytes], *, present: bool = False) -> None:
        """Present timers past the cache are deleted in one WriteBatch, in key order, without the point read
        that ``remove`` checks with."""
        if not present:
            super().remove_many(sort_keys)
            return
        bound = self._bound
        if bound is None:
            super().remove_many(sort_keys)
            return
        past = [sort_key for sort_key in sort_keys if sort_key > bound]
        if len(past) < len(sort_keys):
            for sort_key in sort_keys:
                if sort_key <= bound:
                    self.remove(sort_key)
        if past:
            past.sort()
            batch = WriteBatch(raw_mode=True)
            deque(map(batch.delete, past, repeat(self._handle)), maxlen=0)
            self._size -= len(past)
            self._db.write(batch)

    def peek(self) -> Timer | None:
        keys = self._keys
        if self._lo == len(keys):
            if self._bound is None:
                return None
            self._refill()
            keys = self._keys
            if not keys:
                return None
        return self._timers[keys[self._lo]]

    def poll(self) -> Timer | None:
        head = self.peek()
        if head is None:
            return None
        keys = self._keys
        lo = self._lo
        sort_key = keys[lo]
        del self._timers[sort_key]
        lo += 1
        if lo == len(keys):
            keys.clear()
            lo = 0
        elif lo >= _COMPACT_AT and 2 * lo > len(keys):
            del keys[:lo]
            lo = 0
        self._lo = lo
        self._db.delete(sort_key)
        self._size -= 1
        return head

    def poll_until_keyed(self, timestamp: int) -> tuple[list[bytes], list[Timer]]:
        """The due timers in firing order: the cache's due head, then, when it runs dry, the due ones
        past its bound read in one scan; each stretch leaves RocksDB in one range delete, not a point
        delete per timer. The cache is left empty below a bound no due timer remains under."""
        return self._poll(timestamp, None)[1:]

    def poll_step_keyed(self, timestamp: int, limit: int) -> tuple[int, list[bytes], list[Timer]]:
        """``poll_until_keyed`` of the step ``step_toward`` finds, in one pass: the scan past the cache that
        finds the step reads the timers it takes (not counted first and read again)."""
        return self._poll(timestamp, limit)

    def _poll(self, timestamp: int, limit: int | None) -> tuple[int, list[bytes], list[Timer]]:
        """The step toward ``timestamp`` (``step_toward``; ``timestamp`` itself without a ``limit``) and its
        due timers, taken: candidates are the cache's due head and, when it runs dry below the bound, the due
        keys past it, read no further than the step needs (``limit`` + 1, then the ties of the last)."""
        bound = due_bound(timestamp)
        keys, lo, timers = self._keys, self._lo, self._timers
        end = len(keys) if bound is None else bisect_left(keys, bound, lo)
        candidates = keys[lo:end]
        cached = len(candidates)
        scanning = end == len(keys) and self._bound is not None  # the cache ran dry below its bound: scan past it
        if scanning:
            candidates += self._scan(self._bound, bound, None if limit is None else max(0, limit + 1 - cached))
        step = timestamp
        if limit is not None and len(candidates) > limit:
            t = sort_key_timestamp(candidates[limit])
            if sort_key_timestamp(candidates[0]) < t:
                step = t - 1
            else:  # every earlier timer shares the time: the step takes all of them, ties past the scan too
                step = t
                if scanning:
                    candidates += self._scan(candidates[-1] if len(candidates) > cached else self._bound, due_bound(t), None)
        taken = bisect_left(candidates, due_bound(step)) if step < timestamp else len(candidates)
        from_cache = min(taken, cached)
        due_keys = candidates[:taken]
        due = list(map(timers.pop, candidates[:from_cache]))
        if from_cache:
            self._db.delete_range(keys[lo], keys[lo + from_cache - 1] + b"\x00")
        if from_cache < cached or not scanning:  # a timer left in the cache is not due, or none is past it
            self._lo = lo + from_cache
        else:
            scanned = candidates[cached:taken]
            if scanned:
                self._db.delete_range(scanned[0], scanned[-1] + b"\x00")
                due += decode_timers(scanned)
                self._bound = scanned[-1] if taken < len(candidates) or self._any_after(scanned[-1]) else None
            elif taken == len(candidates) and not self._any_after(self._bound):
                self._bound = None
            self._keys, self._lo = [], 0
        self._size -= len(due)
        return step, due_keys, due

    def _scan(self, after: bytes, until: bytes | None, limit: int | None) -> list[bytes]:
        """The keys past ``after`` and below ``until`` (None: to the end), at most ``limit`` of them, read by
        rocksdict's key iterator in C (a third of a Python step per key)."""
        found = dropwhile(after.__eq__, self._db.keys(from_key=after))
        if until is not None:
            found = takewhile(until.__gt__, found)
        return list(found if limit is None else islice(found, limit))

    def _any_after(self, key: bytes) -> bool:
        """Whether the family holds a key past ``key``."""
        return next(dropwhile(key.__eq__, self._db.keys(from_key=key)), None) is not None

    def timestamp_at(self, n: int, until: int) -> int | None:
        """Counted through the cache's live timers, then through RocksDB's keys past its bound (not decoded),
        no further than the due ones."""
        keys, lo = self._keys, self._lo
        bound = due_bound(until)
        if n < len(keys) - lo:
            key = keys[lo + n]
            return sort_key_timestamp(key) if bound is None or key < bound else None
        if self._bound is None:
            return None
        n -= len(keys) - lo
        it = self._db.iter()
        it.seek(self._bound)
        if it.valid() and it.key() == self._bound:
            it.next()
        for _ in range(n):
            if not it.valid() or bound is not None and it.key() >= bound:
                return None
            it.next()
        return sort_key_timestamp(it.key()) if it.valid() and (bound is None or it.key() < bound) else None

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Timer]:
        """All timers in firing order, read from RocksDB (an iterator sees a consistent snapshot)."""
        for k, _ in scan_from(self._db, None):
            yield decode_timer(k)[0]

    def clear(self) -> None:
        self._db.delete_range(b"", _END)
        self._keys = []
        self._lo = 0
        self._timers = {}
        self._bound = None
        self._size = 0

    # -- snapshots ----------------------------------------------------------------------------
    def record_size(self) -> None:
        """Write the timer count for a checkpoint about to be taken (no timer may change until ``forget_size``)."""
        self._db.put(_SIZE_KEY, self._size.to_bytes(8, "big"))

    def forget_size(self) -> None:
        """Delete the count ``record_size`` wrote, once the checkpoint holds it."""
        self._db.delete(_SIZE_KEY)

    # -- state introspection (tests, bench) ---------------------------------------------------
    def cached(self) -> int:
        """How many timers the in-memory cache holds now."""
        return len(self._timers)

    def cache_holds_all(self) -> bool:
        """True when the cache holds every timer of the queue (RocksDB is not consulted)."""
        return self._bound is None

    def _release(self, closed: Closed) -> None:
        """Drop the cache and the column family; later use raises StateError."""
        self._db = self._handle = closed
        self._keys = []
        self._lo = 0
        self._timers = {}
        self._bound = b""
        self._size = 0
