"""Open sessions against memory on Spark (issue 46): ``statekit sessionize`` on each backend and layout next to
Spark's native ``session_window`` (RocksDB state store), with every session still open when the input ends.

N users click once each within ``SPREAD_MS`` of event time (gap 30 s: no session closes before the end), in
parquet files of ``EPOCH`` records (one epoch / micro-batch each, ``maxFilesPerTrigger=1``, ``availableNow``),
on ``local[2]`` with 2 partitions (the settings of ``bench spark``). statekit's runs end with ``--final``,
Spark's with the sentinel file of ``bench spark``; every run's output is then checked to hold each user's
session exactly once (read after its process ended). Each run is a fresh process with its own JVM; its peak
RSS is sampled every 0.2 s over the whole process tree and per kind of process (driver Python, driver JVM,
statekit's Python processes: the daemon and workers Spark forks, and the state hosts).

The files are written by numpy and pyarrow in a process of their own before any run (so the generator's memory
is in no run's figures) and kept in ``<out>/open-sessions-data`` for the next bench. A heap run whose state
outgrows the memory budget fails its epoch with an error naming memory and ``--backend rocksdb``: it is
reported as failed over budget, with that line, not as a crash. The ``restart`` and ``rescale`` runs read the
first half of the files in one application and the rest in a new one (on 2, then 3 partitions for ``rescale``),
so every open session is restored from the checkpoint by a fresh process.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from statekit.jobs import DEFAULT_STATE_LAYOUT
from statekit.memory_budget import BUDGET_SETTING, MACHINE_FRACTION, default_budget

from .common import (GAP_MS, HOSTS, JVM, MIB, PYTHON, STATEKIT_PYTHON, WORKERS, PeakRSS, check_names, count_tag,
                     progress, run_isolated, watched)
from .report import BenchReport
from .spark_runs import (DELAY_MS, MASTER, NATIVE, PARTITIONS, SENTINEL, RunSpec, java_version, run_builtin,
                         run_native, run_plain_cells)

SIZES = (1_000_000, 10_000_000, 30_000_000)
QUICK_SIZES = (20_000,)
EPOCH, QUICK_EPOCH = 250_000, 10_000
"""Records per input file, so per epoch: the same at every size, so that memory follows the state, not the epoch."""
SPREAD_MS = 20_000
"""Every click within this much event time: sessions (gap 30 s) stay open until the input ends."""
BASE_MS = 1_700_000_000_000
SEED = 46
NATIVE_BUDGET_S = 6 * 3600
"""Spark's query is stopped after this long (then its sessions are not all out, and the run is a failure)."""
DATA_VERSION = 1
"""Bumped when the files' layout changes: cached files of another version are written again."""
ROLES = {STATEKIT_PYTHON: "statekit's Python processes (state hosts, daemon and workers)", HOSTS: "state hosts",
         WORKERS: "Python workers (daemon and workers)", JVM: "driver JVM", PYTHON: "driver Python"}


@dataclass(frozen=True)
class Run:
    """One kind of run: statekit's ``sessionize`` on ``backend`` and ``layout``, or (``backend`` None) Spark's own."""

    label: str
    backend: str | None
    layout: str | None = None
    resumed_on: int | None = None
    """Partitions of the new application that reads the second half of the files (None: one application)."""
    plain: bool = False
    """``run_keyed`` with the bench's plain Python ``AggregateFunction`` instead of ``sessionize``."""


def _statekit(backend: str, layout: str, resumed_on: int | None = None) -> Run:
    default = layout == DEFAULT_STATE_LAYOUT
    label = f"statekit {backend} ({layout}{', its default' if default else ''})"
    if resumed_on is not None:
        label += f", a new application on {resumed_on} partitions halfway"
    return Run(label, backend, layout, resumed_on)


RUNS = {  # ``--runs`` names, in the order each size runs them
    "rocksdb": _statekit("rocksdb", DEFAULT_STATE_LAYOUT),
    "cells": _statekit("rocksdb", "cells"),
    "heap": _statekit("heap", DEFAULT_STATE_LAYOUT),
    "native": Run(f"{NATIVE} (RocksDB state store)", None),
    "plain": Run("statekit run_keyed, a plain Python AggregateFunction, rocksdb (cells, WindowOperator's default)",
                 "rocksdb", "cells", plain=True),
    "restart": _statekit("rocksdb", DEFAULT_STATE_LAYOUT, PARTITIONS),
    "rescale": _statekit("rocksdb", DEFAULT_STATE_LAYOUT, PARTITIONS + 1),
}
GROUPS = (("each backend's default layout", "heap", "rocksdb"), ("cells layout on rocksdb", None, "cells"),
          ("a plain Python AggregateFunction through run_keyed", None, "plain"),
          ("restarted halfway in a new application", None, "restart"),
          (f"rescaled {PARTITIONS} -> {PARTITIONS + 1} halfway in a new application", None, "rescale"))
