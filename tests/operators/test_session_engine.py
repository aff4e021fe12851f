"""``WindowOperator.process_columns``: an epoch as columns gives exactly what ``process_batch`` of the
same records gives (output, late and invalid side outputs, metrics, state and timers), on every
backend; its vectorized session path and ``RowAggregate.accumulate`` are checked piece by piece."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from statekit.operators import EventTimeSessionWindows, WindowOperator
from statekit.operators.columns import factorize, session_segments
from statekit.operators.testing import OperatorHarness
from statekit import StateConfig
from statekit.jobs.aggregates import RowAggregate
from tests.operators_support import fresh_stretch

GAP = 10
AGGS = [("sum", 1), ("count", None), ("min", 1), ("max", 1), ("avg", 1)]
WIDE = [(kind, pos) for pos in (1, 2, 3) for kind in ("sum", "min", "max", "avg")] + [("count", None)]
KEYS = st.sampled_from(["a", "b", "c", 1, 2, (3, "x")])
HALVES = st.one_of(st.just(-0.0), st.integers(-50, 50).map(lambda x: x / 2))  # exact sums in any order
# rows (key, nullable int, int, float): the columns without nulls take the numpy reductions
EPOCHS = st.lists(st.tuples(
    st.lists(st.tuples(KEYS, st.integers(-15, 40), st.one_of(st.none(), st.integers(-50, 50)),
                       st.integers(-50, 50), HALVES), max_size=30),
    st.integers(0, 25)), min_size=1, max_size=6)


def harness(backend: str, tmp_path, lateness: int, name: str, aggs: list = AGGS) -> OperatorHarness:
    op = WindowOperator(EventTimeSessionWindows.with_gap(GAP), RowAggregate(aggs), allowed_lateness=lateness,
                        late_output_tag="late", invalid_output_tag="invalid")
    h = OperatorHarness(op, StateConfig(backend=backend, local_dir=str(tmp_path / name)))
    h.open()
    return h


def state(h: OperatorHarness) -> dict:
    """The backend's logical snapshot with entries in a canonical order (insertion order may differ)."""
    snap = h.backend.snapshot_logical()
    for s in snap["states"].values():
        s["entries"] = sorted(s["entries"], key=repr)
    return snap


def canonical(records: list) -> str:
    """Records in a canonical order, as text: 1 and 1.0, 0.0 and -0.0 differ."""
    return repr(sorted(records, key=repr))


def columns_of(records: list[tuple]) -> tuple[list, np.ndarray, list[list]]:
    keys = [k for k, _, _ in records]
    cols = [list(c) for c in zip(*(v for _, v, _ in records))] if records else [[], []]
    return keys, np.array([t for _, _, t in records], dtype=np.int64), cols


