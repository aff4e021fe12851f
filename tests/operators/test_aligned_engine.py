"""The aligned-window engine (``operators.engines.aligned_engine``) against the window operator's generic record path.

Event-time tumbling and sliding windows (with offsets) with the EventTimeTrigger and an incremental
function go through the engine, fed as columns (``process_columns``) or records (``process_batch``);
the same operator with ``columnar=False`` takes the generic path (a window namespace per accumulator,
a trigger and a cleanup timer per window, one record at a time). Both must give the same results in
the same order, the same late and invalid outputs and metrics, and leave nothing behind, on every
backend: order-sensitive functions (first/last, concatenation), out-of-order records, late records
and late-but-allowed re-fires included.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import example, given, strategies as st

from statekit.jobs.sessionize import SessionRows
from statekit.operators import (ProcessWindowFunction, RowAggregate, SlidingEventTimeWindows, TumblingEventTimeWindows,
                                Output, WindowOperator)
from statekit.operators.engines import aligned_engine
from statekit.operators.engines.aligned_engine import AlignedEngine
from statekit.operators.windowing.columnar_window import ColumnarWindowOperator
from statekit.operators.windowing.record_window import RecordWindowOperator
from tests.operators.test_session_engine import HALVES, KEYS, PACKED, WIDE, columns_of, concat, harness, run_epochs
from tests.operators_support import Concat, KeyedWindowResult, differential

ASSIGNERS = {
    "tumbling": lambda: TumblingEventTimeWindows(10, offset=3),
    "sliding": lambda: SlidingEventTimeWindows(25, 10, offset=-4),  # 2 or 3 windows per record
}
FUNCTIONS = {
    "row-aggregate": lambda: (RowAggregate(WIDE), None),  # -0.0 floats: list cells
    "concat": lambda: (Concat(), None),
    "reduce": lambda: (concat, None),
    "window-function": lambda: (RowAggregate([("first", 1), ("last", 1), ("count", None)]), KeyedWindowResult()),
    "packed": lambda: (RowAggregate(WIDE), None),  # never -0.0: packed cells, merged and fired in bulk
    "packed-rows": lambda: (RowAggregate(WIDE), SessionRows()),  # fired windows in one rows() call
}
ROWS = ("row-aggregate", "window-function", *PACKED)
CASES = [(f, feed) for f in FUNCTIONS for feed in (("columns", "records") if f in ROWS else ("records",))]
# rows (key, time offset, nullable int, int, float); offsets below the watermark make late records
EPOCHS = st.lists(st.tuples(
    st.lists(st.tuples(KEYS, st.integers(-25, 40), st.one_of(st.none(), st.integers(-50, 50)),
                       st.integers(-50, 50), HALVES), max_size=30),
    st.booleans(), st.integers(0, 25)), min_size=1, max_size=6)
# "a" fills windows, they fire at +20; then records behind the watermark: late-but-allowed re-fires
# (lateness 7), late records, and an out-of-order stretch of "b"
REFIRING = [([("a", 0, 1, 1, 0.5), ("a", 12, 2, 2, 1.5), ("b", 30, 3, 3, 2.5), ("b", 5, None, 4, 1.0)], True, 20),
            ([("a", 15, 4, 5, 2.0), ("a", 2, 5, 6, 0.5), ("b", 22, 6, 7, -1.0), ("b", 21, 7, 8, 3.0)], False, 10)]


def operator(assigner: str, function: str, lateness: int, reference: bool) -> WindowOperator:
    fn, window_fn = FUNCTIONS[function]()
    return WindowOperator(ASSIGNERS[assigner](), fn, window_function=window_fn, columnar=not reference,
                          allowed_lateness=lateness, late_output_tag="late", invalid_output_tag="invalid")


def count_calls(monkeypatch, owner: object, name: str, calls: dict[str, int], counted=lambda args, result: True) -> None:
    """Wrap ``owner.name`` so that each call adds ``counted(args, result)`` to ``calls[name]``."""
    real = getattr(owner, name)

    def wrapper(*args):
        result = real(*args)
        calls[name] += counted(args, result)
        return result
    monkeypatch.setattr(owner, name, wrapper)


def spy_packed_paths(monkeypatch) -> dict[str, int]:
    """Count the engine's bulk merges of packed cells that merged, its packed watermarks and bulk fires."""
    calls = {"merged_by_start": 0, "_advance_packed": 0, "fire_windows_packed": 0, "collect_columns": 0}
    count_calls(monkeypatch, aligned_engine, "merged_by_start", calls, lambda args, result: result is not None)
    count_calls(monkeypatch, AlignedEngine, "_advance_packed", calls)
    count_calls(monkeypatch, ColumnarWindowOperator, "fire_windows_packed", calls, lambda args, result: len(args[1]) > 0)
    count_calls(monkeypatch, Output, "collect_columns", calls)
    return calls