"""The report's groups of figures: (title, heap run, rocksdb run), each against the native run."""
DEFAULT_RUNS = ("rocksdb", "cells", "heap", "native")
"""The runs unless ``--runs`` names others (``restart`` and ``rescale`` double a run's time: on request)."""
QUICK_RUNS = ("rocksdb", "native")
"""``--quick``'s runs unless ``--runs`` names others: a smoke of each engine, two JVM starts."""


def check_runs(names: list[str]) -> list[str]:
    """``names`` if each is one of ``RUNS``; else a ValueError naming the unknown ones and the valid ones."""
    return check_names(names, RUNS, "run", "rocksdb,native")


def user_ids(ids: np.ndarray) -> pa.Array:
    """The users' keys, ``u<id>``, built by Arrow (no Python string per user)."""
    return pc.binary_join_element_wise("u", pa.array(ids).cast(pa.string()), "")


def write_inputs(root: str, n: int, epoch: int) -> None:
    """Write ``n`` users' clicks as ``<root>/input/part-NNNNN.parquet``, ``epoch`` users per file (their ids in a
    block, shuffled, times rising with the id across ``SPREAD_MS``), modification times one second apart in
    name order; ``<root>/input-with-sentinel``: the same files and the sentinel after them (``bench spark``);
    ``<root>/done.json`` last. Run in a process of its own."""
    rng = np.random.default_rng(SEED)
    files = -(-n // epoch)
    base = time.time() - files - 2
    inp, spark_dir = Path(root, "input"), Path(root, "input-with-sentinel")
    inp.mkdir(parents=True)
    spark_dir.mkdir()
    for i in progress(range(files), total=files, desc=f"writing {n:,} users' clicks"):
        ids = rng.permutation(np.arange(i * epoch, min(n, (i + 1) * epoch), dtype=np.int64))
        table = pa.table({"user_id": user_ids(ids), "ts_ms": BASE_MS + ids * SPREAD_MS // n,
                          "value": np.ones(len(ids), np.int64)})
        path = inp / f"part-{i:05d}.parquet"
        pq.write_table(table, path)
        os.utime(path, (base + i, base + i))
        os.link(path, spark_dir / path.name)
    end = BASE_MS + SPREAD_MS + 100 * (GAP_MS + DELAY_MS)
    sentinel = spark_dir / f"part-{files:05d}.parquet"
    pq.write_table(pa.table({"user_id": pa.array([SENTINEL]), "ts_ms": pa.array([end], pa.int64()),
                             "value": pa.array([0], pa.int64())}), sentinel)
    os.utime(sentinel, (base + files, base + files))
    Path(root, "done.json").write_text(json.dumps(_marker(n, epoch)))


def _marker(n: int, epoch: int) -> dict:
    return {"version": DATA_VERSION, "users": n, "epoch": epoch, "files": -(-n // epoch), "seed": SEED}


def inputs(data_dir: Path, n: int, epoch: int) -> Path:
    """The directory of ``n`` users' files in epochs of ``epoch``: the cached one when its ``done.json`` says
    it holds them all (and the files are there), else written anew by ``write_inputs`` in a fresh process."""
    root = data_dir / f"users-{count_tag(n)}-epoch-{count_tag(epoch)}"
    if not _cached(root, _marker(n, epoch)):
        shutil.rmtree(root, ignore_errors=True)
        run_isolated(write_inputs, str(root), n, epoch)
    return root


def _cached(root: Path, marker: dict) -> bool:
    """Whether ``root`` holds the files ``marker`` describes: its ``done.json`` (written last) says so and the
    files are there by name."""
    names = [f"part-{i:05d}.parquet" for i in range(marker["files"])]
    try:
        return (json.loads((root / "done.json").read_text()) == marker
                and sorted(os.listdir(root / "input")) == names
                and sorted(os.listdir(root / "input-with-sentinel")) == [*names, f"part-{len(names):05d}.parquet"])
    except (OSError, ValueError):
        return False


def over_budget(error: str) -> str | None:
    """The line of a failed run's error saying its state outgrew the memory budget (it names memory and the
    RocksDB backend as the way out), or None for any other failure."""
    if "--backend rocksdb" not in error or "memory" not in error.lower():
        return None
    return next(line.strip() for line in error.splitlines() if "memory" in line.lower())


def run_statekit(spec: RunSpec, plain: bool = False) -> dict:
    """``bench spark``'s ``run_builtin`` (``sessionize``, stream, ``--final``), or with ``plain`` its plain Python
    aggregate on cells (``run_plain_cells``); a run failed over its memory budget gives its seconds until then and
    the error's line instead of raising."""
    t0 = time.perf_counter()
    try:
        return (run_plain_cells if plain else run_builtin)(spec)
    except Exception as e:
        line = over_budget(f"{e}")
        if line is None:
            raise
        return {"seconds": time.perf_counter() - t0, "over_budget": line}


def committed(work: str) -> int:
    """Micro-batches a run in ``work`` committed so far (the files of its Spark checkpoint's ``commits``)."""
    return len(glob.glob(os.path.join(glob.escape(work), "**", "commits", "[0-9]*"), recursive=True))


def check_sessions(path: str, n: int) -> tuple[int, str]:
    """How many sessions a run wrote to ``path`` (the sentinel's left out) and whether they are each of the
    ``n`` users' one click exactly once; read with pyarrow after the run's process ended, a batch at a time
    (8 bytes a session held, then 8 a user)."""
    ids, clicks = [], 0
    for batch in pads.dataset(path, format="parquet").to_batches(columns=["user_id", "count"]):
        batch = batch.filter(pc.not_equal(batch["user_id"], SENTINEL))
        try:
            ids.append(pc.cast(pc.utf8_slice_codeunits(batch["user_id"], 1), pa.int64()).to_numpy())
        except pa.ArrowInvalid:
            return sum(map(len, ids)) + batch.num_rows, "DIFFERS: keys that are not the input's"
        clicks += pc.sum(batch["count"]).as_py() or 0
    every = np.concatenate(ids) if ids else np.zeros(0, np.int64)
    if len(every) and (every.min() < 0 or every.max() >= n):
        return len(every), "DIFFERS: keys that are not the input's"
    seen = np.bincount(every, minlength=n)
    missing, repeated = int((seen == 0).sum()), int((seen > 1).sum())
    if missing or repeated or clicks != n:
        return len(every), (f"DIFFERS: {missing:,} users without a session, {repeated:,} with more than one, "
                            f"{clicks:,} clicks")
    return len(every), "every user's session exactly once"


def report_name(sizes: list[int] | None, epoch: int | None, runs: list[str] | None, budget: str | None) -> str:
    """``open-sessions`` and what differs from a default run: ``open-sessions-10m-30m-epoch-1m-rocksdb-native-budget-2g``."""
    tags = ["-".join(count_tag(n) for n in sizes) if sizes else "", f"epoch-{count_tag(epoch)}" if epoch else "",
            "-".join(runs or ()), f"budget-{budget}" if budget else ""]
    return "-".join(["open-sessions", *filter(None, tags)])


def run(quick: bool = False, open_sessions: list[int] | None = None, epoch_records: int | None = None,
        runs: list[str] | None = None, memory_budget: str | None = None,
        data_dir: Path = Path("bench-out", "open-sessions-data")) -> BenchReport:
    """Each of ``runs`` (default: ``DEFAULT_RUNS``; quick: ``QUICK_RUNS``) at each size of ``open_sessions``, on files of
    ``epoch_records`` (kept in ``data_dir``); ``memory_budget`` sets ``spark.statekit.memory_budget``."""
    sizes = open_sessions or list(QUICK_SIZES if quick else SIZES)
    epoch = epoch_records or (QUICK_EPOCH if quick else EPOCH)
    names = [n for n in RUNS if n in check_runs(runs)] if runs else list(QUICK_RUNS if quick else DEFAULT_RUNS)
    budget = memory_budget or (f"default: {default_budget(None) // MIB:,} MiB ({MACHINE_FRACTION:.0%} of this "
                               f"machine's memory on a local master), split across the state hosts")
    rep = BenchReport(report_name(open_sessions, epoch_records, runs and names, memory_budget), params={
        "open_sessions": sizes, "epoch_records": epoch, "files": {n: -(-n // epoch) for n in sizes},
        "runs": {n: RUNS[n].label for n in names}, "master": MASTER, "partitions": PARTITIONS, "java": java_version(),
        "gap_ms": GAP_MS, "watermark_delay_ms": DELAY_MS, "spread_ms": SPREAD_MS, "format": "parquet",
        "aggregate": "sum(value), count per session", "state_store": "RocksDBStateStoreProvider",
        "trigger": "availableNow, maxFilesPerTrigger=1", "memory_budget": budget, "rss_sample_s": 0.2,
        "statekit": "sessionize --mode stream --final", "spark_end_of_input": "sentinel event file (bench spark)"})
    conf = ((BUDGET_SETTING, memory_budget),) if memory_budget else ()
    results: dict[tuple[int, str], tuple[dict, PeakRSS]] = {}
    data_dir.mkdir(parents=True, exist_ok=True)
    for n in sizes:
        root = inputs(data_dir, n, epoch)
        for name in names:
            results[(n, name)] = _measure(root, n, name, conf)
    _report(rep, sizes, names, results)
    return rep


def _measure(root: Path, n: int, name: str, conf: tuple[tuple[str, str], ...]) -> tuple[dict, PeakRSS]:
    """One run in a fresh process on ``root``'s files (a work directory beside them, removed after), its
    sessions checked once it ended."""
    kind = RUNS[name]
    work = root / f"work-{name}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    files = len(os.listdir(root / "input"))
    spec = RunSpec(str(root / ("input" if kind.backend else "input-with-sentinel")), str(work), "parquet",
                   kind.backend, kind.layout, conf=conf, budget_s=NATIVE_BUDGET_S)
    batches = files if kind.backend else files + 2  # Spark's: the sentinel's batch, then the no-data batch
    with watched(lambda: committed(str(work)), batches, f"{kind.label}, {n:,} open sessions: micro-batches"):
        if kind.resumed_on is not None:
            res, peak = _resumed(root / "input", replace(spec, input=str(work / "input")), kind.resumed_on)
        else:
            res, peak = run_isolated(run_statekit, spec, kind.plain) if kind.backend else run_isolated(run_native, spec)
    if "output" in res:
        res["sessions"], res["check"] = check_sessions(res.pop("output"), n)
    shutil.rmtree(work, ignore_errors=True)
    return res, peak


def _resumed(files: Path, spec: RunSpec, partitions: int) -> tuple[dict, PeakRSS]:
    """The first half of ``files`` (linked into ``spec.input``) in one application, not final; then the rest in
    a new application on ``partitions`` partitions, with ``--final``: seconds and batches of both, the new
    application's own figures under ``resumed``, the higher of each peak."""
    names = sorted(os.listdir(files))
    Path(spec.input).mkdir()

    def link(part: list[str]) -> None:
        for name in part:
            os.link(files / name, Path(spec.input, name))

    link(names[:len(names) // 2])
    first, first_peak = run_isolated(run_statekit, replace(spec, final=False))
    if "over_budget" in first:
        return first, first_peak
    link(names[len(names) // 2:])
    second, peak = run_isolated(run_statekit, replace(spec, partitions=partitions))
    res = {**second, "seconds": first["seconds"] + second["seconds"],
           "batches": first.get("batches", 0) + second.get("batches", 0),
           "state_bytes": max(first.get("state_bytes", 0), second.get("state_bytes", 0)), "resumed": second}
    return res, first_peak.highest(peak)


def _report(rep: BenchReport, sizes: list[int], names: list[str],
            results: dict[tuple[int, str], tuple[dict, PeakRSS]]) -> None:
    """Per size and layout: seconds, sessions and peak RSS (whole tree and per kind of process), heap and
    rocksdb against Spark's native; a run's failure in its notes (and in the report's failures unless it is
    heap over its budget); the plots of peak RSS and time against open sessions."""
    native = "native" if "native" in names else None
    tree: dict[str, list[tuple[float, float]]] = {}
    ours: dict[str, list[tuple[float, float]]] = {}
    secs: dict[str, list[tuple[float, float]]] = {}
    for n in sizes:
        got = {name: results[(n, name)] for name in names}
        verdict = {name: _verdict(rep, n, name, res) for name, (res, _) in got.items()}
        for name, (res, peak) in got.items():
            if "sessions" in res and not verdict[name].startswith("DIFFERS"):
                tree.setdefault(RUNS[name].label, []).append((n, peak.mib()))
                secs.setdefault(RUNS[name].label, []).append((n, res["seconds"]))
                if RUNS[name].backend:
                    ours.setdefault(RUNS[name].label, []).append((n, peak.mib(STATEKIT_PYTHON)))
        for title, heap, rocksdb in GROUPS:
            heap, rocksdb = (r if r in names else None for r in (heap, rocksdb))
            if heap or rocksdb or (native and title == GROUPS[0][0]):
                _figures(rep, f"{title}, {n:,} open sessions", heap, rocksdb, native, got, verdict)
    if tree:  # none when every run failed
        rep.series("peak RSS, whole process tree", "open sessions", "MiB", tree, log_x=True)
    if ours:
        rep.series("peak RSS, statekit's Python processes", "open sessions", "MiB", ours, log_x=True)
    if secs:
        rep.series("time", "open sessions", "s", secs, log_x=True, log_y=True)


def _verdict(rep: BenchReport, n: int, name: str, res: dict) -> str:
    """What a run's output was: its check, failed over budget (heap's way to fail: reported, not a failure of
    the bench), or stopped unfinished; anything but exactly once is added to the report's failures."""
    label = RUNS[name].label
    if "over_budget" in res:
        text = f"failed: over budget after {res['seconds']:.1f} s ({res['over_budget']})"
        if RUNS[name].backend != "heap":
            rep.failures.append(f"{label}, {n:,} open sessions: {text}")
        return text
    text = res.get("check") or f"DIFFERS: stopped after {NATIVE_BUDGET_S} s, {res['batches']} batches"
    if text.startswith("DIFFERS") or res["sessions"] != n:
        rep.failures.append(f"{label}, {n:,} open sessions: {res.get('sessions', 0):,} sessions written; {text}")
    return text


def _figures(rep: BenchReport, tag: str, heap: str | None, rocksdb: str | None, native: str | None,
             got: dict[str, tuple[dict, PeakRSS]], verdict: dict[str, str]) -> None:
    """The figures of one size and layout: heap and rocksdb runs (``None``: not run) against Spark's native."""
    cols = (heap, rocksdb, native)
    ran = [c for c in cols if c]
    baseline = RUNS[native].label if native else ""

    def add(what: str, unit: str, value: Callable[[dict, PeakRSS], float | None], notes: str = "") -> None:
        values = [value(*got[c]) if c else None for c in cols]
        if any(v is not None for v in values):
            rep.add(f"{what}, {tag}", unit, *values, baseline_name=baseline, notes=notes)

    failed = "; ".join(f"{RUNS[c].label}: {verdict[c]}" for c in ran if verdict[c].startswith("failed"))
    add("seconds", "s", lambda res, _: None if "over_budget" in res else res["seconds"],
        "; ".join(_timing(RUNS[c].label, got[c][0]) for c in ran))
    add("sessions written", "sessions", lambda res, _: res.get("sessions"),
        "; ".join(f"{RUNS[c].label}: {verdict[c]}" for c in ran))
    note = f"{failed} (its peak until it failed)" if failed else ""
    add("peak RSS whole process tree", "MiB", lambda _, peak: peak.mib(), note)
    for role, label in ROLES.items():
        add(f"peak RSS {label}", "MiB", lambda _, peak, r=role: peak.mib(r),
            "none in Spark's native run: session_window runs in the JVM" if role in (HOSTS, WORKERS, STATEKIT_PYTHON)
            and native else "")


def _timing(label: str, res: dict) -> str:
    """A run's seconds and batches, and for statekit's the most state bytes an epoch reported and any warning."""
    text = f"{label} {res['seconds']:.1f} s" + (f", {res['batches']} batches" if "batches" in res else "")
    if "state_bytes" in res:
        text += f", state {res['state_bytes'] / MIB:,.0f} MiB at most"
    if res.get("memory_warning"):
        text += f" (warned: {res['memory_warning']})"
    resumed = res.get("resumed")
    if resumed:
        text += (f"; the new application {resumed['seconds']:.1f} s, its first epoch "
                 f"{resumed['first_epoch_seconds']:.1f} s (restores {resumed['first_restore_seconds']:.1f} s)")
    return text
