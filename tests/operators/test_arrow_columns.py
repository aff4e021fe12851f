"""Arrow in (``process_columns`` of Arrow arrays, as the Spark glue feeds it) against Python lists.

The window engines take keys and value columns as Arrow arrays without making a Python object per
row: keys are dictionary-encoded as they are, numeric columns read as numpy for the packed
aggregates, Python values made only for what goes to Python code. Fed the same epochs, an operator
given Arrow arrays must give the results, side outputs, metrics and stored cells of one given
Python lists, and both those of the generic record path: every assigner, both backends, with and
without allowed lateness (late-but-allowed re-fires), order-sensitive aggregates (first/last,
concatenation), nulls, -0.0, NaN and narrow Arrow types included.
"""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, strategies as st

from statekit.operators import (EventTimeSessionWindows, RowAggregate, SlidingEventTimeWindows, TumblingEventTimeWindows,
                                WindowOperator)
from statekit.operators.aggregates.packed_values import masked as _masked
from statekit.operators import columns
from statekit.operators.engines import cell_engine
from statekit.operators.columns import factorize
from tests.operators.test_session_engine import WIDE, harness, stored_cells
from tests.operators_support import Concat, differential, fresh_stretch

ASSIGNERS = {
    "session": lambda: EventTimeSessionWindows.with_gap(10),
    "tumbling": lambda: TumblingEventTimeWindows(10, offset=3),
    "sliding": lambda: SlidingEventTimeWindows(25, 10, offset=-4),
}
FUNCTIONS = {
    "packed": lambda: (RowAggregate(WIDE), None),
    "rows": lambda: (RowList(), None),  # not columnar: every row as Python values, in order
}
FLOATS = st.one_of(st.none(), st.just(-0.0), st.just(float("nan")), st.integers(-50, 50).map(lambda x: x / 2))
# rows (key, time offset, nullable int, int, nullable float); offsets below the watermark make late records
EPOCHS = st.lists(st.tuples(
    st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.integers(-25, 40),
                       st.one_of(st.none(), st.integers(-50, 50)), st.integers(-50, 50), FLOATS), max_size=30),
    st.booleans(), st.integers(0, 25)), min_size=1, max_size=5)
TYPES = [pa.string(), pa.int32(), pa.int64(), pa.float32()]
"""Arrow types of the key, nullable int, int and float columns (narrow ones: Python values are the same)."""


class RowList(Concat):
    """Order-revealing and not columnar: the rows in the order they were added."""

    def get_result(self, accumulator: list) -> str:
        return repr(accumulator)


def operator(assigner: str, function: str, lateness: int, reference: bool) -> WindowOperator:
    fn, window_fn = FUNCTIONS[function]()
    return WindowOperator(ASSIGNERS[assigner](), fn, window_function=window_fn, columnar=not reference,
                          allowed_lateness=lateness, late_output_tag="late", invalid_output_tag="invalid")


@pytest.mark.parametrize("function", list(FUNCTIONS))
@pytest.mark.parametrize("assigner", list(ASSIGNERS))
@pytest.mark.parametrize("lateness", [0, 7])
def test_arrow_columns_equal_python_columns_and_the_record_path(backend_name, tmp_path, function, assigner, lateness):
    arrow, lists, reference = (harness(operator(assigner, function, lateness, ref), backend_name, tmp_path, name)
                               for name, ref in (("arrow", False), ("lists", False), ("reference", True)))
    hs = (arrow, lists, reference)
    examples = itertools.count()

    @differential(backend_name, 30, 15)
    @given(epochs=EPOCHS)
    def check(epochs):
        n = next(examples)
        wm = fresh_stretch(*hs)
        for records, in_time_order, advance in epochs:
            rows = [(f"{n}:{k}", (a, b, c), wm + dt) for k, dt, a, b, c in records]
            if in_time_order:
                rows.sort(key=lambda r: r[2])
            keys, ts = [r[0] for r in rows], np.array([r[2] for r in rows], np.int64)
            cols = [keys, *([v[i] for _, v, _ in rows] for i in range(3))]
            arrow.process_columns(pa.chunked_array([pa.array(keys, pa.string())]), ts,
                                  [pa.array(c, t) for c, t in zip(cols, TYPES)])
            lists.process_columns(keys, ts, cols)
            reference.process_batch([(k, tuple(c[r] for c in cols), t) for r, (k, _, t) in enumerate(rows)])
            wm += advance
            for h in hs:
                h.process_watermark(wm)
            outputs = [repr(h.output()) for h in hs]
            assert outputs[0] == outputs[1] == outputs[2]
            late = [repr(h.side_output("late")) for h in hs]
            assert late[0] == late[1] == late[2]
            assert arrow.metrics == lists.metrics == reference.metrics
            stored = [stored_cells(h, sorted(set(keys))) for h in (arrow, lists)]
            assert repr(stored[0]) == repr(stored[1])  # the same cells (repr: NaN equals NaN), packed alike
        for h in hs:
            h.process_watermark(wm + 500)
        assert repr(arrow.output()) == repr(lists.output()) == repr(reference.output())
        assert arrow.num_entries() == lists.num_entries() == reference.num_entries() == 0

    check()
    for h in hs:
        h.close()


