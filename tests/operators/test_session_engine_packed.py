"""The session engine with packed session cells (a ``PackedAggregate``: ``RowAggregate``) in targeted
scenarios, against the generic record path (``columnar=False``) on every backend: merges that
bridge stored packed sessions in the vectorized path, late-but-allowed re-fires, checkpoints whose
cells have the list form of before packed cells (restored, then packed when touched) and packed cells
of an older accumulator version migrated on restore.
"""

from __future__ import annotations

import numpy as np
import pytest

import statekit
from statekit import ColumnarAggregate, SerializationError
from statekit.operators import RowAggregate
from statekit.jobs.sessionize import SessionRows
from statekit.operators import EventTimeSessionWindows, WindowOperator
from statekit.operators.engines import session_engine
from statekit.operators.engines.session_engine import SessionEngine
from statekit.operators.testing import OperatorHarness
from tests.operators_support import make_harness

GAP = 10
# columns (x: int, y: float or None); first/last of y show the order in which contents are merged
AGGS = [("first", 0), ("last", 0), ("first", 1), ("last", 1), ("sum", 0), ("count", None), ("avg", 1), ("max", 0)]


def operator(lateness: int, reference: bool, function=None) -> WindowOperator:
    return WindowOperator(EventTimeSessionWindows.with_gap(GAP), function or RowAggregate(AGGS),
                          window_function=SessionRows(), columnar=not reference, allowed_lateness=lateness,
                          late_output_tag="late")


def feed(h: OperatorHarness, records: list[tuple], as_columns: bool) -> None:
    """Records (key, x, y, time): as columns (in this order) or as records."""
    if as_columns:
        h.process_columns([r[0] for r in records], np.array([r[3] for r in records], np.int64),
                          [[r[1] for r in records], [r[2] for r in records]])
    else:
        h.process_batch([(k, (x, y), t) for k, x, y, t in records])


def cells(h: OperatorHarness, keys: list) -> dict:
    """The engine's stored value per key (None: no sessions)."""
    resolved, refused = h.backend.resolve_keys(keys)
    assert not refused
    return dict(zip(keys, h.operator._engine._state.get_internal_many(resolved)))


@pytest.fixture
def spy(monkeypatch) -> dict[str, int]:
    """Counts vectorized merges that merged (``merged`` not None) and packed watermarks."""
    calls = {"merged": 0, "advance_packed": 0}
    real_merged, real_advance = session_engine.merged, SessionEngine._advance_packed

    def merged(*args):
        result = real_merged(*args)
        calls["merged"] += result is not None
        return result

    def advance_packed(self, *args):
        calls["advance_packed"] += 1
        return real_advance(self, *args)

    monkeypatch.setattr(session_engine, "merged", merged)
    monkeypatch.setattr(SessionEngine, "_advance_packed", advance_packed)
    return calls


def run_both(backend: str, tmp_path, lateness: int, steps: list) -> tuple[list, OperatorHarness]:
    """``steps`` (records or a watermark) on the engine (records as columns) and the record path; the
    outputs of each step (results and late records) must be equal; returns them and the engine."""
    engine = make_harness(operator(lateness, False), backend, tmp_path)
    reference = make_harness(operator(lateness, True), backend, tmp_path)
    outputs = []
    for step in steps:
        for h in (engine, reference):
            if isinstance(step, int):
                h.process_watermark(step)
            else:
                feed(h, step, h is engine)
        got = [(h.output(), h.side_output("late")) for h in (engine, reference)]
        assert repr(got[0]) == repr(got[1]), step
        outputs.append(got[0])
        assert engine.metrics == reference.metrics
    if not engine.num_entries():
        assert reference.num_entries() == 0
    reference.close()
    return outputs, engine