@pytest.mark.parametrize("lateness", [0, 7])
def test_columns_equal_batch(backend_name, tmp_path, lateness):
    batch = harness(backend_name, tmp_path, lateness, "batch", WIDE)
    cols = harness(backend_name, tmp_path, lateness, "cols", WIDE)
    examples = itertools.count()

    @settings(max_examples=60 if backend_name == "heap" else 30, deadline=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(epochs=EPOCHS)
    def check(epochs):
        n = next(examples)
        wm = fresh_stretch(batch, cols)
        for records, advance in epochs:
            recs = [((n, k), ((n, k), *values), wm + dt) for k, dt, *values in records]
            batch.process_batch(recs)
            cols.process_columns(*columns_of(recs))
            wm += advance
            for h in (batch, cols):
                h.process_watermark(wm)
            assert canonical(cols.output()) == canonical(batch.output())
            assert repr(cols.side_output("late")) == repr(batch.side_output("late"))
            assert cols.metrics == batch.metrics
            assert repr(state(cols)) == repr(state(batch))
        for h in (batch, cols):
            h.process_watermark(wm + 500)
        assert canonical(cols.output()) == canonical(batch.output())
        assert cols.num_entries() == batch.num_entries() == 0

    check()
    batch.close()
    cols.close()


def test_bridging_touching_and_separate_segments(backend_name, tmp_path):
    """Stored sessions [100, 110) and [125, 135); one epoch adds 110 (touches the first: merges), 118
    (bridges both), 200 and 211 (gap + 1 apart: two sessions), both paths leave the same state."""
    hs = [harness(backend_name, tmp_path, 0, name) for name in ("batch", "cols")]
    first = [("k", ("k", 1), 100), ("k", ("k", 2), 125)]
    second = [("k", ("k", 3), 110), ("k", ("k", 4), 118), ("k", ("k", 5), 200), ("k", ("k", 6), 211)]
    hs[0].process_batch(first)
    hs[1].process_columns(*columns_of(first))
    hs[0].process_batch(second)
    hs[1].process_columns(*columns_of(second))
    assert state(hs[0]) == state(hs[1])
    for h in hs:
        h.process_watermark(10_000)
    expected = [((1 + 2 + 3 + 4, 4, 1, 4, 2.5), 134), ((5, 1, 5, 5, 5.0), 209), ((6, 1, 6, 6, 6.0), 220)]
    assert sorted(hs[0].output()) == sorted(hs[1].output()) == sorted(expected)
    for h in hs:
        h.close()


def test_records_that_could_be_late_keep_the_record_path(backend_name, tmp_path):
    """A key with one record behind the watermark goes through ``process_batch`` (late output, in order);
    a None key and an unhashable key land in the invalid output like there."""
    hs = [harness(backend_name, tmp_path, 0, name) for name in ("batch", "cols")]
    for h in hs:
        h.process_watermark(100)
    recs = [("late", ("late", 1), 50), ("late", ("late", 2), 200), ("ok", ("ok", 3), 150), (None, (None, 4), 150)]
    hs[0].process_batch(recs)
    hs[1].process_columns(*columns_of(recs))
    assert hs[1].side_output("late") == hs[0].side_output("late") == [(("late", 1), 50)]
    assert [r.reason for r, _ in hs[1].side_output("invalid")] == [r.reason for r, _ in hs[0].side_output("invalid")]
    assert hs[1].metrics == hs[0].metrics and state(hs[0]) == state(hs[1])
    unhashable = [(["x"], (["x"], 1), 300)]
    hs[1].process_columns(*columns_of(unhashable))
    assert "not hashable" in hs[1].side_output("invalid")[0][0].reason
    for h in hs:
        h.close()


def test_bad_keys_keep_their_order_in_the_invalid_output(backend_name, tmp_path):
    """A None key whose records are all on time and a NaN key with a late record (record path) are
    refused in the order ``process_batch`` refuses them: by their first record."""
    hs = [harness(backend_name, tmp_path, 0, name) for name in ("batch", "cols")]
    for h in hs:
        h.process_watermark(100)
    recs = [(None, (None, 1), 500), (float("nan"), ("nan", 2), 50), ("ok", ("ok", 3), 500)]
    hs[0].process_batch(recs)
    hs[1].process_columns(*columns_of(recs))
    refused = [[r.value for r, _ in h.side_output("invalid")] for h in hs]
    assert refused[1] == refused[0] == [(None, 1), ("nan", 2)]
    assert hs[1].metrics == hs[0].metrics and state(hs[0]) == state(hs[1])
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


def test_session_segments_cut_on_key_and_gap():
    codes, distinct = factorize(["a", "b", "a", "a", "b", "a"])
    assert distinct == ["a", "b"] and codes.tolist() == [0, 1, 0, 0, 1, 0]
    ts = np.array([0, 5, 10, 21, 30, 10])
    seg = session_segments(codes, ts, np.arange(6), gap=10)
    # a: 0, 10, 10 (ties keep row order: row 2 before row 5), then 21 (> gap after 10); b: 5, then 30
    assert seg.order.tolist() == [0, 2, 5, 3, 1, 4]
    assert (seg.codes, seg.lows, seg.highs, seg.counts) == ([0, 0, 1, 1], [0, 21, 5, 30], [20, 31, 15, 40], [3, 1, 1, 1])
