"""Timer service (Flink's InternalTimerService): event- and processing-time timers per (key, namespace).

Timers are ordered by one byte string, ``timer_sort_key``: timestamp (sign-flipped big-endian),
key group, key bytes, namespace bytes. Every backend fires timers in that order, so the heap and
RocksDB backends produce identical output, and RocksDB can keep timers sorted on disk as is.
The firing logic lives here once; backends supply only a ``TimerQueue``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from itertools import repeat
from operator import itemgetter
from typing import Any, Iterator, NamedTuple, Protocol, Sequence

import numpy as np

from .errors import SerializationError
from .key_identity import SELF_IDENTICAL_TYPES
from .serialization import NamespaceBytes, loads_prefix, loads_stream
from .state import ResolvedKey


_TS_BIAS = 1 << 63
MIN_TIMESTAMP = -(1 << 63)
MAX_TIMESTAMP = (1 << 63) - 1


class Timer(NamedTuple):
    """A registered timer: fires once for (key, namespace) at ``timestamp``."""

    timestamp: int
    key: Any
    namespace: Any


def timer_sort_key(timestamp: int, key_group: int, key_bytes: bytes, namespace_bytes: bytes) -> bytes:
    """The bytes that order timers: by timestamp, then key group, key and namespace."""
    return (timestamp + _TS_BIAS).to_bytes(8, "big") + key_group.to_bytes(2, "big") + key_bytes + namespace_bytes


def timer_sort_keys(timestamps: Sequence[int], key_groups: Sequence[int], keys_bytes: Sequence[bytes],
                    namespace_bytes: bytes) -> list[bytes]:
    """``timer_sort_key`` of many timers of one namespace, their fixed-width prefixes built with numpy."""
    prefix = np.empty(len(timestamps), dtype=[("t", ">u8"), ("g", ">u2")])
    prefix["t"] = np.asarray(timestamps, np.int64).view(np.uint64) ^ np.uint64(_TS_BIAS)
    prefix["g"] = key_groups
    raw = prefix.tobytes()
    return [raw[i:i + 10] + kb + namespace_bytes for i, kb in zip(range(0, 10 * len(keys_bytes), 10), keys_bytes)]


def due_bound(timestamp: int) -> bytes | None:
    """The sort keys of the timers due at ``timestamp`` (<=) are those below this bound (None: all are)."""
    return None if timestamp >= MAX_TIMESTAMP else (timestamp + 1 + _TS_BIAS).to_bytes(8, "big")


def sort_key_timestamp(sort_key: bytes) -> int:
    """The timestamp of a ``timer_sort_key``."""
    return int.from_bytes(sort_key[:8], "big") - _TS_BIAS


def decode_timers(sort_keys: Sequence[bytes]) -> list[Timer]:
    """The timers of many ``timer_sort_key``s: timestamps read with numpy, keys and namespaces
    unpacked as one msgpack stream (not a decoder per timer)."""
    if not sort_keys:
        return []
    ts = np.frombuffer(b"".join([k[:8] for k in sort_keys]), ">u8") ^ np.uint64(_TS_BIAS)
    objs = loads_stream(b"".join([k[10:] for k in sort_keys]))
    if len(objs) != 2 * len(sort_keys):
        raise SerializationError(f"timer sort keys hold {len(objs)} msgpack objects, expected {2 * len(sort_keys)}")
    # Timer tuples made in C (``tuple.__new__``, as ``Timer._make`` does), not by a Python call each
    return list(map(tuple.__new__, repeat(Timer), zip(ts.view(np.int64).tolist(), objs[0::2], objs[1::2])))


def decode_timer(sort_key: bytes) -> tuple[Timer, int]:
    """Timer and key group back from a ``timer_sort_key``."""
    ts = int.from_bytes(sort_key[:8], "big") - _TS_BIAS
    kg = int.from_bytes(sort_key[8:10], "big")
    (key, namespace), _ = loads_prefix(sort_key[10:], 2)
    return Timer(ts, key, namespace), kg


class TimerTarget(ABC):
    """What an operator implements to receive timers; the current key is set before each call."""

    @abstractmethod
    def on_event_time(self, timer: Timer) -> None: ...

    @abstractmethod
    def on_processing_time(self, timer: Timer) -> None: ...


class TimerQueue(ABC):
    """An ordered, de-duplicated set of timers keyed by their sort key."""

    @abstractmethod
    def add(self, sort_key: bytes, timer: Timer) -> bool:
        """Insert; False when the timer was already present."""

    @abstractmethod
    def remove(self, sort_key: bytes) -> bool:
        """Delete; False when it was not present."""

    @abstractmethod
    def peek(self) -> Timer | None:
        """The earliest timer, or None."""

    @abstractmethod
    def poll(self) -> Timer | None:
        """Remove and return the earliest timer, or None."""

    def add_many(self, sort_keys: Sequence[bytes], timers: Sequence[Timer], *, fresh: bool = False) -> None:
        """``add`` of each (sort key, timer) pair; ``fresh``: the caller knows none of them is present (a
        queue may skip its existence checks; a present one would then be counted twice)."""
        for sort_key, timer in zip(sort_keys, timers, strict=True):
            self.add(sort_key, timer)

    def remove_many(self, sort_keys: Sequence[bytes], *, present: bool = False) -> None:
        """``remove`` of each sort key; ``present``: the caller knows each of them is present (a queue may
        skip its existence checks; an absent one would then be counted as removed)."""
        for sort_key in sort_keys:
            self.remove(sort_key)

    def poll_until(self, timestamp: int) -> list[Timer]:
        """Remove and return every timer due at ``timestamp`` (<=), in firing order."""
        return self.poll_until_keyed(timestamp)[1]

    @abstractmethod
    def poll_until_keyed(self, timestamp: int) -> tuple[list[bytes], list[Timer]]:
        """``poll_until``, with each due timer's sort key (same order)."""

    def poll_step_keyed(self, timestamp: int, limit: int) -> tuple[int, list[bytes], list[Timer]]:
        """The step ``step_toward(self, timestamp, limit)`` and ``poll_until_keyed`` of it (a queue reading its
        timers in order may find the step and take its timers in one pass)."""
        step = step_toward(self, timestamp, limit)
        return (step, *self.poll_until_keyed(step))

    def timestamp_at(self, n: int, until: int) -> int | None:
        """The timestamp of the timer ``n`` places after the earliest in firing order when it is due at
        ``until`` (<=); None when it is not, when there are not that many timers, or when the queue cannot
        tell without ordering everything it holds (this default: a queue holding every timer in memory,
        whose due timers are taken all at once)."""
        return None

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def __iter__(self) -> Iterator[Timer]:
        """All timers in firing order."""

    @abstractmethod
    def clear(self) -> None: ...


