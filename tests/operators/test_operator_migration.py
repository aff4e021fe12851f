"""Window operators restored with a migrated aggregate (a new accumulator version): open windows keep
what they had and aggregate the added slot from their next records on, merges that bridge windows
included; on the session and aligned-window engines and the generic record path, both backends."""

from __future__ import annotations

import pytest

from statekit import StateConfig, StateMigrationError
from statekit.operators import RowAggregate
from statekit.jobs.sessionize import SessionRows
from statekit.operators import EventTimeSessionWindows, TumblingEventTimeWindows, WindowOperator
from statekit.operators.testing import OperatorHarness
from statekit.testing import BACKENDS

V1 = [("sum", 0), ("count", None)]
V2 = [("sum", 0), ("count", None), ("max", 0)]
NAMES_V1, NAMES_V2 = ["sum_v", "count"], ["sum_v", "count", "max_v"]

EPOCH_1 = [("a", (1,), 0), ("a", (2,), 5), ("c", (9,), 3), ("b", (3,), 100), ("e", (1,), 300), ("e", (2,), 320)]
EPOCH_2 = [("b", (7,), 105), ("d", (4,), 200), ("e", (6,), 310)]

PATHS = {
    "session-engine": (lambda: EventTimeSessionWindows.with_gap(10), True),
    "session-record-path": (lambda: EventTimeSessionWindows.with_gap(10), False),
    "tumbling": (lambda: TumblingEventTimeWindows.of(10), True),
    "tumbling-record-path": (lambda: TumblingEventTimeWindows.of(10), False),
}
EXPECTED = {  # (key, start, end, sum, count, max): max only over the records after the migration
    "session-engine": [("b", 100, 115, 10, 2, 7), ("d", 200, 210, 4, 1, 4), ("e", 300, 330, 9, 3, 6)],
    "tumbling": [("b", 100, 110, 10, 2, 7), ("d", 200, 210, 4, 1, 4), ("e", 300, 310, 1, 1, None),
                 ("e", 310, 320, 6, 1, 6), ("e", 320, 330, 2, 1, None)],
}
EXPECTED["session-record-path"] = EXPECTED["session-engine"]
EXPECTED["tumbling-record-path"] = EXPECTED["tumbling"]


def operator(path: str, function: RowAggregate) -> WindowOperator:
    assigner, engine = PATHS[path]
    return WindowOperator(assigner(), function=function, window_function=SessionRows(), columnar=engine)


def first_epoch(path: str, backend: str) -> bytes:
    h = OperatorHarness(operator(path, RowAggregate(V1)), StateConfig(backend=backend))
    h.open()
    h.process_batch(EPOCH_1)
    h.process_watermark(20)
    assert sorted(v[:3] for v, _ in h.output()) == [("a", 0, 15 if "session" in path else 10), ("c", 3 if "session" in path else 0, 13 if "session" in path else 10)]
    snapshot = h.snapshot()
    h.close()
    return snapshot


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("path", PATHS)
def test_restore_migrates_open_windows(path, backend):
    snapshot = first_epoch(path, backend)
    for target in BACKENDS:  # and into the other backend
        h = OperatorHarness(operator(path, RowAggregate(V2, NAMES_V2, 2, {1: NAMES_V1})), StateConfig(backend=target))
        h.restore(snapshot)
        h.open()
        assert h.metrics["state_migrated"] == 3  # b's window and e's two
        h.process_batch(EPOCH_2)
        h.process_watermark(1 << 40)
        assert sorted(v for v, _ in h.output()) == EXPECTED[path]
        again = h.snapshot()
        h.close()
        h2 = OperatorHarness(operator(path, RowAggregate(V2, NAMES_V2, 2, {1: NAMES_V1})), StateConfig(backend=target))
        h2.restore(again)
        h2.open()
        assert h2.metrics["state_migrated"] == 0 and h2.num_entries() == 0
        h2.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_new_version_without_migration_is_refused_on_restore(backend):
    snapshot = first_epoch("session-engine", backend)
    h = OperatorHarness(operator("session-engine", RowAggregate(V2, NAMES_V2, 2)), StateConfig(backend=backend))
    h.restore(snapshot)
    with pytest.raises(StateMigrationError, match=r"state 'sessions' is stored at version 1.*version 2 without a migration"):
        h.open()
    if h.backend is not None:
        h.backend.close()
