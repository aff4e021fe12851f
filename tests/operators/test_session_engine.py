"""The session engine (``operators.engines.session_engine``) against the window operator's generic record path.

Event-time sessions with the EventTimeTrigger and an incremental function go through the engine,
fed as columns (``process_columns``) or records (``process_batch``); the same operator with
``columnar=False`` takes the generic path (MergingWindowSet, one record at a time). Both
must give the same results in the same order, the same late and invalid outputs and metrics, and
leave nothing behind, on every backend: order-sensitive functions (first/last, concatenation),
merges that bridge stored sessions, out-of-order keys and late-but-allowed re-fires included.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings, strategies as st

from statekit import StateConfig
from statekit.operators import RowAggregate
from statekit.operators import EventTimeSessionWindows, WindowOperator
from statekit.operators.engines import session_engine
from statekit.operators.columns import by_code, factorize, first_at_or_after, present_codes, session_runs
from statekit.operators.windowing.columnar_window import ColumnarWindowOperator
from statekit.operators.windowing.record_window import RecordWindowOperator
from statekit.operators.engines.cell_engine import CellEngine
from statekit.operators.engines.session_engine import SessionEngine
from statekit.operators.testing import OperatorHarness
from statekit.jobs.sessionize import SessionRows
from statekit.operators import Output, WindowRowsFunction
from statekit.operators.output import records_of
from tests.operators_support import Concat, KeyedWindowResult, differential, fresh_stretch

GAP = 10
WIDE = [(kind, pos) for pos in (1, 2, 3) for kind in ("sum", "min", "max", "avg", "first", "last")] + [("count", None)]
KEY_VALUES = ["a", "b", "c", 1, 2, (3, "x")]
KEYS = st.sampled_from(KEY_VALUES)
HALVES = st.one_of(st.just(-0.0), st.integers(-50, 50).map(lambda x: x / 2))  # exact sums in any order
# rows (key, time offset, nullable int, int, float); offsets below the watermark make late records
EPOCHS = st.lists(st.tuples(
    st.lists(st.tuples(KEYS, st.integers(-25, 40), st.one_of(st.none(), st.integers(-50, 50)),
                       st.integers(-50, 50), HALVES), max_size=30),
    st.booleans(), st.integers(0, 25)), min_size=1, max_size=6)
# stored sessions [0, 10) and [25, 35) of "a"; then 10 (touches the first) and 18 (bridges both) in time
# order: runs merged into stored sessions, by the vectorized merge where the accumulators pack
BRIDGING = [([("a", 0, 1, 1, 0.5), ("a", 25, 2, 2, 1.5)], True, 0),
            ([("a", 10, 3, 3, 2.5), ("a", 18, None, 4, -1.0), ("a", 100, 5, 5, 3.0), ("b", 2, None, 6, 0.5)], True, 30)]
# a stored session [0, 37) of "a"; then -5 and 30, more than the gap apart, touching its two ends: two runs
# that one session joins (through the stored session's reach, not through each other)
REACHING = [([("a", dt, dt, 1, 0.5) for dt in (0, 9, 18, 27)], True, 0),
            ([("a", -5, None, 2, 1.5), ("a", 30, 7, 3, -2.0), ("b", 1, 1, 1, 1.0)], True, 40)]


def concat(a: str, b: str) -> str:
    return a + b


FUNCTIONS = {
    "row-aggregate": lambda: (RowAggregate(WIDE), None),
    "concat": lambda: (Concat(), None),
    "reduce": lambda: (concat, None),
    "window-function": lambda: (RowAggregate([("first", 1), ("last", 1), ("count", None)]), KeyedWindowResult()),
    # the same aggregates on rows whose float never is -0.0: the accumulators pack and merge packed,
    # so fast keys take the vectorized path (operators.engines.packed_sessions.merged) and due keys _advance_packed
    "packed": lambda: (RowAggregate(WIDE), None),
    # and with a WindowRowsFunction: due keys' fired sessions go to it in one rows() call per watermark
    "packed-rows": lambda: (RowAggregate(WIDE), SessionRows()),
}
PACKED = ("packed", "packed-rows")


def operator(function: str, lateness: int, reference: bool) -> WindowOperator:
    fn, window_fn = FUNCTIONS[function]()
    return WindowOperator(EventTimeSessionWindows.with_gap(GAP), fn, window_function=window_fn,
                          columnar=not reference, allowed_lateness=lateness,
                          late_output_tag="late", invalid_output_tag="invalid")


def harness(op: WindowOperator, backend: str, tmp_path, name: str) -> OperatorHarness:
    h = OperatorHarness(op, StateConfig(backend=backend, local_dir=str(tmp_path / name)))
    h.open()
    return h


def columns_of(records: list[tuple]) -> tuple[list, np.ndarray, list[list]]:
    keys = [k for k, _, _ in records]
    cols = [list(c) for c in zip(*(v for _, v, _ in records))] if records else [[], []]
    return keys, np.array([t for _, _, t in records], dtype=np.int64), cols


def value_of(function: str, key: object, n: int, values: tuple) -> object:
    """A record's value for ``function``: a row for RowAggregate, a string for the order-revealing ones."""
    if function in ("row-aggregate", "window-function"):
        return (key, *values)
    if function in PACKED:
        nullable, plain, real = values
        return (key, nullable, plain, 0.5 if real == 0 and math.copysign(1, real) < 0 else real)
    return f"{values[1]};"


