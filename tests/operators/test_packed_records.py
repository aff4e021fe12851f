"""Plain AggregateFunctions on the session table (``state_layout="table"``, packed by ``PackedRecords``)
against the same functions on the record path (``columnar=False``), on every backend: an order-sensitive
accumulator with int, float and bool fields, a list mutated in place, int fields that receive floats or
ints beyond int64 (those sessions stay unpacked, exactly), merges that bridge stored sessions, late and
late-but-allowed records, restores between epochs; and what the table refuses."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import example, given, strategies as st

from statekit import AggregateFunction, StateError
from statekit.checkpoint.job import compare
from statekit.operators import EventTimeSessionWindows, WindowOperator
from statekit.operators.aggregates.packed_records import PackedRecords
from statekit.operators.engines.session_table import SessionTable
from tests.operators.test_session_table import harness
from tests.operators.windows_differential import BRIDGING, EPOCHS, KEY_FORMS, REFIRE, drive
from tests.operators_support import KeyedWindowResult, differential, fresh_stretch

GAP = 10
P = 1_000_003
BIG = 1 << 63  # beyond int64 (within msgpack's uint64)


class OrderHash(AggregateFunction):
    """(count, first x, last x, rolling hash of the x's, sum of the y's, any y negative): order-sensitive."""

    def create_accumulator(self):
        return (0, 0, 0, 0, 0.0, False)

    def add(self, row, acc):
        x, y = row
        n, first, _, h, total, negative = acc
        return (n + 1, x if n == 0 else first, x, (h * 31 + x) % P, total + y, negative or y < 0)

    def merge(self, a, b):
        if not a[0] or not b[0]:
            return b if not a[0] else a
        return (a[0] + b[0], a[1], b[2], (a[3] * pow(31, b[0], P) + b[3]) % P, a[4] + b[4], a[5] or b[5])

    def get_result(self, acc):
        return acc


class InPlace(AggregateFunction):
    """[count, sum of x, last y] as a list the user's add and merge change in place."""

    def create_accumulator(self):
        return [0, 0, 0.0]

    def add(self, row, acc):
        acc[0] += 1
        acc[1] += row[0]
        acc[2] = row[1]
        return acc

    def merge(self, a, b):
        a[0] += b[0]
        a[1] += b[1]
        a[2] = b[2]
        return a

    def get_result(self, acc):
        return tuple(acc)


class Mixed(AggregateFunction):
    """(sum, count) declared as ints, summing x or, when x is a multiple of 3, the float y: an int field
    that receives a float (and an int beyond int64 when x is one)."""

    def create_accumulator(self):
        return (0, 0)

    def add(self, row, acc):
        x, y = row
        return (acc[0] + (y if x % 3 == 0 else x), acc[1] + 1)

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1])

    def get_result(self, acc):
        return acc


FUNCTIONS = {"hash": OrderHash, "in-place": InPlace, "mixed": Mixed}
# "a" holds an int beyond int64 (unpacked, restored), then merges with a packed session of its own
UNPACKED = [([("a", 0, BIG, 0.5), ("b", 3, 1, 0.5), ("a", 14, 2, 1.0)], True, "python", 0, True),
            ([("a", 7, 4, -0.0), ("b", 8, 3, -0.0)], True, "python", 30, True)]

def operator(function: str, lateness: int, table: bool) -> WindowOperator:
    """The table (``table``) or the record path's operator of the same plain function."""
    extra = {"state_layout": "table"} if table else {"columnar": False}
    return WindowOperator(EventTimeSessionWindows.with_gap(GAP), FUNCTIONS[function](), window_function=KeyedWindowResult(True),
                          allowed_lateness=lateness, late_output_tag="late", **extra)


@pytest.mark.parametrize("function", list(FUNCTIONS))
@pytest.mark.parametrize("lateness", [0, 6])
def test_table_equals_the_record_path(backend_name, tmp_path, monkeypatch, function, lateness):
    fast = harness(operator(function, lateness, True), backend_name, tmp_path / "f0")
    reference = harness(operator(function, lateness, False), backend_name, tmp_path / "reference")
    assert type(fast.operator._engine) is SessionTable and isinstance(fast.operator.function, PackedRecords)
    merges = [0]
    real_merge = PackedRecords.merge_packed

    def counted(self, words, starts):
        merges[0] += 1
        return real_merge(self, words, starts)
    monkeypatch.setattr(PackedRecords, "merge_packed", counted)
    dirs, examples = itertools.count(1), itertools.count()
    seen = {"restored": 0, "listed": 0, "late": 0, "fired": 0, "refired": 0}
    carried = dict.fromkeys(fast.metrics, 0)  # metrics of the operators restored from

    @differential(backend_name, 25, 10)
    @given(epochs=EPOCHS, key_form=st.sampled_from(list(KEY_FORMS)))
    @example(epochs=BRIDGING, key_form="str")
    @example(epochs=UNPACKED, key_form="int")
    @example(epochs=REFIRE, key_form="str")
    def check(epochs, key_form):
        nonlocal fast

        def listed(h):
            seen["listed"] += bool(h.operator._engine._overflow)

        def remake(snapshot):
            return harness(operator(function, lateness, True), backend_name, tmp_path / f"f{next(dirs)}", snapshot)
        fast = drive(fast, reference, epochs, next(examples), key_form, fresh_stretch(fast, reference), 2, remake,
                     carried, seen, listed)

    check()
    assert seen["restored"] and seen["listed"] and merges[0], (seen, merges)
    assert seen["late"] and (seen["refired"] > 0) == (lateness > 0), seen
    fast.close()
    reference.close()


