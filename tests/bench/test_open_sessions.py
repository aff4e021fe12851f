"""`statekit bench open-sessions` without Spark (its quick run is in test_bench's `all --quick`): the input files
(each user once, times within the spread, in name order, the sentinel last) kept and reused in the output
directory and written anew when incomplete; each user's session checked exactly once; a heap run over its
memory budget reported as such, while a wrong answer is written to the report and exits non-zero; its options
reach the part and are refused elsewhere."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from statekit.bench import open_sessions, runner
from statekit.bench.common import HOSTS, JVM, PYTHON, STATEKIT_PYTHON, WORKERS, PeakRSS
from statekit.bench.open_sessions import (BASE_MS, SPREAD_MS, check_sessions, inputs, over_budget, report_name,
                                          user_ids, write_inputs)
from statekit.bench.spark_runs import SENTINEL
from tests.bench_support import run_in_process

MIB = 1 << 20


@pytest.fixture
def in_process(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """``run_isolated`` of the part run in this process (the calls recorded)."""
    return run_in_process(monkeypatch, open_sessions)


def test_the_input_files_hold_each_user_once_in_name_order(tmp_path):
    write_inputs(str(tmp_path / "d"), 25, 10)
    files = sorted((tmp_path / "d" / "input").iterdir())
    assert [f.name for f in files] == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    table = pa.concat_tables(pq.read_table(f) for f in files)
    assert sorted(table["user_id"].to_pylist()) == sorted(f"u{i}" for i in range(25))
    assert all(BASE_MS <= t < BASE_MS + SPREAD_MS for t in table["ts_ms"].to_pylist())
    with_sentinel = sorted((tmp_path / "d" / "input-with-sentinel").iterdir())
    assert [f.name for f in with_sentinel] == [*(f.name for f in files), "part-00003.parquet"]
    assert pq.read_table(with_sentinel[-1])["user_id"].to_pylist() == [SENTINEL]
    times = [f.stat().st_mtime for f in with_sentinel]
    assert times == sorted(set(times))  # strictly in name order: a stream refuses ties


def test_the_input_files_are_kept_and_written_anew_when_incomplete(tmp_path, in_process):
    root = inputs(tmp_path, 25, 10)
    assert root == tmp_path / "users-25-epoch-10" and len(in_process) == 1
    assert inputs(tmp_path, 25, 10) == root and len(in_process) == 1  # kept
    os.remove(root / "input" / "part-00001.parquet")
    inputs(tmp_path, 25, 10)
    assert len(in_process) == 2 and (root / "input" / "part-00001.parquet").exists()
    (root / "done.json").write_text(json.dumps({"users": 25}))
    inputs(tmp_path, 25, 10)
    assert len(in_process) == 3
    inputs(tmp_path, 25, 5)  # another epoch: other files
    assert len(in_process) == 4


def _write_sessions(path, users: list[str], counts: list[int] | None = None) -> str:
    path.mkdir()
    pq.write_table(pa.table({"user_id": pa.array(users, pa.string()),
                             "count": pa.array(counts or [1] * len(users), pa.int64())}), path / "part-0.parquet")
    (path / "_checkpoint").mkdir()  # statekit's own files beside its output: not read
    pq.write_table(pa.table({"user_id": ["u0"], "count": [1]}), path / "_checkpoint" / "x.parquet")
    return str(path)


def test_each_users_session_is_checked_exactly_once(tmp_path):
    keys = user_ids(pa.array(range(5)).to_numpy()).to_pylist()
    assert check_sessions(_write_sessions(tmp_path / "a", [*keys, SENTINEL]), 5) == \
        (5, "every user's session exactly once")
    assert check_sessions(_write_sessions(tmp_path / "b", [*keys[:4], keys[0]]), 5) == \
        (5, "DIFFERS: 1 users without a session, 1 with more than one, 5 clicks")
    assert check_sessions(_write_sessions(tmp_path / "c", keys, [1, 1, 1, 1, 2]), 5)[1].endswith("6 clicks")
    assert check_sessions(_write_sessions(tmp_path / "d", [*keys[:4], "u9"]), 5)[1] == \
        "DIFFERS: keys that are not the input's"
    assert check_sessions(_write_sessions(tmp_path / "e", [*keys[:4], "user"]), 5)[1] == \
        "DIFFERS: keys that are not the input's"


def test_over_budget_is_the_line_naming_memory_and_rocksdb():
    error = ("Py4JJavaError: An error occurred\nTraceback (most recent call last):\n  File x\n"
             "statekit.errors.MemoryBudgetError: out of memory budget: the heap backend ... rerun with "
             "--backend rocksdb (Spark conf ...)\n\tat org.apache.spark")
    assert over_budget(error) == ("statekit.errors.MemoryBudgetError: out of memory budget: the heap backend ... "
                                  "rerun with --backend rocksdb (Spark conf ...)")
    assert over_budget("java.lang.OutOfMemoryError: Java heap space") is None  # not the budget's error
    assert over_budget("input not found; pass --backend rocksdb") is None


def _peak(tree: int, hosts: int) -> PeakRSS:
    return PeakRSS(tree * MIB, {HOSTS: hosts * MIB, WORKERS: 50 * MIB, STATEKIT_PYTHON: (hosts + 50) * MIB,
                                JVM: 600 * MIB, PYTHON: 100 * MIB})


@pytest.fixture
def measured(monkeypatch: pytest.MonkeyPatch, tmp_path) -> dict[str, dict]:
    """The part run on results given per run name (no files, no Spark)."""
    given: dict[str, dict] = {}
    monkeypatch.setattr(open_sessions, "inputs", lambda data_dir, n, epoch: tmp_path)
    monkeypatch.setattr(open_sessions, "java_version", lambda: "java 17")
    monkeypatch.setattr(open_sessions, "_measure", lambda root, n, name, conf: (given[name], _peak(900, 300)))
    return given


def test_heap_over_its_budget_is_reported_and_not_a_failure(measured, tmp_path):
    measured.update(
        rocksdb={"seconds": 9.0, "batches": 2, "sessions": 100, "check": "every user's session exactly once"},
        heap={"seconds": 4.0, "over_budget": "out of memory budget: ... --backend rocksdb"},
        native={"seconds": 12.0, "batches": 4, "sessions": 100, "check": "every user's session exactly once"})
    rep = open_sessions.run(open_sessions=[100], runs=["heap", "rocksdb", "native"], data_dir=tmp_path)
    assert rep.part == "open-sessions-100-rocksdb-heap-native" and not rep.failures
    figures = {f.name: f for f in rep.figures}
    seconds = figures["seconds, each backend's default layout, 100 open sessions"]
    assert (seconds.heap, seconds.rocksdb, seconds.baseline) == (None, 9.0, 12.0)
    tree = figures["peak RSS whole process tree, each backend's default layout, 100 open sessions"]
    assert tree.heap == 900 and "heap (table, its default): failed: over budget after 4.0 s (out of memory budget" in tree.notes
    assert figures["peak RSS statekit's Python processes (state hosts, daemon and workers), each backend's default layout, "
                   "100 open sessions"].rocksdb == 350
    assert [s.title for s in rep.series_list] == ["peak RSS, whole process tree", "peak RSS, statekit's Python "
                                                  "processes", "time"]
    assert [label for s in rep.series_list for label in s.lines] == [
        "statekit rocksdb (table, its default)", "spark session_window (RocksDB state store)",
        "statekit rocksdb (table, its default)", "statekit rocksdb (table, its default)",
        "spark session_window (RocksDB state store)"]  # the failed heap run left out


def test_a_wrong_answer_is_written_then_exits_non_zero(measured, tmp_path):
    measured.update(cells={"seconds": 9.0, "batches": 2, "sessions": 99,
                           "check": "DIFFERS: 1 users without a session, 0 with more than one, 99 clicks"},
                    rocksdb={"seconds": 5.0, "over_budget": "out of memory budget: ... --backend rocksdb"})
    with pytest.raises(SystemExit, match="(?s)wrong answers.*rocksdb \\(table, its default\\).*over budget.*cells.*99 sessions written; DIFFERS"):
        runner.run_parts(["open-sessions"], False, tmp_path, open_sessions=[100], runs=["cells", "rocksdb"])
    data = json.loads((tmp_path / "open-sessions-100-rocksdb-cells.json").read_text())
    assert len(data["failures"]) == 2
    assert "FAILED" in (tmp_path / "open-sessions-100-rocksdb-cells.md").read_text()


def test_the_report_name_tells_what_differs():
    assert report_name(None, None, None, None) == "open-sessions"
    assert report_name([10_000_000, 30_000_000], 1_000_000, ["rocksdb", "native"], "2g") == \
        "open-sessions-10m-30m-epoch-1m-rocksdb-native-budget-2g"


def test_a_rescale_reads_half_the_files_then_the_rest_in_a_new_application(tmp_path, monkeypatch, in_process):
    """``rescale``: the first half of the files on 2 partitions without --final, then all of them on 3 with --final,
    each in a process of its own; the times add up, the new application's first epoch is in the notes, the peak is
    the higher of the two."""
    root = inputs(tmp_path, 25, 10)
    calls = []

    def fake(spec):
        calls.append((sorted(os.listdir(spec.input)), spec.partitions, spec.final))
        if spec.final:
            out = _write_sessions(tmp_path / "out", user_ids(pa.array(range(25)).to_numpy()).to_pylist())
            return {"seconds": 3.0, "batches": 2, "output": out, "first_epoch_seconds": 1.5,
                    "first_restore_seconds": 0.5, "state_bytes": 10}
        return {"seconds": 2.0, "batches": 2, "output": "unused", "first_epoch_seconds": 0.1,
                "first_restore_seconds": 0.0, "state_bytes": 20}

    monkeypatch.setattr(open_sessions, "run_statekit", fake)
    peaks = iter([_peak(700, 200), _peak(800, 100)])
    monkeypatch.setattr(open_sessions, "run_isolated", lambda fn, spec: (fn(spec), next(peaks)))
    res, peak = open_sessions._measure(root, 25, "rescale", ())
    assert calls == [(["part-00000.parquet"], 2, False),
                     (["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"], 3, True)]
    assert (res["seconds"], res["batches"], res["state_bytes"], res["sessions"]) == (5.0, 4, 20, 25)
    assert res["check"] == "every user's session exactly once"
    assert (peak.mib(), peak.mib(HOSTS)) == (800, 200)
    assert open_sessions._timing("rescale", res).endswith(
        "the new application 3.0 s, its first epoch 1.5 s (restores 0.5 s)")
    assert not (root / "work-rescale").exists()  # its work directory removed once checked


def test_the_plain_run_is_run_keyed_with_the_plain_aggregate_on_cells(tmp_path, monkeypatch, in_process):
    """``plain``: a user's plain Python aggregate through ``run_keyed``, on rocksdb and ``WindowOperator``'s
    default layout (cells), checked like the others."""
    root = inputs(tmp_path, 25, 10)
    seen = []

    def fake(spec):
        seen.append((spec.backend, spec.state_layout))
        out = _write_sessions(tmp_path / "out", user_ids(pa.array(range(25)).to_numpy()).to_pylist())
        return {"seconds": 3.0, "batches": 3, "output": out}

    monkeypatch.setattr(open_sessions, "run_plain_cells", fake)
    monkeypatch.setattr(open_sessions, "run_builtin", lambda spec: pytest.fail("sessionize run for plain"))
    res, _ = open_sessions._measure(root, 25, "plain", ())
    assert seen == [("rocksdb", "cells")] and res["check"] == "every user's session exactly once"


def test_the_plain_operator_takes_the_layout_it_is_given():
    from statekit.bench.user_logic import session_operator
    from statekit.operators import state_layout_of

    assert state_layout_of(session_operator(30_000).describe()) == "table"
    assert state_layout_of(session_operator(30_000, state_layout="cells").describe()) == "cells"