@pytest.mark.parametrize("function, feed", CASES)
@pytest.mark.parametrize("assigner", list(ASSIGNERS))
@pytest.mark.parametrize("lateness", [0, 7])
def test_engine_equals_record_path(backend_name, tmp_path, monkeypatch, function, feed, assigner, lateness):
    engine = harness(operator(assigner, function, lateness, False), backend_name, tmp_path, "engine")
    reference = harness(operator(assigner, function, lateness, True), backend_name, tmp_path, "reference")
    assert type(engine.operator._engine) is AlignedEngine and type(reference.operator) is RecordWindowOperator
    calls = spy_packed_paths(monkeypatch)
    packed_cells = 0
    examples = itertools.count()

    @differential(backend_name, 25, 10)
    @given(epochs=EPOCHS)
    @example(epochs=REFIRING)
    def check(epochs):
        nonlocal packed_cells
        packed_cells += run_epochs(engine, reference, function, next(examples), epochs, feed == "columns")

    check()
    if function in PACKED:  # the bulk paths ran (not only their per-key fallbacks)
        assert calls["_advance_packed"] > 0 and calls["fire_windows_packed"] > 0 and packed_cells > 0, (calls, packed_cells)
        assert (calls["merged_by_start"] > 0) == (feed == "columns"), calls  # records carry no columns to fold packed
    engine.close()
    reference.close()


def test_packed_windows_merge_in_bulk_and_fire(backend_name, tmp_path, monkeypatch):
    """Stored packed windows of "k" get an epoch's records in and out of time order (no record behind the
    watermark): one bulk merge, contents in arrival order per window (first/last of y show it), then
    the windows fire in bulk at the watermark, stamped with their ends."""
    calls = spy_packed_paths(monkeypatch)
    hs = [harness(WindowOperator(TumblingEventTimeWindows(10), RowAggregate([("first", 1), ("last", 1), ("count", None)]),
                                 window_function=SessionRows(), columnar=not ref), backend_name, tmp_path, f"h{ref}")
          for ref in (False, True)]
    first = [("k", (1, 0.5), 101), ("k", (2, 1.5), 112)]
    second = [("k", (3, 2.5), 118), ("k", (4, None), 105), ("k", (5, 3.0), 103), ("j", (6, 1.0), 100)]
    for records in (first, second):
        hs[0].process_columns(*columns_of(records))
        hs[1].process_batch(records)
    assert calls["merged_by_start"] == 2 and calls["_advance_packed"] == 0
    for h in hs:
        h.process_watermark(1_000)
    expected = [(("j", 100, 110, 1.0, 1.0, 1), 109), (("k", 100, 110, 0.5, 3.0, 3), 109),
                (("k", 110, 120, 1.5, 2.5, 2), 119)]
    outputs = [h.output() for h in hs]
    assert repr(outputs[0]) == repr(outputs[1]) and sorted(outputs[0]) == expected
    assert calls["_advance_packed"] == 1 and calls["fire_windows_packed"] == calls["collect_columns"] == 1
    assert hs[0].num_entries() == 0
    for h in hs:
        h.close()


