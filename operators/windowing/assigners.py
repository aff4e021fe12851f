"""Window assigners (Flink's formulas): which windows an element belongs to, their default trigger, and the
columnar engine (if any) that runs them with that trigger."""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import timedelta
from typing import Any, Callable

from statekit.durations import to_millis

from ..engines.aligned_engine import AlignedEngine
from ..engines.session_engine import SessionEngine
from ..engines.session_table import SessionTable
from ..engines.window_engine import EngineSpec
from ..windows import GLOBAL_WINDOW, TimeWindow
from .evictors import CountEvictor, Evictor
from .triggers import (CountTrigger, EventTimeTrigger, NeverTrigger, ProcessingTimeTrigger, PurgingTrigger,
                       Trigger)

Duration = int | timedelta | str


class WindowAssigner(ABC):
    """Assigns windows to elements; ``context.get_current_processing_time()`` serves processing-time assigners."""

    @abstractmethod
    def assign_windows(self, element: Any, timestamp: int | None, context: Any) -> list: ...

    @abstractmethod
    def get_default_trigger(self) -> Trigger: ...

    @abstractmethod
    def is_event_time(self) -> bool: ...

    def get_default_evictor(self) -> Evictor | None:
        """The evictor an operator uses when none is given (only count windows have one)."""
        return None

    def columnar_engine(self, layout: str) -> EngineSpec | None:
        """The engine that runs these windows columnar, stored in ``layout`` (one of ``STATE_LAYOUTS``),
        with the default event-time trigger, no evictor and an incremental function; None: the record
        path only. A subclass whose windows differ from its base's must say None (or its own engine)."""
        return None


class MergingWindowAssigner(WindowAssigner):
    """An assigner whose windows merge (sessions)."""

    merges_intersecting_time_windows: bool = False
    """True when ``merge_windows`` is ``TimeWindow.merge_windows`` (enables a direct merge in MergingWindowSet)."""

    @abstractmethod
    def merge_windows(self, windows: list, callback: Callable[[list, Any], None]) -> None:
        """Call ``callback(to_be_merged, merge_result)`` for every group of windows to merge."""


def _event_timestamp(timestamp: int | None, assigner: WindowAssigner) -> int:
    if timestamp is None:
        raise ValueError(f"{type(assigner).__name__} is an event-time assigner: the element needs a timestamp")
    return timestamp


class _OnEventTime:
    """An assigner over event time: the element's timestamp, fired by an EventTimeTrigger."""

    def _time(self, timestamp: int | None, context: Any) -> int:
        return _event_timestamp(timestamp, self)

    def get_default_trigger(self) -> Trigger:
        return EventTimeTrigger()

    def is_event_time(self) -> bool:
        return True


class _FixedWindows(_OnEventTime, WindowAssigner):
    """Windows computed from one time alone (``_windows(ts)``), not merged."""

    @abstractmethod
    def _windows(self, ts: int) -> list[TimeWindow]: ...

    def assign_windows(self, element, timestamp, context):
        return self._windows(self._time(timestamp, context))


class TumblingEventTimeWindows(_FixedWindows):
    """Fixed-size, non-overlapping event-time windows: ``start = ts - (ts - offset) mod size``."""

    def __init__(self, size: int, offset: int = 0) -> None:
        if size <= 0 or abs(offset) >= size:
            raise ValueError(f"{type(self).__name__} needs size > 0 and abs(offset) < size, got size={size}, offset={offset}")
        self.size = size
        self.offset = offset

    @classmethod
    def of(cls, size: Duration, offset: Duration = 0):
        return cls(to_millis(size, "size"), to_millis(offset, "offset"))

    def _windows(self, ts: int) -> list[TimeWindow]:
        start = ts - (ts - self.offset) % self.size
        return [TimeWindow(start, start + self.size)]

    def columnar_engine(self, layout: str) -> EngineSpec | None:
        return EngineSpec(AlignedEngine, (self.size, self.size, self.offset)) if layout == "cells" else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.size}, offset={self.offset})"


class _OnProcessingTime:
    """Turns an event-time assigner (which reads time through ``_time``) into its processing-time twin:
    windows of the operator's processing time when the element arrives, fired by a ProcessingTimeTrigger."""

    def _time(self, timestamp: int | None, context: Any) -> int:
        return context.get_current_processing_time()

    def get_default_trigger(self) -> Trigger:
        return ProcessingTimeTrigger()

    def is_event_time(self) -> bool:
        return False

    def columnar_engine(self, layout: str) -> EngineSpec | None:
        return None  # the engines are event-time ones


class TumblingProcessingTimeWindows(_OnProcessingTime, TumblingEventTimeWindows):
    """Tumbling windows over the operator's processing time when the element arrives."""


