"""``statekit.checkpoint.readable_state``: packed windows of a committed checkpoint read as lists, found by the
engine that stores each state (no table of engines), in this process and in a fresh one."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

from statekit import StateConfig
from statekit.checkpoint import CheckpointStore, JobRecord, read_state
from statekit.checkpoint.readable_state import readable_state
from statekit.operators import EventTimeSessionWindows, RowAggregate, TumblingEventTimeWindows, WindowOperator
from statekit.operators.testing import OperatorHarness
from tests.checkpoint_support import run_python

OPERATORS = {
    "sessions": lambda: WindowOperator(EventTimeSessionWindows(10), RowAggregate([("count", None), ("sum", 1)])),
    "session-table": lambda: WindowOperator(EventTimeSessionWindows(10), RowAggregate([("count", None), ("sum", 1)]),
                                            state_layout="table"),
    "aligned-windows": lambda: WindowOperator(TumblingEventTimeWindows(10), RowAggregate([("count", None), ("sum", 1)])),
}
EXPECTED = {
    # u1's records at 0 and 5 (values 5, 7), u2's at 100 (value 1); nothing fired at watermark 0
    "sessions": {"u1": [14, 0, 15, [2, 12]], "u2": [109, 100, 110, [1, 1]]},  # [timer, start, end, acc]
    "aligned-windows": {"u1": [9, 0, [2, 12]], "u2": [109, 100, [1, 1]]},    # [timer, start, acc]
    "session-table": [["u1", 0, 15, [2, 12]], ["u2", 100, 110, [1, 1]]],      # [key, start, end, acc] per page row
}


def commit(state: str, root: str, tmp_path) -> None:
    """A checkpoint of the operator storing ``state``, with its job record."""
    op = OPERATORS[state]()
    h = OperatorHarness(op, StateConfig(backend="heap", local_dir=str(tmp_path / "w"), max_parallelism=8))
    h.open()
    h.process_columns(["u1", "u1", "u2"], np.array([0, 5, 100]), [["u1", "u1", "u2"], [5, 7, 1]])
    h.process_watermark(0)
    CheckpointStore(root).commit("op", 1, h.backend, {"operator": op.snapshot_metadata()})
    JobRecord(root).write({"operator_id": "op", "operator": op.describe()})


def readable(rows: list[dict], described: dict, state: str) -> object:
    """What readable_state makes of the rows of ``state``: per key for cells, all pages' rows for the table."""
    if state == "session-table":
        return sorted(s for r in rows for s in readable_state(described, state, r["value"]))
    return {r["key"]: readable_state(described, state, r["value"]) for r in rows}


FRESH = """
import json
from statekit.checkpoint import JobRecord, read_state
from statekit.checkpoint.readable_state import readable_state
rows = read_state({root!r}, "op", {state!r})
described = JobRecord({root!r}).read()["operator"]
packed = all(type(r["value"]) is bytes for r in rows)
if {state!r} == "session-table":
    print(json.dumps([packed, sorted(s for r in rows for s in readable_state(described, {state!r}, r["value"]))]))
else:
    print(json.dumps([packed, {{r["key"]: readable_state(described, {state!r}, r["value"]) for r in rows}}]))
"""


@pytest.mark.parametrize("state", sorted(OPERATORS))
def test_packed_windows_read_as_lists(state, tmp_path):
    root = str(tmp_path / "ckpt")
    commit(state, root, tmp_path)
    rows = read_state(root, "op", state)
    assert rows and all(type(r["value"]) is bytes for r in rows)  # stored packed: what needs reading
    described = JobRecord(root).read()["operator"]
    assert readable(rows, described, state) == EXPECTED[state]
    fresh = json.loads(run_python(textwrap.dedent(FRESH).format(root=root, state=state), tmp_path))
    assert fresh == [True, EXPECTED[state]]


def test_what_it_cannot_read_stays_as_stored(tmp_path):
    root = str(tmp_path / "ckpt")
    commit("sessions", root, tmp_path)
    described = JobRecord(root).read()["operator"]
    value = read_state(root, "op", "sessions")[0]["value"]
    assert readable_state(described, "window-contents", value) == value           # no engine stores it
    assert readable_state(None, "sessions", value) == value                        # no description
    user = {"state": {"function": "my.module.MyPackedAggregate"}}
    assert readable_state(user, "sessions", value) == value                        # a user's own function
    unknown = {"state": {"function": {"class": "RowAggregate", "aggregates": [["median", 1]]}}}
    assert readable_state(unknown, "sessions", value) == value                     # a layout of unknown aggregates
    assert readable_state(described, "sessions", [1, 2]) == [1, 2]                  # a cell in the list form


def test_a_damaged_value_is_named(tmp_path):
    root = str(tmp_path / "ckpt")
    commit("sessions", root, tmp_path)
    described = JobRecord(root).read()["operator"]
    with pytest.raises(ValueError, match=r"state 'sessions': a stored value of 13 bytes is not a sessions-per-key "
                                         r"value of the recorded aggregates \[\['count', None\], \['sum', 1\]\].*"
                                         r"read it raw with statekit.checkpoint.read_state"):
        readable_state(described, "sessions", bytes(13))
