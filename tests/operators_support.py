"""Shared helpers of the operator tests: functions, harness construction, output helpers."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings

from statekit import AggregateFunction, StateConfig, ValueStateDescriptor
from statekit.operators import KeyedProcessFunction, ProcessWindowFunction
from statekit.operators.testing import OperatorHarness
from statekit.testing.contract import Concat, SumCount  # noqa: F401  (SumCount: re-exported for the operator tests)

_dirs = itertools.count()


def make_harness(op: Any, backend: str, tmp_path: Path, key_groups: Any = None, open_: bool = True,
                 snapshot: bytes | None = None) -> OperatorHarness:
    """A harness for ``op`` on ``backend`` with its own local dir; restored from ``snapshot`` if given."""
    cfg = StateConfig(backend=backend, local_dir=str(tmp_path / f"h{next(_dirs)}"))
    h = OperatorHarness(op, cfg, key_groups=key_groups)
    if snapshot is not None:
        h.restore(snapshot)
    if open_:
        h.open()
    return h


class Sum(AggregateFunction):
    def create_accumulator(self):
        return 0

    def add(self, value, accumulator):
        return accumulator + value

    def merge(self, acc_a, acc_b):
        return acc_a + acc_b

    def get_result(self, accumulator):
        return accumulator


def add(a, b):
    return a + b


class KeyedWindowResult(ProcessWindowFunction):
    """Yields (key, start, end, value) for an aggregate/reduce result, or (key, start, end, elements)."""

    def __init__(self, fold: bool = False) -> None:
        self.fold = fold

    def process(self, key, context, elements):
        w = context.window
        elements = list(elements)
        yield (key, w.start, w.end, elements[0] if self.fold else elements)


def by_time(records: list) -> list:
    """Output sorted by (timestamp, repr(value)) for records that fire at the same time on several keys."""
    return sorted(records, key=lambda r: (r[1], repr(r[0])))


class ListAgg(Concat):
    """Keeps elements in arrival/merge order: any change in the order of add/merge calls shows."""

    def get_result(self, accumulator):
        return tuple(accumulator)


def per_key(records: list) -> dict:
    """Records grouped by the key in ``value[0]``, order kept."""
    out: dict = {}
    for value, ts in records:
        out.setdefault(value[0], []).append((value, ts))
    return out


def window_variants() -> dict:
    """Event-time operator factories covering assigners, triggers, evictors and function kinds.

    Every result value starts with the key, so outputs can be compared per key.
    """
    from statekit.operators import (ContinuousEventTimeTrigger, CountEvictor, CountTrigger, EventTimeSessionWindows,
                           PurgingTrigger, SlidingEventTimeWindows, TimeEvictor, TumblingEventTimeWindows,
                           WindowOperator)

    keyed = KeyedWindowResult
    return {
        "session-agg-lateness": lambda: WindowOperator(EventTimeSessionWindows.with_gap(10), function=ListAgg(),
                                                       window_function=keyed(fold=True), allowed_lateness=5),
        "session-evictor-process": lambda: WindowOperator(EventTimeSessionWindows.with_gap(10), function=keyed(),
                                                          evictor=CountEvictor.of(3)),
        "session-count-trigger": lambda: WindowOperator(EventTimeSessionWindows.with_gap(8), function=ListAgg(),
                                                        window_function=keyed(fold=True), trigger=CountTrigger.of(3),
                                                        allowed_lateness=4),
        "tumbling-count-reduce": lambda: WindowOperator(TumblingEventTimeWindows.of(20), function=add,
                                                        window_function=keyed(fold=True),
                                                        trigger=CountTrigger.of(2)),
        "tumbling-purging-time-evictor": lambda: WindowOperator(
            TumblingEventTimeWindows.of(20), function=keyed(), trigger=PurgingTrigger.of(CountTrigger.of(3)),
            evictor=TimeEvictor.of(5), allowed_lateness=10),
        "sliding-agg-lateness": lambda: WindowOperator(SlidingEventTimeWindows.of(30, 10), function=ListAgg(),
                                                       window_function=keyed(fold=True), allowed_lateness=10),
        "continuous-event-time": lambda: WindowOperator(TumblingEventTimeWindows.of(20), function=ListAgg(),
                                                        window_function=keyed(fold=True),
                                                        trigger=ContinuousEventTimeTrigger.of(7),
                                                        allowed_lateness=3),
    }


def fresh_stretch(*harnesses: Any) -> int:
    """Move every harness to a watermark 1000 past the first one's, so each hypothesis example starts on
    a fresh stretch of time, and drop what that fired; returns the watermark."""
    wm = harnesses[0].operator.current_watermark()
    wm = 1000 if wm < 0 else wm + 1000
    for h in harnesses:
        h.process_watermark(wm)
        h.output(), h.side_output("late")
    return wm


class CountWithTimer(KeyedProcessFunction):
    count = ValueStateDescriptor("count", default=0)

    def open(self, context):
        self.state = context.get_state(self.count)

    def process_element(self, value, ctx):
        self.state.update(self.state.value() + 1)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)
        yield (ctx.get_current_key(), value, self.state.value())

    def on_timer(self, timestamp, ctx):
        yield (ctx.get_current_key(), "timer", self.state.value())
        self.state.clear()


def differential(backend_name: str, heap: int, rocksdb: int) -> settings:
    """Hypothesis settings of a differential test: ``heap`` examples on the heap backend, ``rocksdb`` on RocksDB
    (each example costs more there), no deadline, slow data generation allowed."""
    return settings(max_examples=heap if backend_name == "heap" else rocksdb, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