def spy_packed_paths(monkeypatch) -> dict[str, int]:
    """Count the engine's vectorized merges that merged (``merged`` not None), those that merged runs into
    stored sessions or into each other (fewer sessions out than in), and its packed watermarks."""
    calls = {"merged": 0, "merged_into_stored": 0, "advance_packed": 0, "fire_windows": 0, "columns": 0}
    real_merged, real_advance = session_engine.merged, SessionEngine._advance_packed
    real_fire, real_columns = ColumnarWindowOperator.fire_windows_packed, Output.collect_columns

    def merged(table, run_owner, *args, **kwargs):
        result = real_merged(table, run_owner, *args, **kwargs)
        if result is not None:
            calls["merged"] += 1
            calls["merged_into_stored"] += len(table.rows) > 0 and len(result.rows) < len(table.rows) + len(run_owner)
        return result

    def advance_packed(self, *args, **kwargs):
        calls["advance_packed"] += 1
        return real_advance(self, *args, **kwargs)

    def fire_windows(self, keys, *args):
        calls["fire_windows"] += len(keys) > 0
        return real_fire(self, keys, *args)

    def collect_columns(self, *args):
        calls["columns"] += 1
        return real_columns(self, *args)

    monkeypatch.setattr(session_engine, "merged", merged)
    monkeypatch.setattr(SessionEngine, "_advance_packed", advance_packed)
    monkeypatch.setattr(ColumnarWindowOperator, "fire_windows_packed", fire_windows)
    monkeypatch.setattr(Output, "collect_columns", collect_columns)
    return calls


def stored_cells(h: OperatorHarness, keys: list) -> list:
    """The engine's stored values of ``keys`` (None for a key without sessions)."""
    resolved, refused = h.backend.resolve_keys(keys)
    assert not refused
    return h.operator._engine._state.get_internal_many(resolved)


def run_epochs(engine: OperatorHarness, reference: OperatorHarness, function: str, n: int, epochs: list,
               as_columns: bool) -> int:
    """Example ``n``'s ``epochs`` on the engine (as columns or records) and the record path, on a fresh
    stretch of time: the same results, late records and metrics after each epoch and watermark, and
    nothing left after a final one; returns how many packed cells the engine held (``PACKED`` functions)."""
    packed_cells = 0
    wm = fresh_stretch(engine, reference)
    for records, in_time_order, advance in epochs:
        recs = [((n, k), value_of(function, (n, k), n, tuple(values)), wm + dt) for k, dt, *values in records]
        if in_time_order:
            recs.sort(key=lambda r: r[2])  # as the Spark tasks feed it: the run path
        reference.process_batch(recs)
        if as_columns:
            engine.process_columns(*columns_of(recs))
        else:
            engine.process_batch(recs)
        assert repr(engine.output()) == repr(reference.output())
        wm += advance
        for h in (engine, reference):
            h.process_watermark(wm)
        assert repr(engine.output()) == repr(reference.output())
        assert repr(engine.side_output("late")) == repr(reference.side_output("late"))
        assert engine.metrics == reference.metrics
        if function in PACKED:  # every stored cell is packed (ints and float halves always pack)
            cells = [c for c in stored_cells(engine, [(n, k) for k in KEY_VALUES]) if c is not None]
            assert all(type(c) is bytes for c in cells), [c for c in cells if type(c) is not bytes]
            packed_cells += len(cells)
    for h in (engine, reference):
        h.process_watermark(wm + 500)
    assert repr(engine.output()) == repr(reference.output())
    assert engine.num_entries() == reference.num_entries() == 0
    return packed_cells


