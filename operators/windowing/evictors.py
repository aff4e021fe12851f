"""Evictors (Flink's semantics): remove elements of a firing window before and/or after the function runs.

``elements`` is a list of ``TimestampedValue`` that an evictor edits in place; what remains is
written back to the window's state.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import timedelta
from typing import Any, NamedTuple

from statekit.durations import to_millis


class TimestampedValue(NamedTuple):
    """A window element with the timestamp it arrived with (None for processing-time input)."""

    value: Any
    timestamp: int | None

    def get_value(self) -> Any:
        return self.value

    def get_timestamp(self) -> int | None:
        return self.timestamp

    def has_timestamp(self) -> bool:
        return self.timestamp is not None


class Evictor(ABC):
    """Edits a firing window's elements; ``ctx`` offers ``get_current_watermark()`` and
    ``get_current_processing_time()``."""

    @abstractmethod
    def evict_before(self, elements: list[TimestampedValue], size: int, window: Any, ctx: Any) -> None: ...

    @abstractmethod
    def evict_after(self, elements: list[TimestampedValue], size: int, window: Any, ctx: Any) -> None: ...


class CountEvictor(Evictor):
    """Keeps the last ``max_count`` elements (before the function runs, or after it with ``do_evict_after``)."""

    def __init__(self, max_count: int, do_evict_after: bool = False) -> None:
        if max_count < 0:
            raise ValueError(f"CountEvictor needs max_count >= 0, got {max_count}")
        self.max_count = max_count
        self.do_evict_after = do_evict_after

    @staticmethod
    def of(max_count: int, do_evict_after: bool = False) -> "CountEvictor":
        return CountEvictor(max_count, do_evict_after)

    def _evict(self, elements: list, size: int) -> None:
        if size > self.max_count:
            del elements[:size - self.max_count]

    def evict_before(self, elements, size, window, ctx):
        if not self.do_evict_after:
            self._evict(elements, size)

    def evict_after(self, elements, size, window, ctx):
        if self.do_evict_after:
            self._evict(elements, size)

    def __repr__(self) -> str:
        return f"CountEvictor({self.max_count}, do_evict_after={self.do_evict_after})"


class TimeEvictor(Evictor):
    """Keeps the elements newer than ``window_size`` before the newest element's timestamp."""

    def __init__(self, window_size: int, do_evict_after: bool = False) -> None:
        self.window_size = window_size
        self.do_evict_after = do_evict_after

    @staticmethod
    def of(window_size: int | timedelta | str, do_evict_after: bool = False) -> "TimeEvictor":
        return TimeEvictor(to_millis(window_size, "window_size"), do_evict_after)

    def _evict(self, elements: list) -> None:
        if not elements or elements[0].timestamp is None:
            return
        cutoff = max(e.timestamp for e in elements) - self.window_size
        elements[:] = [e for e in elements if e.timestamp > cutoff]

    def evict_before(self, elements, size, window, ctx):
        if not self.do_evict_after:
            self._evict(elements)

    def evict_after(self, elements, size, window, ctx):
        if self.do_evict_after:
            self._evict(elements)

    def __repr__(self) -> str:
        return f"TimeEvictor({self.window_size}, do_evict_after={self.do_evict_after})"
