"""The session table (``state_layout="table"``: every key's sessions as columns, stored as pages per key
group) against the generic record path (``columnar=False``) on every backend: random epochs in and out
of time order, late and late-but-allowed records, accumulators that do not pack (kept in the list form),
snapshots restored into a new backend between epochs, rescaling, and what is stored.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import example, given, strategies as st

from statekit import StateConfig, StateError, key_group_for, key_group_representatives
from statekit.jobs.sessionize import SessionRows
from statekit.operators import EventTimeSessionWindows, RowAggregate, WindowOperator
from statekit.operators.engines import session_table
from statekit.operators.engines.session_table import TABLE_STATE, SessionTable
from statekit.operators.testing import OperatorHarness
from tests.operators_support import KeyedWindowResult, differential, fresh_stretch

GAP = 10
AGGS = [("first", 1), ("last", 1), ("first", 3), ("last", 3), ("sum", 2), ("min", 3), ("avg", 3), ("count", None)]
KEY_VALUES = ["a", "b", 1, True, (3, "x"), 2.0]
HALVES = st.integers(-50, 50).map(lambda x: x / 2)
# (key, time offset, nullable int, int, float or -0.0 (whose first/last/min does not pack))
ROWS = st.tuples(st.sampled_from(KEY_VALUES), st.integers(-25, 40), st.one_of(st.none(), st.integers(-50, 50)),
                 st.integers(-50, 50), st.one_of(HALVES, st.just(-0.0)))
# epochs: rows, fed in time order (the bulk path), as columns (else records), watermark advance, and
# whether the engine is then snapshotted and restored into a new backend
EPOCHS = st.lists(st.tuples(st.lists(ROWS, max_size=25), st.booleans(), st.booleans(), st.integers(0, 25),
                            st.booleans()), min_size=1, max_size=6)
# stored sessions [0, 10) and [25, 35) of "a"; then 10 (touches the first) and 18 (bridges both), in time order
BRIDGING = [([("a", 0, 1, 1, 0.5), ("a", 25, 2, 2, 1.5)], True, True, 0, True),
            ([("a", 10, 3, 3, 2.5), ("a", 18, None, 4, -1.0), ("a", 100, 5, 5, 3.0), ("b", 2, None, 6, 0.5)],
             True, True, 30, False)]
# a session whose sum leaves int64 (a uint64: the list form), restored, then merged and fired
UNPACKED = [([("a", 0, 1, 1 << 63, 0.5), ("b", 3, 1, 1, 0.5)], True, True, 0, True),
            ([("a", 5, 2, 1, -0.0), ("b", 8, 1, 1, -0.0)], False, True, 20, True)]

KEY_FORMS = {  # keys of example n: tuples (Python values), or str / int keys given as an Arrow column
    "tuple": ((lambda n, k: (n, k)), None),
    "str": ((lambda n, k: f"{n}/{k!r}"), pa.string()),
    "int": ((lambda n, k: n * 8 + [repr(v) for v in KEY_VALUES].index(repr(k)) - 200), pa.int64()),
}


class Clearing(KeyedWindowResult):
    """Emits each window's result, and logs its fires and cleanups (``clear``) in the order they come."""

    def __init__(self, log: list) -> None:
        super().__init__()
        self.log = log

    def process(self, key, context, elements):
        self.log.append(("fire", key, context.window))
        yield from super().process(key, context, elements)

    def clear(self, context):
        self.log.append(("clear", context.window))


FUNCTIONS = {
    "columns": lambda log: None,          # results as columns (RowAggregate's packed results)
    "rows": lambda log: SessionRows(),    # a WindowRowsFunction: one call per watermark
    "per-window": Clearing,               # a ProcessWindowFunction per fired window, told of cleanups
}


def operator(function: str, lateness: int, layout: str | None, log: list | None = None) -> WindowOperator:
    """The table (``layout="table"``) or the record path (``layout=None``); ``log``: fires and cleanups."""
    extra = {"state_layout": layout} if layout else {"columnar": False}
    return WindowOperator(EventTimeSessionWindows.with_gap(GAP), RowAggregate(AGGS),
                          window_function=FUNCTIONS[function]([] if log is None else log),
                          allowed_lateness=lateness, late_output_tag="late", invalid_output_tag="invalid", **extra)


