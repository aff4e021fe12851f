"""A plain Python AggregateFunction (no ``accumulate``, no packing) on the aligned-window engine (tumbling
and sliding windows), fed as Python columns, Arrow columns or records, against the record path.

Each (key, window) run's values reach the function's own ``add`` in one fold (``Incremental.fold``), as
on the session engine. The accumulator is order-revealing, so results, late records, metrics and what is
left in state must equal one-by-one processing: late-but-allowed re-fires and restores mid-stream (in a
fresh interpreter too) included.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import example, given, strategies as st

from statekit import AggregateFunction
from statekit.operators import ProcessWindowFunction, SlidingEventTimeWindows, TumblingEventTimeWindows, WindowOperator
from statekit.operators.engines.aligned_engine import AlignedEngine
from statekit.operators.windowing.internal_functions import AggregateAdd
from statekit.operators.windowing.record_window import RecordWindowOperator
from tests.operators.test_session_table import harness
from tests.operators.windows_differential import EPOCHS, KEY_FORMS, REFIRE, drive, feed
from tests.operators_support import differential, fresh_stretch

ROOT = Path(__file__).resolve().parents[2]
LATENESS = 6
ASSIGNERS = {
    "tumbling": lambda: TumblingEventTimeWindows(10, offset=3),
    "sliding": lambda: SlidingEventTimeWindows(25, 10, offset=-4),  # 2 or 3 windows per record
}
# records after the watermark into windows of "a" and "b" stored before the epoch (restored), several per
# window and out of time order: runs folded after stored accumulators
STORED = [([("a", 5, 1, 0.5), ("b", 6, 2, 1.5)], True, "records", 0, True),
          ([("a", 8, 3, -1.0), ("a", 7, 4, 2.0), ("b", 9, 5, 0.5), ("a", 6, 6, 1.0)], False, "arrow", 30, False)]
# a record so far behind the watermark that every window it falls in is cleaned (late, to the side output),
# next to one on time: the late path is met whatever the generated examples hold
LATE = [([("a", 5, 1, 0.5)], True, "python", 60, False),
        ([("a", -45, 2, 1.5), ("b", 1, 3, -0.5)], False, "records", 0, False)]


class Trail(AggregateFunction):
    """Order-revealing, tuple accumulators of rows (x, y): (count, sum of y, the x's in the order added,
    ``|`` where merged)."""

    def create_accumulator(self):
        return (0, 0.0, "")

    def add(self, row, acc):
        return (acc[0] + 1, acc[1] + row[1], f"{acc[2]}{row[0]};")

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1], a[2] + "|" + b[2])

    def get_result(self, acc):
        return acc


class Emit(ProcessWindowFunction):
    """One row per fired window: key, bounds, result."""

    def process(self, key, context, elements):
        (result,) = elements
        yield (key, context.window.start, context.window.end, *result)


def operator(assigner: str, reference: bool) -> WindowOperator:
    return WindowOperator(ASSIGNERS[assigner](), Trail(), window_function=Emit(), columnar=not reference,
                          allowed_lateness=LATENESS, late_output_tag="late")


def aligned_stretch(*harnesses) -> int:
    """``fresh_stretch`` rounded up to a hundred, so aligned windows start at the same offsets in every example."""
    wm = fresh_stretch(*harnesses)
    wm += -wm % 100
    for h in harnesses:
        h.process_watermark(wm)
    return wm


@pytest.mark.parametrize("assigner", list(ASSIGNERS))
def test_plain_aggregate_on_aligned_windows_equals_record_path(backend_name, tmp_path, monkeypatch, assigner):
    fast = harness(operator(assigner, False), backend_name, tmp_path / "f0")
    reference = harness(operator(assigner, True), backend_name, tmp_path / "reference")
    assert type(fast.operator._engine) is AlignedEngine and type(reference.operator) is RecordWindowOperator
    folded = [0]  # runs of more than one record folded at once
    real_fold = AggregateAdd.fold

    def counted(self, accumulator, values):
        folded[0] += len(values) > 1
        return real_fold(self, accumulator, values)
    monkeypatch.setattr(AggregateAdd, "fold", counted)
    dirs, examples = itertools.count(1), itertools.count()
    seen = {"restored": 0, "late": 0, "fired": 0, "refired": 0}
    carried = dict.fromkeys(fast.metrics, 0)  # metrics of the operators restored from

    @differential(backend_name, 25, 10)
    @given(epochs=EPOCHS, key_form=st.sampled_from(list(KEY_FORMS)))
    @example(epochs=STORED, key_form="int")
    @example(epochs=REFIRE, key_form="str")
    @example(epochs=LATE, key_form="str")
    def check(epochs, key_form):
        nonlocal fast

        def remake(snapshot):
            return harness(operator(assigner, False), backend_name, tmp_path / f"f{next(dirs)}", snapshot)
        fast = drive(fast, reference, epochs, next(examples), key_form, aligned_stretch(fast, reference), 2, remake,
                     carried, seen)

    check()
    assert seen["restored"] and seen["late"] and seen["fired"] and folded[0], (seen, folded)
    assert seen["refired"] or assigner == "sliding", seen  # late-but-allowed re-fires met (REFIRE's tumbling window)
    fast.close()
    reference.close()


# "a" and "b" fill windows; the watermark fires some, kept for the lateness; after the restore records
# into stored windows (several per run, out of time order), one behind the watermark (a re-fire), one late
FIRST = [("a", (1, 0.5), 101), ("b", (2, 1.5), 104), ("a", (3, 2.5), 105), ("a", (4, -1.0), 118), ("c", (5, 1.0), 150)]
FIRST_WATERMARK = 114
SECOND = [("a", (6, 1.0), 119), ("a", (7, 2.0), 116), ("b", (8, 0.5), 111), ("a", (9, 3.0), 109),
          ("b", (10, -0.5), 80), ("c", (11, 2.0), 152), ("c", (12, 4.5), 151)]


def resumed(assigner: str, backend: str, local_dir: str, snapshot: bytes) -> str:
    """The second epoch (as Python columns) and a final watermark on an engine restored from ``snapshot``:
    what it emitted."""
    h = harness(operator(assigner, False), backend, Path(local_dir), snapshot)
    feed(h, SECOND, "python", None)
    out = [(h.output(), h.side_output("late"))]
    h.process_watermark(10_000)
    out.append((h.output(), h.side_output("late")))
    h.close()
    return repr(out)


@pytest.mark.parametrize("assigner", list(ASSIGNERS))
def test_restored_mid_stream_in_a_fresh_interpreter_goes_on_as_the_record_path(backend_name, tmp_path, assigner):
    """Windows stored by the engine (fired and kept, open) restored into a new engine, here and in a new
    interpreter: both go on as the record path does without a restore (a late-but-allowed re-fire included)."""
    engine = harness(operator(assigner, False), backend_name, tmp_path / "engine")
    reference = harness(operator(assigner, True), backend_name, tmp_path / "reference")
    feed(engine, FIRST, "python", None)
    reference.process_batch(FIRST)
    for h in (engine, reference):
        h.process_watermark(FIRST_WATERMARK)
    assert repr(engine.output()) == repr(reference.output())
    snapshot = engine.snapshot()
    engine.close()
    reference.process_batch(SECOND)
    expected = [(reference.output(), reference.side_output("late"))]
    reference.process_watermark(10_000)
    expected.append((reference.output(), reference.side_output("late")))
    reference.close()
    assert "3;9;'" in repr(expected[0][0]) and expected[0][1]  # a re-fire at once with the record added; a late one
    assert resumed(assigner, backend_name, str(tmp_path / "warm"), snapshot) == repr(expected)
    (tmp_path / "snapshot").write_bytes(snapshot)
    code = ("import sys; from pathlib import Path; from tests.operators.test_aligned_plain_aggregate import resumed; "
            "print(resumed(sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4]).read_bytes()))")
    done = subprocess.run([sys.executable, "-c", code, assigner, backend_name, str(tmp_path / "cold"),
                           str(tmp_path / "snapshot")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == repr(expected)
