"""WindowOperator: Flink's WindowOperator / EvictingWindowOperator on the statekit state layer.

Window contents live in one state in the window's namespace: the accumulator (or reduced value)
of an ``AggregateFunction`` / reduce callable as a value, or the list of elements for a
``ProcessWindowFunction`` or when an evictor is set (then elements keep their timestamps).
Accumulators of the current key are cached while its records (or one timer) are processed and
written once at the end, so an epoch costs one read and one write per touched window and key.
Merging assigners keep a ``MergingWindowSet`` per key in the void namespace. Trigger state and
timers go through the backend, so an operator is fully described by a backend snapshot plus
``snapshot_metadata()``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from statekit import (MAX_TIMESTAMP, AggregateFunction, ColumnarAggregate, InvalidKeyError, KeyedStateBackend,
                      ListStateDescriptor, PackedAggregate, StateDescriptor, Timer, ValueStateDescriptor)
from statekit.descriptors import Migration, qualified_name
from statekit.durations import to_millis

from .aggregates import RowAggregate
from .aligned_engine import AlignedEngine
from .assigners import (EventTimeSessionWindows, MergingWindowAssigner, SlidingEventTimeWindows,
                        TumblingEventTimeWindows, WindowAssigner)
from .batching import group_by_key
from .columns import RowView
from .window_engine import WindowEngine, WindowSink
from .context import KeyedStateStore, TimerBuffer, WindowProcessContext, WindowTriggerContext
from .evictors import Evictor, TimestampedValue
from .functions import ProcessWindowFunction, WindowColumnsFunction, WindowRowsFunction, window_columns, window_rows
from .invalid import InvalidRecord, error
from .merging_window_set import MergingWindowSet
from .operator import KeyedOperator
from .output import Output
from .packed_cells import PackedCells
from .cell_engine import CellEngine
from .session_engine import SessionEngine
from .session_table import TABLE_STATE, SessionTable, page_sessions
from .triggers import CONTINUE, FIRE, FIRE_AND_PURGE, PURGE, EventTimeTrigger, Trigger
from .windows import TimeWindow

CONTENTS_STATE = "window-contents"
MERGING_SET_STATE = "merging-window-set"
TIMER_SERVICE = "window-timers"

_PROCESS, _AGGREGATE, _REDUCE = "process", "aggregate", "reduce"
_ABSENT = object()
_ENGINES: dict[type, type[CellEngine]] = {EventTimeSessionWindows: SessionEngine, TumblingEventTimeWindows: AlignedEngine,
                                          SlidingEventTimeWindows: AlignedEngine}
"""The engine of each event-time assigner with one (``columnar``)."""
_BOUNDS = {engine.STATE: engine.BOUNDS for engine in _ENGINES.values()}
STATE_LAYOUTS = ("cells", "table")
"""How columnar windows are stored: a cell per key (``cells``), or, for event-time sessions of a
PackedAggregate, every key's sessions as one columnar table stored in pages per key group (``table``)."""


def state_layout_of(description: dict[str, Any] | None) -> str | None:
    """The one of STATE_LAYOUTS a WindowOperator described by ``description`` (its ``describe()``, as a
    checkpoint records it) stores its windows in; None without a description."""
    if not isinstance(description, dict):
        return None
    return "table" if description.get("state", {}).get("layout") == SessionTable.LAYOUT else "cells"


def readable_state(description: dict[str, Any] | None, state: str, value: Any) -> Any:
    """A value a WindowOperator described by ``description`` (its ``describe()``) stored in ``state``, as
    people read it: a packed cell of a RowAggregate in the list form ``[timer, *bounds, accumulator, ...]``
    (a session's bounds: start and end; an aligned window's: start); a session-table page as
    ``[[key, start, end, accumulator], ...]``; anything else as it is (a user's own PackedAggregate cannot
    be rebuilt offline)."""
    if (state not in _BOUNDS and state != TABLE_STATE) or type(value) is not bytes or not isinstance(description, dict):
        return value
    function = RowAggregate.from_layout(description.get("state", {}).get("function"))
    if function is None:
        return value
    if state == TABLE_STATE:
        return page_sessions(value, function, function.version)
    return PackedCells(function, _BOUNDS[state]).unpack_version(value, function.version)