def harness(op: WindowOperator, backend: str, path, snapshot: bytes | None = None, key_groups=None) -> OperatorHarness:
    h = OperatorHarness(op, StateConfig(backend=backend, local_dir=str(path)), key_groups=key_groups)
    if snapshot is not None:
        h.restore(snapshot)
    h.open()
    return h


def columns_of(records: list[tuple]) -> tuple[list, np.ndarray, list[list]]:
    keys = [k for k, _, _ in records]
    cols = [list(c) for c in zip(*(v for _, v, _ in records))] if records else [[], [], [], []]
    return keys, np.array([t for _, _, t in records], dtype=np.int64), cols


def flushed_entries(h: OperatorHarness) -> int:
    h.backend.flush()
    return h.num_entries()


def moved_pages(h: OperatorHarness) -> int:
    """The pages a harness's table left as MOVED_PAGE: all of its key groups once it moved to cells, else none."""
    engine = h.operator._engine
    return len(engine._page_keys) if engine._cells is not None else 0


@pytest.mark.parametrize("function", list(FUNCTIONS))
@pytest.mark.parametrize("lateness", [0, 7])
@pytest.mark.parametrize("moves", [False, True], ids=["held", "moves"])
def test_table_equals_record_path(backend_name, tmp_path, function, lateness, moves, monkeypatch):
    # bulk work in parts of two key codes, so that an epoch's keys are merged over several parts
    monkeypatch.setattr(SessionTable, "BULK_KEYS", 2)
    if moves:  # a table past 4 rows moves to cells, whatever the backend
        monkeypatch.setattr(session_table, "table_rows", lambda config: 4)
    parts_of = SessionTable._parts
    most_parts = [0]

    def counted_parts(self, codes, rows, fast):
        parts = list(parts_of(self, codes, rows, fast))
        most_parts[0] = max(most_parts[0], len(parts))
        return iter(parts)

    monkeypatch.setattr(SessionTable, "_parts", counted_parts)
    dirs = itertools.count()
    logs: tuple[list, list] = ([], [])
    table = harness(operator(function, lateness, "table", logs[0]), backend_name, tmp_path / "t0")
    reference = harness(operator(function, lateness, None, logs[1]), backend_name, tmp_path / "reference")
    assert type(table.operator._engine) is SessionTable
    seen = {"restored": 0, "listed": 0, "moved": 0}
    carried = dict.fromkeys(table.metrics, 0)  # metrics of the operators restored from
    examples = itertools.count()

    @differential(backend_name, 40, 20)
    @given(epochs=EPOCHS, key_form=st.sampled_from(list(KEY_FORMS)))
    @example(epochs=BRIDGING, key_form="tuple")
    @example(epochs=BRIDGING, key_form="str")
    @example(epochs=UNPACKED, key_form="int")
    def check(epochs, key_form):
        nonlocal table
        n = next(examples)
        wm = fresh_stretch(table, reference)
        key_of, arrow_type = KEY_FORMS[key_form]
        for records, in_time_order, as_columns, advance, restore in epochs:
            recs = [(key_of(n, k), (key_of(n, k), *values), wm + dt) for k, dt, *values in records]
            if in_time_order:
                recs.sort(key=lambda r: r[2])
            reference.process_batch(recs)
            if as_columns:
                keys, times, cols = columns_of(recs)
                table.process_columns(keys if arrow_type is None else pa.array(keys, arrow_type), times, cols)
            else:
                table.process_batch(recs)
            for tag in ("late", "invalid"):
                assert repr(table.side_output(tag)) == repr(reference.side_output(tag))
            assert repr(table.output()) == repr(reference.output())
            seen["listed"] += bool(table.operator._engine._overflow)
            seen["moved"] += moved_pages(table) > 0
            if restore:
                snapshot = table.snapshot()
                for name, value in table.metrics.items():
                    carried[name] += value
                table.close()
                table = harness(operator(function, lateness, "table", logs[0]), backend_name,
                                tmp_path / f"t{next(dirs)}", snapshot)
                seen["restored"] += 1
            wm += advance
            for h in (table, reference):
                h.process_watermark(wm)
            assert repr(table.output()) == repr(reference.output())
            assert logs[0] == logs[1]
            assert repr(table.side_output("late")) == repr(reference.side_output("late"))
            assert repr(table.side_output("invalid")) == repr(reference.side_output("invalid"))
            assert {k: v + carried[k] for k, v in table.metrics.items()} == reference.metrics
        for h in (table, reference):
            h.process_watermark(wm + 500)
        assert repr(table.output()) == repr(reference.output())
        assert flushed_entries(table) - moved_pages(table) == reference.num_entries() == 0

    check()
    assert seen["restored"] > 0 and seen["listed"] > 0 and (most_parts[0] > 1 or moves), (seen, most_parts)
    assert (seen["moved"] > 0) == moves, seen
    assert (function != "per-window") == (not any(entry[0] == "clear" for entry in logs[0]))
    table.close()
    reference.close()


