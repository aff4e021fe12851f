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
from operator import itemgetter
from typing import Any, Iterable, Sequence

import numpy as np

from statekit import (MAX_TIMESTAMP, AggregateFunction, InvalidKeyError, KeyedStateBackend, ListStateDescriptor, Timer,
                      ValueStateDescriptor)
from statekit.descriptors import qualified_name
from statekit.durations import to_millis

from .assigners import EventTimeSessionWindows, MergingWindowAssigner, WindowAssigner
from .batching import group_by_key
from .columns import factorize, out_of_order_keys, session_segments
from .context import KeyedStateStore, TimerBuffer, WindowProcessContext, WindowTriggerContext
from .evictors import Evictor, TimestampedValue
from .functions import ProcessWindowFunction
from .invalid import MAX_EVENT_TIMESTAMP, MIN_EVENT_TIMESTAMP, InvalidRecord, error
from .merging_window_set import MergingWindowSet
from .operator import KeyedOperator
from .output import Output
from .triggers import CONTINUE, FIRE, FIRE_AND_PURGE, PURGE, EventTimeTrigger, Trigger
from .windows import TimeWindow

CONTENTS_STATE = "window-contents"
MERGING_SET_STATE = "merging-window-set"
TIMER_SERVICE = "window-timers"

_PROCESS, _AGGREGATE, _REDUCE = "process", "aggregate", "reduce"
_ABSENT = object()
_bounds = itemgetter(0, 1)


def _function_kind(function: Any) -> str:
    if isinstance(function, ProcessWindowFunction):
        return _PROCESS
    if all(callable(getattr(function, m, None)) for m in ("create_accumulator", "add", "merge", "get_result")):
        return _AGGREGATE
    if callable(function):
        return _REDUCE
    raise TypeError(f"window function must be an AggregateFunction, a reduce callable (a, b) -> c or a "
                    f"ProcessWindowFunction, got {type(function).__name__}")


