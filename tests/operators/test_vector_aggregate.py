"""A user's VectorAggregate and WindowBatchFunction (the example of docs/window-operators.md, run as the
doc has it) on the fast engines (packed session cells, the session table, tumbling and sliding windows)
against the same logic written as a plain AggregateFunction and ProcessWindowFunction on the record path
(``columnar=False``), on every backend: order-sensitive results (first/last), merges that bridge stored
sessions, late and late-but-allowed records, restores between epochs; and what a user's method returns
or is given that does not fit: errors naming the class, the method and the field or column."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import example, given, strategies as st

from statekit import AggregateFunction
from statekit.checkpoint.job import compare
from statekit.operators import (EventTimeSessionWindows, Output, ProcessWindowFunction, RowAggregate,
                                SlidingEventTimeWindows, TumblingEventTimeWindows, VectorAggregate, WindowBatchFunction,
                                WindowOperator)
from statekit.operators.windowing.columnar_window import ColumnarWindowOperator
from statekit.operators.windowing.record_window import RecordWindowOperator
from tests.operators.test_session_table import columns_of, harness
from tests.operators.windows_differential import BRIDGING, EPOCHS, KEY_FORMS, REFIRE, drive
from tests.operators_support import differential, fresh_stretch
from tests.test_readme import ROOT, blocks

DOC = ROOT / "docs" / "window-operators.md"
GAP, LATENESS = 10, 6


def doc_example() -> dict:
    """The names the doc's VectorAggregate example defines, made by running its code block as written."""
    block = next(b for b in blocks(DOC) if "class SessionStats(VectorAggregate)" in b.code)
    namespace = {"__name__": "window_operators_doc"}
    exec(compile(block.code, f"{DOC}:{block.line}", "exec"), namespace)  # noqa: S102 (the project's own doc)
    return namespace


DOC_EXAMPLE = doc_example()
SessionStats, SessionReport = DOC_EXAMPLE["SessionStats"], DOC_EXAMPLE["SessionReport"]


class PlainStats(AggregateFunction):
    """SessionStats one record at a time: (rows, sum, first, last) of the row's one value."""

    def create_accumulator(self):
        return (0, 0.0, None, None)

    def add(self, row, acc):
        (value,) = row
        return (acc[0] + 1, acc[1] + value, value if acc[0] == 0 else acc[2], value)

    def merge(self, a, b):
        if not a[0] or not b[0]:
            return b if not a[0] else a
        return (a[0] + b[0], a[1] + b[1], a[2], b[3])

    def get_result(self, acc):
        n, total, first, last = acc
        return (n, float(total), total / n, float(first), float(last))


class PlainReport(ProcessWindowFunction):
    """SessionReport one window at a time."""

    def process(self, key, context, elements):
        for n, _, mean, first, last in elements:
            yield (key, context.window.start, n, mean, last - first)


class Extremes(VectorAggregate):
    """Over rows (x int, y float): the largest x, whether a y was negative, the last y; its results
    come in another order than its fields (what a WindowBatchFunction names them by)."""

    def accumulator_fields(self):
        return {"hi": "int64", "negative": "bool", "last_y": "float64"}

    def create(self):
        return {"hi": np.iinfo(np.int64).min, "negative": False, "last_y": 0.0}

    def accumulate_runs(self, columns, starts):
        x, y = columns
        ends = np.append(starts[1:], len(x))
        return {"hi": np.maximum.reduceat(x, starts), "negative": np.logical_or.reduceat(y < 0, starts),
                "last_y": y[ends - 1]}

    def merge_runs(self, accs, starts):
        ends = np.append(starts[1:], len(accs["hi"]))
        return {"hi": np.maximum.reduceat(accs["hi"], starts),
                "negative": np.logical_or.reduceat(accs["negative"], starts), "last_y": accs["last_y"][ends - 1]}

    def results(self, accs):
        return {"last_y": accs["last_y"], "hi": accs["hi"], "negative": accs["negative"]}


class PlainExtremes(AggregateFunction):
    def create_accumulator(self):
        return None

    def add(self, row, acc):
        x, y = row
        return (x, y < 0, float(y)) if acc is None else (max(acc[0], x), acc[1] or y < 0, float(y))

    def merge(self, a, b):
        if a is None or b is None:
            return b if a is None else a
        return (max(a[0], b[0]), a[1] or b[1], b[2])

    def get_result(self, acc):
        return (acc[2], acc[0], acc[1])


class AllColumns(WindowBatchFunction):
    """The batch as it is: key, start, end and the result fields by name."""

    def batch(self, windows):
        return windows