def test_pack_is_exact_or_none():
    """Values of exactly their field's type pack and come back so (floats by their bits); anything else
    does not pack: a float or bool in an int field, an int in a float field, an int beyond int64, another
    container or length."""
    packed = PackedRecords(OrderHash())
    accs = [(1, -5, 7, 3, -0.0, True), (2, (1 << 63) - 1, -(1 << 63), 0, float("inf"), False)]
    back = packed.unpack(packed.pack(accs))
    assert repr(back) == repr(accs) and all(type(a) is tuple for a in back)
    for bad in [(1, 2.0, 7, 3, 0.5, True), (1, True, 7, 3, 0.5, True), (1, 2, 7, 3, 1, True), (1, 2, 7, 3, 0.5, 1),
                (1, BIG, 7, 3, 0.5, True), (1, -BIG - 1, 7, 3, 0.5, True), [1, 2, 7, 3, 0.5, True], (1, 2, 7, 3, 0.5)]:
        assert packed.pack([accs[0], bad]) is None, bad


def test_unpacked_lists_are_new_and_merges_fold_in_order():
    """A list accumulator comes back as new lists: the user's in-place add and merge change neither the
    words nor another accumulator; merge_packed folds each group's accumulators in their order."""
    packed = PackedRecords(InPlace())
    words = packed.pack([[1, 10, 0.5], [2, 20, 1.5], [3, 30, 2.5]])
    kept = words.copy()
    first, second, _ = packed.unpack(words)
    packed.add((5, 9.0), first)
    assert first == [2, 15, 9.0] and second == [2, 20, 1.5] and (words == kept).all()
    merged = packed.merge_packed(words, np.array([0, 1]))
    assert (words == kept).all()
    assert packed.unpack(merged) == [[1, 10, 0.5], [5, 50, 2.5]]
    hashed = PackedRecords(OrderHash())
    fn = OrderHash()
    parts = [fn.add((x, 0.5), fn.create_accumulator()) for x in (3, 1, 2)]
    whole = fn.create_accumulator()
    for x in (3, 1, 2):
        whole = fn.add((x, 0.5), whole)
    assert hashed.unpack(hashed.merge_packed(hashed.pack(parts), np.array([0]))) == [whole]


class Nested(AggregateFunction):
    def __init__(self, created):
        self.created = created

    def create_accumulator(self):
        return self.created

    def add(self, value, acc):
        return acc

    def merge(self, a, b):
        return a

    def get_result(self, acc):
        return acc


@pytest.mark.parametrize("created", [(1, (2, 3)), (1, "a"), (1, None), None, {"n": 1}, 5, (), [1, [2]], 2.5])
def test_an_accumulator_that_does_not_pack_is_refused_on_the_table(created):
    with pytest.raises(ValueError) as e:
        WindowOperator(EventTimeSessionWindows.with_gap(GAP), Nested(created), state_layout="table")
    message = str(e.value)
    assert "test_packed_records:Nested" in message and repr(created)[:20] in message
    assert "state_layout='cells'" in message and "any accumulator" in message
    WindowOperator(EventTimeSessionWindows.with_gap(GAP), Nested(created))  # the cells layout takes it


class FloatSums(Mixed):
    """Mixed with a float sum: the same width, another field kind."""

    def create_accumulator(self):
        return (0.0, 0)


def test_other_field_kinds_are_a_refused_state_layout():
    def description(fn):
        return {"operator": WindowOperator(EventTimeSessionWindows.with_gap(GAP), fn, state_layout="table").describe()}

    assert compare(description(Mixed()), description(Mixed())) == ([], [])
    _, refused = compare(description(Mixed()), description(FloatSums()))
    assert len(refused) == 1 and refused[0].startswith("operator state layout"), refused
    assert '"fields": ["int64", "int64"]' in refused[0] and '"fields": ["float64", "int64"]' in refused[0]


class MixedV2(Mixed):
    def accumulator_version(self):
        return 2

    def accumulator_migration(self):
        return lambda version, acc: acc


def test_packed_words_of_another_accumulator_version_are_refused(backend_name, tmp_path):
    """A table snapshot of version 1 restored by a function of version 2 with a migration: the words'
    field kinds are not known, so the restore fails naming both versions instead of guessing them."""
    h = harness(WindowOperator(EventTimeSessionWindows.with_gap(GAP), Mixed(), state_layout="table"), backend_name,
                tmp_path / "v1")
    h.process_columns(["a", "b"], np.array([1, 2], np.int64), [[1, 2], [0.5, 0.5]])
    snapshot = h.snapshot()
    h.close()
    with pytest.raises(StateError, match="version 1 cannot be read by its version 2"):
        harness(WindowOperator(EventTimeSessionWindows.with_gap(GAP), MixedV2(), state_layout="table"), backend_name,
                tmp_path / "v2", snapshot)