def test_bridging_merge_of_packed_sessions(backend_name, tmp_path, spy):
    """Stored packed sessions [100, 110) and [125, 135); an epoch adds 110 (touches the first), 118
    (bridges both), 200 and 211 (gap + 1 apart: two sessions), in time order: the vectorized merge.
    Contents merge as one-by-one: the first session, 110, the second, 118 (y's first and last show it)."""
    first = [("k", 1, None, 100), ("k", 2, 7.5, 125)]
    second = [("k", 3, 2.5, 110), ("k", 4, None, 118), ("k", 5, 1.0, 200), ("k", 6, 2.0, 211)]
    outputs, engine = run_both(backend_name, tmp_path, 0, [first, 50])
    assert type(cells(engine, ["k"])["k"]) is bytes
    merges = spy["merged"]
    feed(engine, second, True)
    assert spy["merged"] == merges + 1  # the epoch went through the vectorized merge
    engine.process_watermark(10_000)
    expected = [(("k", 100, 135, 1, 4, 2.5, 7.5, 10, 4, 5.0, 4), 134), (("k", 200, 210, 5, 5, 1.0, 1.0, 5, 1, 1.0, 5), 209),
                (("k", 211, 221, 6, 6, 2.0, 2.0, 6, 1, 2.0, 6), 220)]
    assert engine.output() == expected
    assert spy["advance_packed"] > 0 and engine.num_entries() == 0
    engine.close()
    outputs, engine = run_both(backend_name, tmp_path, 0, [first, 50, second, 10_000])
    assert outputs[-1] == (expected, [])
    engine.close()


def test_runs_more_than_a_gap_apart_join_through_a_stored_session(backend_name, tmp_path, spy):
    """A stored packed session [0, 37); records -5 and 30 (more than the gap apart: two runs) touch its
    two ends: both runs and the session become one session, [-5, 40)."""
    first = [("k", 1, 0.5, 0), ("k", 2, None, 9), ("k", 3, 1.5, 18), ("k", 4, None, 27)]
    second = [("k", 5, None, -5), ("k", 6, 2.5, 30), ("k", 7, 3.5, 100)]
    outputs, engine = run_both(backend_name, tmp_path, 0, [first, -20, second, 1000])
    assert spy["merged"] == 2
    assert outputs[-1][0] == [(("k", -5, 40, 1, 6, 0.5, 2.5, 21, 6, 1.5, 6), 39), (("k", 100, 110, 7, 7, 3.5, 3.5, 7, 1, 3.5, 7), 109)]
    engine.close()


def test_late_but_allowed_records_refire_packed_sessions(backend_name, tmp_path, spy):
    """Lateness 20: sessions fired at watermark 115 stay (packed) until their cleanup. Then "k" bridges
    its fired session and an open one by the vectorized merge (fires again later), while "j" gets a
    record behind the watermark (its own key takes the record path) that merges into its fired
    session and fires it again at once; cleanups and a late record no session takes follow."""
    steps = [
        [("k", 1, 0.5, 100), ("j", 1, 1.5, 100), ("k", 2, 3.5, 125), ("i", 9, None, 101)],
        115,                                                          # k [100, 110), j, i fire; k [125, 135) open
        [("k", 3, None, 110), ("k", 4, -1.0, 118), ("j", 5, 4.0, 105), ("k", 5, 1.0, 200), ("k", 6, 2.0, 211)],
        130,                                                          # i cleaned at 130
        [("j", 7, 0.5, 80), ("i", 1, 1.0, 104)],                     # j late (no session), i new [104, 114) fires at once
        140,                                                          # k [100, 135) fires again; j, i cleaned
        [("k", 8, 5.0, 120)],                                         # late but allowed: k fires a third time
        1000,
    ]
    outputs, engine = run_both(backend_name, tmp_path, 20, steps)
    assert spy["merged"] > 0 and spy["advance_packed"] > 0
    fired = [value for out, _ in outputs for value, _ in out]
    assert [v for v in fired if v[0] == "k" and v[1] == 100] == [
        ("k", 100, 110, 1, 1, 0.5, 0.5, 1, 1, 0.5, 1),
        ("k", 100, 135, 1, 4, 0.5, -1.0, 10, 4, 1.0, 4),             # y: 0.5, (110: None), 3.5, -1.0
        ("k", 100, 135, 1, 8, 0.5, 5.0, 18, 5, 2.0, 8)]
    assert [v for v in fired if v[0] == "j"] == [("j", 100, 110, 1, 1, 1.5, 1.5, 1, 1, 1.5, 1),
                                                 ("j", 100, 115, 1, 5, 1.5, 4.0, 6, 2, 2.75, 5)]
    assert outputs[4][1] == [((7, 0.5), 80)]                      # late records carry their value
    assert engine.num_entries() == 0
    engine.close()