class PlainColumns(ProcessWindowFunction):
    def process(self, key, context, elements):
        for result in elements:
            yield (key, context.window.start, context.window.end, *result)


AGGREGATES = {  # name: (VectorAggregate, plain AggregateFunction, batch function, its plain form, row width)
    "stats": (SessionStats, PlainStats, SessionReport, PlainReport, 1),
    "extremes": (Extremes, PlainExtremes, AllColumns, PlainColumns, 2),
}
ASSIGNERS = {
    "sessions": lambda: EventTimeSessionWindows.with_gap(GAP),
    "tumbling": lambda: TumblingEventTimeWindows(10, offset=3),
    "sliding": lambda: SlidingEventTimeWindows(25, 10, offset=-4),  # 2 or 3 windows per record
}
CASES = [  # (aggregate, assigner, state layout, window function: batch or none)
    ("stats", "sessions", "cells", "batch"), ("stats", "sessions", "table", "batch"),
    ("stats", "sessions", "table", "none"), ("stats", "tumbling", "cells", "batch"),
    ("stats", "sliding", "cells", "none"), ("extremes", "sessions", "cells", "batch"),
    ("extremes", "sessions", "table", "none"), ("extremes", "sliding", "cells", "batch"),
]
# stored windows of "a" (restored), then records into the same windows, after the watermark: merged packed
STORED = [([("a", 5, 1, 0.5), ("a", 6, 2, 1.5)], True, "python", 0, True),
          ([("a", 7, 3, -1.0), ("a", 8, 4, 2.0)], True, "arrow", 30, False)]
def operator(aggregate: str, assigner: str, layout: str | None, function: str) -> WindowOperator:
    """The fast operator (a state ``layout``) or the record path's plain one (``layout=None``)."""
    vector, plain, batch, plain_batch, _ = AGGREGATES[aggregate]
    fn = vector() if layout else plain()
    window_fn = None if function == "none" else batch() if layout else plain_batch()
    extra = {"state_layout": layout} if layout else {"columnar": False}
    return WindowOperator(ASSIGNERS[assigner](), fn, window_function=window_fn, allowed_lateness=LATENESS,
                          late_output_tag="late", **extra)


def spy(monkeypatch) -> dict[str, int]:
    """Counts the bulk paths taken: packed folds and merges of a VectorAggregate, results as columns."""
    calls = dict.fromkeys(("accumulate_packed", "merge_packed", "result_columns_packed", "collect_columns"), 0)
    for owner, name in [(VectorAggregate, "accumulate_packed"), (VectorAggregate, "merge_packed"),
                        (VectorAggregate, "result_columns_packed"), (Output, "collect_columns")]:
        real = getattr(owner, name)

        def counted(*args, _real=real, _name=name):
            calls[_name] += 1
            return _real(*args)
        monkeypatch.setattr(owner, name, counted)
    return calls


@pytest.mark.parametrize("aggregate, assigner, layout, function", CASES)
def test_vector_aggregate_equals_the_plain_one_on_the_record_path(backend_name, tmp_path, monkeypatch, aggregate,
                                                                  assigner, layout, function):
    width = AGGREGATES[aggregate][4]
    fast = harness(operator(aggregate, assigner, layout, function), backend_name, tmp_path / "f0")
    reference = harness(operator(aggregate, assigner, None, function), backend_name, tmp_path / "reference")
    assert type(fast.operator) is ColumnarWindowOperator and type(reference.operator) is RecordWindowOperator
    calls = spy(monkeypatch)
    dirs, examples = itertools.count(1), itertools.count()
    seen = {"restored": 0, "late": 0, "fired": 0, "refired": 0}
    carried = dict.fromkeys(fast.metrics, 0)  # metrics of the operators restored from

    @differential(backend_name, 12, 6)
    @given(epochs=EPOCHS, key_form=st.sampled_from(list(KEY_FORMS)))
    @example(epochs=BRIDGING, key_form="str")
    @example(epochs=STORED, key_form="int")
    @example(epochs=REFIRE, key_form="str")
    def check(epochs, key_form):
        nonlocal fast
        wm = fresh_stretch(fast, reference)
        wm += -wm % 100  # aligned windows start at the same offsets in every example
        for h in (fast, reference):
            h.process_watermark(wm)

        def remake(snapshot):
            return harness(operator(aggregate, assigner, layout, function), backend_name,
                           tmp_path / f"f{next(dirs)}", snapshot)
        fast = drive(fast, reference, epochs, next(examples), key_form, wm, width, remake, carried, seen)

    check()
    assert seen["restored"] and seen["late"] and seen["fired"], seen
    assert seen["refired"] or function == "none" or assigner == "sliding", seen  # late-but-allowed re-fires met
    assert min(calls.values()) > 0, calls  # the bulk paths ran, not only the per-record ones
    fast.close()
    reference.close()


