"""End to end on Spark (local[2]): statekit sessionize (heap, rocksdb) next to Spark's native
streaming ``session_window`` and the same sessionization written with ``transformWithStateInPandas``.

One generated clickstream per user count, written as 10 parquet files (quick: 3; one file per epoch
/ micro-batch, ``maxFilesPerTrigger=1``, ``availableNow``), the same Spark settings for every run
(``local[2]``, ``spark.sql.shuffle.partitions`` = statekit partitions, RocksDB state store provider,
10 s watermark delay, 30 s gap, sum+count per session). Each run is a fresh process with its own
JVM; events/s is the input size over the query's wall time (from start to the last session
written, Spark's startup excluded); peak RSS is sampled per role: driver Python, driver JVM, Python
workers. Every run's sessions are checked against the sort-and-scan reference, read once its process
ended (so the check is not in the run's peak RSS). A Spark baseline still running after ``BUDGET_S``
is stopped and rated on the micro-batches it finished (so the full run stays well under an hour); its
sessions are then not compared.

On Spark Connect (``--remote``): the same runs, each on a Connect session. ``--remote local[2]`` starts
a Connect server in each run's process (its JVM and Python workers are then in the sampled process tree,
as for a classic run); ``--remote sc://host:port`` connects to a running server, whose memory is not
sampled. The server's Python workers need statekit: a server started elsewhere needs ``PYSPARK_PYTHON``
set to an interpreter that has it.

Closing the last sessions: statekit runs ``--final`` (a last epoch with the maximum watermark).
Spark's streaming operators have no such end-of-input flush, so their input gets one extra file
holding a single sentinel event far in the future: its batch moves the watermark past every
session, and Spark's no-data batch emits them (the sentinel's own session is ignored).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Iterator

from statekit.clickstream import sessionize_reference
from statekit.jobs import DEFAULT_STATE_LAYOUT

from .common import DISORDER_MS, GAP_MS, HOSTS, JVM, PYTHON, WORKERS, PeakRSS, clicks, progress, rate, run_isolated, timed
from .report import BenchReport

MASTER = "local[2]"
PARTITIONS = 2
DELAY_MS = 10_000
SENTINEL = "__end_of_input__"
STATEKIT = {"heap": "statekit heap", "rocksdb": "statekit rocksdb"}
NATIVE, TWS = "spark session_window", "transformWithStateInPandas"
GOALS = {(NATIVE, "default"): 1.0, (NATIVE, "medium"): 1.2, (NATIVE, "large"): 1.2,
         (TWS, "default"): 10.0, (TWS, "medium"): 10.0, (TWS, "large"): 10.0}
"""statekit's speedup goals over each Spark baseline per scale, for both backends (issue 13; TWS: issue 6)."""
ROLES = {JVM: "driver JVM", WORKERS: "Python workers", HOSTS: "state hosts", PYTHON: "driver Python"}
COLUMNS = ("user_id", "window_start", "window_end", "sum_value", "count")
BUDGET_S = 300
"""A Spark baseline query still running after this long is stopped and rated on the batches it finished."""


SETTINGS = {
    "spark.sql.shuffle.partitions": PARTITIONS,
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}
"""Spark settings of every run, classic or Connect (runtime settings: a Connect client can set them)."""


def _spark(remote: str | None = None) -> Any:
    """The same session settings for every run: a classic session on ``MASTER``, or with ``remote`` a Spark
    Connect session (``sc://host:port``, or ``local[2]``: a Connect server started in this process)."""
    from statekit.spark import spark_session

    return spark_session(None if remote else MASTER, SETTINGS, app_name="statekit bench", remote=remote)


def _sessions(path: str) -> list[tuple]:
    """The sessions a run wrote, read with pyarrow after its process ended (so the check's memory is not
    counted in the run's peak RSS; files named ``_*`` or ``.*``, such as Spark's metadata, are skipped).
    Imported here, not with the module: a run's process imports this module, and pandas with it, which
    no run uses."""
    import pyarrow.dataset as pads

    table = pads.dataset(path, format="parquet").to_table(columns=list(COLUMNS))
    return sorted(row for row in zip(*(table.column(c).to_pylist() for c in COLUMNS)) if row[0] != SENTINEL)


