"""Restore, inspect and read_state in a fresh interpreter that imported nothing but what it asks for:
decoding must not depend on which modules a process happened to import. Window namespaces decode through
the ``statekit.types`` entry points; a user's own type decodes once the job registers it (a checkpoint
records its name, and a restore never imports what a checkpoint names)."""

from __future__ import annotations

import json
import textwrap

import pytest

from statekit.memory_budget import TABLE_FRACTION, TABLE_ROW_BYTES
from statekit.testing import BACKENDS
from tests.checkpoint_support import USER_TYPES
from tests.checkpoint_support import run_python as _run

WRITE = """
import json, sys
sys.path.insert(0, {support!r})
import user_types  # registers Point under code 42: the writer knows it, the reader will not import it
from statekit import StateConfig, ValueStateDescriptor
from statekit.checkpoint import CheckpointStore
from statekit.operators import ProcessWindowFunction, TumblingEventTimeWindows, WindowOperator
from statekit.operators.testing import OperatorHarness
from statekit.testing.contract import SumCount

op = WindowOperator(TumblingEventTimeWindows.of(1000), function=SumCount(), columnar=False)  # window namespaces
h = OperatorHarness(op, StateConfig(backend={backend!r}, local_dir={local!r}))
h.open()
h.process_batch([("u1", 5, 1_000), ("u1", 7, 1_050), ("u2", 1, 3_000)])
h.process_watermark(500)
h.backend.set_current_key("u1")
h.backend.get_state(ValueStateDescriptor("where")).update(user_types.Point(3, 4))
CheckpointStore({root!r}).commit("op", 0, h.backend, {{"watermark": 500}})
from statekit.checkpoint import read_state
rows = read_state({root!r}, "op", "window-contents")
print(json.dumps({{"namespaces": sorted(repr(x["namespace"]) for x in rows), "point": repr(user_types.Point(3, 4)),
                  "timers": h.backend.timer_service("window-timers", None).num_event_time_timers()}}))
"""

READ = """
import json, sys
from statekit import StateConfig, ValueStateDescriptor
from statekit.checkpoint import CheckpointStore, format_report, inspect_checkpoint, read_state
import user_types  # the job registers its own type, as the module of its operator factory would
assert "statekit.operators" not in sys.modules
rows = read_state({root!r}, "op", "window-contents")
r = CheckpointStore({root!r}).restore("op", StateConfig(backend={target!r}, local_dir={local!r}))
b = r.backend
b.set_current_key("u1")
point = b.get_state(ValueStateDescriptor("where")).value()
timers = b.timer_service("window-timers", None)
print(json.dumps({{"namespaces": sorted(repr(x["namespace"]) for x in rows), "point": repr(point),
                  "timers": timers.num_event_time_timers(), "report": format_report(inspect_checkpoint({root!r}))}}))
"""



@pytest.mark.parametrize("source", BACKENDS)
@pytest.mark.parametrize("target", BACKENDS)
def test_fresh_interpreter_restores_windows_and_user_types(tmp_path, source, target):
    support = tmp_path / "support"
    support.mkdir()
    (support / "user_types.py").write_text(USER_TYPES)
    root = str(tmp_path / "ckpt")
    wrote = json.loads(_run(textwrap.dedent(WRITE).format(support=str(support), backend=source,
                                                          local=str(tmp_path / "w"), root=root), tmp_path))
    out = _run(textwrap.dedent(READ).format(root=root, target=target, local=str(tmp_path / "r")), tmp_path, support)
    got = json.loads(out)
    assert len(wrote["namespaces"]) == 2 and all(n.startswith("TimeWindow(") for n in wrote["namespaces"])
    assert got["namespaces"] == wrote["namespaces"]
    assert got["point"] == wrote["point"] == "Point(x=3, y=4)"
    assert got["timers"] == wrote["timers"] > 0
    assert "operator op: 1 partition(s)" in got["report"]


READ_UNDECLARED = """
import json, sys
from statekit import SerializationError, StateConfig, ValueStateDescriptor
from statekit.checkpoint import CheckpointStore
try:
    b = CheckpointStore({root!r}).restore("op", StateConfig(backend={target!r}, local_dir={local!r})).backend
    b.set_current_key("u1")
    error = "decoded " + repr(b.get_state(ValueStateDescriptor("where")).value())
except SerializationError as e:
    error = str(e)
print(json.dumps({{"error": error, "imported": "user_types" in sys.modules}}))
"""