def test_pages_hold_a_key_groups_sessions_under_its_representative_key(backend_name, tmp_path):
    """After a flush the state holds one page per key group with open sessions, stored under the
    group's representative key; a group whose sessions all fired is cleared."""
    h = harness(operator("columns", 0, "table"), backend_name, tmp_path / "h")
    keys = [f"user-{i}" for i in range(40)]
    h.process_columns(keys, np.arange(40, dtype=np.int64), [keys, list(range(40)), list(range(40)), [0.5] * 40])
    h.backend.flush()
    groups = sorted({key_group_for(k) for k in keys})
    reps = key_group_representatives(h.backend.max_parallelism)
    state = h.operator._engine._state
    resolved, _ = h.backend.resolve_keys([reps[g] for g in range(h.backend.max_parallelism)])
    pages = state.get_internal_many(resolved)
    assert [g for g, page in enumerate(pages) if page is not None] == groups
    assert h.backend.state_entry_counts()[TABLE_STATE] == len(groups)
    h.process_watermark(1000)
    assert len(h.output()) == 40
    assert flushed_entries(h) == 0
    h.close()


@pytest.mark.parametrize("target", ["heap", "rocksdb"])
def test_rescaled_pages_go_with_their_key_groups(backend_name, target, tmp_path):
    """A snapshot of one backend restored into two (halves of the key groups) and the other backend:
    each half holds the sessions of its keys only, and together they fire what the whole would."""
    keys = [f"k{i}" for i in range(60)]
    cols = [keys, list(range(60)), list(range(60)), [0.25] * 60]
    whole = harness(operator("columns", 3, "table"), backend_name, tmp_path / "whole")
    whole.process_columns(keys, np.arange(60, dtype=np.int64) * 3, cols)
    whole.process_watermark(20)
    fired_before = whole.output()
    snapshot = whole.snapshot()
    whole.process_watermark(1000)
    expected = sorted(repr(r) for r in whole.output())
    got = []
    for i, kgs in enumerate((range(0, 64), range(64, 128))):
        half = harness(operator("columns", 3, "table"), target, tmp_path / f"half{i}", snapshot, key_groups=kgs)
        slots = half.operator._engine._slots
        held = set(slots.keys_at(np.flatnonzero(slots.alive)))
        assert held and all(key_group_for(k) in kgs for k in held)
        half.process_watermark(1000)
        got += [repr(r) for r in half.output()]
        assert flushed_entries(half) == 0
        half.close()
    assert fired_before and sorted(got) == expected
    whole.close()


@pytest.mark.parametrize("target", ["heap", "rocksdb"])
def test_groups_moved_to_cells_and_paged_groups_restore_into_one_operator(backend_name, target, tmp_path, monkeypatch):
    """Two partitions rescaled into one: one's table moved to cells, the other's held its pages. The new operator
    takes the paged sessions to cells too (all its groups are marked moved) and fires every session once, as
    one operator over all keys would."""
    keys = [f"k{i}" for i in range(80)]
    cols = [keys, list(range(80)), list(range(80)), [0.25] * 80]
    times = np.arange(80, dtype=np.int64) * 3
    whole = harness(operator("columns", 3, "table"), backend_name, tmp_path / "whole")
    whole.process_columns(keys, times, cols)
    whole.process_watermark(20)
    whole.process_watermark(1000)
    expected = sorted(repr(r) for r in whole.output())
    limits = {0: 4, 1: 10_000}  # half 0 moves past 4 rows; half 1 keeps its table
    snapshots, got = [], []
    for i, kgs in enumerate((range(0, 64), range(64, 128))):
        monkeypatch.setattr(session_table, "table_rows", lambda config, i=i: limits[i])
        mine = [j for j, k in enumerate(keys) if key_group_for(k) in kgs]
        half = harness(operator("columns", 3, "table"), backend_name, tmp_path / f"half{i}", key_groups=kgs)
        half.process_columns([keys[j] for j in mine], times[mine], [[c[j] for j in mine] for c in cols])
        half.process_watermark(20)
        assert (moved_pages(half) > 0) == (i == 0)
        snapshots.append(half.snapshot())
        got += [repr(r) for r in half.output()]
        half.close()
    assert got  # some sessions fired before the rescale
    monkeypatch.setattr(session_table, "table_rows", lambda config: 10_000)
    one = OperatorHarness(operator("columns", 3, "table"), StateConfig(backend=target, local_dir=str(tmp_path / "one")))
    one.restore(*snapshots)
    one.open()
    assert moved_pages(one) == one.backend.max_parallelism and not len(one.operator._engine._owner)
    one.process_watermark(1000)
    got = sorted(got + [repr(r) for r in one.output()])
    assert len(got) == 80 and got == expected
    assert flushed_entries(one) == moved_pages(one)
    one.close()
    whole.close()


