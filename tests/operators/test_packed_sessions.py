"""Packed accumulators (``RowAggregate`` as a ``PackedAggregate``) and packed session cells
(``operators.engines.packed_cells.PackedCells``), without an operator.

Packed results are compared with the per-accumulator methods by ``repr``: 1, 1.0 and True differ,
and so do None and 0 (an empty ``avg`` is ``[0, 0]``, an empty ``sum`` None). Each ``*_packed``
method may refuse (None) what it cannot compute exactly; where the inputs fit (ints and float
halves without -0.0 or NaN, one type per aggregate) it must not refuse, or these tests prove nothing.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from statekit.operators.aggregates.row_aggregate import KINDS, RowAggregate
from statekit.operators.engines.packed_cells import NO_TIMER, PackedCells, WindowTable

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
HALVES = st.integers(-50, 50).map(lambda x: x / 2)  # exact sums in any order; 0 / 2 is 0.0, never -0.0
SMALL_INTS = st.integers(-1000, 1000)
COLUMN_KINDS = ["int", "int-or-none", "float", "float-or-none", "bool", "bool-or-none", "none"]
EXAMPLES = settings(max_examples=150, deadline=None)


def column(kind: str, n: int) -> st.SearchStrategy:
    """A column of ``n`` values of ``kind``; int and float columns sometimes as numpy arrays."""
    if kind == "none":
        return st.just([None] * n)
    value = {"int": SMALL_INTS, "float": HALVES, "bool": st.booleans()}[kind.partition("-")[0]]
    if kind.endswith("-or-none"):
        return st.lists(st.one_of(st.none(), value), min_size=n, max_size=n)
    values = st.lists(value, min_size=n, max_size=n)
    if kind in ("int", "float"):
        dtype = np.int64 if kind == "int" else np.float64
        return st.one_of(values, values.map(lambda v: np.array(v, dtype=dtype)))
    return values


@st.composite
def columnar_case(draw) -> tuple:
    """(kinds of the columns, columns, aggregates, order, starts): ``order`` a permutation of some of
    the rows, ``starts`` where its non-empty runs begin."""
    n = draw(st.integers(1, 25))
    kinds = draw(st.lists(st.sampled_from(COLUMN_KINDS), min_size=1, max_size=4))
    columns = [draw(column(k, n)) for k in kinds]
    aggs = draw(st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, len(columns) - 1)), min_size=1, max_size=7))
    aggs = [(kind, None if kind == "count" else pos) for kind, pos in aggs]
    rows = draw(st.permutations(range(n)))[:draw(st.integers(1, n))]
    cuts = draw(st.sets(st.integers(1, len(rows) - 1))) if len(rows) > 1 else set()
    return kinds, columns, aggs, np.array(rows, np.int64), np.array([0, *sorted(cuts)], np.int64)


@EXAMPLES
@given(columnar_case())
def test_accumulate_packed_equals_accumulate(case):
    _, columns, aggs, order, starts = case
    fn = RowAggregate(aggs)
    expected = fn.accumulate(columns, order, starts)
    packed = fn.accumulate_packed(columns, order, starts)
    if any(kind != "count" and any(type(v) is bool for v in columns[pos]) for kind, pos in aggs):
        assert packed is None  # bools only pack from accumulators, not from columns
        return
    assert packed is not None, "ints and float halves (nulls allowed) must accumulate packed"
    assert packed.dtype == np.int64 and packed.shape == (len(starts), fn.packed_width())
    assert repr(fn.unpack(packed)) == repr(expected)


@EXAMPLES
@given(columnar_case())
def test_pack_round_trips_accumulators_of_columns(case):
    _, columns, aggs, order, starts = case
    fn = RowAggregate(aggs)
    accs = fn.accumulate(columns, order, starts)
    words = fn.pack(accs)
    assert words is not None and words.dtype == np.int64 and words.shape == (len(accs), fn.packed_width())
    assert repr(fn.unpack(words)) == repr(accs)


def slot(kind: str) -> st.SearchStrategy:
    """Any packable accumulator slot of ``kind``: ints in int64, any float (NaN, inf, -0.0), bools."""
    int64 = st.integers(INT64_MIN, INT64_MAX)
    if kind == "count":
        return st.integers(0, INT64_MAX)
    if kind == "avg":
        return st.one_of(st.just([0, 0]), st.lists(st.one_of(int64, st.floats()), min_size=1, max_size=1).flatmap(
            lambda s: st.integers(1, INT64_MAX).map(lambda n: [s[0], n])))
    return st.one_of(st.none(), int64, st.floats(), st.booleans(), st.sampled_from([-0.0, 0.0, INT64_MIN, INT64_MAX]))


@st.composite
def any_accumulators(draw) -> tuple:
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=0, max_size=7))
    aggs = [(kind, None if kind == "count" else 0) for kind in kinds]
    accs = draw(st.lists(st.tuples(*[slot(kind) for kind in kinds]).map(list), max_size=8))
    return aggs, accs


@EXAMPLES
@given(any_accumulators())
def test_pack_round_trips_any_packable_accumulators(case):
    aggs, accs = case
    fn = RowAggregate(aggs)
    words = fn.pack(accs)
    assert words is not None and words.dtype == np.int64 and words.shape == (len(accs), fn.packed_width())
    assert repr(fn.unpack(words)) == repr(accs)
    assert [[type(v) for v in acc] for acc in fn.unpack(words)] == [[type(v) for v in acc] for acc in accs]


@st.composite
def mergeable(draw) -> tuple:
    """Aggregates each of one value type (bools only for first/last), accumulators of them and groups."""
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=7))
    aggs = [(kind, None if kind == "count" else 0) for kind in kinds]
    slots = []
    for kind in kinds:
        types = ["int", "float"] + (["bool"] if kind in ("first", "last") else [])
        value = {"int": SMALL_INTS, "float": HALVES, "bool": st.booleans()}[draw(st.sampled_from(types))]
        if kind == "count":
            slots.append(st.integers(0, 1000))
        elif kind == "avg":
            slots.append(st.one_of(st.just([0, 0]), st.tuples(value, st.integers(1, 50)).map(list)))
        else:
            slots.append(st.one_of(st.none(), value))
    accs = draw(st.lists(st.tuples(*slots).map(list), min_size=1, max_size=12))
    cuts = draw(st.sets(st.integers(1, len(accs) - 1))) if len(accs) > 1 else set()
    return aggs, accs, np.array([0, *sorted(cuts)], np.int64)


@EXAMPLES
@given(mergeable())
def test_merge_packed_equals_folding_merge(case):
    aggs, accs, starts = case
    fn = RowAggregate(aggs)
    ends = [*starts.tolist()[1:], len(accs)]
    expected = []
    for s, e in zip(starts.tolist(), ends):
        acc = copy.deepcopy(accs[s])
        for other in accs[s + 1:e]:
            acc = fn.merge(acc, copy.deepcopy(other))  # left to right: order-sensitive first/last
        expected.append(acc)
    words = fn.pack(accs)
    assert words is not None
    got = fn.merge_packed(words, starts)
    assert got is not None, "accumulators of one type per aggregate must merge packed"
    assert got.dtype == np.int64 and got.shape == (len(starts), fn.packed_width())
    assert repr(fn.unpack(got)) == repr(expected)


@pytest.mark.parametrize("aggs, accs", [
    ([("sum", 0)], [[1], [1.5]]),                      # an int and a float sum: Python's merge gives a float
    ([("min", 0)], [[2.5], [None], [1]]),
    ([("avg", 0)], [[[1, 1]], [[1.5, 1]]]),
    ([("sum", 0)], [[True], [True]]),                  # bool sums add to ints
    ([("max", 0)], [[True], [False]]),
    ([("sum", 0)], [[float("nan")], [1.0]]),
    ([("min", 0)], [[1.0], [float("nan")]]),
    ([("min", 0)], [[0.0], [-0.0]]),                   # ties: Python keeps the first, numpy may not
    ([("max", 0)], [[-0.0], [0.0]]),
    ([("sum", 0)], [[1 << 62], [1 << 62]]),            # would overflow int64
    ([("count", None), ("last", 0)], [[1, 1], [2, 2.5]]),
])
def test_merge_packed_refuses_what_it_cannot_merge_exactly(aggs, accs):
    fn = RowAggregate(aggs)
    words = fn.pack(accs)
    assert words is not None
    assert fn.merge_packed(words, np.array([0])) is None


@pytest.mark.parametrize("aggs, accs", [
    ([("sum", 0)], [[1 << 63]]),
    ([("sum", 0)], [[INT64_MIN - 1]]),
    ([("min", 0)], [[1], [1 << 70]]),
    ([("count", None)], [[1 << 63]]),
    ([("avg", 0)], [[[True, 1]]]),
    ([("avg", 0)], [[[1 << 63, 1]]]),
    ([("avg", 0)], [[[1, 1 << 63]]]),
    ([("first", 0)], [["text"]]),
    ([("last", 0)], [[(1, 2)]]),
])
def test_pack_refuses_what_does_not_fit(aggs, accs):
    assert RowAggregate(aggs).pack(accs) is None


@pytest.mark.parametrize("col", [
    [1.0, float("nan"), 2.0], [1.0, -0.0, 2.0], [1.0, None, -0.0], [1, 2.5, 3], [1, None, 2.5],
    [True, False, True], [True, None, False], ["a", "b", "c"], [1, 1 << 62, 3], [1, 1 << 63, 2],
    np.array([1.0, np.nan, 2.0]), np.array([0.0, -0.0, 1.0]), np.array([1, 2, 3], np.int32),
])
def test_accumulate_packed_refuses_columns_it_cannot_reduce_exactly(col):
    fn = RowAggregate([("sum", 0), ("count", None)])
    assert fn.accumulate_packed([col], np.array([2, 0, 1]), np.array([0, 2])) is None
    words = fn.pack(fn.accumulate([col], np.array([2, 0, 1]), np.array([0, 2])))  # what the engine then stores
    if words is not None:
        assert repr(fn.unpack(words)) == repr(fn.accumulate([col], np.array([2, 0, 1]), np.array([0, 2])))


# -- packed cells --------------------------------------------------------------------------------
CELL_AGGS = [("sum", 0), ("count", None), ("avg", 1), ("first", 2), ("last", 2), ("min", 1)]


@st.composite
def key_sessions(draw) -> tuple:
    """(timer or None, sessions) of one key: sessions in time order, apart; no timer without sessions."""
    n = draw(st.integers(0, 4))
    bounds = sorted(draw(st.sets(st.integers(-10**12, 10**12), min_size=2 * n, max_size=2 * n)))
    accs = draw(st.lists(st.tuples(*[slot(kind) for kind, _ in CELL_AGGS]).map(list), min_size=n, max_size=n))
    sessions = [[s, e, acc] for s, e, acc in zip(bounds[::2], bounds[1::2], accs)]
    timer = draw(st.one_of(st.none(), st.integers(-10**12, 10**12))) if sessions else None
    return timer, sessions


@settings(max_examples=100, deadline=None)
@given(st.lists(key_sessions(), max_size=8))
def test_cells_round_trip(keys):
    fn = RowAggregate(CELL_AGGS)
    codec = PackedCells(fn, 2)
    cells = [codec.from_windows(timer, sessions) if sessions else None for timer, sessions in keys]
    assert all(type(c) is bytes for c in cells if c is not None)
    for cell, (timer, sessions) in zip(cells, keys):
        if cell is not None:
            assert repr(codec.to_windows(cell)) == repr((timer, sessions))
            assert len(cell) == 8 * (1 + len(sessions) * codec.width)
            assert np.frombuffer(cell, np.int64)[0] == (NO_TIMER if timer is None else timer)

    table = codec.decode(cells)
    counts = [len(sessions) for _, sessions in keys]
    assert table.timers.tolist() == [NO_TIMER if t is None else t for t, _ in keys]
    assert table.owner.tolist() == [k for k, n in enumerate(counts) for _ in range(n)]
    assert table.counts().tolist() == counts
    expected_rows = [[s, e] for _, sessions in keys for s, e, _ in sessions]
    assert table.rows[:, :2].tolist() == expected_rows
    assert repr(fn.unpack(table.rows[:, 2:])) == repr([acc for _, sessions in keys for _, _, acc in sessions])
    assert codec.encode(table) == cells       # and back, None where a key has no sessions

    again = codec.decode(codec.encode(table))
    for name in ("timers", "owner", "rows"):
        a, b = getattr(again, name), getattr(table, name)
        assert a.dtype == b.dtype == np.int64 and np.array_equal(a, b)


def test_a_key_left_without_sessions_encodes_to_none_and_its_timer_goes():
    codec = PackedCells(RowAggregate([("count", None)]), 2)
    rows = np.array([[10, 20, 3], [30, 40, 1]], np.int64)
    table = WindowTable(np.array([55, 77, NO_TIMER], np.int64), np.array([0, 0]), rows)
    cells = codec.encode(table)
    assert cells[1] is None and cells[2] is None and type(cells[0]) is bytes
    assert codec.to_windows(cells[0]) == (55, [[10, 20, [3]], [30, 40, [1]]])
    back = codec.decode([None, *cells, None])
    assert back.timers.tolist() == [NO_TIMER, 55, NO_TIMER, NO_TIMER, NO_TIMER]
    assert back.owner.tolist() == [1, 1] and back.rows.tolist() == rows.tolist()
    empty = codec.decode([None, None])
    assert empty.rows.shape == (0, codec.width) and codec.encode(empty) == [None, None]
    assert codec.to_windows(codec.from_windows(None, [[1, 2, [4]]])) == (None, [[1, 2, [4]]])


# -- known bug (fails at 3eb5891): merge_packed's overflow guard takes np.abs of int64 words, and
# np.abs(-2**63) is -2**63 (it wraps), so a sum holding int64's minimum passes the guard and wraps.
@pytest.mark.parametrize("aggs, accs, merged", [
    ([("sum", 0)], [[INT64_MIN], [-1]], [INT64_MIN - 1]),
    ([("avg", 0)], [[[INT64_MIN, 1]], [[-1, 1]]], [[INT64_MIN - 1, 2]]),
])
def test_merge_packed_refuses_sums_past_int64_min(aggs, accs, merged):
    fn = RowAggregate(aggs)
    assert fn.merge(*accs) == merged                     # Python's merge: past int64, cannot be packed
    words = fn.pack(accs)
    assert words is not None                             # each accumulator fits int64
    got = fn.merge_packed(words, np.array([0]))
    assert got is None, f"merge_packed gave {fn.unpack(got)} instead of refusing (expected {merged})"


@EXAMPLES
@given(st.one_of(any_accumulators(), mergeable().map(lambda case: case[:2])))
def test_result_columns_packed_equal_get_result(case):
    """Results computed from packed words in bulk, one list per aggregate: the same values and types as
    ``get_result`` of each unpacked accumulator (an avg of int sums divided as Python divides ints)."""
    aggs, accs = case
    fn = RowAggregate(aggs)
    columns = fn.result_columns_packed(fn.pack(accs))
    assert len(columns) == len(aggs) and all(len(c) == len(accs) for c in columns)
    if aggs:
        assert repr(list(zip(*columns))) == repr([fn.get_result(acc) for acc in accs])


def test_an_average_of_large_int_sums_is_divided_exactly():
    """Sums past 2**53 do not convert to float64 exactly: their averages are divided as Python ints."""
    fn = RowAggregate([("avg", 0)])
    accs = [[[2090926044445830980, 484]], [[-(1 << 60) - 7, 1 << 20]], [[0, 0]]]
    expected = [[s / n if n else None for [[s, n]] in accs]]
    assert repr(fn.result_columns_packed(fn.pack(accs))) == repr(expected)
    assert float(2090926044445830980) / 484 != 2090926044445830980 / 484  # what a float64 division gets wrong
