"""`statekit bench bootstrap`: numpy's sessions are the reference's; the files (history in name order, every
session of it open at its end, the table its sessions in the --initial-state shape, the next input continuing,
restarting and starting sessions, the reference the whole input's sessions) kept and written anew when
incomplete; an output checked against the reference; a wrong one or a short restore written to the report, then
exit non-zero. The quick run end to end (slow): both resumed outputs the whole input's sessions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from statekit.bench import bootstrap, runner
from statekit.bench.bootstrap import (BASE_MS, QUICK_SIZES, RUNS, check_output, inputs, next_clicks, report_name,
                                      sessions_of, write_inputs)
from statekit.bench.common import GAP_MS, PeakRSS, clicks
from statekit.bench.spark_runs import DELAY_MS
from statekit.clickstream import Click, sessionize_reference
from tests.bench_support import run_in_process

MIB = 1 << 20


def _as_tuples(sessions: dict[str, np.ndarray], name=lambda i: f"u{i}") -> list[tuple]:
    return sorted((name(int(i)), *map(int, rest)) for i, *rest in zip(*sessions.values()))


def _read(path: Path) -> list[Click]:
    table = pq.read_table(path)
    return [Click(u, t, v) for u, t, v in zip(*(table[c].to_pylist() for c in ("user_id", "ts_ms", "value")))]


def test_numpy_sessions_are_the_references():
    cs = clicks(3000, 40)  # out of order, touching sessions, keys user_<n>
    ids, ts, values = (np.array(v) for v in zip(*((int(c.user_id.split("_")[1]), c.ts_ms, c.value) for c in cs)))
    assert _as_tuples(sessions_of(ids, ts, values), lambda i: f"user_{i}") == sessionize_reference(cs, GAP_MS)


@pytest.mark.parametrize("clicks", [1, 3])
def test_the_files_hold_a_history_of_open_sessions_its_table_and_the_next_input(tmp_path, clicks):
    write_inputs(str(tmp_path / "d"), 30, 10, clicks)
    root = tmp_path / "d"
    history = sorted((root / "history").iterdir())
    assert [f.name for f in history] == [f"part-{i:05d}.parquet" for i in range(1, 3 * clicks + 1)]
    nexts = sorted((root / "next").iterdir())
    assert [f.name for f in nexts] == [f"part-{i:05d}.parquet" for i in (3 * clicks + 1, 3 * clicks + 2)]
    [empty] = (root / "empty").iterdir()
    assert empty.name == "part-00000.parquet" and pq.read_table(empty).num_rows == 0
    times = [f.stat().st_mtime for f in [empty, *history, *nexts]]
    assert times == sorted(set(times))  # strictly in name order: a stream refuses ties
    past = [c for f in history for c in _read(f)]
    assert sorted(c.user_id for c in past) == sorted(f"u{i}" for i in range(30) for _ in range(clicks))
    opened = sessionize_reference(past, GAP_MS)
    watermark = max(c.ts_ms for c in past) - DELAY_MS
    assert len(opened) == 30 and all(end > watermark for *_, end, _, _ in opened)  # none closed by the history
    table = pq.read_table(root / "table.parquet")
    assert table.column_names == ["user_id", "window_start", "window_end", "sum_value", "count", "avg_value_sum",
                                  "avg_value_count"]
    assert sorted(table.select(table.column_names[:5]).to_pylist(), key=lambda r: r["user_id"]) == \
        [dict(zip(table.column_names, s)) for s in opened]
    assert table["avg_value_sum"] == table["sum_value"] and table["avg_value_count"] == table["count"]
    later = [c for f in nexts for c in _read(f)]
    assert min(c.ts_ms for c in later) > max(c.ts_ms for c in past)
    whole = sessionize_reference(past + later, GAP_MS)
    ref = pq.read_table(root / "reference.parquet")
    assert _as_tuples({c: ref[c].to_numpy() for c in ref.column_names}) == whole
    continued = {s[0] for s in whole if s[0] in {c.user_id for c in past} and s[4] == clicks + 1}
    restarted = {u for u in {s[0] for s in whole} if sum(s[0] == u for s in whole) == 2}
    new = {s[0] for s in whole} - {c.user_id for c in past}
    assert (len(continued), len(restarted), len(new)) == (5, 5, 10) and not continued & restarted


def test_the_next_input_continues_restarts_and_starts_sessions():
    [(ids0, ts0, _), (ids1, ts1, _)] = next_clicks(np.random.default_rng(1), 100, 20)
    assert len(set(ids0) | set(ids1)) == 80 and (ids0 < 100).sum() == (ids1 < 100).sum() == 20
    last_click = BASE_MS + 20_000  # the history's; its first at BASE_MS
    assert (ts0 > last_click).all() and (ts0 <= BASE_MS + GAP_MS).all()
    assert (ts1 > last_click + GAP_MS).all() and (ts1 - DELAY_MS > ts0.max() - DELAY_MS).all()


@pytest.fixture
def in_process(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """``run_isolated`` of the part run in this process (the calls recorded)."""
    return run_in_process(monkeypatch, bootstrap)


def test_the_files_are_kept_and_written_anew_when_incomplete(tmp_path, in_process):
    roots = [inputs(tmp_path, 30, 10, 2) for _ in range(2)]
    assert roots == [tmp_path / "users-30-epoch-10-clicks-2"] * 2 and len(in_process) == 1  # kept
    for missing in ("table.parquet", "next/part-00008.parquet", "done.json"):
        os.remove(roots[0] / missing)
        inputs(tmp_path, 30, 10, 2)
        assert (roots[0] / missing).exists()
    assert len(in_process) == 4


def _write_output(path: Path, rows: list[tuple]) -> str:
    (path / "epoch=3").mkdir(parents=True)
    pq.write_table(pa.table({"user_id": pa.array([r[0] for r in rows], pa.string()),
                             **{c: pa.array([r[i + 1] for r in rows], pa.int64()) for i, c in enumerate(
                                 ("window_start", "window_end", "sum_value", "count"))},
                             "avg_value": pa.array([r[3] / r[4] for r in rows], pa.float64())}),
                   path / "epoch=3" / "part-0.parquet")
    (path / "_late").mkdir()  # statekit's side outputs beside the sessions: not read
    pq.write_table(pa.table({"user_id": ["u9"]}), path / "_late" / "x.parquet")
    return str(path)


def test_an_output_is_checked_against_the_reference(tmp_path):
    ref = {"id": np.array([0, 0, 1]), "window_start": np.array([5, 90, 7]), "window_end": np.array([40, 120, 37]),
           "sum_value": np.array([3, 1, 2]), "count": np.array([2, 1, 1])}
    rows = [("u1", 7, 37, 2, 1), ("u0", 90, 120, 1, 1), ("u0", 5, 40, 3, 2)]
    assert check_output(_write_output(tmp_path / "a", rows), ref) == (3, "the sessions of the whole input")
    assert check_output(_write_output(tmp_path / "b", rows[:2]), ref) == \
        (2, "DIFFERS: 2 sessions, the reference has 3")
    got = check_output(_write_output(tmp_path / "c", [*rows[:2], ("u0", 5, 40, 3, 3)]), ref)
    assert got[1].startswith("DIFFERS: 1 sessions differ from the reference; the first: {'id': 0, 'window_start': 5")
    assert check_output(_write_output(tmp_path / "d", [*rows[:2], ("x0", 5, 40, 3, 2)]), ref)[1] == \
        "DIFFERS: keys that are not the input's"


def _result(seconds: float, check: str = "the sessions of the whole input", restored: int = 0) -> dict:
    resume = {"seconds": 5.0, "batches": 3, "late": 0, "invalid": 0, "peak_mib": 800.0}
    return {"seconds": seconds, "batches": 4, "restored": restored, "epoch_seconds": seconds - 2,
            "first_epoch_seconds": 1.5, "checkpoint_bytes": 3 * MIB, "resume": resume,
            "sessions": 150, "check": check}


@pytest.fixture
def measured(monkeypatch: pytest.MonkeyPatch, tmp_path) -> dict[str, dict]:
    """The part run on results given per run name (no Spark): the reference read from a tiny file."""
    given: dict[str, dict] = {}
    pq.write_table(pa.table({"id": [0]}), tmp_path / "reference.parquet")
    monkeypatch.setattr(bootstrap, "inputs", lambda data_dir, n, epoch, clicks: tmp_path)
    monkeypatch.setattr(bootstrap, "java_version", lambda: "java 17")
    monkeypatch.setattr(bootstrap, "_measure", lambda root, n, name, ref: (given[name], PeakRSS(900 * MIB)))
    return given


def test_the_report_has_each_figure_of_both_runs(measured, tmp_path):
    measured.update(replay=_result(30.0), bootstrap=_result(6.0, restored=100))
    rep = bootstrap.run(bootstrap_sessions=[100], data_dir=tmp_path)
    assert rep.part == "bootstrap-100" and not rep.failures
    figures = {f.name: f for f in rep.figures}
    seconds = figures["seconds, 100 open sessions"]
    assert (seconds.rocksdb, seconds.baseline, seconds.baseline_name) == (6.0, 30.0, RUNS["replay"])
    assert seconds.notes.startswith("bootstrap 5.0x faster; replay 30.0 s: 4 epochs 28.0 s (the first 1.5 s), the "
                                    "rest 2.0 s; its resume 5.0 s in 3 epochs (0 late, 0 invalid); bootstrap 6.0 s")
    assert figures["speedup of bootstrap over replay, 100 open sessions"].rocksdb == 5.0
    assert figures["checkpoint MiB, 100 open sessions"].rocksdb == 3.0
    assert figures["peak RSS whole process tree, 100 open sessions"].baseline == 900
    assert [s.title for s in rep.series_list] == ["time to the history's open sessions", "peak RSS, whole process tree"]


def test_a_wrong_output_or_restore_is_written_then_exits_non_zero(measured, tmp_path):
    measured.update(replay=_result(30.0, "DIFFERS: 149 sessions, the reference has 150"),
                    bootstrap=_result(60.0, restored=99))
    with pytest.raises(SystemExit, match="(?s)wrong answers.*replay of the history, 100 open sessions: 150 sessions "
                                         "after the resume; DIFFERS.*restored 99 sessions of 100"):
        runner.run_parts(["bootstrap"], False, tmp_path, bootstrap_sessions=[100])
    data = json.loads((tmp_path / "bootstrap-100.json").read_text())
    assert len(data["failures"]) == 2
    assert "bootstrap 2.0x slower" in (tmp_path / "bootstrap-100.md").read_text()


def test_the_report_name_tells_the_sizes():
    assert report_name(None, None) == "bootstrap"
    assert report_name([1_000_000, 10_000_000], 10) == "bootstrap-1m-10m-clicks-10"


@pytest.mark.slow
def test_quick_run_resumes_both_checkpoints_to_the_whole_inputs_sessions(tmp_path):
    """Four Spark applications: the replay, the bootstrap, and each checkpoint's resume with --final."""
    script = Path(sys.executable).with_name("statekit")
    cmd = [str(script), "bench"] if script.exists() else [sys.executable, "-m", "bench"]
    subprocess.run([*cmd, "bootstrap", "--quick", "--out", str(tmp_path)], check=True, timeout=600)
    data = json.loads((tmp_path / "bootstrap.json").read_text())
    assert not data["failures"]
    [n] = QUICK_SIZES
    figures = {f["name"]: f for f in data["figures"]}
    tag = f"{n:,} open sessions"
    for name in ("seconds", "peak RSS whole process tree", "checkpoint MiB",
                 "resume seconds (--final on the next input)"):
        f = figures[f"{name}, {tag}"]
        assert f["rocksdb"] > 0 and f["baseline"] > 0 and f["baseline_name"] == RUNS["replay"], f
    speedup = figures[f"speedup of bootstrap over replay, {tag}"]["rocksdb"]
    assert speedup == pytest.approx(figures[f"seconds, {tag}"]["baseline"] / figures[f"seconds, {tag}"]["rocksdb"])
    sessions = figures[f"sessions after the resume, {tag}"]
    files = tmp_path / "bootstrap-data" / "users-20k-epoch-10k-clicks-2"
    reference = pq.read_table(files / "reference.parquet").num_rows
    assert sessions["rocksdb"] == sessions["baseline"] == reference > n
    assert sessions["notes"].count("the sessions of the whole input") == 2, sessions["notes"]
    assert (tmp_path / "bootstrap.md").read_text().count("\n|") == 2 + len(figures)
    assert (tmp_path / "bootstrap.png").stat().st_size > 0