def test_the_table_needs_session_windows_of_a_packed_aggregate():
    with pytest.raises(ValueError, match="state_layout='table' takes event-time session windows"):
        WindowOperator(EventTimeSessionWindows.with_gap(GAP), lambda a, b: a + b, state_layout="table")
    with pytest.raises(ValueError, match="state_layout must be one of"):
        WindowOperator(EventTimeSessionWindows.with_gap(GAP), RowAggregate(AGGS), state_layout="pages")


def test_a_closed_operator_leaves_no_flush_hook(tmp_path):
    """An operator closed on a backend that is kept (a caught-up slot reopens another over it) no longer
    writes pages at the backend's flushes: the new operator's are the only ones."""
    first = harness(operator("columns", 0, "table"), "heap", tmp_path / "h")
    first.process_columns(["a"], np.array([1], np.int64), [["a"], [1], [1], [0.5]])
    first.backend.flush()
    first.operator.close()
    second = WindowOperator(EventTimeSessionWindows.with_gap(GAP), RowAggregate(AGGS), state_layout="table")
    second.open(first.backend, first._out)
    second.process_watermark(100)
    first.backend.flush()
    assert first.backend.num_entries() == 0  # the first engine would have written "a"'s page back
    second.close()
    first.backend.close()


def test_a_checkpoint_of_cells_is_refused_by_the_table():
    from statekit.checkpoint.job import compare

    table, cells = (WindowOperator(EventTimeSessionWindows.with_gap(GAP), RowAggregate(AGGS), state_layout=layout)
                    for layout in ("table", "cells"))
    carried, refused = compare({"operator": table.describe()}, {"operator": cells.describe()})
    assert not carried and len(refused) == 1 and '"session-table"' in refused[0] and '"sessions-per-key"' in refused[0]


V1 = [("sum", 1), ("count", None)]
V2 = [("count", None), ("avg", 1), ("sum", 1), ("max", 1)]   # reordered, one added: another row width


@pytest.mark.parametrize("target", ["heap", "rocksdb"])
def test_pages_of_an_older_accumulator_version_migrate(backend_name, target, tmp_path):
    """Pages of RowAggregate version 1 (sum, count) restore into version 2 (count, avg, sum, max): each
    open session keeps its sum and count (avg and max count the records after the migration), a fired
    session re-fires on a late-but-allowed record, and a list-form key (a sum beyond int64) migrates too."""
    def table(aggs, *version):
        names = [f"{k}_{p}" if p is not None else k for k, p in aggs]
        return WindowOperator(EventTimeSessionWindows.with_gap(GAP), RowAggregate(aggs, names, *version),
                              window_function=SessionRows(), allowed_lateness=20, state_layout="table")

    h = harness(table(V1), backend_name, tmp_path / "v1")
    keys = ["a", "a", "b", "c", "c", "big"]
    h.process_columns(keys, np.array([10, 15, 100, 50, 55, 60]), [keys, [1, 2, 3, 4, 5, 1 << 63]])
    h.process_watermark(30)
    assert h.output() == [(("a", 10, 25, 3, 2), 24)]
    assert list(h.operator._engine._overflow.values()) == [[[60, 70, [1 << 63, 1]]]]
    snapshot = h.snapshot()
    h.close()
    v2 = harness(table(V2, 2, {1: ["sum_1", "count"]}), target, tmp_path / "v2", snapshot)
    assert v2.metrics["state_migrated"] == 4
    v2.process_columns(["a", "b", "d"], np.array([20, 105, 200]), [["a", "b", "d"], [10, 7, 4]])
    assert v2.output() == [(("a", 10, 30, 3, 10.0, 13, 10), 29)]
    v2.process_watermark(1 << 40)
    assert sorted(v for v, _ in v2.output()) == [("b", 100, 115, 2, 7.0, 10, 7), ("big", 60, 70, 1, None, 1 << 63, None),
                                                 ("c", 50, 65, 2, None, 9, None), ("d", 200, 210, 1, 4.0, 4, 4)]
    assert flushed_entries(v2) == 0
    v2.close()


