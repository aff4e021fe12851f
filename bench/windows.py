"""Session windows through ``WindowOperator.process_batch`` next to a plain sort-and-scan sessionizer,
and the session engine (fed records or columns) next to the generic record path at two key counts.

A generated clickstream (bounded disorder) is cut into epochs of ~50k records; per epoch the
operator takes the batch, then the watermark (max event time seen minus the disorder bound), then
the backend flushes (RocksDB writes its epoch batch), as the Spark glue drives it. A final
watermark fires every open session. Each side runs in a fresh process (peak RSS per side); the
sessions of every backend are checked equal to the sort-and-scan result.
"""

from __future__ import annotations

import gc
import tempfile
import time

import numpy as np
import pyarrow as pa

from statekit import MAX_TIMESTAMP, StateConfig, available_backends, create_backend
from statekit.clickstream import sessionize_reference
from statekit.operators import EventTimeSessionWindows, Output, ProcessWindowFunction, RowAggregate, WindowOperator

from .common import DISORDER_MS, GAP_MS, SumCount, clicks, progress, rate, run_isolated, timed
from .report import BenchReport

EPOCH = 50_000
KEYS_FULL = (10_000, 1_000_000)
KEYS_QUICK = (1_000, 10_000)
"""Key counts of the record path vs engine rows: 10^4 keys (about 5 records per key and epoch at 1M
events) and 10^6 (about one record per key, most keys new each epoch)."""


class SessionRow(ProcessWindowFunction):
    def process(self, key, context, elements):
        for total, count in elements:
            yield (key, context.window.start, context.window.end, total, count)


def _freeze_input() -> None:
    """Move the prepared input out of the cyclic GC's sight (both sides do it before timing), so
    neither side pays for rescanning generated data that a real job would not hold."""
    gc.collect()
    gc.freeze()


def run_operator(backend: str, n_events: int, n_keys: int) -> dict:
    """Sessionize through the operator; returns seconds, per-epoch progress and the sessions."""
    data = clicks(n_events, n_keys)
    batches = [[(c.user_id, c.value, c.ts_ms) for c in data[i:i + EPOCH]] for i in range(0, len(data), EPOCH)]
    del data
    _freeze_input()
    with tempfile.TemporaryDirectory(prefix="bench-windows-") as tmp:
        b = create_backend(StateConfig(backend=backend, local_dir=tmp))
        out = Output()
        op = WindowOperator(EventTimeSessionWindows.with_gap(GAP_MS), function=SumCount(), window_function=SessionRow())
        op.open(b, out)
        points, done, max_ts = [], 0, -(1 << 62)
        t0 = time.perf_counter()
        for batch in batches:
            op.process_batch(batch)
            max_ts = max(max_ts, max(r[2] for r in batch))
            op.process_watermark(max_ts - DISORDER_MS)
            b.flush()
            done += len(batch)
            points.append((done, rate(done, time.perf_counter() - t0)))
        op.process_watermark(MAX_TIMESTAMP)
        b.flush()
        seconds = time.perf_counter() - t0
        left = b.num_entries()
        b.close()
    return {"seconds": seconds, "points": points, "sessions": sorted(v for v, _ in out.records), "left": left,
            "late": op.metrics["late_side_output"] + op.metrics["late_dropped"]}


PATHS = ("record path", "engine, records", "engine, columns", "table, columns")
"""The generic record path (``columnar=False``, one record at a time through MergingWindowSet), the
session engine (a cell per key) fed ``process_batch`` records or ``process_columns`` Arrow columns, and
the session table (``state_layout="table"``: all keys' sessions as columns) fed Arrow columns."""


def run_path(backend: str, n_events: int, n_keys: int, path: str) -> dict:
    """The sessionize job's operator (``RowAggregate`` sum+count over row tuples) on one of ``PATHS``,
    fed epochs sorted by event time as the Spark tasks do (inputs built before timing)."""
    data = clicks(n_events, n_keys)
    epochs = []
    for i in range(0, len(data), EPOCH):
        part = sorted(data[i:i + EPOCH], key=lambda c: c.ts_ms)  # the Spark tasks sort by event time
        if path.endswith("columns"):  # Arrow arrays, as the Spark glue hands a task's columns over
            users, ts = pa.array([c.user_id for c in part]), np.array([c.ts_ms for c in part], np.int64)
            epochs.append((users, ts, [users, pa.array(ts), pa.array([c.value for c in part], pa.int64())]))
        else:
            epochs.append([(c.user_id, (c.user_id, c.ts_ms, c.value), c.ts_ms) for c in part])
    del data
    _freeze_input()
    with tempfile.TemporaryDirectory(prefix="bench-windows-") as tmp:
        b = create_backend(StateConfig(backend=backend, local_dir=tmp))
        out = Output()
        op = WindowOperator(EventTimeSessionWindows.with_gap(GAP_MS), function=RowAggregate([("sum", 2), ("count", None)]),
                            columnar=path != "record path", state_layout="table" if path.startswith("table") else "cells")
        op.open(b, out)
        max_ts = -(1 << 62)
        t0 = time.perf_counter()
        for epoch in epochs:
            if path.endswith("columns"):
                op.process_columns(*epoch)
                max_ts = max(max_ts, int(epoch[1].max()))
            else:
                op.process_batch(epoch)
                max_ts = max(max_ts, epoch[-1][2])
            op.process_watermark(max_ts - DISORDER_MS)
            b.flush()
        op.process_watermark(MAX_TIMESTAMP)
        b.flush()
        seconds = time.perf_counter() - t0
        b.close()
    return {"seconds": seconds, "sessions": sorted((tuple(v), t) for v, t in out.records)}