def test_doc_example_on_the_record_path_too():
    """The doc's classes on the record path (a VectorAggregate's derived add/merge/get_result) give the
    doc's results; values handed out are tuples, never the stored accumulator."""
    stats = SessionStats()
    acc = stats.add((5,), stats.create_accumulator())
    acc = stats.merge(acc, stats.add((3,), stats.add((7,), stats.create_accumulator())))
    assert acc == (3, 15.0, 5.0, 3.0) and type(acc) is tuple
    assert stats.get_result(acc) == (3, 15.0, 5.0, 5.0, 3.0)
    assert stats.result_names() == ["count", "sum", "mean", "first", "last"]
    assert stats.unpack(stats.pack([acc])) == [acc]


class Mutating(Extremes):
    """Extremes that scribbles over every array it is given once it is done with it."""

    def accumulate_runs(self, columns, starts):
        out = super().accumulate_runs(columns, starts)
        out = {k: v.copy() for k, v in out.items()}
        for c in columns:
            c[:] = 0
        return out

    def merge_runs(self, accs, starts):
        out = {k: v.copy() for k, v in super().merge_runs(accs, starts).items()}
        for v in accs.values():
            v[:] = 0
        return out

    def results(self, accs):
        out = {k: v.copy() for k, v in super().results(accs).items()}
        for v in accs.values():
            v[:] = 0
        return out


def test_arrays_handed_to_the_user_are_copies(backend_name, tmp_path):
    """A function that overwrites its inputs changes neither the caller's columns nor stored state:
    fires, a bridging merge and a late-but-allowed re-fire give the plain function's results."""
    def op(fn, reference):
        return WindowOperator(EventTimeSessionWindows.with_gap(GAP), fn, allowed_lateness=20, columnar=not reference,
                              window_function=None if reference else AllColumns())

    fast = harness(op(Mutating(), False), backend_name, tmp_path / "f")
    reference = harness(WindowOperator(EventTimeSessionWindows.with_gap(GAP), PlainExtremes(), columnar=False,
                                       allowed_lateness=20, window_function=PlainColumns()), backend_name, tmp_path / "r")
    x, y = np.array([4, 9, 2], np.int64), np.array([0.5, -1.0, 2.0])
    fast.process_columns(["k", "k", "j"], np.array([100, 125, 100]), [x, y])
    reference.process_batch([("k", (4, 0.5), 100), ("k", (9, -1.0), 125), ("j", (2, 2.0), 100)])
    assert x.tolist() == [4, 9, 2] and y.tolist() == [0.5, -1.0, 2.0]
    for records, wm in [([("k", (3, 1.5), 112), ("k", (1, 3.0), 118)], 150), ([("k", (7, 2.5), 140)], 400)]:
        fast.process_columns(*columns_of(records))
        reference.process_batch(records)
        for h in (fast, reference):
            h.process_watermark(wm)
        assert repr(fast.output()) == repr(reference.output())
    fast.close()
    reference.close()
    fn = Mutating()
    words = fn.pack([(5, True, 1.5), (7, False, -2.0)])  # packed words as an engine holds them
    before = words.copy()
    assert fn.unpack(fn.merge_packed(words, np.array([0]))) == [(7, True, -2.0)]
    assert [c.tolist() for c in fn.result_columns_packed(words)] == [[1.5, -2.0], [5, 7], [True, False]]
    assert (words == before).all()


class Broken(SessionStats):
    """SessionStats with one method replaced by ``how``."""

    def __init__(self, method: str, how):
        self.method, self.how = method, how

    def accumulate_runs(self, columns, starts):
        got = super().accumulate_runs(columns, starts)
        return self.how(got) if self.method == "accumulate_runs" else got

    def merge_runs(self, accs, starts):
        got = super().merge_runs(accs, starts)
        return self.how(got) if self.method == "merge_runs" else got

    def results(self, accs):
        got = super().results(accs)
        return self.how(got) if self.method == "results" else got

    def accumulator_fields(self):
        got = super().accumulator_fields()
        return self.how(got) if self.method == "accumulator_fields" else got

    def create(self):
        got = super().create()
        return self.how(got) if self.method == "create" else got


def without(name):
    return lambda d: {k: v for k, v in d.items() if k != name}