def test_key_slots_find_add_release_and_compact():
    from statekit import KEY_SERIALIZER
    from statekit.operators.engines.key_slots import KeyBytes, KeySlots

    def kb(keys):
        return KeyBytes.of(KEY_SERIALIZER.dumps_many(keys))

    slots = KeySlots()
    keys = [f"k{i}" for i in range(10_000)] + [("t", 1), 1, True, 1.0]
    got = slots.add(list(range(len(keys))), kb(keys))
    assert got.tolist() == list(range(len(keys))) and slots.keys_at(np.array([10_000, 2])) == [("t", 1), "k2"]
    assert slots.find(kb([True, 1, 1.0, "1", ("t", 1), b"k1"])).tolist() == [10_002, 10_001, 10_003, -1, 10_000, -1]
    slots.release(np.arange(0, 9_000))
    assert slots.find(kb(["k1", "k9001", 1])).tolist() == [-1, 9001, 10_001]
    moved = slots.compact()  # 9,000 of 10,004 dead: renumbered
    assert moved is not None and moved[9001] == 1 and (moved[:9000] == -1).all()
    assert len(slots) == slots.live() == 1004 and slots.find(kb(["k9001", "k1", True])).tolist() == [1, -1, 1002]
    assert slots.keys_at(np.array([1002, 1000])) == [True, ("t", 1)] and slots.groups[1].item() == 9001
    assert slots.key_blob(np.array([1, 1002])) == KEY_SERIALIZER.dumps("k9001") + KEY_SERIALIZER.dumps(True)
    assert slots.kb_len[1] == 6
    assert slots.compact() is None  # nothing dead
    again = slots.add([5], kb(["k1"]))  # a key that left comes back at a new slot
    assert again.tolist() == [1004] and slots.find(kb(["k1"])).tolist() == [1004]


def test_key_slots_tell_apart_keys_whose_hashes_collide():
    """Keys are verified against their stored bytes: keys with one hash (forced here) are still told
    apart, each found at its own slot, through probes over many entries."""
    from statekit import KEY_SERIALIZER
    from statekit.operators.engines.key_slots import KeyBytes, KeySlots

    keys = [f"c{i}" for i in range(3000)]
    same = KeyBytes(KeyBytes.of(KEY_SERIALIZER.dumps_many(keys)).array, np.full(len(keys), 12345, np.int64))
    slots = KeySlots()
    slots.add([0] * 2000, same.take(np.arange(2000)))
    slots.release(np.arange(0, 2000, 2))
    assert slots.find(same).tolist() == [-1 if i % 2 == 0 or i >= 2000 else i for i in range(3000)]


def test_many_keys_leaving_renumber_slots_and_results_stay_equal(backend_name, tmp_path, monkeypatch):
    """Thousands of keys open and fire epoch after epoch, so the table renumbers its slots between
    epochs: results equal the record path's and a restore after it reads the same sessions."""
    table = harness(operator("columns", 5, "table"), backend_name, tmp_path / "t")
    reference = harness(operator("columns", 5, None), backend_name, tmp_path / "r")
    from statekit.operators.engines.key_slots import KeySlots

    rng = np.random.default_rng(7)
    compacted = []
    real = KeySlots.compact
    monkeypatch.setattr(KeySlots, "compact", lambda self: compacted.append(real(self)) or compacted[-1])
    for epoch in range(6):
        keys = [f"u{epoch}-{i}" for i in rng.integers(0, 6000, 4000)] + [f"stay{i}" for i in range(50)]
        times = np.sort(rng.integers(epoch * 100, epoch * 100 + 90, len(keys)))
        recs = [(k, (k, int(t) % 7, int(t) % 5, 0.5), int(t)) for k, t in zip(keys, times.tolist())]
        reference.process_batch(recs)
        table.process_columns(*columns_of(recs))
        if epoch == 3:
            table.backend.flush()
            snapshot = table.snapshot()
            table.close()
            table = harness(operator("columns", 5, "table"), backend_name, tmp_path / "t2", snapshot)
        for h in (table, reference):
            h.process_watermark(epoch * 100 + 80)
        assert sorted(repr(r) for r in table.output()) == sorted(repr(r) for r in reference.output())
    assert sum(moved is not None for moved in compacted) >= 2  # renumbered, before and after the restore
    for h in (table, reference):
        h.process_watermark(10_000)
    assert sorted(repr(r) for r in table.output()) == sorted(repr(r) for r in reference.output())
    assert flushed_entries(table) == 0
    table.close()
    reference.close()


