"""``WindowOperator(...)`` makes the shape that fits (columnar, record path, evicting), each describing its
state as before the shapes were split (so checkpoints restore), and a window kind is one assigner that
declares its engine."""

from __future__ import annotations

import random

import pytest

from statekit import Timer
from statekit.operators import (CountEvictor, CountTrigger, DynamicEventTimeSessionWindows, EventTimeSessionWindows,
                                EventTimeTrigger,
                                ProcessingTimeSessionWindows, RowAggregate, SlidingEventTimeWindows,
                                SlidingProcessingTimeWindows, TumblingEventTimeWindows, TumblingProcessingTimeWindows,
                                WindowOperator, count_window)
from statekit.operators.engines.aligned_engine import AlignedEngine
from statekit.operators.windowing.assigners import _FixedWindows
from statekit.operators.windowing.columnar_window import ColumnarWindowOperator
from statekit.operators.windowing.evicting_window import EvictingWindowOperator
from statekit.operators.windowing.record_window import RecordWindowOperator
from statekit.operators.engines.session_engine import SessionEngine
from statekit.operators.engines.session_table import SessionTable
from statekit.operators.engines.window_engine import EngineSpec
from statekit.operators.windows import TimeWindow
from tests.operators_support import KeyedWindowResult, Sum, add, make_harness

COUNT = lambda: RowAggregate([("count", None), ("sum", 1)])  # noqa: E731

SHAPES = [
    # (assigner, function, options, shape, its engine, the layout describe() records)
    (lambda: EventTimeSessionWindows(10), COUNT, {}, ColumnarWindowOperator, SessionEngine, "sessions-per-key"),
    (lambda: EventTimeSessionWindows(10), COUNT, {"state_layout": "table"}, ColumnarWindowOperator, SessionTable,
     "session-table"),
    (lambda: TumblingEventTimeWindows(10), Sum, {}, ColumnarWindowOperator, AlignedEngine, "windows-per-key"),
    (lambda: SlidingEventTimeWindows(20, 10), lambda: add, {}, ColumnarWindowOperator, AlignedEngine, "windows-per-key"),
    (lambda: EventTimeSessionWindows(10), COUNT, {"columnar": False}, RecordWindowOperator, None, "window-namespaces"),
    (lambda: TumblingEventTimeWindows(10), KeyedWindowResult, {}, RecordWindowOperator, None, "window-namespaces"),
    (lambda: TumblingEventTimeWindows(10), Sum, {"trigger": CountTrigger.of(2)}, RecordWindowOperator, None,
     "window-namespaces"),
    (lambda: TumblingProcessingTimeWindows(10), Sum, {}, RecordWindowOperator, None, "window-namespaces"),
    (lambda: SlidingProcessingTimeWindows(20, 10), Sum, {}, RecordWindowOperator, None, "window-namespaces"),
    (lambda: ProcessingTimeSessionWindows(10), Sum, {}, RecordWindowOperator, None, "window-namespaces"),
    # an event-time trigger does not make processing-time windows the engines' (they read event time)
    (lambda: TumblingProcessingTimeWindows(10), Sum, {"trigger": EventTimeTrigger()}, RecordWindowOperator, None,
     "window-namespaces"),
    (lambda: ProcessingTimeSessionWindows(10), Sum, {"trigger": EventTimeTrigger()}, RecordWindowOperator, None,
     "window-namespaces"),
    (lambda: DynamicEventTimeSessionWindows(lambda v: 10), Sum, {}, RecordWindowOperator, None, "window-namespaces"),
    (lambda: EventTimeSessionWindows(10), Sum, {"evictor": CountEvictor.of(2)}, EvictingWindowOperator, None,
     "window-namespaces"),
    (lambda: count_window(3, slide=1), Sum, {}, EvictingWindowOperator, None, "window-namespaces"),
    (lambda: count_window(3), Sum, {}, RecordWindowOperator, None, "window-namespaces"),
]


@pytest.mark.parametrize("assigner, function, options, shape, engine, layout", SHAPES)
def test_the_shape_that_fits(assigner, function, options, shape, engine, layout, tmp_path):
    op = WindowOperator(assigner(), function(), **options)
    assert type(op) is shape
    assert op.describe()["state"]["layout"] == layout
    make_harness(op, "heap", tmp_path)  # opened: the engine made
    if engine is not None:
        assert type(op._engine) is engine


@pytest.mark.parametrize("assigner, function", [(lambda: TumblingEventTimeWindows(10), COUNT),
                                                (lambda: EventTimeSessionWindows(10), Sum),
                                                (lambda: EventTimeSessionWindows(10), KeyedWindowResult)])
def test_a_table_only_of_packed_sessions(assigner, function):
    with pytest.raises(ValueError, match="state_layout='table' takes event-time session windows"):
        WindowOperator(assigner(), function(), state_layout="table")
    with pytest.raises(ValueError, match=r"state_layout must be one of \('cells', 'table'\), got 'rows'"):
        WindowOperator(assigner(), function(), state_layout="rows")


class EveryTen(_FixedWindows):
    """A new window kind: tumbling windows of ten from a shifted origin, declaring the aligned engine."""

    def _windows(self, ts: int) -> list[TimeWindow]:
        start = ts - (ts - 7) % 10
        return [TimeWindow(start, start + 10)]

    def columnar_engine(self, layout: str) -> EngineSpec | None:
        return EngineSpec(AlignedEngine, (10, 10, 7)) if layout == "cells" else None


def test_a_window_kind_is_an_assigner_declaring_its_engine(tmp_path):
    columnar, reference = (make_harness(WindowOperator(EveryTen(), COUNT(), columnar=c, allowed_lateness=5), "heap",
                                        tmp_path) for c in (True, False))
    assert type(columnar.operator) is ColumnarWindowOperator and type(columnar.operator._engine) is AlignedEngine
    rnd = random.Random(3)
    wm = 0
    for _ in range(6):
        records = [(f"k{rnd.randrange(4)}", (None, rnd.randrange(100)), wm + rnd.randrange(-12, 30)) for _ in range(20)]
        wm += rnd.randrange(5, 25)
        for h in (columnar, reference):
            h.process_batch(records)
            h.process_watermark(wm)
        got, expected = columnar.output(), reference.output()
        assert sorted(map(repr, got)) == sorted(map(repr, expected))
        assert columnar.side_output("late") == reference.side_output("late")
    assert columnar.operator.metrics["windows_fired"] > 10 and columnar.operator.metrics == reference.operator.metrics


def test_a_columnar_operator_takes_no_timer_one_by_one(tmp_path):
    op = make_harness(WindowOperator(TumblingEventTimeWindows(10), Sum()), "heap", tmp_path).operator
    with pytest.raises(RuntimeError, match="windows-per-key windows are event-time windows: a processing-time timer"):
        op.on_processing_time(Timer(5, "k", TimeWindow(0, 10)))
    with pytest.raises(RuntimeError, match="take their timers in bulk when the watermark advances"):
        op.on_event_time(Timer(5, "k", TimeWindow(0, 10)))
