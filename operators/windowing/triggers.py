"""Triggers (Flink's semantics): when a window fires, purges, and how trigger state merges.

A trigger keeps its state through ``ctx.get_partitioned_state(descriptor)`` (scoped to the
window) and its timers through the context, so both live in the state backend.
"""

from __future__ import annotations

import operator
from abc import ABC, abstractmethod
from datetime import timedelta
from enum import Enum
from typing import Any

from statekit import ReducingStateDescriptor, State, StateDescriptor
from statekit.durations import to_millis



class TriggerResult(Enum):
    """What to do with a window: (fire, purge)."""

    CONTINUE = (False, False)
    FIRE_AND_PURGE = (True, True)
    FIRE = (True, False)
    PURGE = (False, True)

    def is_fire(self) -> bool:
        return self.value[0]

    def is_purge(self) -> bool:
        return self.value[1]


CONTINUE = TriggerResult.CONTINUE
FIRE = TriggerResult.FIRE
PURGE = TriggerResult.PURGE
FIRE_AND_PURGE = TriggerResult.FIRE_AND_PURGE


class TriggerContext(ABC):
    """What a trigger may use: time, timers and state, all scoped to the current key and window."""

    @abstractmethod
    def get_current_processing_time(self) -> int: ...

    @abstractmethod
    def get_current_watermark(self) -> int: ...

    @abstractmethod
    def register_processing_time_timer(self, time: int) -> None: ...

    @abstractmethod
    def register_event_time_timer(self, time: int) -> None: ...

    @abstractmethod
    def delete_processing_time_timer(self, time: int) -> None: ...

    @abstractmethod
    def delete_event_time_timer(self, time: int) -> None: ...

    @abstractmethod
    def get_partitioned_state(self, state_descriptor: StateDescriptor) -> State: ...

    def current_watermark(self) -> int:
        return self.get_current_watermark()

    def current_processing_time(self) -> int:
        return self.get_current_processing_time()


class OnMergeContext(TriggerContext):
    """The context of ``Trigger.on_merge``: trigger state of the merged windows can be merged."""

    @abstractmethod
    def merge_partitioned_state(self, state_descriptor: StateDescriptor) -> None: ...


class Trigger(ABC):
    """Decides when a window is evaluated (``on_element``, ``on_event_time``, ``on_processing_time``)."""

    TriggerContext = TriggerContext
    OnMergeContext = OnMergeContext

    timers_follow_window: bool = False
    """True when every timer the trigger registers is for a window in flight and ``clear`` deletes it
    (lets the operator drop buffered timer operations of windows born and merged within one batch)."""

    @abstractmethod
    def on_element(self, element: Any, timestamp: int | None, window: Any, ctx: TriggerContext) -> TriggerResult: ...

    @abstractmethod
    def on_processing_time(self, time: int, window: Any, ctx: TriggerContext) -> TriggerResult: ...

    @abstractmethod
    def on_event_time(self, time: int, window: Any, ctx: TriggerContext) -> TriggerResult: ...

    def can_merge(self) -> bool:
        """Whether ``on_merge`` is supported (required by merging window assigners)."""
        return False

    def on_merge(self, window: Any, ctx: OnMergeContext) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not support merging")

    @abstractmethod
    def clear(self, window: Any, ctx: TriggerContext) -> None:
        """Remove the trigger's state and timers for ``window``."""


class _EventTimeDomain:
    """A trigger's timers in event time: the watermark is its clock, and the window fires at its end."""

    def on_element(self, element: Any, timestamp: int | None, window: Any, ctx: TriggerContext) -> TriggerResult:
        """FIRE at once when the watermark has passed the window's end (a late-but-allowed element),
        else CONTINUE with a timer registered at that end."""
        max_ts = window.max_timestamp()
        if max_ts <= ctx.get_current_watermark():
            return FIRE
        ctx.register_event_time_timer(max_ts)
        return CONTINUE

    def on_processing_time(self, time: int, window: Any, ctx: TriggerContext) -> TriggerResult:
        """Processing time never fires an event-time trigger."""
        return CONTINUE

    def _now(self, ctx) -> int:
        return ctx.get_current_watermark()

    def _register(self, ctx, time: int) -> None:
        ctx.register_event_time_timer(time)

    def _delete(self, ctx, time: int) -> None:
        ctx.delete_event_time_timer(time)