@pytest.mark.parametrize("max_parallelism", [1, 128, 4096])
def test_each_key_group_has_its_smallest_int_key_as_representative(max_parallelism):
    reps = key_group_representatives(max_parallelism)
    assert [key_group_for(r, max_parallelism) for r in reps] == list(range(max_parallelism))
    assert all(key_group_for(i, max_parallelism) != g for g, r in enumerate(reps[:64]) for i in range(r))


def test_a_damaged_page_is_an_error_naming_the_state_and_key_group(backend_name, tmp_path):
    """A page that is not one (another format, cut short, bytes of a key that do not decode) refuses the
    restore with the state and key group, not a crash inside numpy or msgpack."""
    h = harness(operator("columns", 0, "table"), backend_name, tmp_path / "h")
    h.process_columns(["a"], np.array([1], np.int64), [["a"], [1], [1], [0.5]])
    h.backend.flush()
    group = key_group_for("a")
    state = h.operator._engine._state
    page_key = h.operator._engine._page_keys[group]
    good = state.get_internal_many([page_key])[0]
    kb_at = len(good) - len(b"\xa1a")  # the key's bytes end the page (no list-form tail)
    for i, (damaged, reason) in enumerate([(b"\x07" * 20, "format None"), (good[:60], "cannot read its page"),
                                           (good[:kb_at] + b"\xc1\xc1", "cannot read its page")]):
        state.update_internal_many([page_key], [damaged])
        restored = OperatorHarness(operator("columns", 0, "table"),
                                   StateConfig(backend=backend_name, local_dir=str(tmp_path / f"r{i}")))
        restored.restore(h.snapshot())
        with pytest.raises(StateError, match=f"state 'session-table', key group {group}: .*{reason}"):
            restored.open()
        restored.backend.close()
    h.close()


@pytest.mark.parametrize("layout,described", [("table", "table"), ("cells", "cells"), (None, "cells")])
def test_a_recorded_description_tells_its_state_layout(layout, described):
    """What ``sessionize`` resumes a checkpoint with when no layout is named: the layout its recorded
    ``describe()`` says (the record path's counts as cells: another layout than the table's)."""
    from statekit.operators import state_layout_of

    description = json.loads(json.dumps(operator("columns", 0, layout).describe()))  # as a checkpoint records it
    assert state_layout_of(description) == described
    assert state_layout_of(None) is None


def test_an_arrow_key_column_too_long_to_hash_as_a_column_takes_the_python_path(backend_name, tmp_path):
    """Keys past the column-wise hash's length (and a column with nulls) are resolved one by one: the same
    sessions as the record path, the null key refused to the invalid output with its reason."""
    table = harness(operator("columns", 0, "table"), backend_name, tmp_path / "t")
    reference = harness(operator("columns", 0, None), backend_name, tmp_path / "r")
    keys = ["k" * 100, "j" * 70, "k" * 100, None, "short"]
    recs = [(k, (k, 1, 2, 0.5), t) for k, t in zip(keys, [1, 2, 5, 6, 7])]
    reference.process_batch(recs)
    _, times, cols = columns_of(recs)
    table.process_columns(pa.array(keys, pa.string()), times, cols)
    for h in (table, reference):
        h.process_watermark(1000)
    got, want = table.output(), reference.output()
    assert repr(got) == repr(want) and len(got) == 3  # the long keys' sessions and "short"'s
    invalid = table.side_output("invalid")
    assert repr(invalid) == repr(reference.side_output("invalid")) and len(invalid) == 1 and "key" in repr(invalid)
    table.close()
    reference.close()
