"""Sessions put into a session operator as they are (``restore_sessions``, what a job bootstrapped from a table
of open sessions starts from): then records and watermarks give what the operator gives having taken the
records that made those sessions itself, on both layouts and both backends, through a snapshot and restore;
sessions that would have merged, or shorter than the gap, are refused naming them."""

from __future__ import annotations

import random

import pytest

from statekit import MAX_TIMESTAMP, StateConfig, StateError
from statekit.jobs.sessionize import SessionOperatorFactory
from statekit.operators import RowAggregate
from statekit.operators.testing import OperatorHarness

GAP = 10
AGGS = (("sum", 0), ("count", None), ("avg", 0), ("first", 0), ("last", 0), ("min", 0), ("max", 0))


def sessions_of(records: list[tuple], fn: RowAggregate | None = None) -> list[tuple]:
    """``(key, start, end, accumulator)`` of each session ``records`` (``(key, t, value)``, in time order) make, by
    ``fn``'s accumulators (default ``AGGS``')."""
    fn = fn or RowAggregate(list(AGGS))
    open_: dict = {}
    out = []
    for key, t, value in records:
        s = open_.get(key)
        if s is not None and t <= s[2]:  # [t, t + GAP) touches [start, end): merged
            s[2] = max(s[2], t + GAP)
            s[3] = fn.add((value,), s[3])
            continue
        if s is not None:
            out.append(tuple(s))
        open_[key] = [key, t, t + GAP, fn.add((value,), fn.create_accumulator())]
    return out + [tuple(s) for s in open_.values()]


def history(seed: int) -> tuple[list, list]:
    """Two parts of a history of keys ``a``..``e``: the first in time order, the second with records out of order."""
    rng = random.Random(seed)
    first = sorted(((rng.choice("abcde"), rng.randrange(0, 200), rng.randrange(-50, 50)) for _ in range(60)),
                   key=lambda r: r[1])
    second = [(rng.choice("abcdef"), rng.randrange(150, 300), rng.randrange(-50, 50)) for _ in range(40)]
    return first, second


def run(harness: OperatorHarness, records: list) -> list:
    harness.process_columns([r[0] for r in records], [r[1] for r in records], [[r[2] for r in records]])
    harness.process_watermark(MAX_TIMESTAMP)
    return sorted(harness.output(), key=repr)


@pytest.mark.parametrize("layout", ["table", "cells"])
@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_restored_sessions_continue_as_the_history_would(layout: str, backend: str, seed: int, tmp_path) -> None:
    factory = SessionOperatorFactory(GAP, AGGS, state_layout=layout)
    config = StateConfig(backend=backend, local_dir=str(tmp_path)) if backend == "rocksdb" else StateConfig()
    first, second = history(seed)
    scratch = OperatorHarness(factory(), config)
    scratch.open()
    scratch.process_columns([r[0] for r in first], [r[1] for r in first], [[r[2] for r in first]])
    expected = run(scratch, second)
    scratch.snapshot()  # pages are written as a snapshot is taken
    assert scratch.num_entries() == 0
    scratch.close()

    sessions = sessions_of(first)
    restored = OperatorHarness(factory(), config)
    restored.open()
    keys = restored.operator.restore_sessions(*zip(*sessions))
    assert keys == len({s[0] for s in sessions})
    snapshot = restored.snapshot()
    restored.close()
    resumed = OperatorHarness(factory(), config)  # the restored sessions and their timers survive a snapshot
    resumed.restore(snapshot)
    resumed.open()
    assert run(resumed, second) == expected
    resumed.snapshot()
    assert resumed.num_entries() == 0
    resumed.close()


@pytest.mark.parametrize("layout", ["table", "cells"])
def test_sessions_the_rules_would_have_merged_are_refused(layout: str) -> None:
    h = OperatorHarness(SessionOperatorFactory(GAP, (("count", None),), state_layout=layout)())
    h.open()
    with pytest.raises(ValueError, match=r"\[0, 10\) and \[10, 25\) of key 'a' touch"):
        h.operator.restore_sessions(["a", "b", "a"], [0, 0, 10], [10, 10, 25], [[1], [1], [2]])
    with pytest.raises(ValueError, match=r"session \[5, 9\) of key 'b' is shorter than the gap"):
        h.operator.restore_sessions(["b"], [5], [9], [[1]])
    h.operator.restore_sessions(["a"], [0], [10], [[1]])
    with pytest.raises(StateError, match="key 'a' holds"):
        h.operator.restore_sessions(["a"], [50], [60], [[1]])
    h.close()


@pytest.mark.parametrize("layout", ["table", "cells"])
@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_a_table_put_in_a_few_keys_at_a_time_continues_as_put_in_whole(layout, backend, tmp_path, monkeypatch):
    """``SessionRestore`` puts a task's table in by slices of keys (bounded Python memory at 10^7 sessions): the
    operator then goes on exactly as with the whole table put in at once."""
    import pyarrow as pa

    from statekit.spark import initial_sessions
    from statekit.spark.initial_sessions import SessionRestore

    aggs = (("sum", 0), ("count", None))
    factory = SessionOperatorFactory(GAP, aggs, state_layout=layout)
    first, second = history(4)
    fn = RowAggregate(list(aggs))
    sessions = [s[:3] + (fn.get_result(s[3]),) for s in sessions_of(first, fn)]
    table = pa.table({"key": [s[0] for s in sessions], "window_start": [s[1] for s in sessions],
                      "window_end": [s[2] for s in sessions], "sum_value": [s[3][0] for s in sessions],
                      "count": [s[3][1] for s in sessions]})
    outputs, slices = [], []
    for rows in (len(sessions), 3):
        monkeypatch.setattr(initial_sessions, "RESTORE_ROWS", rows)
        config = StateConfig(backend=backend, local_dir=str(tmp_path / str(rows))) if backend == "rocksdb" \
            else StateConfig()
        h = OperatorHarness(factory(), config)
        h.open()
        calls = []
        restore = h.operator.restore_sessions
        h.operator.restore_sessions = lambda *a: calls.append(len(a[0])) or restore(*a)
        assert SessionRestore(aggs, ("sum_value", "count"))(h.operator, table) == len({s[0] for s in sessions})
        slices.append(calls)
        outputs.append(run(h, second))
        h.close()
    assert slices[0] == [len(sessions)] and len(slices[1]) > 3 and sum(slices[1]) == len(sessions)
    assert outputs[0] == outputs[1] and outputs[0]

