"""A plain Python AggregateFunction (no ``accumulate``, no packing) with a ProcessWindowFunction on the
session engine, fed as columns the way a Spark task feeds it, against the record path.

Each run's rows reach the function's own ``add`` in one fold (``Incremental.fold`` over ``RowView.take``),
fired windows reach ``process`` in one loop, and the key of a fired window is made current only once the
window function takes keyed state (in ``open`` or through its context). Results, late records, metrics
and what is left in state must equal the record path's: order-sensitive accumulators, merges that bridge
stored sessions, late-but-allowed re-fires and a restore mid-stream (in a fresh interpreter too) included.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, strategies as st

from statekit import AggregateFunction, StateConfig, ValueStateDescriptor
from statekit.operators import EventTimeSessionWindows, ProcessWindowFunction, WindowOperator
from statekit.operators.windowing.columnar_window import ColumnarWindowOperator
from statekit.operators.windowing.record_window import RecordWindowOperator
from statekit.operators.testing import OperatorHarness
from tests.operators_support import differential, fresh_stretch

GAP = 10
ROOT = Path(__file__).resolve().parents[2]


class Trail(AggregateFunction):
    """Order-revealing, tuple accumulators: (count, sum, the tags in the order added, ``|`` where merged)."""

    def create_accumulator(self):
        return (0, 0, "")

    def add(self, row, acc):
        return (acc[0] + 1, acc[1] + row[1], acc[2] + row[0] + ";")

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1], a[2] + "|" + b[2])

    def get_result(self, acc):
        return acc


FIRES = ValueStateDescriptor("fires", default=0)


class Emit(ProcessWindowFunction):
    """One row per fired session: key, bounds, result; the watermark shows when it fired."""

    def process(self, key, context, elements):
        (result,) = elements
        yield (key, context.window.start, context.window.end, *result, int(context.current_watermark))


class CountedInProcess(ProcessWindowFunction):
    """Counts each key's fires in keyed state taken through the context on its first window and kept:
    later windows use it without asking again, so their keys must be made current before ``process``."""

    def __init__(self) -> None:
        self.fires = None

    def process(self, key, context, elements):
        if self.fires is None:
            self.fires = context.global_state.get_state(FIRES)
        self.fires.update(self.fires.value() + 1)
        yield (key, context.window.start, context.window.end, *elements[0], self.fires.value())


class CountedFromOpen(ProcessWindowFunction):
    """The same count in keyed state taken in ``open``."""

    def open(self, context):
        self.fires = context.get_state(FIRES)

    def process(self, key, context, elements):
        self.fires.update(self.fires.value() + 1)
        yield (key, context.window.start, context.window.end, *elements[0], self.fires.value())


WINDOW_FUNCTIONS = {"emit": Emit, "state-in-process": CountedInProcess, "state-from-open": CountedFromOpen}


def operator(window_function: str, lateness: int, reference: bool) -> WindowOperator:
    return WindowOperator(EventTimeSessionWindows.with_gap(GAP), Trail(), window_function=WINDOW_FUNCTIONS[window_function](),
                          columnar=not reference, allowed_lateness=lateness, late_output_tag="late",
                          invalid_output_tag="invalid")


def harness(op: WindowOperator, backend: str, path: Path, snapshot: bytes | None = None) -> OperatorHarness:
    h = OperatorHarness(op, StateConfig(backend=backend, local_dir=str(path)))
    if snapshot is not None:
        h.restore(snapshot)
    h.open()
    return h


def feed(h: OperatorHarness, records: list, as_columns: bool) -> None:
    """An epoch's ``(key, (tag, value), ts)`` records as columns (a task's Arrow-like input), or as records."""
    if not as_columns:
        h.process_batch(records)
        return
    keys = [k for k, _, _ in records]
    ts = np.array([t for _, _, t in records], np.int64)
    h.process_columns(keys, ts, [[v[0] for _, v, _ in records], [v[1] for _, v, _ in records]])


def drained(h: OperatorHarness) -> str:
    return repr((h.output(), h.side_output("late"), h.side_output("invalid")))


KEYS = st.sampled_from(["a", "b", "c", 7, 8])
# epochs: rows (key, time offset from the watermark, value); in time order or not; watermark advance
EPOCHS = st.lists(st.tuples(st.lists(st.tuples(KEYS, st.integers(-25, 40), st.integers(-9, 9)), max_size=25),
                            st.booleans(), st.integers(0, 25)), min_size=1, max_size=6)
# stored sessions [0, 10) and [25, 35) of "a"; then 10 (touches the first) and 18 (bridges both), in time order
BRIDGING = [([("a", 0, 1), ("a", 25, 2)], True, 0), ([("a", 10, 3), ("a", 18, 4), ("a", 100, 5), ("b", 2, 6)], True, 30)]
# a session fired at once, then a late-but-allowed record re-fires it (lateness 7)
REFIRING = [([("a", 0, 1), ("b", 1, 2)], True, 12), ([("a", 3, 3), ("b", 30, 4)], True, 0)]


def epoch_records(n: int, wm: int, rows: list, in_time_order: bool, as_columns: bool) -> list:
    """Example ``n``'s rows as records of keys of their own (``n``-tagged; str keys for columns)."""
    recs = [(f"{n}/{k}" if as_columns else (n, k), (f"t{i}", v), wm + dt) for i, (k, dt, v) in enumerate(rows)]
    return sorted(recs, key=lambda r: r[2]) if in_time_order else recs