class _ProcessingTimeDomain:
    """A trigger's timers in processing time."""

    def on_event_time(self, time: int, window: Any, ctx: TriggerContext) -> TriggerResult:
        """Event time never fires a processing-time trigger."""
        return CONTINUE

    def _now(self, ctx) -> int:
        return ctx.get_current_processing_time()

    def _register(self, ctx, time: int) -> None:
        ctx.register_processing_time_timer(time)

    def _delete(self, ctx, time: int) -> None:
        ctx.delete_processing_time_timer(time)


class _WindowEndTrigger(Trigger):
    """Fires when its time domain reaches the window's end (``max_timestamp``); the timer at that end is
    registered, merged and deleted through ``_now``/``_register``/``_delete`` of the domain."""

    timers_follow_window = True

    @abstractmethod
    def _now(self, ctx) -> int: ...

    @abstractmethod
    def _register(self, ctx, time: int) -> None: ...

    @abstractmethod
    def _delete(self, ctx, time: int) -> None: ...

    def clear(self, window, ctx):
        self._delete(ctx, window.max_timestamp())

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx):
        # a merged window whose end already passed fires through on_element (event time)
        max_ts = window.max_timestamp()
        if max_ts > self._now(ctx):
            self._register(ctx, max_ts)

    @classmethod
    def create(cls):
        return cls()

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class EventTimeTrigger(_EventTimeDomain, _WindowEndTrigger):
    """Fires once the watermark passes the window's end (immediately for late-but-allowed elements)."""

    def on_event_time(self, time, window, ctx):
        return FIRE if time == window.max_timestamp() else CONTINUE


class ProcessingTimeTrigger(_ProcessingTimeDomain, _WindowEndTrigger):
    """Fires when processing time reaches the window's end."""

    def on_element(self, element, timestamp, window, ctx):
        ctx.register_processing_time_timer(window.max_timestamp())
        return CONTINUE

    def on_processing_time(self, time, window, ctx):
        return FIRE


class _Untimed:
    """A trigger that registers no timers: neither time domain fires it."""

    def on_event_time(self, time: int, window: Any, ctx: TriggerContext) -> TriggerResult:
        """No timer of this trigger is ever due."""
        return CONTINUE

    def on_processing_time(self, time: int, window: Any, ctx: TriggerContext) -> TriggerResult:
        """No timer of this trigger is ever due."""
        return CONTINUE


class CountTrigger(_Untimed, Trigger):
    """Fires when the window holds ``count`` elements (counted in a reducing state), then restarts."""

    timers_follow_window = True

    def __init__(self, count: int) -> None:
        if count <= 0:
            raise ValueError(f"CountTrigger needs a positive count, got {count}")
        self.count = count
        self.state_descriptor = ReducingStateDescriptor("count", operator.add)

    @staticmethod
    def of(count: int) -> "CountTrigger":
        return CountTrigger(count)

    def on_element(self, element, timestamp, window, ctx):
        st = ctx.get_partitioned_state(self.state_descriptor)
        st.add(1)
        if st.get() >= self.count:
            st.clear()
            return FIRE
        return CONTINUE

    def clear(self, window, ctx):
        ctx.get_partitioned_state(self.state_descriptor).clear()

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx):
        ctx.merge_partitioned_state(self.state_descriptor)

    def __repr__(self) -> str:
        return f"CountTrigger({self.count})"


class PurgingTrigger(Trigger):
    """Wraps a trigger and turns each of its FIREs into FIRE_AND_PURGE."""

    def __init__(self, nested_trigger: Trigger) -> None:
        self.nested_trigger = nested_trigger
        self.timers_follow_window = nested_trigger.timers_follow_window

    @staticmethod
    def of(nested_trigger: Trigger) -> "PurgingTrigger":
        return PurgingTrigger(nested_trigger)

    @staticmethod
    def _purging(result: TriggerResult) -> TriggerResult:
        return FIRE_AND_PURGE if result is FIRE else result

    def on_element(self, element, timestamp, window, ctx):
        return self._purging(self.nested_trigger.on_element(element, timestamp, window, ctx))

    def on_event_time(self, time, window, ctx):
        return self._purging(self.nested_trigger.on_event_time(time, window, ctx))

    def on_processing_time(self, time, window, ctx):
        return self._purging(self.nested_trigger.on_processing_time(time, window, ctx))

    def clear(self, window, ctx):
        self.nested_trigger.clear(window, ctx)

    def can_merge(self) -> bool:
        return self.nested_trigger.can_merge()

    def on_merge(self, window, ctx):
        self.nested_trigger.on_merge(window, ctx)

    def __repr__(self) -> str:
        return f"PurgingTrigger({self.nested_trigger!r})"


