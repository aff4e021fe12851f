"""The differential drive of a fast window operator (a columnar engine, a state layout) against the same
logic on the record path: epochs of generated records fed to both (as Python or Arrow columns, or records),
restores of the fast one mid-stream, and every output, side output and metric compared."""

from __future__ import annotations

from typing import Any, Callable

import pyarrow as pa
from hypothesis import strategies as st

from tests.operators.test_session_table import columns_of

HALVES = st.integers(-40, 40).map(lambda v: v / 2)  # exact sums in any order
KEYS = ["a", "b", "c"]
KEY_FORMS = {"str": (lambda n, k: f"{n}/{k}", pa.string()), "int": (lambda n, k: n * 4 + KEYS.index(k), pa.int64())}
# epochs: rows (key, time offset, x, y), in time order or not, fed as columns (Python, Arrow) or records,
# watermark advance, and whether the fast operator is then snapshotted and restored into a new backend
ROWS = st.tuples(st.sampled_from(KEYS), st.integers(-25, 40), st.integers(-50, 50), HALVES)
EPOCHS = st.lists(st.tuples(st.lists(ROWS, max_size=25), st.booleans(), st.sampled_from(["python", "arrow", "records"]),
                            st.integers(0, 25), st.booleans()), min_size=1, max_size=5)
# stored sessions [0, 10) and [25, 35) of "a" (restored); then 10 (touches the first) and 18 (bridges both),
# in time order: runs merged into stored sessions (x not a multiple of 3: the packed records test's Mixed
# packs them); then records behind the watermark re-fire them
BRIDGING = [([("a", 0, 1, 0.5), ("a", 25, 2, 1.5)], True, "arrow", 0, True),
            ([("a", 10, 4, 2.5), ("a", 18, -4, -1.0), ("a", 100, 5, 3.0), ("b", 2, 7, 0.5)], True, "python", 40, False),
            ([("a", 20, 7, -2.0), ("a", 36, 9, 4.5), ("b", -2, 8, 1.0), ("c", -30, 1, 1.0)], False, "python", 5, True)]
# windows of "a" fired but kept (lateness), restored; then a record behind the watermark re-fires them
# (a session and a tumbling window; a sliding window's first one is cleaned by then)
REFIRE = [([("a", 5, 1, 0.5), ("a", 6, 2, 1.5)], True, "python", 16, True),
          ([("a", -9, 3, -1.0), ("b", -8, 4, 2.0)], True, "arrow", 30, False)]  # times as offsets from the watermark


def feed(h: Any, recs: list, how: str, key_type: pa.DataType, width: int = 2) -> None:
    """``recs`` (key, row of ``width`` values (int, float), time) into harness ``h``: as records, or as
    columns of Python values or Arrow arrays."""
    if how == "records":
        h.process_batch(recs)
        return
    keys, times, cols = columns_of(recs)
    cols = cols if recs else [[] for _ in range(width)]
    if how == "arrow":
        cols = [pa.array(c, t) for c, t in zip(cols, [pa.int64(), pa.float64()])]
        keys = pa.array(keys, key_type)
    h.process_columns(keys, times, cols)


def drive(fast: Any, reference: Any, epochs: list, example: int, key_form: str, wm: int, width: int,
          remake: Callable[[Any], Any], carried: dict, seen: dict,
          after_records: Callable[[Any], None] | None = None) -> Any:
    """``epochs`` through ``fast`` and ``reference`` (harnesses, both at watermark ``wm``), everything they emit
    compared; a restore makes the fast one anew by ``remake(snapshot)`` (its metrics so far go to ``carried``).
    Counts late records, restores, fired and re-fired windows in ``seen``; ``after_records(fast)`` looks at the
    fast one after each epoch's records. Closes the stretch with a watermark that cleans every window, and
    returns the fast harness (restored or not)."""
    key_of, key_type = KEY_FORMS[key_form]
    for records, in_time_order, how, advance, restore in epochs:
        recs = [(key_of(example, k), (x, y)[:width], wm + dt) for k, dt, x, y in records]
        if in_time_order:
            recs.sort(key=lambda r: r[2])
        reference.process_batch(recs)
        feed(fast, recs, how, key_type, width)
        out = reference.output()  # late-but-allowed re-fires: a record fires a window only so
        assert repr(fast.output()) == repr(out)
        seen["refired"] += len(out)
        late = reference.side_output("late")
        assert repr(fast.side_output("late")) == repr(late)
        seen["late"] += len(late)
        if after_records is not None:
            after_records(fast)
        if restore:
            snapshot = fast.snapshot()
            for name, value in fast.metrics.items():
                carried[name] += value
            fast.close()
            fast = remake(snapshot)
            seen["restored"] += 1
        wm += advance
        for h in (fast, reference):
            h.process_watermark(wm)
        out = reference.output()
        assert repr(fast.output()) == repr(out)
        seen["fired"] += len(out)
        assert {k: v + carried[k] for k, v in fast.metrics.items()} == reference.metrics
    for h in (fast, reference):
        h.process_watermark(wm + 500)
    assert repr(fast.output()) == repr(reference.output())
    fast.backend.flush()
    assert fast.num_entries() == reference.num_entries() == 0
    return fast
