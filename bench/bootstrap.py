"""Bootstrapping open sessions from a table against replaying the history that made them: ``statekit sessionize
--initial-state TABLE`` on a new checkpoint next to ``statekit sessionize`` over the history, at 10^6 and 10^7
open sessions (time, peak RSS of the process tree, checkpoint bytes).

The history: N users click ``HISTORY_CLICKS`` times each (``--history-clicks``) within ``SPREAD_MS`` of event
time (gap 30 s: every session is still open when it ends), in parquet files of ``EPOCH`` records, one epoch each.
The table: the history's sessions in the ``--initial-state`` shape (key, bounds, ``sum_value``, ``count``, avg's
accumulator ``avg_value_sum``, ``avg_value_count``), computed by numpy in the generator's process, not by
statekit, so that the bootstrap depends on no replay. Then both checkpoints resume with ``--final`` on the next
input (two files: clicks that continue users' sessions, that start a user's next one, and new users'), and each
output must equal the sessions of the whole input computed by numpy (``sessions_of``); anything else is a
failure in the report.
Each run is a fresh process with its own JVM on ``local[2]`` (``bench spark``'s settings), sessionize's default
backend and layout (rocksdb, cells); the files are written in a process of their own and kept in
``<out>/bootstrap-data``.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from statekit.jobs import DEFAULT_STATE_LAYOUT

from .common import GAP_MS, MIB, PeakRSS, count_tag, progress, run_isolated, timed, watched
from .open_sessions import BASE_MS, EPOCH, QUICK_EPOCH, SPREAD_MS, committed, user_ids
from .report import BenchReport
from .spark_runs import DELAY_MS, MASTER, PARTITIONS, SETTINGS, java_version

SIZES = (1_000_000, 10_000_000)
QUICK_SIZES = (20_000,)
HISTORY_CLICKS = 2
"""Clicks per user in the history by default, ``SPREAD_MS / HISTORY_CLICKS`` apart: the shortest history whose
sessions merge clicks; a real one is longer, and only the replay's cost grows with it."""
NEXT_FILES = 2
CONTINUE_MS = (SPREAD_MS + 1_000, GAP_MS)
"""Next input's first file: times after the history's last click and within the gap of every user's last one
(at the history's start or later), so an existing user's click continues its session."""
RESTART_MS = (SPREAD_MS + GAP_MS + 1_000, SPREAD_MS + GAP_MS + 19_000)
"""Next input's second file: more than the gap after every history click (an existing user's next session),
and after the first file's watermark (none late)."""
AGGS = ("sum:value", "count", "avg:value")
BACKEND = "rocksdb"
SEED = 49
DATA_VERSION = 1
"""Bumped when the files' layout changes: cached files of another version are written again."""
RUNS = {"replay": "replay of the history", "bootstrap": "--initial-state table"}


def sessions_of(ids: np.ndarray, ts: np.ndarray, values: np.ndarray) -> dict[str, np.ndarray]:
    """The sessions of clicks (user id, time, value), by sessionize's rules (a click at most the gap after its
    user's previous one continues the session; window_end: the last click plus the gap), as columns ``id``,
    ``window_start``, ``window_end``, ``sum_value``, ``count``, sorted by id and start."""
    order = np.lexsort((ts, ids))
    ids, ts, values = ids[order], ts[order], values[order]
    new = np.ones(len(ids), bool)
    new[1:] = (ids[1:] != ids[:-1]) | (ts[1:] - ts[:-1] > GAP_MS)
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], len(ids)) - 1
    return {"id": ids[starts], "window_start": ts[starts], "window_end": ts[ends] + GAP_MS,
            "sum_value": np.add.reduceat(values, starts) if len(ids) else values,
            "count": np.diff(np.append(starts, len(ids)))}


def _clicks(ids: np.ndarray, ts: np.ndarray, values: np.ndarray) -> pa.Table:
    return pa.table({"user_id": user_ids(ids), "ts_ms": ts, "value": values})