@pytest.mark.parametrize("method, how, message", [
    ("accumulate_runs", without("last"), "SessionStats.accumulate_runs returned fields ['n', 'total', 'first']: missing ['last']"),
    ("accumulate_runs", lambda d: {**d, "max": d["n"]}, "SessionStats.accumulate_runs returned fields ['n', 'total', 'first', 'last', 'max']: not declared ['max']"),
    ("accumulate_runs", lambda d: {**d, "n": d["n"][:-1]}, "SessionStats.accumulate_runs: field 'n' is shape (1,); expected one value per run (2)"),
    ("accumulate_runs", lambda d: {**d, "n": d["n"] * 0.5}, "SessionStats.accumulate_runs: field 'n' is float64, which does not fit its declared type int64"),
    ("accumulate_runs", lambda d: list(d.values()), "SessionStats.accumulate_runs returned list"),
    ("merge_runs", lambda d: {**d, "total": 1.0}, "SessionStats.merge_runs: field 'total' is a scalar; expected one value per group (1)"),
    ("merge_runs", lambda d: {**d, "first": d["first"].astype(str)}, "SessionStats.merge_runs: field 'first' is <U32, which does not fit its declared type float64"),
    ("results", lambda d: {**d, "count": d["count"][:0]}, "SessionStats.results: field 'count' is shape (0,); expected one value per accumulator (1)"),
    ("results", lambda d: d if not d["count"].any() else without("mean")(d),
     "SessionStats.results returned the result fields ['count', 'sum', 'first', 'last']: expected the result "
     "fields ['count', 'sum', 'mean', 'first', 'last']"),
    ("accumulator_fields", lambda d: {**d, "n": "int32"}, "SessionStats.accumulator_fields: field 'n' has type 'int32'"),
    ("create", without("n"), "SessionStats.create returned fields ['total', 'first', 'last']: missing ['n']"),
    ("create", lambda d: {**d, "n": 0.5}, "SessionStats.create: field 'n' is float64, which does not fit its declared type int64"),
])
def test_what_a_users_method_returns_is_checked(tmp_path, method, how, message):
    """Two runs (accumulate_runs) bridged by a third into one session (merge_runs), fired (results):
    each bad return is an error naming the class, the method and the field."""
    with pytest.raises(TypeError) as err:
        h = harness(WindowOperator(EventTimeSessionWindows.with_gap(GAP), Broken(method, how)), "heap", tmp_path / "h")
        h.process_columns(["k", "k"], np.array([100, 120]), [[1, 2]])
        h.process_columns(["k"], np.array([110]), [[3]])
        h.process_watermark(1000)
    assert message in str(err.value).replace("Broken.", "SessionStats.")
    assert "VectorAggregate Broken." in str(err.value)


@pytest.mark.parametrize("column", [[1, None, 3], pa.array([1, None, 3], pa.int64())], ids=["python", "arrow"])
def test_a_null_in_a_column_is_refused_naming_its_position(tmp_path, column):
    def fresh(name):
        return harness(WindowOperator(EventTimeSessionWindows.with_gap(GAP), Extremes()), "heap", tmp_path / name)

    with pytest.raises(ValueError, match=r"VectorAggregate Extremes.accumulate_runs: column 0 of the row holds a null "
                                         r"\(None, in row 1 of those aggregated\).*fill or drop them"):
        fresh("columns").process_columns(["k"] * 3, np.array([1, 2, 3]), [column, [0.5, 1.5, 2.5]])
    with pytest.raises(ValueError, match="column 1 of the row holds a null"):
        fresh("records").process_batch([("j", (1, None), 5)])  # the per-record add: the same rule


def test_a_null_only_in_rows_not_aggregated_is_no_error(tmp_path):
    """A late record's null never reaches the aggregate (it goes to the late side output as it is)."""
    h = harness(WindowOperator(EventTimeSessionWindows.with_gap(GAP), Extremes()), "heap", tmp_path / "h")
    h.process_watermark(100)
    h.process_columns(pa.array(["k", "late"]), np.array([200, 5]), [pa.array([1, None]), pa.array([0.5, 1.0])])
    assert h.side_output("late") == [((None, 1.0), 5)]
    h.process_watermark(1000)
    assert h.output() == [((0.5, 1, False), 209)]


def test_a_changed_field_list_is_a_refused_state_layout():
    class MoreStats(SessionStats):
        def accumulator_fields(self):
            return {**super().accumulator_fields(), "sq": "float64"}

    def description(fn):
        return {"operator": WindowOperator(EventTimeSessionWindows.with_gap(GAP), fn).describe()}

    assert compare(description(SessionStats()), description(SessionStats())) == ([], [])
    carried, refused = compare(description(SessionStats()), description(MoreStats()))
    assert len(refused) == 1 and refused[0].startswith("operator state layout")
    assert '["last", "float64"], ["sq", "float64"]' in refused[0]