def _function_kind(function: Any) -> str:
    if isinstance(function, ProcessWindowFunction):
        return _PROCESS
    if all(callable(getattr(function, m, None)) for m in ("create_accumulator", "add", "merge", "get_result")):
        return _AGGREGATE
    if callable(function):
        return _REDUCE
    raise TypeError(f"window function must be an AggregateFunction, a reduce callable (a, b) -> c or a "
                    f"ProcessWindowFunction, got {type(function).__name__}")


class WindowOperator(KeyedOperator, WindowSink):
    """Windows a keyed stream: assigner + trigger (+ evictor) + function, with allowed lateness and a
    side output for late elements (``late_output_tag=None`` drops and counts them instead).

    Invalid records (see ``operators.invalid``) raise ``InvalidRecordError``, or go to the
    ``invalid_output_tag`` side output as ``InvalidRecord`` and are counted in ``metrics["invalid"]``.
    Event-time sessions, tumbling and sliding windows with the default trigger, no evictor and an
    incremental function run columnar, on one stored value per key (``operators.session_engine``,
    ``operators.aligned_engine``); ``columnar=False`` keeps them on the generic record path, which gives
    the same results (for comparisons and benchmarks).
    An exception out of ``process_batch`` fails the epoch: restore the backend from the last
    committed checkpoint before going on (``CheckpointStore.restore`` notices the changed state)."""

    def __init__(self, assigner: WindowAssigner, function: Any, window_function: ProcessWindowFunction | None = None,
                 trigger: Trigger | None = None, evictor: Evictor | None = None,
                 allowed_lateness: int | timedelta | str = 0, late_output_tag: str | None = "late",
                 invalid_output_tag: str | None = None, columnar: bool = True, state_layout: str = "cells") -> None:
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
        self.invalid_output_tag = invalid_output_tag
        self.merging = isinstance(assigner, MergingWindowAssigner)
        if self.merging and not self.trigger.can_merge():
            raise ValueError(f"{self.trigger!r} cannot be used with the merging assigner {assigner!r}: it does not support merging")
        self.event_time = assigner.is_event_time()
        self._engine_type = (_ENGINES.get(type(assigner)) if columnar and type(self.trigger) is EventTimeTrigger
                             and self.evictor is None and self.kind != _PROCESS else None)
        if state_layout not in STATE_LAYOUTS:
            raise ValueError(f"state_layout must be one of {STATE_LAYOUTS}, got {state_layout!r}")
        if state_layout == "table":
            if self._engine_type is not SessionEngine or self._packed() is None:
                raise ValueError("state_layout='table' takes event-time session windows with the default trigger, "
                                 "no evictor, columnar=True and a PackedAggregate function (such as RowAggregate)")
            self._engine_type = SessionTable
        self.metrics: dict[str, int] = {"records_in": 0, "late_dropped": 0, "late_side_output": 0, "windows_fired": 0,
                                        "invalid": 0, "state_migrated": 0}
        self._backend: KeyedStateBackend | None = None
        self._engine: WindowEngine | None = None

    def describe(self) -> dict[str, Any]:
        fn = self.function
        layout = fn.state_layout() if isinstance(fn, AggregateFunction) else qualified_name(fn)
        acc = self._accumulating()
        version = acc.accumulator_version() if acc is not None else 1
        return {"state": {"operator": "WindowOperator", "assigner": type(self.assigner).__name__,
                          "function": layout, "kind": self.kind,
                          **({"version": version} if version > 1 else {}),  # as recorded before versions existed
                          "window_function": None if self.window_function is None else qualified_name(self.window_function),
                          "trigger": type(self.trigger).__name__,
                          "evictor": None if self.evictor is None else type(self.evictor).__name__,
                          "layout": "window-namespaces" if self._engine_type is None else self._engine_type.LAYOUT},
                "parameters": {"assigner": repr(self.assigner), "trigger": repr(self.trigger),
                               "allowed_lateness": self.allowed_lateness},
                "migration": acc is not None and acc.accumulator_migration() is not None}

    # -- lifecycle -----------------------------------------------------------------------------
    def open(self, backend: KeyedStateBackend, output: Output) -> None:
        """Bind to a backend (possibly restored) and an output; resolves every state once."""
        self._backend = backend
        self._output = output
        self._collect = output.collect
        self._list_contents = self.evictor is not None or self.kind == _PROCESS
        self._contents_ns: Any = None
        self._accs: dict = {}
        self._dirty: set = set()
        if self._engine_type is not None:
            self._contents = self._mws_state = None
        else:
            desc = (ListStateDescriptor(CONTENTS_STATE) if self._list_contents
                    else self._versioned(ValueStateDescriptor(CONTENTS_STATE), lambda migrate: migrate))
            self._contents = backend.get_state(desc)
            self._mws_state = backend.get_state(ValueStateDescriptor(MERGING_SET_STATE)) if self.merging else None
        self._svc = backend.timer_service(TIMER_SERVICE, self)
        self._timers = TimerBuffer(self._svc)
        self._ctx = WindowTriggerContext(backend, self._timers, self._svc)
        self._pctx = WindowProcessContext(backend, self._svc, self.merging)
        self._key: Any = None
        self._process_fn = self.function if self.kind == _PROCESS else self.window_function
        fn_type = type(self._process_fn)
        self._clears_window_state = self._process_fn is not None and fn_type.clear is not ProcessWindowFunction.clear
        for fn in (self.function, self.window_function):
            if isinstance(fn, ProcessWindowFunction):
                fn.open(KeyedStateStore(backend))
        self._engine: WindowEngine | None = None
        engine = self._engine_type
        if engine is not None:
            packed = self._packed()
            state = backend.get_state(self._versioned(ValueStateDescriptor(engine.STATE),
                                                      lambda migrate: engine.cell_migration(migrate, packed)))
            self._engine = engine(*self._window_shape(), self.allowed_lateness, backend, state, self._svc, self,
                                  *self._incremental(), self.metrics, self._clears_window_state, packed)

    def _window_shape(self) -> tuple[int, ...]:
        """What the engine's windows are made of: a session's gap; aligned windows' size, slide and offset."""
        a = self.assigner
        if isinstance(a, EventTimeSessionWindows):
            return (a.gap,)
        return a.size, a.slide if isinstance(a, SlidingEventTimeWindows) else a.size, a.offset

    def _accumulating(self) -> AggregateFunction | None:
        """The AggregateFunction whose accumulators this operator stores (and versions), if any."""
        fn = self.function
        return fn if self.kind == _AGGREGATE and isinstance(fn, AggregateFunction) else None

    def _packed(self) -> PackedAggregate | None:
        """The function when its accumulators pack (the session engine then stores packed cells)."""
        fn = self._accumulating()
        return fn if isinstance(fn, PackedAggregate) else None

    def _versioned(self, descriptor: StateDescriptor, lift: Callable[[Migration], Migration]) -> StateDescriptor:
        """``descriptor`` of a state holding the function's accumulators, at their version, with their
        migration (``lift`` applies an accumulator migration to the state's values); each migrated
        accumulator (a window's) counts in ``metrics["state_migrated"]``."""
        fn = self._accumulating()
        if fn is None:
            return descriptor
        migrate = fn.accumulator_migration()
        if migrate is None:
            return descriptor.with_version(fn.accumulator_version())

        def counted(version: int, accumulator: Any) -> Any:
            self.metrics["state_migrated"] += 1
            return migrate(version, accumulator)
        return descriptor.with_version(fn.accumulator_version(), lift(counted))

    def _incremental(self) -> tuple:
        """``add(value, accumulator or None)`` and ``merge(a, b)`` of the window function."""
        fn = self.function
        if self.kind == _AGGREGATE:
            create, add = fn.create_accumulator, fn.add
            return (lambda value, acc: add(value, create() if acc is None else acc)), fn.merge
        return (lambda value, acc: value if acc is None else fn(acc, value)), fn

    # -- WindowSink (the engine's results) -------------------------------------------------------
    def fire_window(self, key: Any, window: TimeWindow, accumulator: Any) -> None:
        self._key = key
        self.metrics["windows_fired"] += 1
        data = self.function.get_result(accumulator) if self.kind == _AGGREGATE else accumulator
        if self.window_function is None:
            self._collect(data, window.max_timestamp())
        else:
            self._backend.set_current_key(key)
            self._process(self.window_function, window, [data], window.max_timestamp())

    def fire_windows(self, keys: list, starts: list, ends: list, accumulators: list) -> None:
        wf = self.window_function
        if wf is not None and not isinstance(wf, WindowRowsFunction):
            for key, start, end, acc in zip(keys, starts, ends, accumulators):
                self.fire_window(key, TimeWindow(start, end), acc)
            return
        self.metrics["windows_fired"] += len(keys)
        data = list(map(self.function.get_result, accumulators)) if self.kind == _AGGREGATE else accumulators
        values = data if wf is None else window_rows(wf, keys, starts, ends, data)
        self._output.collect_many(values, [end - 1 for end in ends])  # each window's max_timestamp()

    def fire_windows_packed(self, keys: list, starts: np.ndarray, ends: np.ndarray, words: np.ndarray) -> None:
        """Results as columns straight from the packed words when the function computes them so and the
        window function (if any) makes columns; else ``fire_windows`` of the unpacked accumulators."""
        fn, wf = self._packed(), self.window_function
        fields = fn.result_columns_packed(words) if wf is None or isinstance(wf, WindowColumnsFunction) else None
        if not fields:
            self.fire_windows(keys, starts.tolist(), ends.tolist(), fn.unpack(words))
            return
        self.metrics["windows_fired"] += len(keys)
        columns = fields if wf is None else window_columns(wf, keys, starts, ends, fields)
        self._output.collect_columns(columns, ends - 1)  # each window's max_timestamp()

    def clear_window(self, key: Any, window: TimeWindow) -> None:
        self._backend.set_current_key(key)
        self._pctx.set_window(window)
        self._process_fn.clear(self._pctx)

    def late_record(self, value: Any, timestamp: int) -> None:
        self._late(value, timestamp, self._svc.current_watermark())

    def invalid_record(self, record: tuple, field: str, reason: str) -> None:
        self._invalid(record, field, reason)

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
        for fn in (self.function, self.window_function):
            if isinstance(fn, ProcessWindowFunction):
                fn.close()

    # -- elements ------------------------------------------------------------------------------
    def process_batch(self, records: Iterable[tuple[Any, Any, int | None]]) -> None:
        """An epoch's records at the current watermark, grouped per key (same output as one by one)."""
        if self._engine is not None:
            records = records if isinstance(records, list) else list(records)
            self._engine.process([r[0] for r in records], [r[2] for r in records], lambda i: records[i][1], None)
            return
        set_key = self._backend.set_current_key
        for items in group_by_key(records, self._invalid, self.event_time).values():
            key = items[0][0]
            try:
                set_key(key)
            except InvalidKeyError as e:
                for rec in items:
                    self._invalid(rec, "key", str(e))
                continue
            self._process_key(key, len(items), items)

    def process_columns(self, keys: Sequence[Any], timestamps: Sequence[int], columns: Sequence[Sequence[Any]]) -> None:
        """An epoch's records as columns: record i is ``(keys[i], tuple(c[i] for c in columns),
        timestamps[i])``; the same results, side outputs, state and timers as ``process_batch`` of them.

        Columnar windows go to their engine as columns; an AggregateFunction that implements
        ``accumulate`` is then applied to whole runs of rows at once. Keys and columns may be Arrow
        arrays: the engine then makes Python values only of what it hands to Python code."""
        if self._engine is None:
            super().process_columns(keys, timestamps, columns)
            return
        fn = self.function
        rows = RowView(columns)
        fold = None if not isinstance(fn, ColumnarAggregate) else (lambda order, starts: fn.accumulate(rows.python(), order, starts))
        packed = self._packed()
        fold_packed = None if packed is None else (lambda order, starts: packed.accumulate_packed(columns, order, starts))
        self._engine.process(keys, np.asarray(timestamps), rows, fold, fold_packed)

    def process_watermark(self, watermark: int) -> None:
        if self._engine is None:
            super().process_watermark(watermark)
        else:
            self._engine.advance(watermark)

    def _invalid(self, record: tuple, field: str, reason: str) -> None:
        """A record that cannot be processed: raise, or side-output and count it."""
        if self.invalid_output_tag is None:
            raise error(record, field, reason)
        self.metrics["invalid"] += 1
        self._output.side_output(self.invalid_output_tag, InvalidRecord(*record, field, reason), None)

    def _process_key(self, key: Any, count: int, items: list) -> None:
        """One key's records."""
        self.metrics["records_in"] += count
        self._key = key
        timers = self._timers
        timers.buffering = True
        try:
            if self.merging:
                mws = MergingWindowSet(self.assigner, self._mws_state)
                if self.trigger.timers_follow_window:
                    timers.known = mws.initial
                for _, value, ts in items:
                    self._merging_element(mws, value, ts)
                mws.persist()
            else:
                for _, value, ts in items:
                    self._element(value, ts)
            self._flush_accumulators()
            timers.flush()
        except BaseException as e:
            # nothing buffered for this key may leak into the next one
            self._accs.clear()
            self._dirty.clear()
            timers.discard()
            e.add_note(f"while processing the records of key {key!r}")
            raise
        finally:
            timers.buffering = False
            timers.known = None

    def _element(self, value: Any, ts: int | None) -> None:
        ctx, trigger = self._ctx, self.trigger
        wm = self._svc.current_watermark()
        skipped = True
        for window in self.assigner.assign_windows(value, ts, self):
            if self.event_time and self._cleanup_time(window) <= wm:
                continue
            skipped = False
            self._add(window, value, ts)
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
        ctx, trigger = self._ctx, self.trigger
        wm = self._svc.current_watermark()
        skipped = True
        for window in self.assigner.assign_windows(value, ts, self):
            actual = mws.add_window(window, self._merge)
            if self.event_time and self._cleanup_time(actual) <= wm:
                mws.retire_window(actual)
                continue
            skipped = False
            state_window = mws.mapping[actual]
            self._add(state_window, value, ts)
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
            self._merge_contents(state_window, merged_state_windows)

    # -- window contents -----------------------------------------------------------------------
    def _add(self, state_window: Any, value: Any, ts: int | None) -> None:
        if self._list_contents:
            self._scope(state_window)
            self._contents.add(value if self.evictor is None else (value, ts))
            return
        acc = self._accumulator(state_window)
        if self.kind == _AGGREGATE:
            agg = self.function
            acc = agg.add(value, agg.create_accumulator() if acc is _ABSENT else acc)
        else:
            acc = value if acc is _ABSENT else self.function(acc, value)
        self._accs[state_window] = acc
        self._dirty.add(state_window)

    def _scope(self, state_window: Any) -> None:
        """Point the contents state at ``state_window`` (skipped when it already is: a RocksDB state
        encodes the namespace on every change)."""
        if state_window is not self._contents_ns:
            self._contents.set_current_namespace(state_window)
            self._contents_ns = state_window

    def _accumulator(self, state_window: Any) -> Any:
        """The cached accumulator of ``state_window`` under the current key (read on first use)."""
        acc = self._accs.get(state_window, _ABSENT)
        if acc is _ABSENT and state_window not in self._accs:
            self._scope(state_window)
            stored = self._contents.get_internal()
            acc = _ABSENT if stored is None else stored
            self._accs[state_window] = acc
        return acc

    def _merge_contents(self, target: Any, sources: list) -> None:
        """Flink's ``mergeNamespaces``: sources merged in order, then into the target; sources cleared."""
        if self._list_contents:
            self._contents.merge_namespaces(target, sources)
            return
        merge = self.function.merge if self.kind == _AGGREGATE else self.function
        merged = _ABSENT
        for src in sources:
            if src == target:
                continue
            acc = self._accumulator(src)
            if acc is _ABSENT:
                continue
            merged = acc if merged is _ABSENT else merge(merged, acc)
            self._accs[src] = _ABSENT
            self._dirty.add(src)
        if merged is not _ABSENT:
            acc = self._accumulator(target)
            self._accs[target] = merged if acc is _ABSENT else merge(acc, merged)
            self._dirty.add(target)

    def _flush_accumulators(self) -> None:
        """Write the changed accumulators of the current key and forget the cache."""
        contents, accs = self._contents, self._accs
        for sw in self._dirty:
            self._scope(sw)
            acc = accs[sw]
            if acc is _ABSENT:
                contents.clear()
            else:
                contents.update_internal(acc)
        self._dirty.clear()
        accs.clear()

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
        self._timers.start_firing(event, window, time)
        try:
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
        finally:
            self._timers.end_firing()
        if mws is not None:
            mws.persist()
        self._flush_accumulators()

    def _purge(self, state_window: Any) -> None:
        if self._list_contents:
            self._scope(state_window)
            self._contents.clear()
        else:
            self._accs[state_window] = _ABSENT
            self._dirty.add(state_window)

    def _fire(self, window: Any, state_window: Any) -> bool:
        """Emit the window's result stamped ``window.max_timestamp()``; False when it has no contents."""
        if self._list_contents:
            self._scope(state_window)
            data = self._contents.get()
            if not data:
                return False
        else:
            acc = self._accumulator(state_window)
            if acc is _ABSENT:
                return False
            data = self.function.get_result(acc) if self.kind == _AGGREGATE else acc
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
        if self._clears_window_state:
            self._pctx.set_window(window)
            self._process_fn.clear(self._pctx)
        if mws is not None:
            mws.retire_window(window)