def _write(path: Path, table: pa.Table, mtime: float) -> None:
    """A file of the stream, its modification time set: a stream's files must be in name order by it."""
    pq.write_table(table, path)
    os.utime(path, (mtime, mtime))


def write_inputs(root: str, n: int, epoch: int, clicks: int) -> None:
    """Write under ``root``: ``history/`` (``n`` users' ``clicks`` clicks each in files of ``epoch``, times
    rising across them, each file shuffled), ``next/`` (``NEXT_FILES`` files continuing users' sessions, starting
    their next ones and new users'), ``empty/`` (a file of no rows sorting before ``next/``'s: a bootstrap run's
    input), ``table.parquet`` (the history's open sessions), ``reference.parquet`` (the sessions of history and
    next, by user number) and ``done.json`` last. Run in a process of its own."""
    rng = np.random.default_rng(SEED)
    root_path = Path(root)
    for d in ("history", "next", "empty"):
        (root_path / d).mkdir(parents=True)
    ids = np.tile(np.arange(n, dtype=np.int64), clicks)
    ts = BASE_MS + np.arange(len(ids), dtype=np.int64) * SPREAD_MS // len(ids)  # click j of user i: rank j*n+i
    values = rng.integers(1, 10, len(ids), dtype=np.int64)
    files = -(-len(ids) // epoch)
    base = time.time() - files - NEXT_FILES - 2
    _write(root_path / "empty" / "part-00000.parquet", _clicks(ids[:0], ts[:0], values[:0]), base)
    for i in progress(range(files), total=files, desc=f"writing {n:,} users' history"):
        part = rng.permutation(np.arange(i * epoch, min(len(ids), (i + 1) * epoch)))
        _write(root_path / "history" / f"part-{i + 1:05d}.parquet", _clicks(ids[part], ts[part], values[part]),
               base + i + 1)
    history = sessions_of(ids, ts, values)
    pq.write_table(pa.table({"user_id": user_ids(history["id"]), **{c: history[c] for c in list(history)[1:]},
                             "avg_value_sum": history["sum_value"], "avg_value_count": history["count"]}),
                   root_path / "table.parquet")
    nexts = next_clicks(rng, n, min(epoch, n) // 2)
    for j, (nid, nts, nval) in enumerate(nexts):
        _write(root_path / "next" / f"part-{files + 1 + j:05d}.parquet", _clicks(nid, nts, nval), base + files + 1 + j)
    whole = [np.concatenate([history_column, *(clicks[k] for clicks in nexts)])
             for k, history_column in enumerate((ids, ts, values))]
    pq.write_table(pa.table(sessions_of(*whole)), root_path / "reference.parquet")
    (root_path / "done.json").write_text(json.dumps(_marker(n, epoch, clicks)))


def next_clicks(rng: np.random.Generator, n: int, k: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The next input's ``NEXT_FILES`` files of (ids, times, values), shuffled: ``k`` of the ``n`` users continue
    their session and ``k`` new users click in the first; ``k`` other users start their next session and ``k``
    more new users click in the second."""
    old = rng.permutation(n)[:2 * k].astype(np.int64)
    out = []
    for j, (lo, hi) in enumerate((CONTINUE_MS, RESTART_MS)):
        ids = rng.permutation(np.concatenate([old[j * k:(j + 1) * k], n + np.arange(j * k, (j + 1) * k)]))
        out.append((ids.astype(np.int64), BASE_MS + rng.integers(lo, hi, len(ids), dtype=np.int64),
                    rng.integers(1, 10, len(ids), dtype=np.int64)))
    return out


def _marker(n: int, epoch: int, clicks: int) -> dict:
    return {"version": DATA_VERSION, "users": n, "epoch": epoch, "clicks": clicks, "seed": SEED,
            "history_files": -(-n * clicks // epoch), "next_files": NEXT_FILES}


def inputs(data_dir: Path, n: int, epoch: int, clicks: int) -> Path:
    """The directory of ``n`` users' ``clicks`` each in files of ``epoch``: the cached one when its ``done.json``
    (written last) says so and the files are there, else written anew by ``write_inputs`` in a fresh process."""
    root = data_dir / f"users-{count_tag(n)}-epoch-{count_tag(epoch)}-clicks-{clicks}"
    marker = _marker(n, epoch, clicks)
    try:
        cached = (json.loads((root / "done.json").read_text()) == marker
                  and len(os.listdir(root / "history")) == marker["history_files"]
                  and len(os.listdir(root / "next")) == NEXT_FILES and (root / "table.parquet").is_file())
    except (OSError, ValueError):
        cached = False
    if not cached:
        shutil.rmtree(root, ignore_errors=True)
        run_isolated(write_inputs, str(root), n, epoch, clicks)
    return root


@dataclass(frozen=True)
class Job:
    """One ``sessionize`` run: its input directory, output, checkpoint; ``final``; ``initial_state``: a table."""

    input_dir: str
    output: str
    checkpoint: str
    final: bool
    initial_state: str | None = None


def run_sessionize(job: Job) -> dict:
    """``statekit sessionize`` through its Python API (stream mode, available-now), timed from the call (the JVM
    started before); its epochs, the sessions it restored from the table, late and invalid records."""
    from statekit.jobs import sessionize
    from statekit.spark import spark_session

    spark = spark_session(MASTER, SETTINGS, app_name="statekit bench")
    summary, seconds = timed(lambda: sessionize(
        spark, input=job.input_dir, output=job.output, checkpoint=job.checkpoint, key="user_id", time="ts_ms",
        gap=GAP_MS, watermark_delay=DELAY_MS, aggs=list(AGGS), backend=BACKEND, partitions=PARTITIONS, fmt="parquet",
        mode="stream", trigger="available-now", final=job.final, initial_state=job.initial_state))
    spark.stop()
    return {"seconds": seconds, "batches": len(summary.epochs), "restored": summary.total("restored"),
            "epoch_seconds": summary.total("seconds"), "first_epoch_seconds": summary.epochs[0]["seconds"],
            "late": summary.total("late"), "invalid": summary.total("invalid")}


def tree_bytes(path: Path) -> int:
    """Bytes of the files under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def check_output(path: str, reference: dict[str, np.ndarray]) -> tuple[int, str]:
    """How many sessions a run wrote to ``path`` and whether they are ``reference``'s (avg: sum / count), read
    with pyarrow after the run's process ended."""
    table = pads.dataset(path, format="parquet").to_table(
        columns=["user_id", "window_start", "window_end", "sum_value", "count", "avg_value"])
    try:
        ids = pc.cast(pc.utf8_slice_codeunits(table["user_id"], 1), pa.int64()).to_numpy()
    except pa.ArrowInvalid:
        ids = None
    if ids is None or not pc.all(pc.starts_with(table["user_id"], "u")).as_py():
        return table.num_rows, "DIFFERS: keys that are not the input's"
    order = np.lexsort((table["window_start"].to_numpy(), ids))
    got = {"id": ids[order], **{c: table[c].to_numpy()[order] for c in list(reference)[1:]}}
    if len(ids) != len(reference["id"]):
        return len(ids), f"DIFFERS: {len(ids):,} sessions, the reference has {len(reference['id']):,}"
    wrong = np.zeros(len(ids), bool)
    for c, want in reference.items():
        wrong |= got[c] != want
    wrong |= table["avg_value"].to_numpy()[order] != reference["sum_value"] / reference["count"]
    if wrong.any():
        i = int(np.flatnonzero(wrong)[0])
        first, want = ({c: int(v[i]) for c, v in cols.items()} for cols in (got, reference))
        return len(ids), (f"DIFFERS: {int(wrong.sum()):,} sessions differ from the reference; the first: {first} "
                          f"against {want}")
    return len(ids), "the sessions of the whole input"


def report_name(sizes: list[int] | None, clicks: int | None) -> str:
    """``bootstrap`` and what differs from a default run: ``bootstrap-1m-clicks-10``."""
    return "-".join(["bootstrap", *(count_tag(n) for n in sizes or ()), *([f"clicks-{clicks}"] if clicks else [])])


def run(quick: bool = False, bootstrap_sessions: list[int] | None = None, history_clicks: int | None = None,
        data_dir: Path = Path("bench-out", "bootstrap-data")) -> BenchReport:
    """Replay and bootstrap at each size of ``bootstrap_sessions`` (default ``SIZES``, quick ``QUICK_SIZES``) of a
    history of ``history_clicks`` per user (default ``HISTORY_CLICKS``), each checkpoint then resumed with
    ``--final`` on the next input and its output checked."""
    sizes = bootstrap_sessions or list(QUICK_SIZES if quick else SIZES)
    epoch, clicks = QUICK_EPOCH if quick else EPOCH, history_clicks or HISTORY_CLICKS
    rep = BenchReport(report_name(bootstrap_sessions, history_clicks), params={
        "open_sessions": sizes, "history_clicks_per_user": clicks, "epoch_records": epoch,
        "next_files": NEXT_FILES, "master": MASTER, "partitions": PARTITIONS, "java": java_version(),
        "gap_ms": GAP_MS, "watermark_delay_ms": DELAY_MS, "spread_ms": SPREAD_MS, "format": "parquet",
        "aggs": list(AGGS), "backend": BACKEND, "state_layout": DEFAULT_STATE_LAYOUT, "rss_sample_s": 0.2,
        "replay": "sessionize over the history (stream, available-now)",
        "bootstrap": "sessionize --initial-state table.parquet on a new checkpoint, input: one empty file",
        "resume": "each checkpoint: sessionize --final on the next input, output checked against numpy's sessions"})
    data_dir.mkdir(parents=True, exist_ok=True)
    results = {}
    for n in sizes:
        root = inputs(data_dir, n, epoch, clicks)
        table = pq.read_table(root / "reference.parquet")
        reference = {c: table[c].to_numpy() for c in table.column_names}
        results[n] = {name: _measure(root, n, name, reference) for name in RUNS}
    _report(rep, results)
    return rep


def _measure(root: Path, n: int, name: str, reference: dict[str, np.ndarray]) -> tuple[dict, PeakRSS]:
    """One run (``replay`` or ``bootstrap``) in a fresh process, its checkpoint's bytes, then its resume on the
    next input in another, whose output is checked; a work directory beside the files, removed after."""
    work = root / f"work-{name}"
    shutil.rmtree(work, ignore_errors=True)
    (work / "input").mkdir(parents=True)
    given = sorted((root / ("history" if name == "replay" else "empty")).iterdir())
    for f in given:
        os.link(f, work / "input" / f.name)
    job = Job(str(work / "input"), str(work / "out"), str(work / "checkpoint"), False,
              str(root / "table.parquet") if name == "bootstrap" else None)
    with watched(lambda: committed(str(work)), len(given), f"{RUNS[name]}, {n:,} open sessions: micro-batches"):
        res, peak = run_isolated(run_sessionize, job)
    res["checkpoint_bytes"] = tree_bytes(work / "checkpoint")
    for f in sorted((root / "next").iterdir()):
        os.link(f, work / "input" / f.name)
    with watched(lambda: committed(str(work)), len(given) + NEXT_FILES, f"{RUNS[name]}, {n:,} open sessions: resumed"):
        resumed, resume_peak = run_isolated(run_sessionize, Job(job.input_dir, job.output, job.checkpoint, True))
    res["resume"] = {**resumed, "peak_mib": resume_peak.mib()}
    res["sessions"], res["check"] = check_output(job.output, reference)
    shutil.rmtree(work, ignore_errors=True)
    return res, peak


def _report(rep: BenchReport, results: dict[int, dict[str, tuple[dict, PeakRSS]]]) -> None:
    """Per size: seconds, speedup, peak RSS, checkpoint MiB and the resumed outputs' sessions, the bootstrap in
    the rocksdb column against the replay as baseline; a wrong output or restored count in the failures; plots of
    time and peak RSS against open sessions."""
    secs: dict[str, list[tuple[float, float]]] = {}
    rss: dict[str, list[tuple[float, float]]] = {}
    base = RUNS["replay"]
    for n, got in results.items():
        (replay, replay_peak), (boot, boot_peak) = got["replay"], got["bootstrap"]
        tag = f"{n:,} open sessions"
        speedup = replay["seconds"] / boot["seconds"]
        rep.add(f"seconds, {tag}", "s", rocksdb=boot["seconds"], baseline=replay["seconds"], baseline_name=base,
                notes=_speedup(speedup) + "; " + "; ".join(_timing(k, got[k][0]) for k in RUNS))
        rep.add(f"speedup of bootstrap over replay, {tag}", "x", rocksdb=speedup)
        rep.add(f"peak RSS whole process tree, {tag}", "MiB", rocksdb=boot_peak.mib(), baseline=replay_peak.mib(),
                baseline_name=base, notes="; ".join(f"{k}'s resume {got[k][0]['resume']['peak_mib']:,.0f} MiB"
                                                    for k in RUNS))
        rep.add(f"checkpoint MiB, {tag}", "MiB", rocksdb=boot["checkpoint_bytes"] / MIB,
                baseline=replay["checkpoint_bytes"] / MIB, baseline_name=base)
        rep.add(f"resume seconds (--final on the next input), {tag}", "s", rocksdb=boot["resume"]["seconds"],
                baseline=replay["resume"]["seconds"], baseline_name=base)
        rep.add(f"sessions after the resume, {tag}", "sessions", rocksdb=boot["sessions"], baseline=replay["sessions"],
                baseline_name=base, notes="; ".join(f"{k}: {got[k][0]['check']}" for k in RUNS))
        for k in RUNS:
            res = got[k][0]
            if res["check"].startswith("DIFFERS"):
                rep.failures.append(f"{RUNS[k]}, {tag}: {res['sessions']:,} sessions after the resume; {res['check']}")
            secs.setdefault(RUNS[k], []).append((n, res["seconds"]))
            rss.setdefault(RUNS[k], []).append((n, got[k][1].mib()))
        if boot["restored"] != n:
            rep.failures.append(f"{RUNS['bootstrap']}, {tag}: restored {boot['restored']:,} sessions of {n:,}")
    rep.series("time to the history's open sessions", "open sessions", "s", secs, log_x=True, log_y=True)
    rep.series("peak RSS, whole process tree", "open sessions", "MiB", rss, log_x=True)


def _speedup(speedup: float) -> str:
    return f"bootstrap {speedup:.1f}x faster" if speedup >= 1 else f"bootstrap {1 / speedup:.1f}x slower"


def _timing(name: str, res: dict) -> str:
    """A run's seconds, epochs (the first's seconds: the bootstrap's from the table) and the rest (the query's
    start, and for the bootstrap the table's check), then its resume's."""
    resume = res["resume"]
    return (f"{name} {res['seconds']:.1f} s: {res['batches']} epochs {res['epoch_seconds']:.1f} s (the first "
            f"{res['first_epoch_seconds']:.1f} s), the rest {res['seconds'] - res['epoch_seconds']:.1f} s; its resume "
            f"{resume['seconds']:.1f} s in {resume['batches']} epochs ({resume['late']:,} late, "
            f"{resume['invalid']:,} invalid)")