@pytest.mark.parametrize("window_function", list(WINDOW_FUNCTIONS))
@pytest.mark.parametrize("lateness", [0, 7])
def test_plain_aggregate_equals_record_path(backend_name, tmp_path, window_function, lateness):
    engine = harness(operator(window_function, lateness, False), backend_name, tmp_path / "engine")
    reference = harness(operator(window_function, lateness, True), backend_name, tmp_path / "reference")
    assert type(engine.operator) is ColumnarWindowOperator and type(reference.operator) is RecordWindowOperator
    examples = itertools.count()

    @differential(backend_name, 30, 15)
    @given(epochs=EPOCHS, as_columns=st.booleans())
    @example(epochs=BRIDGING, as_columns=True)
    @example(epochs=REFIRING, as_columns=True)
    def check(epochs, as_columns):
        n = next(examples)
        wm = fresh_stretch(engine, reference)
        for rows, in_time_order, advance in epochs:
            recs = epoch_records(n, wm, rows, in_time_order, as_columns)
            reference.process_batch(recs)
            feed(engine, recs, as_columns)
            assert drained(engine) == drained(reference)
            wm += advance
            for h in (engine, reference):
                h.process_watermark(wm)
            assert drained(engine) == drained(reference)
            assert engine.metrics == reference.metrics
        for h in (engine, reference):
            h.process_watermark(wm + 500)
        assert drained(engine) == drained(reference)
        assert engine.backend.state_entry_counts().get("fires") == reference.backend.state_entry_counts().get("fires")

    check()
    engine.close()
    reference.close()


FIRST = [("a", ("t0", 1), 100), ("b", ("t1", 2), 101), ("a", ("t2", 3), 104), ("c", ("t3", 4), 150)]
FIRST_WATERMARK = 115  # fires a's [100, 114) and b's [101, 111); lateness 7 keeps a's until 120
# 105 joins a's fired session, which fires again at once; 125 starts a new one
SECOND = [("a", ("t4", 5), 105), ("b", ("t5", 6), 180), ("a", ("t6", 7), 125), ("c", ("t7", 8), 155)]


def resumed(backend: str, local_dir: str, snapshot: bytes, window_function: str) -> str:
    """The second epoch and a final watermark on an engine restored from ``snapshot``: what it emitted."""
    h = harness(operator(window_function, 7, False), backend, Path(local_dir), snapshot)
    feed(h, SECOND, True)
    out = [drained(h)]
    h.process_watermark(10_000)
    out.append(drained(h))
    h.close()
    return repr(out)


@pytest.mark.parametrize("window_function", list(WINDOW_FUNCTIONS))
def test_restored_mid_stream_in_a_fresh_interpreter_goes_on_as_the_record_path(backend_name, tmp_path, window_function):
    """Sessions stored by the engine (two fired, one open) restored into a new engine, here and in a new
    interpreter: both go on as the record path does without a restore (a late-but-allowed re-fire included)."""
    engine = harness(operator(window_function, 7, False), backend_name, tmp_path / "engine")
    reference = harness(operator(window_function, 7, True), backend_name, tmp_path / "reference")
    feed(engine, FIRST, True)
    reference.process_batch(FIRST)
    for h in (engine, reference):
        h.process_watermark(FIRST_WATERMARK)
    assert drained(engine) == drained(reference)
    snapshot = engine.snapshot()
    engine.close()
    reference.process_batch(SECOND)
    expected = [drained(reference)]
    reference.process_watermark(10_000)
    expected.append(drained(reference))
    reference.close()
    assert "'t0;t2;t4;'" in expected[0]  # the re-fire at once of the restored session with the record added
    assert resumed(backend_name, str(tmp_path / "warm"), snapshot, window_function) == repr(expected)
    (tmp_path / "snapshot").write_bytes(snapshot)
    code = ("import sys; from pathlib import Path; from tests.operators.test_plain_aggregate_engine import resumed; "
            "print(resumed(*sys.argv[1:3], Path(sys.argv[3]).read_bytes(), sys.argv[4]))")
    done = subprocess.run([sys.executable, "-c", code, backend_name, str(tmp_path / "cold"), str(tmp_path / "snapshot"),
                           window_function], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == repr(expected)