@pytest.mark.parametrize("function", list(FUNCTIONS))
@pytest.mark.parametrize("lateness", [0, 7])
def test_engine_equals_record_path(backend_name, tmp_path, monkeypatch, function, lateness):
    engine = harness(operator(function, lateness, False), backend_name, tmp_path, "engine")
    reference = harness(operator(function, lateness, True), backend_name, tmp_path, "reference")
    assert type(engine.operator) is ColumnarWindowOperator and type(reference.operator) is RecordWindowOperator
    as_columns = function in ("row-aggregate", "window-function", *PACKED)
    calls = spy_packed_paths(monkeypatch)
    packed_cells = 0
    examples = itertools.count()

    @differential(backend_name, 40, 20)
    @given(epochs=EPOCHS)
    @example(epochs=BRIDGING)
    @example(epochs=REACHING)
    def check(epochs):
        nonlocal packed_cells
        packed_cells += run_epochs(engine, reference, function, next(examples), epochs, as_columns)

    check()
    if function in PACKED:  # the vectorized paths ran (not only their per-key fallbacks)
        assert min(calls.values()) > 0 and packed_cells > 0, (calls, packed_cells)
    engine.close()
    reference.close()


@pytest.mark.parametrize("function", ["packed", "window-function"])
def test_engine_takes_keys_in_bounded_batches(backend_name, tmp_path, monkeypatch, function):
    """With ``KEYS_AT_ONCE`` small, an epoch's keys are read and written a few at a time (in order of first
    appearance), and on RocksDB a watermark's due keys too (in steps of the watermark): the same results,
    late records and metrics as the record path, whatever the batches (hypothesis epochs, ties in time
    included), and no batch of more keys than the bound where the due keys' times differ."""
    monkeypatch.setattr(CellEngine, "KEYS_AT_ONCE", 2, raising=False)
    engine = harness(operator(function, 7, False), backend_name, tmp_path, "engine")
    reference = harness(operator(function, 7, True), backend_name, tmp_path, "reference")
    reads, due = [], []
    state, timers = engine.operator._engine._state, engine.operator._engine._timers
    real_read, real_take = type(state).get_internal_many, type(timers).take_event_time_step_scoped
    monkeypatch.setattr(type(state), "get_internal_many", lambda self, keys: reads.append(len(keys)) or real_read(self, keys))
    monkeypatch.setattr(type(timers), "take_event_time_step_scoped",
                        lambda self, wm, limit: (lambda got: due.append(len(got[1])) or got)(real_take(self, wm, limit)))
    # one epoch of 9 keys with sessions ending at distinct times, some out of time order, one late
    wm = fresh_stretch(engine, reference)
    recs = [((0, k), value_of(function, (0, k), 0, (k, k, 0.5)), wm + 3 * k + dt) for k in range(9) for dt in (2, 0)]
    recs.append(((0, 99), value_of(function, (0, 99), 0, (1, 1, 0.5)), wm - 30))
    reference.process_batch(recs)
    engine.process_columns(*columns_of(recs))
    assert reads == [2, 2, 2, 2, 2], reads  # 10 keys, 2 at a time
    reads.clear(), due.clear()
    handed: list[list] = []  # what the output held at the end of each step of the watermark, handed over then
    engine.hand_over(lambda parts: handed.append(records_of(parts)))
    for h in (engine, reference):
        h.process_watermark(wm + 100)
    engine.hand_over(None)
    fired = reference.output()
    assert engine.output() == [] and repr(list(itertools.chain(*handed))) == repr(fired) and len(fired) == 9
    assert repr(engine.side_output("late")) == repr(reference.side_output("late"))
    # the heap takes every due key at once; RocksDB's steps take a key's fire and its cleanup (lateness 7) apart,
    # and hand each step's results over before the next: never more than the step's 2 keys' sessions held
    assert due == [9] if backend_name == "heap" else max(due) <= 2 and sum(due) == 18, due
    sizes = [len(h) for h in handed]
    assert sizes == [9] if backend_name == "heap" else max(sizes) <= 2 and len(sizes) >= 5, sizes
    examples = itertools.count(1)

    @settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(epochs=EPOCHS)
    @example(epochs=BRIDGING)
    def check(epochs):
        run_epochs(engine, reference, function, next(examples), epochs, True)

    check()
    engine.close()
    reference.close()