@pytest.mark.parametrize("target", BACKENDS)
def test_a_user_type_the_job_does_not_register_is_an_unknown_code(tmp_path, target):
    """The snapshot records code 42 as user_types:Point and user_types is importable, but the reading job does not
    register it: the restore fails naming the code and the recorded name, and imports nothing; ``statekit inspect``
    still lists the epoch and says which code is unknown."""
    support = tmp_path / "support"
    support.mkdir()
    (support / "user_types.py").write_text(USER_TYPES)
    root = str(tmp_path / "ckpt")
    _run(textwrap.dedent(WRITE).format(support=str(support), backend="heap", local=str(tmp_path / "w"), root=root),
         tmp_path)
    got = json.loads(_run(textwrap.dedent(READ_UNDECLARED).format(root=root, target=target, local=str(tmp_path / "r")),
                          tmp_path, support))
    assert got["error"].startswith("state 'where': unknown msgpack extension code 42, recorded as user_types:Point: ")
    assert "statekit.register_type(42, ...)" in got["error"] and "statekit.types" in got["error"]
    assert got["imported"] is False
    report = _run(f"import sys; from statekit.cli import main; sys.exit(main(['inspect', {root!r}]))", tmp_path,
                  support)  # `statekit inspect`
    assert "operator op: 1 partition(s)" in report and "    epoch 0: heap" in report
    assert "unknown type code 42, recorded as user_types:Point" in report
    assert "unknown type code 10" not in report  # a window: declared by statekit's entry points


WRITE_PACKED = """
from statekit import StateConfig
from statekit.checkpoint import CheckpointStore, JobRecord
from statekit.operators import EventTimeSessionWindows, RowAggregate, WindowOperator
from statekit.operators.testing import OperatorHarness

op = WindowOperator(EventTimeSessionWindows.with_gap(1000), function=RowAggregate([("sum", 1), ("count", None)]))
h = OperatorHarness(op, StateConfig(backend={backend!r}, local_dir={local!r}))
h.open()
h.process_columns(["u1", "u1", "u2"], [1_000, 1_050, 3_000], [["u1", "u1", "u2"], [5, 7, 1]])
CheckpointStore({root!r}).commit("op", 0, h.backend, {{"operator": op.snapshot_metadata()}})
JobRecord({root!r}).write({{"operator_id": "op", "operator": op.describe()}})
"""

