"""Timer service (Flink's InternalTimerService): event- and processing-time timers per (key, namespace).

Timers are ordered by one byte string, ``timer_sort_key``: timestamp (sign-flipped big-endian),
key group, key bytes, namespace bytes. Every backend fires timers in that order, so the heap and
RocksDB backends produce identical output, and RocksDB can keep timers sorted on disk as is.
The firing logic lives here once; backends supply only a ``TimerQueue``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Iterator, NamedTuple, Protocol, Sequence

from .serialization import KEY_SERIALIZER, loads_prefix
from .state import ResolvedKey


_TS_BIAS = 1 << 63
_NS_CACHE_LIMIT = 1 << 14
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

    def poll_until(self, timestamp: int) -> list[Timer]:
        """Remove and return every timer due at ``timestamp`` (<=), in firing order."""
        due = []
        head = self.peek()
        while head is not None and head.timestamp <= timestamp:
            due.append(self.poll())
            head = self.peek()
        return due

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def __iter__(self) -> Iterator[Timer]:
        """All timers in firing order."""

    @abstractmethod
    def clear(self) -> None: ...


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
        self._ns_bytes: dict[Any, bytes] = {}

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
        nsb = self._ns_bytes.get(namespace)
        if nsb is None:
            nsb = self._namespace_bytes(namespace)
        return (timer_sort_key(timestamp, kg, kb, nsb), Timer(timestamp, key, namespace))

    def _namespace_bytes(self, namespace: Any) -> bytes:
        """Serialized namespace, cached: a window's timer is registered and deleted with the same namespace."""
        cache = self._ns_bytes
        if len(cache) >= _NS_CACHE_LIMIT:
            cache.clear()
        nsb = cache[namespace] = KEY_SERIALIZER.dumps(namespace)
        return nsb

    def _sort_keys(self, keys: Sequence[ResolvedKey], namespace: Any, timestamps: Sequence[int]) -> Iterator[tuple[bytes, Timer]]:
        nsb = self._ns_bytes.get(namespace)
        if nsb is None:
            nsb = self._namespace_bytes(namespace)
        for (key, kg, kb), ts in zip(keys, timestamps):
            if type(ts) is not int or not MIN_TIMESTAMP <= ts <= MAX_TIMESTAMP:
                raise ValueError(f"timer service '{self.name}': timestamp must be an int64, got {ts!r}")
            yield timer_sort_key(ts, kg, kb, nsb), Timer(ts, key, namespace)

    def register_event_time_timers(self, keys: Sequence[ResolvedKey], namespace: Any, timestamps: Sequence[int]) -> None:
        """``register_event_time_timer(namespace, timestamps[i])`` under each ``keys[i]``, in one call."""
        add = self._event.add
        for sort_key, timer in self._sort_keys(keys, namespace, timestamps):
            add(sort_key, timer)

    def delete_event_time_timers(self, keys: Sequence[ResolvedKey], namespace: Any, timestamps: Sequence[int]) -> None:
        """``delete_event_time_timer(namespace, timestamps[i])`` under each ``keys[i]``, in one call."""
        remove = self._event.remove
        for sort_key, _ in self._sort_keys(keys, namespace, timestamps):
            remove(sort_key)

    def take_due_event_time(self, watermark: int) -> list[Timer]:
        """Set the watermark and remove every event-time timer due at it, returning them in firing
        order instead of firing them: for an operator that handles an epoch's timers in bulk."""
        self._watermark = watermark
        return self._event.poll_until(watermark)

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