def test_bridging_merge_keeps_the_order_of_contents(backend_name, tmp_path):
    """Stored sessions [100, 110) and [125, 135); an epoch adds 110 (touches the first), 118 (bridges
    both), 200 and 211 (gap + 1 apart: two sessions). Concatenation shows the order of contents: the
    first session, 110, then the second merged in, then 118, as one-by-one processing has it."""
    hs = [harness(operator("concat", 0, ref), backend_name, tmp_path, f"h{ref}") for ref in (False, True)]
    first = [("k", "1;", 100), ("k", "2;", 125)]
    second = [("k", "3;", 110), ("k", "4;", 118), ("k", "5;", 200), ("k", "6;", 211)]
    for h in hs:
        h.process_batch(first)
        h.process_batch(second)
        h.process_watermark(10_000)
    expected = [("1;3;2;4;", 134), ("5;", 209), ("6;", 220)]
    assert hs[0].output() == hs[1].output() == expected
    for h in hs:
        h.close()


def test_late_and_invalid_records(backend_name, tmp_path):
    """Behind the watermark: a record no session takes is late; a None key, a NaN key and a float
    timestamp are refused with their reasons, in the order the generic path refuses them."""
    hs = [harness(operator("concat", 0, ref), backend_name, tmp_path, f"h{ref}") for ref in (False, True)]
    for h in hs:
        h.process_watermark(100)
    recs = [("late", "1;", 50), (None, "2;", 500), ("ok", "3;", 150), (float("nan"), "4;", 50), ("ok", "5;", 1.5)]
    for h in hs:
        h.process_batch(recs)
    assert hs[0].side_output("late") == hs[1].side_output("late") == [("1;", 50)]
    refused = [[(r.value, r.field) for r, _ in h.side_output("invalid")] for h in hs]
    assert refused[0] == refused[1] == [("5;", "timestamp"), ("2;", "key"), ("4;", "key")]
    assert hs[0].metrics == hs[1].metrics
    unhashable = [(["x"], ("x", 1), 300)]
    hs[0].process_columns(*columns_of(unhashable))
    assert "not hashable" in hs[0].side_output("invalid")[0][0].reason
    for h in hs:
        h.close()


def test_a_key_that_cannot_be_serialized_is_refused_among_plain_keys(backend_name, tmp_path):
    """Plain string keys go through Arrow's dictionary encoding; one with a lone surrogate (no UTF-8 form)
    is refused with its reason, as the record path refuses it, and the others are processed."""
    hs = [harness(operator("row-aggregate", 0, ref), backend_name, tmp_path, f"s{ref}") for ref in (False, True)]
    recs = [(k, (k, v, v, v / 2), t) for k, v, t in [("a", 1, 100), ("\ud800", 2, 101), ("a", 3, 102)]]
    hs[0].process_columns(*columns_of(recs))
    hs[1].process_batch(recs)
    for h in hs:
        h.process_watermark(1_000)
    invalid = [h.side_output("invalid") for h in hs]
    assert [(r.key, r.field) for r, _ in invalid[0]] == [(r.key, r.field) for r, _ in invalid[1]] == [("\ud800", "key")]
    assert "cannot be serialized" in invalid[0][0][0].reason
    outputs = [h.output() for h in hs]
    assert repr(outputs[0]) == repr(outputs[1]) and len(outputs[0]) == 1
    for h in hs:
        h.close()