def run_statekit(backend: str, input_dir: str, work: str, state_layout: str = DEFAULT_STATE_LAYOUT,
                 remote: str | None = None) -> dict:
    """``statekit sessionize`` through its Python API, stream mode, ``--final``."""
    from statekit.jobs import sessionize

    spark = _spark(remote)
    summary, seconds = timed(lambda: sessionize(
        spark, input=input_dir, output=f"{work}/out", key="user_id", time="ts_ms", gap=GAP_MS,
        watermark_delay=DELAY_MS, aggs=["sum:value", "count"], backend=backend, partitions=PARTITIONS,
        fmt="parquet", mode="stream", trigger="available-now", final=True, state_layout=state_layout))
    epochs = summary.epochs
    out = {"seconds": seconds, "output": summary.output, "late": summary.total("late"),
           "batches": len(epochs), "snapshot_seconds": sum(m["snapshot_seconds"] for m in epochs),
           "epoch_seconds": sum(m["seconds"] for m in epochs), "process_seconds": sum(m["process_seconds"] for m in epochs),
           "setup_seconds": sum(m["setup_seconds"] for m in epochs),
           "restore_seconds": sum(m["restore_seconds"] for m in epochs),
           "fast_path": f"{sum(m['fast_path_partitions'] for m in epochs)}/{sum(m['partitions'] for m in epochs)}",
           "caught_up": f"{sum(m['caught_up_partitions'] for m in epochs)}/{sum(m['partitions'] for m in epochs)}"}
    spark.stop()
    return out


def _source(spark: Any, input_dir: str) -> Any:
    from pyspark.sql import functions as F

    return (spark.readStream.schema("user_id string, ts_ms long, value long").option("maxFilesPerTrigger", 1)
            .parquet(input_dir).withColumn("ts", F.timestamp_millis("ts_ms"))
            .withWatermark("ts", f"{DELAY_MS} milliseconds"))


def _run_query(spark: Any, df: Any, work: str, budget_s: float) -> dict:
    """Write ``df`` (append mode) to parquet with availableNow; wall seconds and what it wrote. A query
    still running after ``budget_s`` is stopped: its rate is then the rows of the batches it finished
    over their time, and its sessions are not compared."""
    def go() -> tuple[Any, bool]:
        q = (df.writeStream.format("parquet").outputMode("append").option("checkpointLocation", f"{work}/ckpt")
             .trigger(availableNow=True).start(f"{work}/out"))
        done = q.awaitTermination(budget_s)
        if not done:
            q.stop()
        elif q.exception() is not None:
            raise RuntimeError(f"streaming query failed: {q.exception()}")
        return q, done

    (q, done), seconds = timed(go)
    batches = q.recentProgress
    out = {"seconds": seconds, "late": sum(op.numRowsDroppedByWatermark for p in batches for op in p.stateOperators),
           "batches": len(batches), "complete": done}
    if done:
        out["output"] = f"{work}/out"
    else:
        out["events"] = sum(p.numInputRows for p in batches)
        out["seconds"] = sum(p.durationMs.get("triggerExecution", 0) for p in batches) / 1000
    spark.stop()
    return out


def run_native(input_dir: str, work: str, budget_s: float, remote: str | None = None) -> dict:
    """Spark's streaming ``session_window`` aggregation, append mode, RocksDB state store."""
    from pyspark.sql import functions as F

    spark = _spark(remote)
    sessions = (_source(spark, input_dir).groupBy("user_id", F.session_window("ts", f"{GAP_MS} milliseconds"))
                .agg(F.sum("value").alias("sum_value"), F.count("*").alias("count"))
                .select("user_id", F.unix_millis("session_window.start").alias("window_start"),
                        F.unix_millis("session_window.end").alias("window_end"), "sum_value", "count"))
    return _run_query(spark, sessions, work, budget_s)


def run_tws(input_dir: str, work: str, budget_s: float, remote: str | None = None) -> dict:
    """The same sessions with ``transformWithStateInPandas`` (event-time timers, RocksDB state store)."""
    spark = _spark(remote)
    df = (_source(spark, input_dir).groupBy("user_id")
          .transformWithStateInPandas(statefulProcessor=session_processor()(GAP_MS),
                                      outputStructType=", ".join(f"{c} {'string' if c == 'user_id' else 'long'}"
                                                                 for c in COLUMNS),
                                      outputMode="Append", timeMode="EventTime"))
    return _run_query(spark, df, work, budget_s)


