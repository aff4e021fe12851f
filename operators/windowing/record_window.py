"""RecordWindowOperator: Flink's ``WindowOperator`` record by record, for every assigner, trigger and function.

Window contents live in one state in the window's namespace: the accumulator (or reduced value) of an
``AggregateFunction`` / reduce callable as a value, or the list of elements for a ``ProcessWindowFunction``
(``operators.windowing.evicting_window`` keeps elements with their timestamps). Accumulators of the current key are
cached while its records (or one timer) are processed and written once at the end, so an epoch costs one
read and one write per touched window and key. Merging assigners keep a ``MergingWindowSet`` per key in the
void namespace.
"""

from __future__ import annotations

from typing import Any, Iterable

from statekit import MAX_TIMESTAMP, InvalidKeyError, KeyedStateBackend, ListStateDescriptor, Timer, ValueStateDescriptor

from ..batching import group_by_key
from ..output import Output
from .context import TimerBuffer, WindowTriggerContext
from .internal_functions import ABSENT
from .merging_window_set import MergingWindowSet
from .triggers import CONTINUE, FIRE, FIRE_AND_PURGE, PURGE
from .window_base import BaseWindowOperator

CONTENTS_STATE = "window-contents"
MERGING_SET_STATE = "merging-window-set"


class RecordWindowOperator(BaseWindowOperator):
    """Windows taken record by record (see ``BaseWindowOperator``); ``WindowOperator(...)`` makes one
    for what the columnar engines do not run (and with ``columnar=False``, for comparisons)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lists = self.fn.keeps_elements
        """Whether a window's contents are its elements (a list state) rather than an accumulator."""

    def window_layout(self) -> str:
        return "window-namespaces"

    def open(self, backend: KeyedStateBackend, output: Output) -> None:
        """Bind to a backend (possibly restored) and an output; resolves every state once."""
        desc = (ListStateDescriptor(CONTENTS_STATE) if self._lists
                else self._versioned(ValueStateDescriptor(CONTENTS_STATE), lambda migrate: migrate))
        self._contents = backend.get_state(desc)
        self._mws_state = backend.get_state(ValueStateDescriptor(MERGING_SET_STATE)) if self.merging else None
        self._contents_ns: Any = None
        self._accs: dict = {}
        self._dirty: set = set()
        super().open(backend, output)
        self._timers = TimerBuffer(self._svc)
        self._ctx = WindowTriggerContext(backend, self._timers, self._svc)

    def _element(self, value: Any, ts: int | None) -> Any:
        """What a list of window contents keeps of an element."""
        return value

    # -- elements ------------------------------------------------------------------------------
    def process_batch(self, records: Iterable[tuple[Any, Any, int | None]]) -> None:
        """An epoch's records at the current watermark, grouped per key (same output as one by one)."""
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
                    self._one(value, ts)
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

    def _one(self, value: Any, ts: int | None) -> None:
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
        if self._lists:
            self._scope(state_window)
            self._contents.add(self._element(value, ts))
            return
        self._accs[state_window] = self.fn.add(value, self._accumulator(state_window))
        self._dirty.add(state_window)

    def _scope(self, state_window: Any) -> None:
        """Point the contents state at ``state_window`` (skipped when it already is: a RocksDB state
        encodes the namespace on every change)."""
        if state_window is not self._contents_ns:
            self._contents.set_current_namespace(state_window)
            self._contents_ns = state_window

    def _accumulator(self, state_window: Any) -> Any:
        """The cached accumulator of ``state_window`` under the current key (read on first use)."""
        acc = self._accs.get(state_window, ABSENT)
        if acc is ABSENT and state_window not in self._accs:
            self._scope(state_window)
            stored = self._contents.get_internal()
            acc = ABSENT if stored is None else stored
            self._accs[state_window] = acc
        return acc

    def _merge_contents(self, target: Any, sources: list) -> None:
        """Flink's ``mergeNamespaces``: sources merged in order, then into the target; sources cleared."""
        if self._lists:
            self._contents.merge_namespaces(target, sources)
            return
        merge = self.fn.merge
        merged = ABSENT
        for src in sources:
            if src == target:
                continue
            acc = self._accumulator(src)
            if acc is ABSENT:
                continue
            merged = acc if merged is ABSENT else merge(merged, acc)
            self._accs[src] = ABSENT
            self._dirty.add(src)
        if merged is not ABSENT:
            acc = self._accumulator(target)
            self._accs[target] = merged if acc is ABSENT else merge(acc, merged)
            self._dirty.add(target)

    def _flush_accumulators(self) -> None:
        """Write the changed accumulators of the current key and forget the cache."""
        contents, accs = self._contents, self._accs
        for sw in self._dirty:
            self._scope(sw)
            acc = accs[sw]
            if acc is ABSENT:
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
        if self._lists:
            self._scope(state_window)
            self._contents.clear()
        else:
            self._accs[state_window] = ABSENT
            self._dirty.add(state_window)

    def _fire(self, window: Any, state_window: Any) -> bool:
        """Emit the window's result stamped ``window.max_timestamp()``; False when it has no contents."""
        if self._lists:
            self._scope(state_window)
            contents = self._contents.get()
            if not contents:
                return False
        else:
            contents = self._accumulator(state_window)
            if contents is ABSENT:
                return False
        self.metrics["windows_fired"] += 1
        self._emit(window, contents, window.max_timestamp())
        return True

    def _emit(self, window: Any, contents: Any, ts: int) -> None:
        """A firing window's results out, stamped ``ts``: ``contents`` is its accumulator or its elements."""
        self.fn.emit(window, contents, ts)

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
            self.fn.clear(self._pctx)
        if mws is not None:
            mws.retire_window(window)