def test_late_and_invalid_records(backend_name, tmp_path):
    """Behind the watermark: a record all of whose windows are cleaned up is late; a None key, a NaN key
    and a float timestamp are refused with their reasons, in the order the generic path refuses them."""
    hs = [harness(operator("sliding", "concat", 0, ref), backend_name, tmp_path, f"h{ref}") for ref in (False, True)]
    for h in hs:
        h.process_watermark(100)
    recs = [("late", "1;", 50), (None, "2;", 500), ("ok", "3;", 150), (float("nan"), "4;", 50), ("ok", "5;", 1.5),
            ("half", "6;", 95)]  # 95: its window [86, 111) is open, [76, 101) is late
    for h in hs:
        h.process_batch(recs)
        h.process_watermark(1_000)
    assert hs[0].side_output("late") == hs[1].side_output("late") == [("1;", 50)]
    refused = [[(r.value, r.field) for r, _ in h.side_output("invalid")] for h in hs]
    assert refused[0] == refused[1] == [("5;", "timestamp"), ("2;", "key"), ("4;", "key")]
    assert repr(hs[0].output()) == repr(hs[1].output())
    assert hs[0].metrics == hs[1].metrics
    for h in hs:
        h.close()


class Cleared(ProcessWindowFunction):
    """Emits (key, start, end, result) and records every window ``clear`` is called for."""

    def __init__(self) -> None:
        self.cleared: list = []

    def process(self, key, context, elements):
        yield (key, context.window.start, context.window.end, *elements)

    def clear(self, context):
        self.cleared.append(context.window)


def test_cleanup_clears_each_window_in_timer_order(backend_name, tmp_path):
    """A window function defining ``clear``: each cleaned window is cleared once, in the record path's order."""
    hs = [harness(WindowOperator(SlidingEventTimeWindows(20, 10), RowAggregate([("count", None)]), window_function=Cleared(),
                                 allowed_lateness=5, columnar=not ref), backend_name, tmp_path, f"h{ref}")
          for ref in (False, True)]
    for wm, records in [(0, [("a", (1,), 5), ("b", (2,), 14), ("a", (3,), 25)]), (40, [("a", (4,), 37)]), (100, [])]:
        for h in hs:
            h.process_batch(records)
            h.process_watermark(wm)
    assert repr(hs[0].output()) == repr(hs[1].output())
    cleared = [h.operator.window_function.cleared for h in hs]
    assert cleared[0] == cleared[1] and len(cleared[0]) == 7  # a: 5 windows, b: 2
    for h in hs:
        h.close()


def test_a_checkpoint_of_one_layout_is_refused_by_the_other():
    """The engine's state (a value per key) and the record path's (window namespaces) differ: a job
    moved between them on one checkpoint is refused before anything runs, not misread."""
    from statekit.checkpoint.job import compare

    for assigner in ASSIGNERS:
        engine, record = (operator(assigner, "packed", 0, reference) for reference in (False, True))
        carried, refused = compare({"operator": engine.describe()}, {"operator": record.describe()})
        assert not carried and len(refused) == 1 and "state layout" in refused[0]
        assert '"windows-per-key"' in refused[0] and '"window-namespaces"' in refused[0]


@pytest.mark.parametrize("feed", ["columns", "records"])
def test_records_between_windows_shorter_than_their_slide(backend_name, tmp_path, feed):
    """Windows of 5 every 10: a record at 5..9 past a slide has no window; behind the watermark it is
    late (side output), else it is only counted, as the record path has it."""
    hs = [harness(WindowOperator(SlidingEventTimeWindows(5, 10), RowAggregate([("count", None)]), columnar=not ref),
                  backend_name, tmp_path, f"h{ref}") for ref in (False, True)]
    for h in hs:
        h.process_watermark(100)
    recs = [(k, (1,), t) for k, t in zip("abcde", (87, 92, 107, 117, 121))]  # 87, 92: late; 107, 117: no window
    for h in hs:
        if feed == "columns" and h is hs[0]:
            h.process_columns(*columns_of(recs))
        else:
            h.process_batch(recs)
        h.process_watermark(1_000)
    assert hs[0].side_output("late") == hs[1].side_output("late") == [((1,), 87), ((1,), 92)]
    assert hs[0].output() == hs[1].output() == [((1,), 124)]
    assert hs[0].metrics == hs[1].metrics and hs[0].num_entries() == 0
    for h in hs:
        h.close()
