"""Memory against open sessions: the sessionize job's operator (a count per session, 30 s gap) driven as a
state host's task drives it, without Spark, on both state layouts.

N users click once each within 20 s of event time, in epochs of 250k records, so every session is still
open after the last epoch. Per epoch: the records as Arrow columns, the watermark, a checkpoint commit
(RocksDB: flush and incremental snapshot into a local directory) and the runtime's release of freed memory;
then a final watermark fires every session, each checked to come out exactly once (its results go to a
staging parquet file as a task's do: a step at a time where the engine takes steps). Each run is a fresh
process: its peak RSS through the epochs and through the final watermark, and its RSS after the last epoch.
"""

from __future__ import annotations

import os
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import psutil

from statekit import MAX_TIMESTAMP, StateConfig, create_backend
from statekit.checkpoint.store import CheckpointStore
from statekit.jobs.sessionize import SessionOperatorFactory
from statekit.operators import Output
from statekit.spark.output_dir import OutputDir
from statekit.spark.results import parts_table
from statekit.spark.runtime import release_free_memory

from .common import MIB, own_peak_rss, progress, rate, run_isolated
from .report import BenchReport

EPOCH_FULL, EPOCH_QUICK = 250_000, 10_000
SESSIONS_FULL = (1_000_000, 3_000_000, 10_000_000)
SESSIONS_QUICK = (20_000, 60_000)
HEAP_UP_TO = 1_000_000
"""The heap backend holds every session in memory: it runs at the sizes up to this one only."""
LAYOUTS = ("table", "cells")
SPREAD_MS = 20_000
"""Every click within this much event time: sessions (gap 30 s) stay open until the final watermark."""


def run_sessions(backend: str, layout: str, n: int, epoch: int) -> dict:
    """``n`` open sessions through the operator in epochs of ``epoch`` records; seconds, memory and how many
    sessions the final watermark fired."""
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        state = create_backend(StateConfig(backend=backend, local_dir=os.path.join(tmp, "db")))
        store = CheckpointStore(os.path.join(tmp, "checkpoint"), retain=2)
        out = Output()
        op = SessionOperatorFactory(gap_ms=30_000, aggs=(("count", None),), state_layout=layout)()
        op.open(state, out)
        t0 = time.perf_counter()
        for e, lo in enumerate(range(0, n, epoch)):
            users = np.arange(lo, min(n, lo + epoch))
            ts = 1_700_000_000_000 + users * SPREAD_MS // n
            keys = pa.array(np.char.add("user-", users.astype(str)).astype(object))
            op.process_columns(keys, ts, [keys, pa.array(ts)])
            release_free_memory()  # where the runtime releases it: after the records, before the commit
            op.process_watermark(int(ts.max()) - 5_000)
            out.drain_parts()
            release_free_memory()
            store.commit("sessions", e, state, metadata={"operator": op.snapshot_metadata()})
        seconds = time.perf_counter() - t0
        after, peak = psutil.Process().memory_info().rss, own_peak_rss()
        t1 = time.perf_counter()
        schema = pa.schema([("user", pa.string()), ("start", pa.int64()), ("end", pa.int64()), ("count", pa.int64())])
        with OutputDir(os.path.join(tmp, "output")).staging_file(0, "results", schema) as staged:
            out.hand_over(lambda parts: staged.write(parts_table(parts, schema, "result")))  # as a task's results leave
            op.process_watermark(MAX_TIMESTAMP)
            out.end_step()
            out.hand_over(None)
            staged.put()
            fired = pq.read_metadata(staged.local).num_rows
        state.flush()
        final = time.perf_counter() - t1
        left = state.num_entries()
        state.close()
    return {"seconds": seconds, "final_seconds": final, "after": after, "epochs_peak": peak, "fired": fired,
            "left": left}


def run(quick: bool = False) -> BenchReport:
    sizes, epoch = (SESSIONS_QUICK, EPOCH_QUICK) if quick else (SESSIONS_FULL, EPOCH_FULL)
    heap_up_to = sizes[0] if quick else HEAP_UP_TO
    rep = BenchReport("memory", params={"open_sessions": list(sizes), "epoch": epoch, "gap_ms": 30_000,
                                        "aggregate": "count per session", "heap_up_to": heap_up_to,
                                        "spread_ms": SPREAD_MS})
    runs = [(b, layout, n) for n in sizes for layout in LAYOUTS for b in ("heap", "rocksdb")
            if b == "rocksdb" or n <= heap_up_to]
    got = {}
    for b, layout, n in progress(runs, desc="memory"):
        res, peak = run_isolated(run_sessions, b, layout, n, epoch)
        if res["fired"] != n or res["left"]:
            raise AssertionError(f"{b}, {layout} layout, {n:,} sessions: the final watermark fired {res['fired']:,} "
                                 f"sessions and left {res['left']} state entries (expected {n:,} and 0)")
        got[(b, layout, n)] = res, peak
    lines: dict[str, list[tuple[float, float]]] = {}
    for i, n in enumerate(sizes):
        for layout in LAYOUTS:
            at = {b: got[(b, layout, n)] for b in ("heap", "rocksdb") if (b, layout, n) in got}
            name = f"{layout} layout, {n:,} open sessions"
            mib = {b: (res["epochs_peak"] / MIB, res["after"] / MIB, peak.mib()) for b, (res, peak) in at.items()}
            before = {b: got[(b, layout, sizes[i - 1])][0]["epochs_peak"] for b in at
                      if i and (b, layout, sizes[i - 1]) in got}
            rep.add(f"peak RSS through the epochs, {name}", unit="MiB", **{b: m[0] for b, m in mib.items()},
                    notes="; ".join(f"{b}: {(at[b][0]['epochs_peak'] - p) / (n - sizes[i - 1]):,.0f} bytes more per "
                                    f"open session than at {sizes[i - 1]:,}" for b, p in before.items()))
            rep.add(f"RSS after the last epoch, {name}", unit="MiB", **{b: m[1] for b, m in mib.items()})
            rep.add(f"peak RSS with the final watermark, {name}", unit="MiB", **{b: m[2] for b, m in mib.items()},
                    notes="every session fired once, into a staging parquet file as a task's results go (a step at "
                          "a time on RocksDB's cells layout, else at once); nothing left")
            rep.add(f"epochs, {name}", unit="records/s", **{b: rate(n, r["seconds"]) for b, (r, _) in at.items()},
                    notes="; ".join(f"{b}: {r['seconds']:.1f}s, final watermark {r['final_seconds']:.1f}s"
                                    for b, (r, _) in at.items()))
            for b, m in mib.items():
                lines.setdefault(f"{b}, {layout}", []).append((n, m[0]))
    rep.series("peak RSS through the epochs", x_label="open sessions", y_label="MiB", lines=lines, log_x=True)
    return rep