def _java_rem(a: int, b: int) -> int:
    """Remainder truncated toward zero (Java's ``%``), which the continuous triggers align with."""
    r = abs(a) % b
    return -r if a < 0 else r


class _ContinuousTrigger(Trigger):
    """Fires every ``interval`` of one time domain (aligned to multiples of it): the next firing time is
    kept in a reducing (min) state so merged windows keep the earliest; the domain's timer is registered
    and deleted through ``_register``/``_delete``."""

    def __init__(self, interval: int) -> None:
        if interval <= 0:
            raise ValueError(f"{type(self).__name__} needs a positive interval, got {interval}")
        self.interval = interval
        self.state_descriptor = ReducingStateDescriptor("fire-time", min)

    @classmethod
    def of(cls, interval: int | timedelta | str):
        return cls(to_millis(interval, "interval"))

    @abstractmethod
    def _register(self, ctx, time: int) -> None: ...

    @abstractmethod
    def _delete(self, ctx, time: int) -> None: ...

    def _register_next(self, time: int, window, ctx, fire_state) -> None:
        nxt = min(time + self.interval, window.max_timestamp())
        fire_state.add(nxt)
        self._register(ctx, nxt)

    def _fire_if_due(self, time: int, window, ctx):
        fire_state = ctx.get_partitioned_state(self.state_descriptor)
        if fire_state.get() == time:
            fire_state.clear()
            self._register_next(time, window, ctx, fire_state)
            return FIRE
        return CONTINUE

    def _start(self, now: int, window, ctx) -> None:
        """Register the first firing time (aligned below ``now``) unless one is registered."""
        fire_state = ctx.get_partitioned_state(self.state_descriptor)
        if fire_state.get() is None:
            self._register_next(now - _java_rem(now, self.interval), window, ctx, fire_state)

    def clear(self, window, ctx):
        fire_state = ctx.get_partitioned_state(self.state_descriptor)
        ts = fire_state.get()
        if ts is not None:
            self._delete(ctx, ts)
            fire_state.clear()

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx):
        ctx.merge_partitioned_state(self.state_descriptor)
        nxt = ctx.get_partitioned_state(self.state_descriptor).get()
        if nxt is not None:
            self._register(ctx, nxt)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.interval})"


class ContinuousEventTimeTrigger(_EventTimeDomain, _ContinuousTrigger):
    """Fires every ``interval`` of event time (aligned to multiples of it) and at the window's end."""

    def on_element(self, element, timestamp, window, ctx):
        result = super().on_element(element, timestamp, window, ctx)
        if result is CONTINUE:
            self._start(timestamp, window, ctx)
        return result

    def on_event_time(self, time, window, ctx):
        if time == window.max_timestamp():
            return FIRE
        return self._fire_if_due(time, window, ctx)


class ContinuousProcessingTimeTrigger(_ProcessingTimeDomain, _ContinuousTrigger):
    """Fires every ``interval`` of processing time (aligned to multiples of it) while the window lives."""

    def on_element(self, element, timestamp, window, ctx):
        self._start(ctx.get_current_processing_time(), window, ctx)
        return CONTINUE

    def on_processing_time(self, time, window, ctx):
        return self._fire_if_due(time, window, ctx)


class NeverTrigger(_Untimed, Trigger):
    """Never fires (the default of ``GlobalWindows``)."""

    timers_follow_window = True

    def on_element(self, element, timestamp, window, ctx):
        return CONTINUE

    def clear(self, window, ctx):
        return None

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx):
        return None

    @staticmethod
    def create() -> "NeverTrigger":
        return NeverTrigger()

    def __repr__(self) -> str:
        return "NeverTrigger()"