class SlidingEventTimeWindows(_FixedWindows):
    """Windows of ``size`` every ``slide``; an element is in every window that overlaps it (latest first)."""

    def __init__(self, size: int, slide: int, offset: int = 0) -> None:
        if size <= 0 or slide <= 0 or abs(offset) >= slide:
            raise ValueError(f"{type(self).__name__} needs size > 0, slide > 0 and abs(offset) < slide, "
                             f"got size={size}, slide={slide}, offset={offset}")
        self.size = size
        self.slide = slide
        self.offset = offset

    @classmethod
    def of(cls, size: Duration, slide: Duration, offset: Duration = 0):
        return cls(to_millis(size, "size"), to_millis(slide, "slide"), to_millis(offset, "offset"))

    def _windows(self, ts: int) -> list[TimeWindow]:
        size, slide = self.size, self.slide
        start = ts - (ts - self.offset) % slide
        lowest = ts - size
        out = []
        while start > lowest:
            out.append(TimeWindow(start, start + size))
            start -= slide
        return out

    def columnar_engine(self, layout: str) -> EngineSpec | None:
        return EngineSpec(AlignedEngine, (self.size, self.slide, self.offset)) if layout == "cells" else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.size}, {self.slide}, offset={self.offset})"


class SlidingProcessingTimeWindows(_OnProcessingTime, SlidingEventTimeWindows):
    """Sliding windows over the operator's processing time when the element arrives."""


class _SessionWindows(_OnEventTime, MergingWindowAssigner):
    """Session windows: each element opens [t, t + gap); intersecting (or touching) windows merge."""

    merges_intersecting_time_windows = True

    def merge_windows(self, windows, callback):
        TimeWindow.merge_windows(windows, callback)



class EventTimeSessionWindows(_SessionWindows):
    """Event-time sessions with a fixed gap."""

    def __init__(self, gap: int) -> None:
        if gap <= 0:
            raise ValueError(f"{type(self).__name__} needs a gap > 0, got {gap}")
        self.gap = gap

    @classmethod
    def with_gap(cls, gap: Duration):
        return cls(to_millis(gap, "gap"))

    def assign_windows(self, element, timestamp, context):
        t = self._time(timestamp, context)
        return [TimeWindow(t, t + self.gap)]

    def columnar_engine(self, layout: str) -> EngineSpec | None:
        return EngineSpec(SessionTable if layout == "table" else SessionEngine, (self.gap,))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.gap})"


class DynamicEventTimeSessionWindows(_SessionWindows):
    """Event-time sessions whose gap comes from each element (a callable, or an object with ``extract``)."""

    def __init__(self, extractor: Callable[[Any], Duration] | Any) -> None:
        self.extractor = extractor
        self._extract = extractor.extract if hasattr(extractor, "extract") else extractor

    @classmethod
    def with_dynamic_gap(cls, extractor):
        return cls(extractor)

    def assign_windows(self, element, timestamp, context):
        gap = to_millis(self._extract(element), "session gap")
        if gap <= 0:
            raise ValueError(f"dynamic session gap must be > 0, got {gap} for element {element!r}")
        t = self._time(timestamp, context)
        return [TimeWindow(t, t + gap)]


class ProcessingTimeSessionWindows(_OnProcessingTime, EventTimeSessionWindows):
    """Processing-time sessions with a fixed gap."""


class DynamicProcessingTimeSessionWindows(_OnProcessingTime, DynamicEventTimeSessionWindows):
    """Processing-time sessions whose gap comes from each element."""


class GlobalWindows(WindowAssigner):
    """Every element goes into the one ``GlobalWindow``; the default trigger never fires."""

    @classmethod
    def create(cls) -> "GlobalWindows":
        return cls()

    def assign_windows(self, element, timestamp, context):
        return [GLOBAL_WINDOW]

    def get_default_trigger(self) -> Trigger:
        return NeverTrigger()

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "GlobalWindows()"


class _CountWindows(GlobalWindows):
    """``GlobalWindows`` carrying the trigger (and evictor) of a count window."""

    def __init__(self, size: int, slide: int | None) -> None:
        if size <= 0 or (slide is not None and slide <= 0):
            raise ValueError(f"count windows need size > 0 and slide > 0, got size={size}, slide={slide}")
        self.size = size
        self.slide = slide

    def get_default_trigger(self) -> Trigger:
        if self.slide is None:
            return PurgingTrigger(CountTrigger(self.size))
        return CountTrigger(self.slide)

    def get_default_evictor(self) -> Evictor | None:
        return None if self.slide is None else CountEvictor(self.size)

    def __repr__(self) -> str:
        return f"count_window({self.size}, slide={self.slide})"


def count_window(size: int, slide: int | None = None) -> GlobalWindows:
    """An assigner for count windows, to pass to ``WindowOperator``: tumbling (GlobalWindows +
    PurgingTrigger(CountTrigger(size))) or sliding (GlobalWindows + CountEvictor(size) + CountTrigger(slide))."""
    return _CountWindows(size, slide)