READ_PACKED = """
import json, sys
from statekit import StateConfig
from statekit.checkpoint import CheckpointStore, JobRecord, read_state
rows = read_state({root!r}, "op", "sessions")
assert "statekit.operators" not in sys.modules
from statekit.checkpoint.readable_state import readable_state
from statekit.operators import EventTimeSessionWindows, Output, RowAggregate, WindowOperator
described = JobRecord({root!r}).read()["operator"]
cells = {{r["key"]: [type(r["value"]).__name__, readable_state(described, "sessions", r["value"])] for r in rows}}
r = CheckpointStore({root!r}).restore("op", StateConfig(backend={backend!r}, local_dir={local!r}))
op = WindowOperator(EventTimeSessionWindows.with_gap(1000), function=RowAggregate([("sum", 1), ("count", None)]))
out = Output()
op.open(r.backend, out)
op.restore_metadata(r.metadata[0]["operator"])
op.process_watermark(10_000)
print(json.dumps({{"cells": cells, "fired": [[list(v), t] for v, t in out.records]}}))
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_packed_session_cells_restore_and_read_in_a_fresh_interpreter(tmp_path, backend):
    """Packed session cells (a RowAggregate's) written by one process: a fresh interpreter reads them
    through the recorded job in the list form, restores them and fires the sessions they hold."""
    root = str(tmp_path / "ckpt")
    _run(textwrap.dedent(WRITE_PACKED).format(backend=backend, local=str(tmp_path / "w"), root=root), tmp_path)
    got = json.loads(_run(textwrap.dedent(READ_PACKED).format(backend=backend, local=str(tmp_path / "r"), root=root),
                          tmp_path))
    assert got["cells"] == {"u1": ["bytes", [2049, 1000, 2050, [12, 2]]], "u2": ["bytes", [3999, 3000, 4000, [1, 1]]]}
    assert got["fired"] == [[[12, 2], 2049], [[1, 1], 3999]]


WRITE_APART = """
from statekit import ListStateDescriptor, StateConfig, ValueStateDescriptor
from statekit.checkpoint import CheckpointStore
from statekit.testing.contract import SERIALIZED_APART

store = CheckpointStore({root!r})
b = __import__("statekit").create_backend(StateConfig(backend={backend!r}, local_dir={local!r}))
v, l = b.get_state(ValueStateDescriptor("v")), b.get_state(ListStateDescriptor("l"))
t = b.timer_service("t", None)
for filler in range(200):  # enough state that the second commit is a delta
    b.set_current_key(f"f{{filler}}"); v.update(filler)
b.set_current_key("k")
for i, ns in enumerate(SERIALIZED_APART[:3]):  # a full snapshot, then a delta with the rest
    v.set_current_namespace(ns); v.update(i); l.set_current_namespace(ns); l.add(i)
    t.register_event_time_timer(ns, 100)
store.commit("op", 0, b)
for i, ns in enumerate(SERIALIZED_APART[3:], 3):
    v.set_current_namespace(ns); v.update(i); l.set_current_namespace(ns); l.add(i)
    t.register_event_time_timer(ns, 100)
v.set_current_namespace(True); v.update(10)
t.delete_event_time_timer(True, 100)
print(store.commit("op", 1, b).manifest.snapshot["incremental"])
"""

READ_APART = """
import json
from statekit import ListStateDescriptor, StateConfig, ValueStateDescriptor
from statekit.checkpoint import CheckpointStore
from statekit.testing.contract import SERIALIZED_APART

b = CheckpointStore({root!r}).restore("op", StateConfig(backend={target!r}, local_dir={local!r})).backend
v, l = b.get_state(ValueStateDescriptor("v")), b.get_state(ListStateDescriptor("l"))
b.set_current_key("k")
cells = []
for ns in reversed(SERIALIZED_APART):  # the opposite order to the writer's
    v.set_current_namespace(ns); l.set_current_namespace(ns)
    cells.append([repr(ns), v.value(), l.get()])
fired = b.timer_service("t", None).take_due_event_time(1000)
print(json.dumps({{"cells": cells, "fired": sorted([t.timestamp, repr(t.namespace)] for t in fired)}}))
"""


@pytest.mark.parametrize("source", BACKENDS)
@pytest.mark.parametrize("target", BACKENDS)
def test_namespaces_serialized_apart_restore_apart_in_a_fresh_interpreter(tmp_path, source, target):
    """Cells and timers under namespaces equal in Python but serialized apart (1, True, 1.0, ...), committed
    as a full snapshot and a delta: a fresh interpreter, meeting them in the opposite order, restores each
    as its own (a cache keyed by Python equality gave a later namespace the first one's bytes)."""
    from statekit.testing.contract import SERIALIZED_APART

    root = str(tmp_path / "ckpt")
    incremental = _run(textwrap.dedent(WRITE_APART).format(root=root, backend=source, local=str(tmp_path / "w")), tmp_path)
    assert incremental.strip() == "True"  # the second commit built on the first
    got = json.loads(_run(textwrap.dedent(READ_APART).format(root=root, target=target, local=str(tmp_path / "r")),
                          tmp_path))
    values = {1: 10}  # True (index 1) was updated again before the delta
    assert got["cells"] == [[repr(ns), values.get(i, i), [i]] for i, ns in reversed(list(enumerate(SERIALIZED_APART)))]
    assert got["fired"] == sorted([100, repr(ns)] for i, ns in enumerate(SERIALIZED_APART) if i != 1)


TABLE_EPOCHS = [
    [("u1", 1000, 5, 0.5), (("t", 2), 1003, 1 << 63, -0.0), (7, 1009, 2, 1.5), ("u2", 3000, 1, 2.0)],  # a sum beyond
    # int64: a key in the list form
    [("u1", 1012, 7, 2.5), (("t", 2), 1010, 4, 1.0), ("u3", 2990, 3, 0.5)],
]
TABLE_OPERATOR = """
from statekit.operators import EventTimeSessionWindows, RowAggregate, WindowOperator
def table_operator(layout):
    return WindowOperator(EventTimeSessionWindows.with_gap(10), RowAggregate([("first", 3), ("sum", 2), ("count", None)]),
                          **({{"state_layout": "table"}} if layout else {{"columnar": False}}))
"""
WRITE_TABLE = TABLE_OPERATOR + """
import json, numpy as np
from statekit import StateConfig, create_backend
from statekit.checkpoint import CheckpointStore
from statekit.operators import Output

store, out = CheckpointStore({root!r}), Output()
b = create_backend(StateConfig(backend={backend!r}, local_dir={local!r}, memory_budget={budget!r}))
op = table_operator(True)
op.open(b, out)
for epoch, records in enumerate({epochs!r}):  # a full snapshot, then a delta
    op.process_columns([r[0] for r in records], np.array([r[1] for r in records], np.int64),
                       [[r[0] for r in records], [r[2] for r in records], [r[2] for r in records], [r[3] for r in records]])
    op.process_watermark(1005 + epoch)
    store.commit("op", epoch, b, metadata={{"operator": op.snapshot_metadata()}})
from statekit.checkpoint import JobRecord
JobRecord({root!r}).write({{"operator_id": "op", "operator": op.describe()}})
print(json.dumps({{"listed": len(op._engine._overflow), "moved": op._engine._cells is not None,
                  "fired": repr(out.drain())}}))
"""
READ_TABLE = """
import json, sys
from statekit.checkpoint import JobRecord, read_state
rows = read_state({root!r}, "op", "session-table")
cells = read_state({root!r}, "op", "sessions")
assert "statekit.operators" not in sys.modules
from statekit.checkpoint.readable_state import readable_state
described = JobRecord({root!r}).read()["operator"]
pages = sorted(repr(session) for r in rows for session in readable_state(described, "session-table", r["value"]))
pages += sorted(repr([r["key"], *c[i:i + 3]]) for r in cells for c in [readable_state(described, "sessions", r["value"])]
                for i in range(1, len(c), 3))
""" + TABLE_OPERATOR + """
from statekit import StateConfig
from statekit.checkpoint import CheckpointStore
from statekit.operators import Output

r = CheckpointStore({root!r}).restore("op", StateConfig(backend={target!r}, local_dir={local!r}))
op, out = table_operator(True), Output()
op.open(r.backend, out)
op.restore_metadata(r.metadata[0]["operator"])
op.process_watermark(10_000)
print(json.dumps({{"fired": repr(out.drain()), "pages": pages}}))
"""


@pytest.mark.parametrize("source, moves", [("heap", False), ("rocksdb", False), ("rocksdb", True)])
@pytest.mark.parametrize("target", BACKENDS)
def test_a_session_table_restores_in_a_fresh_interpreter(tmp_path, source, moves, target):
    """Session-table pages (packed rows and a key in the list form; a full snapshot and a delta) written by
    one process: a fresh interpreter restores them into either backend and fires what the record path
    fires on the same input. ``moves``: the table's budget (3 rows) is passed in the first epoch, so its
    sessions are cells by the first commit, and stay cells in the new process."""
    import numpy as np
    from statekit.operators import Output
    from statekit.operators.testing import OperatorHarness

    root = str(tmp_path / "ckpt")
    budget = round(3 * TABLE_ROW_BYTES / TABLE_FRACTION) if moves else None  # memory_budget.table_rows: 3 rows
    wrote = json.loads(_run(textwrap.dedent(WRITE_TABLE).format(backend=source, local=str(tmp_path / "w"), root=root,
                                                                epochs=TABLE_EPOCHS, budget=budget), tmp_path))
    got = json.loads(_run(textwrap.dedent(READ_TABLE).format(target=target, local=str(tmp_path / "r"), root=root),
                          tmp_path))
    scope: dict = {}
    exec(textwrap.dedent(TABLE_OPERATOR).replace("{{", "{").replace("}}", "}"), scope)
    reference = OperatorHarness(scope["table_operator"](False))
    reference.open()
    fired = []
    for epoch, records in enumerate(TABLE_EPOCHS):
        reference.process_batch([(r[0], (r[0], r[2], r[2], r[3]), r[1]) for r in records])
        reference.process_watermark(1005 + epoch)
        fired.append(reference.output())
    reference.process_watermark(10_000)
    assert wrote == {"listed": 0 if moves else 1, "moved": moves, "fired": repr(fired[0] + fired[1])}
    assert got["fired"] == repr(reference.output()) and str((1 << 63) + 4) in got["fired"]
    # read offline: each open session with its key and accumulator (RowAggregate's [first, sum, count])
    assert got["pages"] == sorted(repr(x) for x in [
        ["u1", 1000, 1010, [0.5, 5, 1]], ["u1", 1012, 1022, [2.5, 7, 1]], [("t", 2), 1003, 1020, [-0.0, (1 << 63) + 4, 2]],
        [7, 1009, 1019, [1.5, 2, 1]], ["u2", 3000, 3010, [2.0, 1, 1]], ["u3", 2990, 3000, [0.5, 3, 1]]])
    reference.close()