@pytest.mark.parametrize("column", [
    [3, -1, 7, 2, 9, 4], [1.5, -2.25, 3.0, 0.5, 8.0, -1.0], [3, None, 7, None, None, 4],
    ["b", "a", "d", "c", "f", "e"], [float("nan"), 1.0, 2.0, 3.0, float("nan"), 0.5], [1 << 62, 1 << 62, 1, 2, 3, 4],
    [1, 2.5, 3, -1, 0.5, 7], [True, 2, False, 5, True, 1], [0.0, -0.0, -0.0, 0.0, 1.0, -0.0]])
def test_accumulate_equals_folding_add(column):
    aggs = [(k, None if k == "count" else 0) for k in ("sum", "count", "min", "max", "avg")]
    if isinstance(column[0], str):
        aggs = [a for a in aggs if a[0] not in ("sum", "avg")]
    fn = RowAggregate(aggs)
    order, starts = np.array([5, 0, 2, 1, 4, 3]), np.array([0, 2, 3])
    got = fn.accumulate([column], order, starts)
    for acc, (s, e) in zip(got, [(0, 2), (2, 3), (3, 6)]):
        expected = fn.create_accumulator()
        for r in order[s:e]:
            expected = fn.add((column[r],), expected)
        assert repr(acc) == repr(expected)  # repr: NaN equals NaN, and 1 vs 1.0 counts
        assert [type(x) for x in acc] == [type(x) for x in expected]


@settings(max_examples=200, deadline=None)
@given(head=st.lists(st.one_of(st.none(), st.just(float("nan")), HALVES), max_size=5),
       tail=st.lists(st.one_of(st.none(), st.just(float("nan")), HALVES), max_size=5))
@example(head=[0.5], tail=[float("nan"), -0.0])  # min: -0.0 one by one; a run's NaN must not hide it
def test_merge_of_a_folded_run_equals_adding_it(head, tail):
    """The ColumnarAggregate promise ``merge(a, fold(add, new, xs)) == fold(add, a, xs)`` that lets the
    engines fold a run on its own, with NaN (ordered above every number), -0.0 ties and nulls."""
    fn = RowAggregate([(k, 0) for k in ("sum", "min", "max", "avg", "first", "last")] + [("count", None)])

    def fold(acc, xs):
        for x in xs:
            acc = fn.add((x,), acc)
        return acc

    a = fold(fn.create_accumulator(), head)
    assert repr(fn.merge(a, fold(fn.create_accumulator(), tail))) == repr(fold(fold(fn.create_accumulator(), head), tail))


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 4), st.integers(-20, 20)), max_size=25),
       queries=st.lists(st.tuples(st.integers(0, 5), st.integers(-25, 25)), max_size=10),
       scale=st.sampled_from([1, 1 << 58]))  # 1 << 58: (code, time) does not fit one int64, the sort path
def test_first_at_or_after_finds_the_first_row_of_the_key_at_or_after_the_time(rows, queries, scale):
    rows = sorted(rows)
    c, t = (np.array([r[i] for r in rows], np.int64).reshape(-1) * (scale if i else 1) for i in (0, 1))
    qc, qt = (np.array([q[i] for q in queries], np.int64).reshape(-1) * (scale if i else 1) for i in (0, 1))
    got = first_at_or_after(c, t, qc, qt).tolist()
    expected = [next((p for p in range(len(rows)) if c[p] == a and t[p] >= b), len(rows))
                for a, b in zip(qc.tolist(), qt.tolist())]
    assert got == expected


@settings(max_examples=150, deadline=None)
@given(records=st.lists(st.tuples(st.integers(0, 6), st.integers(-20, 20)), max_size=30),
       sort_times=st.booleans(), keep=st.lists(st.booleans(), min_size=30, max_size=30),
       code_scale=st.sampled_from([1, 1 << 15, 1 << 20]))  # 1 << 20: codes past 16 bits, no radix sort