def run_plain(n_events: int, n_keys: int) -> dict:
    data = clicks(n_events, n_keys)
    _freeze_input()
    sessions, seconds = timed(lambda: sessionize_reference(data, GAP_MS))
    return {"seconds": seconds, "sessions": sessions}


def run(quick: bool = False) -> BenchReport:
    n_events, n_keys = (20_000, 10_000) if quick else (1_000_000, 10_000)
    rep = BenchReport("windows", params={"events": n_events, "keys": n_keys, "gap_ms": GAP_MS, "epoch": EPOCH,
                                         "max_disorder_ms": DISORDER_MS, "aggregate": "sum+count per session"})
    plain, plain_rss = run_isolated(run_plain, n_events, n_keys)
    rates, rss, lines, notes = {}, {}, {}, []
    for backend in progress(available_backends(), desc="windows"):
        res, rss[backend] = run_isolated(run_operator, backend, n_events, n_keys)
        if res["sessions"] != plain["sessions"]:
            raise AssertionError(f"{backend}: operator sessions differ from sort-and-scan "
                                 f"({len(res['sessions'])} vs {len(plain['sessions'])})")
        if res["left"]:
            raise AssertionError(f"{backend}: {res['left']} state entries left after the final watermark")
        rates[backend] = rate(n_events, res["seconds"])
        lines[backend] = res["points"]
        notes.append(f"{backend}: {res['seconds']:.2f}s")
    plain_rate = rate(n_events, plain["seconds"])
    notes.append(f"sort-and-scan {plain['seconds']:.2f}s; {len(plain['sessions'])} sessions, identical on every "
                 f"backend; no late records; backend empty after the final watermark")
    rep.add("session windows", unit="events/s", heap=rates.get("heap"), rocksdb=rates.get("rocksdb"),
            baseline=plain_rate, baseline_name="sort-and-scan", notes="; ".join(notes))
    rep.add("peak RSS", unit="MiB", heap=rss["heap"].mib() if "heap" in rss else None,
            rocksdb=rss["rocksdb"].mib() if "rocksdb" in rss else None, baseline=plain_rss.mib(),
            baseline_name="sort-and-scan", notes="whole process, including the generated input")
    runs = [(keys, b, p) for keys in (KEYS_QUICK if quick else KEYS_FULL) for b in available_backends() for p in PATHS]
    results = {(keys, b, p): run_isolated(run_path, b, n_events, keys, p)[0]
               for keys, b, p in progress(runs, desc="windows: record path vs engine")}
    for keys in (KEYS_QUICK if quick else KEYS_FULL):
        got = {(b, p): results[(keys, b, p)] for b in available_backends() for p in PATHS}
        for b in available_backends():
            for p in PATHS[1:]:
                if got[(b, p)]["sessions"] != got[(b, PATHS[0])]["sessions"]:
                    raise AssertionError(f"{b}: {p} sessions differ from the record path's ({keys} keys)")
        speed = {k: rate(n_events, r["seconds"]) for k, r in got.items()}
        per_key = n_events / keys / max(1, -(-n_events // EPOCH))
        for p in PATHS:
            notes = f"about {per_key:,.1f} records per key and epoch; sum+count RowAggregate; same sessions on every path"
            if p != PATHS[0]:
                notes = ", ".join(f"{b} {speed[(b, p)] / speed[(b, PATHS[0])]:.1f}x the record path"
                                  for b in available_backends()) + "; " + notes
            rep.add(f"{p}, {keys:,} keys", unit="events/s", heap=speed.get(("heap", p)),
                    rocksdb=speed.get(("rocksdb", p)), notes=notes)
    rep.series("events/s by backend", x_label="events processed", y_label="events/s (cumulative)", lines=lines)
    return rep