def step_toward(queue: TimerQueue, timestamp: int, limit: int) -> int:
    """A timestamp on the way to ``timestamp`` at which at most ``limit`` of ``queue``'s timers are due:
    ``timestamp`` itself when at most ``limit`` are due (or the queue cannot tell, ``TimerQueue.timestamp_at``),
    else just before the timestamp of the first timer past ``limit``, or at it when every earlier timer
    shares its timestamp."""
    t = queue.timestamp_at(limit, timestamp)
    if t is None:
        return timestamp
    return t - 1 if queue.peek().timestamp < t else t


class KeyScope(Protocol):
    """What a timer service needs of its backend: the current key (with its key group and bytes,
    which order timers) and a way to set it before a timer fires."""

    def get_current_key(self) -> Any: ...

    def current_key_scope(self) -> tuple[Any, int, bytes]: ...

    def set_current_key(self, key: Any) -> None: ...


class InternalTimerService:
    """Registers timers for the backend's current key and fires them as time advances."""

    __slots__ = ("name", "_backend", "_target", "_event", "_processing", "_watermark", "_processing_time", "_ns_bytes")

    def __init__(self, name: str, backend: KeyScope, target: TimerTarget,
                 event_queue: TimerQueue, processing_queue: TimerQueue) -> None:
        self.name = name
        self._backend = backend
        self._target = target
        self._event = event_queue
        self._processing = processing_queue
        self._watermark = MIN_TIMESTAMP
        self._processing_time = MIN_TIMESTAMP
        self._ns_bytes = NamespaceBytes(f"timer service '{name}'")

    def queues(self) -> tuple[tuple[str, TimerQueue], tuple[str, TimerQueue]]:
        """``("event", queue), ("processing", queue)``: for the backend that made them (snapshots, release)."""
        return ("event", self._event), ("processing", self._processing)

    def set_target(self, target: TimerTarget) -> None:
        """Re-bind the callback object (a restored service gets its operator after restore)."""
        self._target = target

    def _sort_key(self, namespace: Any, timestamp: int) -> tuple[bytes, Timer]:
        key, kg, kb = self._backend.current_key_scope()
        if not isinstance(timestamp, int) or not MIN_TIMESTAMP <= timestamp <= MAX_TIMESTAMP:
            raise ValueError(f"timer service '{self.name}': timestamp must be an int64, got {timestamp!r}")
        return (timer_sort_key(timestamp, kg, kb, self._ns_bytes(namespace)), Timer(timestamp, key, namespace))

    def _sort_keys(self, keys: Sequence[ResolvedKey], namespace: Any, timestamps: Sequence[int]) -> list[bytes]:
        nsb = self._ns_bytes(namespace)
        if len(keys) != len(timestamps):
            raise ValueError(f"timer service '{self.name}': {len(keys)} keys but {len(timestamps)} timestamps")
        if not set(map(type, timestamps)) <= {int} or \
                (len(timestamps) and not MIN_TIMESTAMP <= min(timestamps) <= max(timestamps) <= MAX_TIMESTAMP):
            bad = next(ts for ts in timestamps if type(ts) is not int or not MIN_TIMESTAMP <= ts <= MAX_TIMESTAMP)
            raise ValueError(f"timer service '{self.name}': timestamp must be an int64, got {bad!r}")
        return timer_sort_keys(timestamps, [k[1] for k in keys], [k[2] for k in keys], nsb)

    def register_event_time_timers(self, keys: Sequence[ResolvedKey], namespace: Any, timestamps: Sequence[int], *,
                                   fresh: bool = False) -> None:
        """``register_event_time_timer(namespace, timestamps[i])`` under each ``keys[i]``, in one call;
        ``fresh``: the caller knows none of them is registered (``TimerQueue.add_many``)."""
        # Timer tuples made in C (``tuple.__new__``, as ``Timer._make`` does), not by a Python call each
        timers = list(map(tuple.__new__, repeat(Timer), zip(timestamps, map(itemgetter(0), keys), repeat(namespace))))
        self._event.add_many(self._sort_keys(keys, namespace, timestamps), timers, fresh=fresh)

    def delete_event_time_timers(self, keys: Sequence[ResolvedKey], namespace: Any, timestamps: Sequence[int], *,
                                 present: bool = False) -> None:
        """``delete_event_time_timer(namespace, timestamps[i])`` under each ``keys[i]``, in one call;
        ``present``: the caller knows each of them is registered (``TimerQueue.remove_many``)."""
        self._event.remove_many(self._sort_keys(keys, namespace, timestamps), present=present)

    def take_due_event_time(self, watermark: int) -> list[Timer]:
        """Set the watermark and remove every event-time timer due at it, returning them in firing
        order instead of firing them: for an operator that handles an epoch's timers in bulk."""
        self._watermark = watermark
        return self._event.poll_until(watermark)

    def event_time_step(self, watermark: int, limit: int) -> int:
        """A watermark on the way to ``watermark`` at which at most ``limit`` event-time timers are due
        (``step_toward``), so that an operator can take a long way's timers in bounded batches (advancing
        through it step by step fires in the same order)."""
        return step_toward(self._event, watermark, limit)

    def take_due_event_time_scoped(self, watermark: int) -> tuple[list[Timer], list[ResolvedKey]]:
        """``take_due_event_time``, with each timer's key resolved as ``KeyedStateBackend.resolve_keys``
        resolves it: read from the timer's sort key, where it was stored, not serialized and hashed again."""
        self._watermark = watermark
        return self._scoped(*self._event.poll_until_keyed(watermark))

    def take_event_time_step_scoped(self, watermark: int, limit: int) -> tuple[int, list[Timer], list[ResolvedKey]]:
        """``take_due_event_time_scoped`` of ``event_time_step(watermark, limit)``, which it returns first: the
        step found and its timers taken in one pass over the queue."""
        step, sort_keys, timers = self._event.poll_step_keyed(watermark, limit)
        self._watermark = step
        return (step, *self._scoped(sort_keys, timers))

    def _scoped(self, sort_keys: list[bytes], timers: list[Timer]) -> tuple[list[Timer], list[ResolvedKey]]:
        """Taken timers with their keys resolved from their sort keys."""
        if not timers:
            return timers, []
        kgs = np.frombuffer(b"".join([sk[8:10] for sk in sort_keys]), ">u2").tolist()
        spaces = list(map(itemgetter(2), timers))
        if set(map(type, spaces)) <= SELF_IDENTICAL_TYPES and len(set(spaces)) == 1:  # one namespace ends every sort key
            end = -len(self._ns_bytes(spaces[0]))
            kbs = [sk[10:end] for sk in sort_keys]
        else:
            nsb = self._ns_bytes
            kbs = [sk[10:len(sk) - len(nsb(ns))] for sk, ns in zip(sort_keys, spaces)]
        return timers, list(zip(map(itemgetter(1), timers), kgs, kbs))

    def register_event_time_timer(self, namespace: Any, timestamp: int) -> None:
        self._event.add(*self._sort_key(namespace, timestamp))

    def register_processing_time_timer(self, namespace: Any, timestamp: int) -> None:
        self._processing.add(*self._sort_key(namespace, timestamp))

    def delete_event_time_timer(self, namespace: Any, timestamp: int) -> None:
        self._event.remove(self._sort_key(namespace, timestamp)[0])

    def delete_processing_time_timer(self, namespace: Any, timestamp: int) -> None:
        self._processing.remove(self._sort_key(namespace, timestamp)[0])

    def current_watermark(self) -> int:
        return self._watermark

    def current_processing_time(self) -> int:
        return self._processing_time

    def advance_watermark(self, timestamp: int) -> int:
        """Set the watermark and fire every event-time timer <= it in order; returns how many fired."""
        self._watermark = timestamp
        return self._fire(self._event, timestamp, self._target.on_event_time)

    def advance_processing_time(self, timestamp: int) -> int:
        """Set processing time and fire every processing-time timer <= it in order."""
        self._processing_time = timestamp
        return self._fire(self._processing, timestamp, self._target.on_processing_time)

    def _fire(self, queue: TimerQueue, timestamp: int, callback) -> int:
        fired = 0
        set_key = self._backend.set_current_key
        peek, poll = queue.peek, queue.poll
        head = peek()
        while head is not None and head.timestamp <= timestamp:
            poll()
            set_key(head.key)
            callback(head)
            fired += 1
            head = peek()
        return fired

    def event_time_timers(self) -> Iterator[Timer]:
        return iter(self._event)

    def processing_time_timers(self) -> Iterator[Timer]:
        return iter(self._processing)

    def num_event_time_timers(self) -> int:
        return len(self._event)

    def num_processing_time_timers(self) -> int:
        return len(self._processing)

    def restore_time(self, watermark: int, processing_time: int) -> None:
        """Set the clocks a snapshot recorded (no timers fire)."""
        self._watermark = watermark
        self._processing_time = processing_time