@example(records=[(2, 0), (0, 1), (3, 1)], sort_times=True, keep=[True] * 30, code_scale=1 << 15)  # 65536 > 16 bits
def test_runs_group_rows_by_key_then_time_then_row_either_way_they_arrive(records, sort_times, keep, code_scale):
    """``session_runs``' order (and ``by_code``, ``present_codes``): rows by key, time and row, whether
    the epoch arrives in time order (grouped by a stable sort of the codes) or not (a full sort)."""
    if sort_times:
        records = sorted(records, key=lambda r: r[1])
    codes = np.array([c * code_scale for c, _ in records], np.int64)
    ts = np.array([t for _, t in records], np.int64)
    rows = np.flatnonzero(np.array(keep[:len(records)], dtype=bool))
    assume(len(rows))  # the engine runs the rows of at least one key
    runs = session_runs(codes, ts, rows, 5, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert runs.order.tolist() == sorted(rows.tolist(), key=lambda r: (codes[r], ts[r], r))
    assert by_code(codes).tolist() == np.argsort(codes, kind="stable").tolist()
    assert present_codes(codes).tolist() == np.unique(codes).tolist()


def test_runs_cut_on_key_gap_and_stored_sessions():
    codes, distinct = factorize(["a", "b", "a", "a", "b", "a"])
    assert distinct == ["a", "b"] and codes.tolist() == [0, 1, 0, 0, 1, 0]
    ts = np.array([0, 5, 10, 21, 30, 10])
    runs = session_runs(codes, ts, np.arange(6), 10, np.array([], np.int64), np.array([], np.int64), np.array([], np.int64))
    # a: 0, 10, 10 (ties keep row order: row 2 before row 5), then 21 (> gap after 10); b: 5, then 30
    assert runs.order.tolist() == [0, 2, 5, 3, 1, 4]
    assert tuple(x.tolist() for x in (runs.codes, runs.firsts, runs.lasts, runs.counts)) == ([0, 0, 1, 1], [0, 21, 5, 30], [10, 21, 5, 30], [3, 1, 1, 1])
    # a stored session of "a" reachable from 8 to 12 starts a run at a's first record in [8, 12] (row 2)
    runs = session_runs(codes, ts, np.arange(6), 10, np.array([0]), np.array([8]), np.array([12]))
    assert tuple(x.tolist() for x in (runs.codes, runs.firsts, runs.counts)) == ([0, 0, 0, 1, 1], [0, 10, 21, 5, 30], [1, 2, 1, 1, 1])


def test_a_checkpoint_of_one_layout_is_refused_by_the_other():
    """The engine's state (a value per key) and the record path's (window namespaces) differ: a job
    moved between them on one checkpoint is refused before anything runs, not misread."""
    from statekit.checkpoint.job import compare

    engine, record = (operator("row-aggregate", 0, reference) for reference in (False, True))
    carried, refused = compare({"operator": engine.describe()}, {"operator": record.describe()})
    assert not carried and len(refused) == 1 and "state layout" in refused[0]
    assert '"sessions-per-key"' in refused[0] and '"window-namespaces"' in refused[0]


class Twice(WindowRowsFunction):
    def rows(self, keys, starts, ends, results):
        return [(k, s, e) for k, s, e in zip(keys, starts, ends)] * 2


@pytest.mark.parametrize("session_engine_on", [True, False])
def test_a_window_rows_function_must_make_one_output_per_window(tmp_path, session_engine_on):
    op = WindowOperator(EventTimeSessionWindows.with_gap(GAP), RowAggregate([("count", None)]),
                        window_function=Twice(), columnar=session_engine_on)
    h = harness(op, "heap", tmp_path, "h")
    h.process_columns(["a", "b"], np.array([1, 2], np.int64), [[1, 2]])
    with pytest.raises(TypeError, match=r"Twice.rows made (4 outputs for 2|2 outputs for 1) windows: a "
                                        r"WindowRowsFunction makes one output per window"):
        h.process_watermark(100)