def test_a_clean_epoch_of_arrow_columns_makes_no_python_values_per_row(backend_name, tmp_path, monkeypatch):
    """In time order, on time and packed: keys encoded and values folded as Arrow/numpy, no column turned
    into Python values (what the Spark tasks' epochs take), with the results of Python lists."""
    converted = []

    def spy(column):
        converted.append(len(column))
        return real(column)

    real = columns.python_values
    monkeypatch.setattr(columns, "python_values", spy)
    monkeypatch.setattr(cell_engine, "python_values", spy)
    arrow, lists = (harness(operator("session", "packed", 0, False), backend_name, tmp_path, name) for name in ("a", "l"))
    keys, ts = ["a", "b", "a", "c", "b"], np.array([100, 101, 105, 130, 150], np.int64)
    cols = [keys, [1, None, 3, 4, 5], [7, 8, 9, 10, 11], [0.5, 1.5, None, 2.0, 0.25]]
    arrow.process_columns(pa.array(keys), ts, [pa.array(c, t) for c, t in zip(cols, TYPES)])
    assert converted == []
    lists.process_columns(keys, ts, cols)
    for h in (arrow, lists):
        h.process_watermark(1_000)
    outputs = [h.output() for h in (arrow, lists)]
    assert converted == [] and arrow.num_entries() == lists.num_entries() == 0
    assert repr(outputs[0]) == repr(outputs[1]) and len(outputs[0]) > 0
    arrow.close()
    lists.close()


@pytest.mark.parametrize("keys, refused", [
    (pa.array(["a", None, "b", "a"]), 2),  # a null key, and the row with the timestamp out of range below
    (pa.array([["x"], ["y"], ["x"], ["z"]], pa.list_(pa.string())), 4),  # unhashable keys (lists), that row
    (pa.array(["a", "b", "b", "a"]), 1)])  # plain keys: that row only
def test_invalid_records_fed_as_arrow_are_named_as_for_python_lists(backend_name, tmp_path, keys, refused):
    arrow, lists = (harness(operator("session", "packed", 0, False), backend_name, tmp_path, name) for name in ("a", "l"))
    ts = np.array([100, 101, (1 << 62) + 1, 103], np.int64)  # past the latest event time
    cols = [keys, pa.array([1, None, 3, 4], pa.int32()), pa.array([5, 6, 7, 8]), pa.array([0.5, 1.0, None, 2.0])]
    arrow.process_columns(keys, ts, cols)
    lists.process_columns(keys.to_pylist(), ts, [c.to_pylist() for c in cols])
    invalid = [h.side_output("invalid") for h in (arrow, lists)]
    assert repr(invalid[0]) == repr(invalid[1]) and len(invalid[0]) == refused
    assert not any(isinstance(r.key, pa.Scalar) for r, _ in invalid[0])  # Python values, as from lists
    for h in (arrow, lists):
        h.process_watermark(1_000)
    outputs = [h.output() for h in (arrow, lists)]
    assert repr(outputs[0]) == repr(outputs[1]) and (len(outputs[0]) > 0) == (refused < 4) and arrow.metrics == lists.metrics
    arrow.close()
    lists.close()


@pytest.mark.parametrize("keys", [
    pa.array(["b", "a", "b", "c", "a"]), pa.array([5, -1, 5, 1 << 40, -1], pa.int64()), pa.array([7, 3, 7], pa.uint8()),
    pa.array([b"x", b"y", b"x"]), pa.array(["b", None, "b"]), pa.array([1.0, 2.0, 1.0]),
    pa.chunked_array([["q", "r"], ["q"]])])
def test_factorize_of_arrow_equals_factorize_of_its_values(keys):
    codes, distinct = factorize(keys)
    expected_codes, expected = factorize(keys.to_pylist())
    assert codes.tolist() == expected_codes.tolist() and distinct == expected
    assert [type(k) for k in distinct] == [type(k) for k in expected]


@pytest.mark.parametrize("column", [
    pa.array([3, None, 7, 2], pa.int32()), pa.array([1.5, None, -2.0, 0.5], pa.float32()), pa.array([None] * 4, pa.float64()),
    pa.array([None] * 4, pa.null()), pa.array([1, 2, (1 << 64) - 1, 3], pa.uint64()), pa.array([1.0, -0.0, 2.0, 3.0]),
    pa.array([1.0, float("nan"), 2.0, 3.0]), pa.array([True, False, None, True]), pa.array(["a", "b", "c", "d"]),
    pa.array([1 << 62, 1 << 62, 1, 2], pa.int64())])
def test_masked_arrow_column_equals_masked_python_values(column):
    """The packed aggregates' view of an Arrow column is that of its Python values: the same numbers,
    nulls and type tag, or the same refusal (None) where numpy would not match ``add``."""
    order = np.array([3, 0, 2, 1])
    got, expected = _masked(column, order), _masked(column.to_pylist(), order)
    assert (got is None) == (expected is None)
    if got is not None:
        assert got[0].dtype == expected[0].dtype and got[2] == expected[2]
        assert got[0].tolist() == expected[0].tolist() and got[1].tolist() == expected[1].tolist()