class WindowOperator(KeyedOperator):
    """Windows a keyed stream: assigner + trigger (+ evictor) + function, with allowed lateness and a
    side output for late elements (``late_output_tag=None`` drops and counts them instead).

    Invalid records (see ``operators.invalid``) raise ``InvalidRecordError``, or go to the
    ``invalid_output_tag`` side output as ``InvalidRecord`` and are counted in ``metrics["invalid"]``.
    An exception out of ``process_batch`` fails the epoch: restore the backend from the last
    committed checkpoint before going on (``CheckpointStore.restore`` notices the changed state)."""

    def __init__(self, assigner: WindowAssigner, function: Any, window_function: ProcessWindowFunction | None = None,
                 trigger: Trigger | None = None, evictor: Evictor | None = None,
                 allowed_lateness: int | timedelta | str = 0, late_output_tag: str | None = "late",
                 invalid_output_tag: str | None = None) -> None:
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
        self._sessions_fast = (self.merging and assigner.merges_intersecting_time_windows and self.event_time
                               and type(self.trigger) is EventTimeTrigger and self.evictor is None
                               and self.kind != _PROCESS)
        self.metrics: dict[str, int] = {"records_in": 0, "late_dropped": 0, "late_side_output": 0, "windows_fired": 0,
                                    "invalid": 0}
        self._backend: KeyedStateBackend | None = None

    def describe(self) -> dict[str, Any]:
        layout = (self.function.state_layout() if isinstance(self.function, AggregateFunction)
                  else qualified_name(self.function))
        return {"state": {"operator": "WindowOperator", "assigner": type(self.assigner).__name__,
                          "function": layout, "kind": self.kind,
                          "window_function": None if self.window_function is None else qualified_name(self.window_function),
                          "trigger": type(self.trigger).__name__,
                          "evictor": None if self.evictor is None else type(self.evictor).__name__},
                "parameters": {"assigner": repr(self.assigner), "trigger": repr(self.trigger),
                               "allowed_lateness": self.allowed_lateness}}

    # -- lifecycle -----------------------------------------------------------------------------
    def open(self, backend: KeyedStateBackend, output: Output) -> None:
        """Bind to a backend (possibly restored) and an output; resolves every state once."""
        self._backend = backend
        self._output = output
        self._collect = output.collect
        self._list_contents = self.evictor is not None or self.kind == _PROCESS
        desc = ListStateDescriptor(CONTENTS_STATE) if self._list_contents else ValueStateDescriptor(CONTENTS_STATE)
        self._contents = backend.get_state(desc)
        self._contents_ns: Any = None
        self._accs: dict = {}
        self._dirty: set = set()
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

    def close(self) -> None:
        for fn in (self.function, self.window_function):
            if isinstance(fn, ProcessWindowFunction):
                fn.close()

    # -- elements ------------------------------------------------------------------------------
    def process_batch(self, records: Iterable[tuple[Any, Any, int | None]]) -> None:
        """An epoch's records at the current watermark, grouped per key (same output as one by one)."""
        set_key = self._backend.set_current_key
        for key, items in group_by_key(records, self._invalid, self.event_time).items():
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

        Event-time sessions with an AggregateFunction that implements ``accumulate`` take a
        vectorized path: each key's records are cut into session segments and aggregated in one
        numpy pass (``operators.columns``), so the session bookkeeping costs per segment, not per
        record. Keys with a record that could be late or fire at once (its own window not after
        the watermark), keys whose records arrive out of time order (the record path's merges then
        depend on arrival order) and bad records keep the record path, in arrival order, first."""
        accumulate = getattr(self.function, "accumulate", None)
        ts = np.asarray(timestamps)
        vectorized = (self._sessions_fast and self.kind == _AGGREGATE and accumulate is not None
                      and type(self.assigner) is EventTimeSessionWindows and ts.dtype.kind == "i")
        codes = None
        if vectorized:
            try:
                codes, distinct = factorize(keys)
            except TypeError:  # an unhashable key: the record path names it
                pass
        if codes is None:
            self.process_batch(list(zip(keys, zip(*columns), ts.tolist())))
            return
        gap = self.assigner.gap
        slow = (ts + (gap - 1) <= self._svc.current_watermark()) | (ts < MIN_EVENT_TIMESTAMP) | (ts > MAX_EVENT_TIMESTAMP)
        slow_keys = np.zeros(len(distinct), dtype=bool)
        slow_keys[codes[slow]] = True
        slow_keys[out_of_order_keys(codes, ts)] = True
        set_key = self._backend.set_current_key
        if slow_keys.any():
            # a key the backend refuses joins the record path, so refused records keep its order
            for code in np.flatnonzero(~slow_keys).tolist():
                try:
                    set_key(distinct[code])
                except InvalidKeyError:
                    slow_keys[code] = True
            by_key = slow_keys[codes]
            rows = np.flatnonzero(by_key).tolist()
            self.process_batch([(keys[i], tuple(c[i] for c in columns), int(ts[i])) for i in rows])
            fast = np.flatnonzero(~by_key)
        else:
            fast = np.arange(len(codes))
        if not len(fast):
            return
        seg = session_segments(codes, ts, fast, gap)
        accs = accumulate(columns, seg.order, seg.starts)
        codes_, lows, highs, counts = seg.codes, seg.lows, seg.highs, seg.counts
        i, n = 0, len(codes_)
        while i < n:
            code = codes_[i]
            j = i + 1
            while j < n and codes_[j] == code:
                j += 1
            key = distinct[code]
            try:
                set_key(key)
            except InvalidKeyError as e:
                for r in np.flatnonzero(codes == code).tolist():
                    self._invalid((key, tuple(c[r] for c in columns), int(ts[r])), "key", str(e))
                i = j
                continue
            self._process_key(key, sum(counts[i:j]), list(zip(lows[i:j], highs[i:j], accs[i:j])), True)
            i = j

    def _invalid(self, record: tuple, field: str, reason: str) -> None:
        """A record that cannot be processed: raise, or side-output and count it."""
        if self.invalid_output_tag is None:
            raise error(record, field, reason)
        self.metrics["invalid"] += 1
        self._output.side_output(self.invalid_output_tag, InvalidRecord(*record, field, reason), None)

    def _process_key(self, key: Any, count: int, items: list, segments: bool = False) -> None:
        """One key's ``items``: records, or with ``segments`` (start, end, accumulator) session segments."""
        self.metrics["records_in"] += count
        self._key = key
        timers = self._timers
        timers.buffering = True
        try:
            if segments:
                self._session_segments(items)
            elif self._sessions_fast:
                self._session_records(items)
            elif self.merging:
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

    def _session_records(self, items: list) -> None:
        """One key's records for event-time sessions with the EventTimeTrigger and an incremental
        function, with the generic path's semantics (same merges, contents, output and final
        timers) but plain-int session bookkeeping.

        Sessions are ``[start, end, state_window, window_or_None, touched]``. The timer operations
        of the generic path reduce to their net effect, applied at the end: the timers of loaded
        windows that merged away are deleted; every window that took an element gets its trigger
        timer (if its end is after the watermark) and its cleanup timer; windows born and merged
        within the batch never had timers.
        """
        mws = MergingWindowSet(self.assigner, self._mws_state)
        wm = self._svc.current_watermark()
        lateness = self.allowed_lateness
        assigner = self.assigner
        gap = assigner.gap if type(assigner) is EventTimeSessionWindows else None
        accs, dirty, accumulator = self._accs, self._dirty, self._accumulator
        fn = self.function
        aggregate = self.kind == _AGGREGATE
        if aggregate:
            agg_add, create = fn.add, fn.create_accumulator
        sessions = [[w[0], w[1], sw, w, False] for w, sw in mws.mapping.items()]
        bounds = [0, 0]
        fixed = [bounds]            # reused for fixed gaps: no allocation per record
        for _, value, ts in items:
            if gap is None or ts is None:
                news = assigner.assign_windows(value, ts, self)
            else:
                bounds[0] = ts
                bounds[1] = ts + gap
                news = fixed
            skipped = True
            for start, end in news:
                hit = None
                more = None
                for sess in sessions:
                    if sess[0] <= end and sess[1] >= start:
                        if hit is None:
                            hit = sess
                        elif more is None:
                            more = [sess]
                        else:
                            more.append(sess)
                if hit is None:
                    hit = [start, end, None, None, False]
                    sessions.append(hit)
                elif more is None:
                    if start < hit[0] or end > hit[1]:
                        if start > hit[0]:
                            start = hit[0]
                        if end < hit[1]:
                            end = hit[1]
                        if end - 1 + lateness <= wm:
                            self._check_merge(start, end, wm)
                        hit[0], hit[1], hit[3] = start, end, None
                else:
                    group = sorted([hit] + more, key=lambda x: (x[0], x[1]))
                    start = min(start, group[0][0])
                    end = max([end] + [g[1] for g in group])
                    self._check_merge(start, end, wm)
                    hit = group[0]
                    for g in group[1:]:
                        sessions.remove(g)
                    self._merge_contents(hit[2], [g[2] for g in group[1:]])
                    hit[0], hit[1], hit[3] = start, end, None
                max_ts = hit[1] - 1
                cleanup = max_ts + lateness
                if cleanup > MAX_TIMESTAMP:
                    cleanup = MAX_TIMESTAMP
                if cleanup <= wm:
                    sessions.remove(hit)
                    continue
                skipped = False
                sw = hit[2]
                if sw is None:
                    sw = hit[2] = hit[3] = TimeWindow(hit[0], hit[1])
                acc = accs.get(sw, _ABSENT)
                if acc is _ABSENT:
                    acc = accumulator(sw)
                if aggregate:
                    acc = agg_add(value, create() if acc is _ABSENT else acc)
                else:
                    acc = value if acc is _ABSENT else fn(acc, value)
                accs[sw] = acc
                dirty.add(sw)
                hit[4] = True
                if max_ts <= wm:
                    if hit[3] is None:
                        hit[3] = TimeWindow(hit[0], hit[1])
                    self._fire(hit[3], sw)
            if skipped:
                self._late(value, ts, wm)
        self._session_timers(mws, sessions, wm)

    def _session_segments(self, segments: list) -> None:
        """One key's session segments (start, end, accumulator), in time order, none of them reaching
        back to the watermark: the state, timers and mapping ``_session_records`` leaves for their records.

        A segment's first record picks the session its records end up in: the earliest session its
        own window touches, else a new one whose state window is that record's window; every other
        session the segment touches merges into it."""
        mws = MergingWindowSet(self.assigner, self._mws_state)
        gap = self.assigner.gap
        accs, dirty, merge = self._accs, self._dirty, self.function.merge
        sessions = [[w[0], w[1], sw, w, False] for w, sw in mws.mapping.items()]
        for lo, hi, acc in segments:
            group = [s for s in sessions if s[0] <= hi and s[1] >= lo]
            if len(group) > 1:
                group.sort(key=_bounds)
            if group and group[0][0] <= lo + gap:
                target, others = group[0], group[1:]
                sw = target[2]
                current = self._accumulator(sw)
                accs[sw] = acc if current is _ABSENT else merge(current, acc)
            else:
                sw = TimeWindow(lo, lo + gap)
                target, others = [lo, lo + gap, sw, sw, False], group
                sessions.append(target)
                accs[sw] = acc
            dirty.add(sw)
            if others:
                for g in others:
                    sessions.remove(g)
                self._merge_contents(sw, [g[2] for g in others])
            start, end = min(lo, target[0]), max(hi, target[1])
            for g in others:
                start, end = min(start, g[0]), max(end, g[1])
            if start != target[0] or end != target[1]:
                target[0], target[1], target[3] = start, end, None
            target[4] = True
        self._session_timers(mws, sessions, self._svc.current_watermark())

    def _check_merge(self, start: int, end: int, wm: int) -> None:
        if min(end - 1 + self.allowed_lateness, MAX_TIMESTAMP) <= wm:
            raise RuntimeError(f"merging into {TimeWindow(start, end)!r} would end the window before the "
                               f"current watermark {wm}")

    def _session_timers(self, mws: MergingWindowSet, sessions: list, wm: int) -> None:
        """Persist the sessions as the mapping and buffer the net timer operations of the batch."""
        lateness, buffer = self.allowed_lateness, self._timers.buffer_event
        mapping = {}
        for sess in sessions:
            w = sess[3]
            if w is None:
                w = sess[3] = TimeWindow(sess[0], sess[1])
            mapping[w] = sess[2]
        for w in mws.initial:
            if w not in mapping:
                max_ts = w[1] - 1
                buffer(w, max_ts, False)
                cleanup = min(max_ts + lateness, MAX_TIMESTAMP)
                if cleanup != MAX_TIMESTAMP:
                    buffer(w, cleanup, False)
        for sess in sessions:
            if sess[4]:
                w = sess[3]
                max_ts = w[1] - 1
                if max_ts > wm:
                    buffer(w, max_ts, True)
                cleanup = min(max_ts + lateness, MAX_TIMESTAMP)
                if cleanup != MAX_TIMESTAMP:
                    buffer(w, cleanup, True)
        mws.mapping = mapping
        mws.persist()

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
        if self._sessions_fast:
            self._session_timer(timer)
        else:
            self._on_timer(timer, True)

    def _session_timer(self, timer: Timer) -> None:
        """``_on_timer`` for the ``_session_records`` configuration, with EventTimeTrigger's
        on_event_time (fire at the window's end) and clear (delete that timer) inlined."""
        window, time = timer.namespace, timer.timestamp
        mws = MergingWindowSet(self.assigner, self._mws_state)
        state_window = mws.mapping.get(window)
        if state_window is None:
            return
        self._key = timer.key
        max_ts = window[1] - 1
        if time == max_ts:
            self._fire(window, state_window)
        if time == self._cleanup_time(window):
            self._purge(state_window)
            if max_ts != time:
                self._svc.delete_event_time_timer(window, max_ts)
            if self._clears_window_state:
                self._pctx.set_window(window)
                self._process_fn.clear(self._pctx)
            mws.retire_window(window)
            mws.persist()
        self._flush_accumulators()

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