def merge_sessions(sessions: list[tuple], ts: Any, values: Any, gap_ms: int) -> list[tuple]:
    """Open sessions ``(start, end, sum, count)`` with the events added; touching sessions merge."""
    items = sorted([*sessions, *((int(t), int(t) + gap_ms, int(v), 1) for t, v in zip(ts, values))])
    merged = [items[0]]
    for s, e, total, n in items[1:]:
        cs, ce, ct, cn = merged[-1]
        if s <= ce:
            merged[-1] = (cs, max(ce, e), ct + total, cn + n)
        else:
            merged.append((s, e, total, n))
    return merged


def session_processor() -> type:
    """The StatefulProcessor class (pyspark imported lazily): per user a list state of open sessions and
    one event-time timer per session end; a timer emits the sessions that ended by then."""
    import pandas as pd
    from pyspark.sql.streaming import StatefulProcessor

    class SessionProcessor(StatefulProcessor):
        def __init__(self, gap_ms: int) -> None:
            self.gap_ms = gap_ms

        def init(self, handle: Any) -> None:
            self.handle = handle
            self.open = handle.getListState("sessions", "start long, end long, total long, n long")

        def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
            pdf = pd.concat(list(rows))
            before = [tuple(s) for s in self.open.get()]
            after = merge_sessions(before, pdf["ts_ms"].to_numpy(), pdf["value"].to_numpy(), self.gap_ms)
            self.open.put(after)
            old, new = {s[1] for s in before}, {s[1] for s in after}
            for end in old - new:
                self.handle.deleteTimer(end)
            for end in new - old:
                self.handle.registerTimer(end)
            return iter(())

        def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Any]:
            t = expiredTimerInfo.getExpiryTimeInMs()
            sessions = [tuple(s) for s in self.open.get()]
            done = [s for s in sessions if s[1] <= t]
            rest = [s for s in sessions if s[1] > t]
            if rest:
                self.open.put(rest)
            else:
                self.open.clear()
            if done:
                yield pd.DataFrame({"user_id": [key[0]] * len(done), "window_start": [s[0] for s in done],
                                    "window_end": [s[1] for s in done], "sum_value": [s[2] for s in done],
                                    "count": [s[3] for s in done]})

        def close(self) -> None:
            pass

    return SessionProcessor