def test_batch_function_result_names():
    """Result fields go by the names given, by position without them; names colliding with the window
    columns are refused; a names list of the wrong length is an error naming both counts."""
    windows = []

    class Keep(WindowBatchFunction):
        def batch(self, batch):
            windows.append(batch)
            return {"key": batch["key"]}

    Keep().columns(["a"], np.array([0]), np.array([5]), [[1], [2.5]])
    assert windows[-1].schema.names == ["key", "start", "end", "result_0", "result_1"]
    with pytest.raises(ValueError, match="none of \\['key', 'start', 'end'\\]"):
        Keep(["start"])
    with pytest.raises(TypeError, match="gives 2 result fields, named \\['n'\\] \\(1\\)"):
        Keep(["n"]).columns(["a"], np.array([0]), np.array([5]), [[1], [2.5]])
    with pytest.raises(TypeError, match="Keep: the windows' keys \\(tuple, ...\\) do not make an Arrow column .*str, int or bytes"):
        Keep().columns([(1, "a")], np.array([0]), np.array([5]), [[1]])
    with pytest.raises(TypeError, match="Listing.batch returned a list"):
        type("Listing", (Keep,), {"batch": lambda self, b: [b["key"]]})().columns(["a"], [0], [5], [[1]])


class Kept(WindowBatchFunction):
    """Keeps each batch it is given; outputs the keys."""

    def __init__(self, result_names=None):
        super().__init__(result_names)
        self.batches = []

    def batch(self, windows):
        self.batches.append(windows)
        return {"key": windows["key"]}


class AtStart(Extremes):
    """Extremes with a result field named like a window column."""

    def results(self, accs):
        return {"start": accs["hi"]}


@pytest.mark.parametrize("assigner, columnar", [("sessions", True), ("sliding", True), ("tumbling", False)])
def test_the_operator_hands_the_aggregates_result_names_to_its_batch_function(tmp_path, assigner, columnar):
    """A WindowBatchFunction given no names gets the aggregate's, on the engines and the record path: a
    VectorAggregate's result_names(), a RowAggregate's names; a plain aggregate's fields go by position,
    names given to the constructor stay."""
    cases = [(Extremes(), None, ["last_y", "hi", "negative"]),
             (RowAggregate([("max", 0), ("count", None)], names=["top", "rows"]), None, ["top", "rows"]),
             (RowAggregate([("max", 0), ("count", None)]), None, ["result_0", "result_1"]),
             (PlainExtremes(), None, ["result_0", "result_1", "result_2"]),
             (Extremes(), ["y", "x", "neg"], ["y", "x", "neg"])]
    for i, (fn, given, expected) in enumerate(cases):
        kept = Kept(given)
        h = harness(WindowOperator(ASSIGNERS[assigner](), fn, window_function=kept, columnar=columnar), "heap",
                    tmp_path / f"h{i}")
        h.process_columns(["k", "k"], np.array([100, 104]), [[4, 9], [0.5, -1.0]])
        h.process_watermark(1_000)
        assert h.output() and kept.batches, (fn, h.output())
        assert {tuple(b.schema.names) for b in kept.batches} == {("key", "start", "end", *expected)}, fn
        h.close()


def test_result_names_that_do_not_fit_are_refused_when_the_operator_is_made():
    """Names of an aggregate's results that collide with a window column, or one batch function shared by
    aggregates of other names: refused by WindowOperator(...), naming the names and the way out."""
    window = EventTimeSessionWindows.with_gap(GAP)
    with pytest.raises(ValueError, match=r"Kept: result names \['start'\] \(of its aggregate\) must be distinct "
                                         r"strings, none of \['key', 'start', 'end'\]: rename the aggregate's results"):
        WindowOperator(window, AtStart(), window_function=Kept())
    WindowOperator(window, AtStart(), window_function=Kept(["hi"]))  # names of its own: the aggregate's unused
    shared = Kept()
    WindowOperator(window, Extremes(), window_function=shared)
    WindowOperator(TumblingEventTimeWindows(10), Extremes(), window_function=shared)  # the same names: fine
    with pytest.raises(ValueError, match=r"Kept: this instance already names the result fields \['last_y', 'hi', "
                                         r"'negative'\] .*names them \['count', 'sum', 'mean', 'first', 'last'\]: "
                                         r"give each operator its own Kept"):
        WindowOperator(window, SessionStats(), window_function=shared)