class ListRowAggregate(ColumnarAggregate):
    """RowAggregate's accumulators, not packed (a ColumnarAggregate, not a PackedAggregate): the engine
    stores them in the list form ``[timer, s0, e0, acc0, ...]``, as before packed cells existed."""

    def __init__(self, aggs) -> None:
        self.inner = RowAggregate(aggs)

    def create_accumulator(self):
        return self.inner.create_accumulator()

    def add(self, value, accumulator):
        return self.inner.add(value, accumulator)

    def merge(self, acc_a, acc_b):
        return self.inner.merge(acc_a, acc_b)

    def get_result(self, accumulator):
        return self.inner.get_result(accumulator)

    def accumulate(self, columns, order, starts):
        return self.inner.accumulate(columns, order, starts)

    def state_layout(self):
        return self.inner.state_layout()


LEGACY_EPOCHS = [
    ([("a", 1, 0.5, 10), ("a", 2, 1.5, 15), ("b", 3, 2.5, 20), ("c", 4, None, 40), ("d", 5, 1.0, 100),
      ("e", 6, 2.0, 50), ("e", 7, 3.0, 58)], 30),                       # a, b fired (kept: lateness 20)
    # -- checkpoint (list cells of a, b, c, d, e) --
    ([("a", 8, None, 22), ("b", 9, 4.5, 25), ("c", 10, 5.5, 45)], 40),  # merge into list cells (a, b: re-fire)
    ([("b", 11, 6.0, 12), ("c", 12, -0.5, 52), ("f", 13, 7.0, 200)], 70),  # b late but allowed; c, f vectorized
    ([("d", 14, None, 105), ("f", 15, 8.0, 209)], 400),
]


def test_list_cells_of_an_older_checkpoint_restore_and_become_packed(backend_name, tmp_path, spy):
    """A checkpoint written before packed cells (list cells, with their timers) restores into an
    operator whose function packs: results equal the record path's, and each key's cell is packed
    once it is written again (records, or its timer firing)."""
    reference = make_harness(operator(20, True), backend_name, tmp_path)
    expected = []
    for records, wm in LEGACY_EPOCHS:
        feed(reference, records, False)
        reference.process_watermark(wm)
        expected.append(repr((reference.output(), reference.side_output("late"))))
    reference.close()

    old = make_harness(operator(20, False, ListRowAggregate(AGGS)), backend_name, tmp_path)
    assert old.operator._engine._cells is None
    records, wm = LEGACY_EPOCHS[0]
    feed(old, records, True)
    old.process_watermark(wm)
    assert repr((old.output(), old.side_output("late"))) == expected[0]
    keys = ["a", "b", "c", "d", "e", "f"]
    stored = cells(old, keys)
    assert all(type(stored[k]) is list for k in "abcde") and stored["f"] is None
    snapshot = old.snapshot(epoch=1)
    old.close()

    for target in statekit.available_backends():
        spy.update(merged=0, advance_packed=0)
        h = make_harness(operator(20, False), target, tmp_path, snapshot=snapshot)
        assert h.operator._engine._cells is not None
        assert all(type(c) is list for c in cells(h, keys).values() if c is not None)
        for i, (records, wm) in enumerate(LEGACY_EPOCHS[1:], start=1):
            feed(h, records, True)
            after_records = cells(h, keys)
            h.process_watermark(wm)
            assert repr((h.output(), h.side_output("late"))) == expected[i], f"{backend_name} -> {target}, epoch {i}"
            if i == 1:  # a, b, c written by their records; d, e untouched
                assert all(type(after_records[k]) is bytes for k in "abc"), after_records
                assert all(type(after_records[k]) is list for k in "de"), after_records
            if i == 2:  # e's session fired at 67 and was written back: packed
                assert type(cells(h, ["e"])["e"]) is bytes
        assert spy["merged"] > 0 and spy["advance_packed"] > 0
        assert h.num_entries() == 0
        h.close()


