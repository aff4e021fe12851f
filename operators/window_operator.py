"""WindowOperator: Flink's WindowOperator / EvictingWindowOperator on the statekit state layer.

Window contents live in one state in the window's namespace: aggregating state for an
``AggregateFunction``, reducing state for a reduce callable, list state of the elements for a
``ProcessWindowFunction`` or when an evictor is set (then elements keep their timestamps).
Merging assigners keep a ``MergingWindowSet`` per key in map state. Trigger state and timers go
through the backend, so an operator is fully described by a backend snapshot plus
``snapshot_metadata()``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Iterable

from statekit import (MAX_TIMESTAMP, AggregatingStateDescriptor, KeyedStateBackend, ListStateDescriptor,
                      MapStateDescriptor, ReducingStateDescriptor, Timer, TimerTarget)

from .assigners import MergingWindowAssigner, WindowAssigner
from .batching import group_by_key
from .context import KeyedStateStore, TimerBuffer, WindowProcessContext, WindowTriggerContext
from statekit.durations import to_millis
from .evictors import Evictor, TimestampedValue
from .functions import ProcessWindowFunction
from .merging_window_set import MergingWindowSet
from .output import Output
from .triggers import CONTINUE, FIRE, FIRE_AND_PURGE, PURGE, Trigger

CONTENTS_STATE = "window-contents"
MERGING_SET_STATE = "merging-window-set"
TIMER_SERVICE = "window-timers"

_PROCESS, _AGGREGATE, _REDUCE = "process", "aggregate", "reduce"


def _function_kind(function: Any) -> str:
    if isinstance(function, ProcessWindowFunction):
        return _PROCESS
    if all(callable(getattr(function, m, None)) for m in ("create_accumulator", "add", "merge", "get_result")):
        return _AGGREGATE
    if callable(function):
        return _REDUCE
    raise TypeError(f"window function must be an AggregateFunction, a reduce callable (a, b) -> c or a "
                    f"ProcessWindowFunction, got {type(function).__name__}")


class WindowOperator(TimerTarget):
    """Windows a keyed stream: assigner + trigger (+ evictor) + function, with allowed lateness and a
    side output for late elements (``late_output_tag=None`` drops and counts them instead)."""

    def __init__(self, assigner: WindowAssigner, function: Any, window_function: ProcessWindowFunction | None = None,
                 trigger: Trigger | None = None, evictor: Evictor | None = None,
                 allowed_lateness: int | timedelta | str = 0, late_output_tag: str | None = "late") -> None:
        if not isinstance(assigner, WindowAssigner):
            raise TypeError(f"assigner must be a WindowAssigner, got {type(assigner).__name__}")
        self.assigner = assigner
        self.function = function
        self.kind = _function_kind(function)
        if window_function is not None and (self.kind == _PROCESS or not isinstance(window_function, ProcessWindowFunction)):
            raise TypeError("window_function must be a ProcessWindowFunction applied to an AggregateFunction's "
                            "or reduce function's result")
        self.window_function = window_function
        self.trigger = trigger if trigger is not None else assigner.get_default_trigger()
        self.evictor = evictor if evictor is not None else assigner.get_default_evictor()
        self.allowed_lateness = to_millis(allowed_lateness, "allowed_lateness")
        if self.allowed_lateness < 0:
            raise ValueError(f"allowed_lateness must be >= 0, got {self.allowed_lateness}")
        self.late_output_tag = late_output_tag
        self.merging = isinstance(assigner, MergingWindowAssigner)
        if self.merging and not self.trigger.can_merge():
            raise ValueError(f"{self.trigger!r} cannot be used with the merging assigner {assigner!r}: it does not support merging")
        self.event_time = assigner.is_event_time()
        self.metrics: dict[str, int] = {"records_in": 0, "late_dropped": 0, "late_side_output": 0, "windows_fired": 0}
        self._backend: KeyedStateBackend | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    def open(self, backend: KeyedStateBackend, output: Output) -> None:
        """Bind to a backend (possibly restored) and an output; resolves every state once."""
        self._backend = backend
        self._output = output
        self._collect = output.collect
        self._list_contents = self.evictor is not None or self.kind == _PROCESS
        if self._list_contents:
            desc = ListStateDescriptor(CONTENTS_STATE)
        elif self.kind == _AGGREGATE:
            desc = AggregatingStateDescriptor(CONTENTS_STATE, self.function)
        else:
            desc = ReducingStateDescriptor(CONTENTS_STATE, self.function)
        self._contents = backend.get_state(desc)
        self._mws_state = backend.get_state(MapStateDescriptor(MERGING_SET_STATE)) if self.merging else None
        self._svc = backend.timer_service(TIMER_SERVICE, self)
        self._timers = TimerBuffer(self._svc)
        self._ctx = WindowTriggerContext(backend, self._timers, self._svc)
        self._pctx = WindowProcessContext(backend, self._svc, self.merging)
        self._key: Any = None
        self._process_fn = self.function if self.kind == _PROCESS else self.window_function
        for fn in (self.function, self.window_function):
            if isinstance(fn, ProcessWindowFunction):
                fn.open(KeyedStateStore(backend))

    def close(self) -> None:
        for fn in (self.function, self.window_function):
            if isinstance(fn, ProcessWindowFunction):
                fn.close()

    def snapshot_metadata(self) -> dict:
        """What a backend snapshot does not hold: the operator's clocks."""
        return {"watermark": self._svc.current_watermark(), "processing_time": self._svc.current_processing_time()}

    def restore_metadata(self, metadata: dict) -> None:
        self._svc.restore_time(metadata["watermark"], metadata["processing_time"])

    # -- time ----------------------------------------------------------------------------------
    def current_watermark(self) -> int:
        return self._svc.current_watermark()

    def get_current_processing_time(self) -> int:
        """Processing time, as assigners read it from their context."""
        return self._svc.current_processing_time()

    def process_watermark(self, watermark: int) -> None:
        """Advance event time: fires and cleans every window whose timers are due."""
        if watermark > self._svc.current_watermark():
            self._svc.advance_watermark(watermark)

    def advance_processing_time(self, time: int) -> None:
        if time > self._svc.current_processing_time():
            self._svc.advance_processing_time(time)

    # -- elements ------------------------------------------------------------------------------
    def process_element(self, key: Any, value: Any, timestamp: int | None = None) -> None:
        self._backend.set_current_key(key)
        self._process_key(key, [(value, timestamp)])

    def process_batch(self, records: Iterable[tuple[Any, Any, int | None]]) -> None:
        """An epoch's records at the current watermark, grouped per key (same output as one by one)."""
        set_key = self._backend.set_current_key
        for key, items in group_by_key(records).items():
            set_key(key)
            self._process_key(key, items)

    def _process_key(self, key: Any, items: list) -> None:
        self.metrics["records_in"] += len(items)
        self._key = key
        timers = self._timers
        timers.buffering = True
        try:
            if self.merging:
                mws = MergingWindowSet(self.assigner, self._mws_state)
                for value, ts in items:
                    self._merging_element(mws, value, ts)
                mws.persist()
            else:
                for value, ts in items:
                    self._element(value, ts)
            timers.flush()
        finally:
            timers.buffering = False

    def _element(self, value: Any, ts: int | None) -> None:
        contents, ctx, trigger = self._contents, self._ctx, self.trigger
        wm = self._svc.current_watermark()
        elem = value if self.evictor is None else (value, ts)
        skipped = True
        for window in self.assigner.assign_windows(value, ts, self):
            if self.event_time and self._cleanup_time(window) <= wm:
                continue
            skipped = False
            contents.set_current_namespace(window)
            contents.add(elem)
            ctx.window = window
            result = trigger.on_element(value, ts, window, ctx)
            if result is not CONTINUE:
                if (result is FIRE or result is FIRE_AND_PURGE) and not self._fire(window, window):
                    continue  # nothing to fire: Flink skips purge and cleanup registration too
                if result is PURGE or result is FIRE_AND_PURGE:
                    self._purge(window)
            self._register_cleanup_timer(window)
        if skipped:
            self._late(value, ts, wm)

    def _merging_element(self, mws: MergingWindowSet, value: Any, ts: int | None) -> None:
        contents, ctx, trigger = self._contents, self._ctx, self.trigger
        wm = self._svc.current_watermark()
        elem = value if self.evictor is None else (value, ts)
        skipped = True
        for window in self.assigner.assign_windows(value, ts, self):
            actual = mws.add_window(window, self._merge)
            if self.event_time and self._cleanup_time(actual) <= wm:
                mws.retire_window(actual)
                continue
            skipped = False
            state_window = mws.mapping[actual]
            contents.set_current_namespace(state_window)
            contents.add(elem)
            ctx.window = actual
            result = trigger.on_element(value, ts, actual, ctx)
            if result is not CONTINUE:
                if (result is FIRE or result is FIRE_AND_PURGE) and not self._fire(actual, state_window):
                    continue
                if result is PURGE or result is FIRE_AND_PURGE:
                    self._purge(state_window)
            self._register_cleanup_timer(actual)
        if skipped:
            self._late(value, ts, wm)

    def _late(self, value: Any, ts: int | None, wm: int) -> None:
        """An element no window took: side-output (or count) it if it is late."""
        if self.event_time and ts + self.allowed_lateness <= wm:
            if self.late_output_tag is not None:
                self._output.side_output(self.late_output_tag, value, ts)
                self.metrics["late_side_output"] += 1
            else:
                self.metrics["late_dropped"] += 1

    def _merge(self, merge_result: Any, merged_windows: list, state_window: Any, merged_state_windows: list) -> None:
        """MergingWindowSet callback: merge trigger state, drop the merged windows' timers, merge contents."""
        if self.event_time:
            if self._cleanup_time(merge_result) <= self._svc.current_watermark():
                raise RuntimeError(f"merging into {merge_result!r} would end the window before the current watermark "
                                   f"{self._svc.current_watermark()}")
        elif merge_result.max_timestamp() <= self._svc.current_processing_time():
            raise RuntimeError(f"merging into {merge_result!r} would end the window before the current processing time")
        ctx, trigger = self._ctx, self.trigger
        ctx.window = merge_result
        ctx.merged_windows = merged_windows
        trigger.on_merge(merge_result, ctx)
        ctx.merged_windows = []
        for m in merged_windows:
            ctx.window = m
            trigger.clear(m, ctx)
            self._delete_cleanup_timer(m)
        if merged_state_windows:
            self._contents.merge_namespaces(state_window, merged_state_windows)

    # -- timers --------------------------------------------------------------------------------
    def on_event_time(self, timer: Timer) -> None:
        self._on_timer(timer, True)

    def on_processing_time(self, timer: Timer) -> None:
        self._on_timer(timer, False)

    def _on_timer(self, timer: Timer, event: bool) -> None:
        window, time = timer.namespace, timer.timestamp
        self._key = timer.key
        ctx = self._ctx
        ctx.window = window
        if self.merging:
            mws = MergingWindowSet(self.assigner, self._mws_state)
            state_window = mws.mapping.get(window)
            if state_window is None:
                return  # the window merged away or was cleaned; its trigger state is gone too
        else:
            mws = None
            state_window = window
        if event:
            result = self.trigger.on_event_time(time, window, ctx)
        else:
            result = self.trigger.on_processing_time(time, window, ctx)
        if result is FIRE or result is FIRE_AND_PURGE:
            self._fire(window, state_window)
        if result is PURGE or result is FIRE_AND_PURGE:
            self._purge(state_window)
        if event == self.event_time and time == self._cleanup_time(window):
            self._clear_all_state(window, state_window, mws)
        if mws is not None:
            mws.persist()

    def _purge(self, state_window: Any) -> None:
        self._contents.set_current_namespace(state_window)
        self._contents.clear()

    def _fire(self, window: Any, state_window: Any) -> bool:
        """Emit the window's result stamped ``window.max_timestamp()``; False when it has no contents."""
        contents = self._contents
        contents.set_current_namespace(state_window)
        data = contents.get()
        if (not data) if self._list_contents else (data is None):
            return False
        self.metrics["windows_fired"] += 1
        ts = window.max_timestamp()
        if self.evictor is not None:
            self._fire_evicting(window, data, ts)
            return True
        fn = self._process_fn
        if fn is None:
            self._collect(data, ts)
        else:
            self._process(fn, window, data if self.kind == _PROCESS else [data], ts)
        return True

    def _process(self, fn: ProcessWindowFunction, window: Any, elements: list, ts: int) -> None:
        self._pctx.set_window(window)
        self._output.collect_all(fn.process(self._key, self._pctx, elements), ts)

    def _fire_evicting(self, window: Any, data: list, ts: int) -> None:
        elements = [TimestampedValue(v, t) for v, t in data]
        ctx, evictor = self._ctx, self.evictor
        ctx.window = window
        evictor.evict_before(elements, len(elements), window, ctx)
        values = [e.value for e in elements]
        if self.kind == _PROCESS:
            self._process(self.function, window, values, ts)
        else:
            if self.kind == _AGGREGATE:
                agg = self.function
                acc = agg.create_accumulator()
                for v in values:
                    acc = agg.add(v, acc)
                result = agg.get_result(acc)
            else:
                result = None
                for v in values:
                    result = v if result is None else self.function(result, v)
            if self.window_function is None:
                self._collect(result, ts)
            else:
                self._process(self.window_function, window, [result], ts)
        evictor.evict_after(elements, len(elements), window, ctx)
        self._contents.update([(e.value, e.timestamp) for e in elements])

    def _cleanup_time(self, window: Any) -> int:
        """When a window's state is dropped: end of the window plus allowed lateness in event time."""
        max_ts = window.max_timestamp()
        if self.event_time:
            return min(max_ts + self.allowed_lateness, MAX_TIMESTAMP)
        return max_ts

    def _register_cleanup_timer(self, window: Any) -> None:
        t = self._cleanup_time(window)
        if t == MAX_TIMESTAMP:
            return
        if self.event_time:
            self._timers.register_event(window, t)
        else:
            self._timers.register_processing(window, t)

    def _delete_cleanup_timer(self, window: Any) -> None:
        t = self._cleanup_time(window)
        if t == MAX_TIMESTAMP:
            return
        if self.event_time:
            self._timers.delete_event(window, t)
        else:
            self._timers.delete_processing(window, t)

    def _clear_all_state(self, window: Any, state_window: Any, mws: MergingWindowSet | None) -> None:
        self._purge(state_window)
        self._ctx.window = window
        self.trigger.clear(window, self._ctx)
        if self._process_fn is not None:
            self._pctx.set_window(window)
            self._process_fn.clear(self._pctx)
        if mws is not None:
            mws.retire_window(window)