def _inputs(root: Path, n_events: int, n_users: int, files: int) -> tuple[str, str, list[tuple]]:
    """Write the input files, and a copy with the sentinel file for Spark's own operators; also
    return the reference sessions."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from statekit.jobs import write_clickstream

    data = clicks(n_events, n_users)
    paths = write_clickstream(data, root / "input", files=files, fmt="parquet")
    spark_dir = root / "input-with-sentinel"
    spark_dir.mkdir()
    for p in paths:
        os.link(p, spark_dir / p.name)
    end = max(c.ts_ms for c in data) + 100 * (GAP_MS + DELAY_MS)
    sentinel = spark_dir / f"part-{files:05d}.parquet"
    pq.write_table(pa.table({"user_id": [SENTINEL], "ts_ms": pa.array([end], pa.int64()),
                             "value": pa.array([0], pa.int64())}), sentinel)
    mtime = paths[-1].stat().st_mtime + 1
    os.utime(sentinel, (mtime, mtime))
    return str(root / "input"), str(spark_dir), sessionize_reference(data, GAP_MS)


def _find(module: str) -> object | None:
    try:
        return importlib.util.find_spec(module)
    except ModuleNotFoundError:  # a missing parent package
        return None


def tws_unavailable() -> str | None:
    """Why transformWithStateInPandas cannot run here, or None."""
    missing = [m for m in ("pandas", "google.protobuf") if _find(m) is None]
    return f"transformWithStateInPandas needs pandas>=2.2 and protobuf; missing: {', '.join(missing)}" if missing else None


def _java_version() -> str:
    from statekit.spark import find_java

    out = subprocess.run([find_java(), "-version"], capture_output=True, text=True)
    return (out.stderr or out.stdout).splitlines()[0]


SCALES = {
    "default": {"events": 1_000_000, "users": [10_000, 100_000], "files": 10, "tws": True},
    "medium": {"events": 2_000_000, "users": [400_000], "files": 10, "tws": False},
    "large": {"events": 5_000_000, "users": [1_000_000], "files": 10, "tws": False},
}
"""Sizes of ``statekit bench spark`` (``--scale medium``/``large``: the large-state cases of issue 13,
without the much slower transformWithStateInPandas); ``--quick`` shrinks any to a smoke run."""


def run(quick: bool = False, scale: str = "default", state_layout: str = DEFAULT_STATE_LAYOUT,
        remote: str | None = None) -> BenchReport:
    """Every variant per user count; with ``remote`` on Spark Connect sessions (see the module's notes)."""
    size = SCALES[scale]
    n_events, files = (20_000, 3) if quick else (size["events"], size["files"])
    user_counts = [2_000] if quick else size["users"]
    name = "-".join(["spark"] + ([scale] if scale != "default" else []) + ([state_layout] if state_layout != DEFAULT_STATE_LAYOUT else [])
                    + (["connect"] if remote else []))
    session = (f"Spark Connect, remote {remote}" + (" (a server per run, in its process)" if remote.startswith("local")
               else " (a running server: its memory is not sampled)") if remote else "classic")
    rep = BenchReport(name, params={"state_layout": state_layout, "session": session,
        "events": n_events, "users": user_counts, "files": files, "java": _java_version(), "master": remote or MASTER, "partitions": PARTITIONS,
        "gap_ms": GAP_MS, "watermark_delay_ms": DELAY_MS, "max_disorder_ms": DISORDER_MS, "format": "parquet",
        "aggregate": "sum(value), count per session", "state_store": "RocksDBStateStoreProvider",
        "trigger": "availableNow, maxFilesPerTrigger=1", "spark_query_budget_s": BUDGET_S, "statekit": "sessionize --mode stream --final",
        "spark_end_of_input": "sentinel event file (see notes)"})
    variants = [*STATEKIT.values(), NATIVE, *([TWS] if size["tws"] else [])]
    missing = tws_unavailable()
    if missing:
        rep.params["skipped"] = {TWS: missing}
    runs = [(u, v) for u in user_counts for v in variants if not (v == TWS and missing)]
    results: dict[tuple[int, str], tuple[dict, PeakRSS]] = {}
    with tempfile.TemporaryDirectory(prefix="statekit-bench-spark-") as tmp:
        inputs = {}
        for users in user_counts:
            root = Path(tmp, f"users-{users}")
            root.mkdir()
            inputs[users] = _inputs(root, n_events, users, files)
        for users, variant in progress(runs, total=len(runs), desc="spark"):
            plain_dir, sentinel_dir, _ = inputs[users]
            work = Path(tmp, f"users-{users}", variant.replace(" ", "-"))
            work.mkdir()
            if variant in (NATIVE, TWS):
                fn = run_native if variant == NATIVE else run_tws
                results[(users, variant)] = run_isolated(fn, sentinel_dir, str(work), BUDGET_S, remote)
            else:
                backend = next(b for b, name in STATEKIT.items() if name == variant)
                results[(users, variant)] = run_isolated(run_statekit, backend, plain_dir, str(work), state_layout, remote)
            res = results[(users, variant)][0]
            if "output" in res:
                res["sessions"] = _sessions(res.pop("output"))
            shutil.rmtree(work, ignore_errors=True)
        references = {u: inputs[u][2] for u in user_counts}
    _report(rep, n_events, user_counts, variants, results, references, scale)
    return rep


def _report(rep: BenchReport, n_events: int, user_counts: list[int], variants: list[str],
            results: dict[tuple[int, str], tuple[dict, PeakRSS]], references: dict[int, list[tuple]],
            scale: str = "default") -> None:
    rates_line: dict[str, list[tuple[float, float]]] = {v: [] for v in variants}
    rss_line: dict[str, list[tuple[float, float]]] = {v: [] for v in variants}
    for users in user_counts:
        ref = references[users]
        got = {v: results[(users, v)] for v in variants if (users, v) in results}
        rates = {v: rate(res.get("events", n_events), res["seconds"]) for v, (res, _) in got.items()}
        for v, (res, peak) in got.items():
            rates_line[v].append((users, rates[v]))
            rss_line[v].append((users, peak.mib()))
        agree = {v: f"not compared: stopped after {BUDGET_S} s, rated on its {res['batches']} finished batches"
                 if "sessions" not in res else "identical to reference" if res["sessions"] == ref else
                 f"DIFFERS: {len(res['sessions']):,} sessions, "
                 f"{len(set(res['sessions']) - set(ref)):,} not in reference, {res['late']} late"
                 for v, (res, _) in got.items()}
        tag = f"{n_events:,} events, {users:,} users"
        for base in (NATIVE, TWS):
            if base not in got:
                continue
            speedup = {b: rates[name] / rates[base] for b, name in STATEKIT.items() if name in rates}
            goal = GOALS[(base, scale)]
            verdicts = ", ".join(f"{b} {'met' if x >= goal else 'MISSED'}" for b, x in speedup.items())
            rep.add(f"events/s vs {base} ({tag})", "events/s", heap=rates.get(STATEKIT["heap"]),
                    rocksdb=rates.get(STATEKIT["rocksdb"]), baseline=rates[base], baseline_name=base,
                    notes=f"speedup heap {speedup.get('heap', 0):.2f}x, rocksdb {speedup.get('rocksdb', 0):.2f}x "
                          f"(goal >= {goal:g}x: {verdicts}); "
                          + "; ".join(_timing(v, res) for v, (res, _) in got.items() if v in (base, *STATEKIT.values())))
            rep.add(f"sessions vs {base} ({tag})", "sessions",
                    heap=_count(got, STATEKIT["heap"]), rocksdb=_count(got, STATEKIT["rocksdb"]),
                    baseline=_count(got, base), baseline_name=base,
                    notes=f"reference {len(ref):,}; " + "; ".join(f"{v}: {agree[v]}" for v in got))
            for role, label in ROLES.items():
                rep.add(f"peak RSS {label} vs {base} ({tag})", "MiB",
                        heap=_rss(got, STATEKIT["heap"], role), rocksdb=_rss(got, STATEKIT["rocksdb"], role),
                        baseline=_rss(got, base, role), baseline_name=base,
                        notes="none: session_window runs in the JVM" if base == NATIVE and role in (WORKERS, HOSTS) else "")
            rep.add(f"peak RSS whole process tree vs {base} ({tag})", "MiB",
                    heap=_rss(got, STATEKIT["heap"]), rocksdb=_rss(got, STATEKIT["rocksdb"]),
                    baseline=_rss(got, base), baseline_name=base)
    rep.series("end to end on Spark local[2]", "users", "events/s", rates_line, log_x=True, log_y=True)
    rep.series("peak RSS, whole process tree", "users", "MiB", rss_line, log_x=True)


def _timing(variant: str, res: dict) -> str:
    """Seconds and batches of one run; for statekit also where its epochs' time went (the slowest task's
    set-up (Arrow input, sort, reaching its state host), restore, operator and snapshot time per epoch,
    summed; the rest is Spark's) and its local fast-path and caught-up shares."""
    text = f"{variant} {res['seconds']:.1f} s, {res['batches']} batches"
    if "fast_path" in res:
        parts = ("setup_seconds", "restore_seconds", "process_seconds", "snapshot_seconds")
        spark = res["epoch_seconds"] - sum(res[p] for p in parts)
        share = (res["restore_seconds"] + res["snapshot_seconds"]) / res["epoch_seconds"] if res["epoch_seconds"] else 0
        text += (f" (epochs {res['epoch_seconds']:.1f} s: task set-up {res['setup_seconds']:.1f} s, restores "
                 f"{res['restore_seconds']:.1f} s, operator {res['process_seconds']:.1f} s, snapshots "
                 f"{res['snapshot_seconds']:.1f} s (restores and snapshots {share:.1%}), Spark and the rest {spark:.1f} s; "
                 f"fast path {res['fast_path']}, caught up {res['caught_up']} partition-epochs)")
    return text


def _count(got: dict[str, tuple[dict, PeakRSS]], variant: str) -> int | None:
    return len(got[variant][0]["sessions"]) if variant in got and "sessions" in got[variant][0] else None


def _rss(got: dict[str, tuple[dict, PeakRSS]], variant: str, role: str | None = None) -> float | None:
    return got[variant][1].mib(role) if variant in got else None