V1 = [("sum", 0), ("count", None)]
NAMES_V1 = ["sum_x", "count"]
V2 = [("count", None), ("avg", 0), ("sum", 0), ("max", 0)]   # reordered, one added: another packed layout
NAMES_V2 = ["count", "avg_x", "sum_x", "max_x"]


def test_packed_cells_of_an_older_accumulator_version_migrate(backend_name, tmp_path, spy):
    """Packed cells of RowAggregate version 1 (sum, count) restore into version 2 (count, avg, sum,
    max; 8 words a session instead of 3): each session keeps its sum and count, avg and max count the
    records after the migration; a fired session re-fires on a late-but-allowed record."""
    v1 = WindowOperator(EventTimeSessionWindows.with_gap(GAP), RowAggregate(V1, NAMES_V1), window_function=SessionRows(),
                        allowed_lateness=20)
    h = make_harness(v1, backend_name, tmp_path)
    h.process_columns(["a", "a", "b", "c", "c"], np.array([10, 15, 100, 50, 55]), [[1, 2, 3, 4, 5]])
    h.process_watermark(30)
    assert h.output() == [(("a", 10, 25, 3, 2), 24)]
    stored = cells(h, ["a", "b", "c"])
    assert all(type(c) is bytes for c in stored.values())
    assert all(len(c) == 8 * (1 + 2 + 3) for c in stored.values())   # timer, one session: bounds + 3 words
    snapshot = h.snapshot(epoch=1)
    h.close()

    for target in statekit.available_backends():
        v2 = WindowOperator(EventTimeSessionWindows.with_gap(GAP), RowAggregate(V2, NAMES_V2, 2, {1: NAMES_V1}),
                            window_function=SessionRows(), allowed_lateness=20)
        h = make_harness(v2, target, tmp_path, snapshot=snapshot)
        assert h.metrics["state_migrated"] == 3
        engine = h.operator._engine
        assert engine._decode(cells(h, ["a"])["a"]) == (44, [[10, 25, [2, [0, 0], 3, None]]])
        assert engine._decode(cells(h, ["c"])["c"]) == (64, [[50, 65, [2, [0, 0], 9, None]]])
        # a: behind the watermark, merges into its fired session and fires it again; b grows; d is new
        h.process_columns(["a", "b", "d"], np.array([20, 105, 200]), [[10, 7, 4]])
        assert h.output() == [(("a", 10, 30, 3, 10.0, 13, 10), 29)]
        assert all(type(c) is bytes for c in cells(h, ["a", "b", "d"]).values())
        merges = spy["merged"]
        h.process_columns(["b"], np.array([112]), [[1]])                  # b's cell is packed now: vectorized
        assert spy["merged"] == merges + 1
        h.process_watermark(1 << 40)
        assert sorted(v for v, _ in h.output()) == [("b", 100, 122, 3, 4.0, 11, 7), ("c", 50, 65, 2, None, 9, None),
                                                    ("d", 200, 210, 1, 4.0, 4, 4)]
        assert h.metrics["state_migrated"] == 3 and h.num_entries() == 0
        h.close()



def test_a_sum_past_int64_min_is_refused_like_the_record_path(backend_name, tmp_path):
    """Known bug (fails at 3eb5891): a stored packed sum of -2**63 (its record is refused by
    accumulate_packed, so the per-key path adds it; the accumulator packs) and a later record -1 in the
    same session. The record path cannot store the sum -2**63 - 1 and fails the epoch
    (SerializationError); the engine's vectorized merge wraps it to 2**63 - 1, stores it and fires it."""
    first, second = [("k", -(1 << 63), None, 100)], [("k", -1, None, 105)]
    reference = make_harness(operator(0, True), backend_name, tmp_path)
    feed(reference, first, False)
    with pytest.raises(SerializationError):
        feed(reference, second, False)
    reference.close()

    engine = make_harness(operator(0, False), backend_name, tmp_path)
    feed(engine, first, True)
    assert type(cells(engine, ["k"])["k"]) is bytes
    try:
        feed(engine, second, True)
    except SerializationError:
        engine.close()
        return                                           # refused, as the record path does
    engine.process_watermark(1000)
    fired = engine.output()
    engine.close()
    assert [v[7] for v, _ in fired] == [-(1 << 63) - 1], f"sum of -2**63 and -1 fired as {fired}"
