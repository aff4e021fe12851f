"""Snapshot and restore cost vs state size and change rate, full vs incremental, per backend.

For each backend and state size N (value state, N keys): a full snapshot to a fresh checkpoint
location, then, per change rate (1%, 10%, 100% of the keys updated), several epochs committed on
top of the previous one, measuring each commit's seconds and the bytes it wrote (mean and max are
reported: RocksDB's L0->L1 compactions rewrite SST files every few epochs, and those epochs upload
more), and the time to restore the last epoch into a new backend (heap: full + changelog; RocksDB:
download and open).
Every (backend, size) runs in a fresh process. The heap's changelog policy is the default one
(a delta is replaced by a full snapshot once the changes exceed half the state), so its 100%
epoch is a full snapshot by design.
"""

from __future__ import annotations

import shutil
import tempfile
import time

from statekit import StateConfig, ValueStateDescriptor, create_backend
from statekit.checkpoint import CheckpointStore

from .common import progress, run_isolated
from .report import BenchReport

BACKENDS = ("heap", "rocksdb")
RATES = (0.01, 0.10, 1.0)
MAX_PAR = 128


def _fill(backend, n: int, start: int, stride: int, tag: int) -> None:
    st = backend.get_state(ValueStateDescriptor("v"))
    set_key, update = backend.set_current_key, st.update
    for k in range(start, n, stride):
        set_key(k)
        update([k, tag, "payload-0123456789"])


def _restore_seconds(store: CheckpointStore, config: StateConfig) -> float:
    t0 = time.perf_counter()
    r = store.restore("bench", config, range(MAX_PAR))
    r.backend.get_state(ValueStateDescriptor("v"))  # the heap imports a state when it registers
    seconds = time.perf_counter() - t0
    r.backend.close()
    return seconds


def measure(backend_name: str, n: int, epochs_per_rate: int) -> dict:
    """Full snapshot, then ``epochs_per_rate`` epochs per change rate; seconds and bytes of each."""
    root = tempfile.mkdtemp(prefix="statekit-bench-snap-")
    try:
        config = StateConfig(backend=backend_name, max_parallelism=MAX_PAR)
        b = create_backend(config)
        _fill(b, n, 0, 1, 0)
        b.flush()
        store = CheckpointStore(f"{root}/ckpt", retain=2)
        full = store.commit("bench", 0, b, full=True)
        out = {"full_seconds": full.seconds, "full_bytes": full.bytes_written,
               "full_restore_seconds": _restore_seconds(store, config.with_options(local_dir=f"{root}/r0"))}
        epoch = 0
        for rate in RATES:
            stride = max(1, round(1 / rate))
            runs = []
            for _ in range(epochs_per_rate):
                epoch += 1
                _fill(b, n, epoch % stride, stride, epoch)
                runs.append(store.commit("bench", epoch, b))
            out[rate] = {"seconds": [c.seconds for c in runs], "bytes": [c.bytes_written for c in runs],
                         "incremental": [bool(c.manifest.snapshot.get("incremental")) for c in runs],
                         "restore_seconds": _restore_seconds(store, config.with_options(local_dir=f"{root}/r{epoch}"))}
        b.close()
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def run(quick: bool = False) -> BenchReport:
    sizes = (10_000,) if quick else (100_000, 1_000_000)
    epochs_per_rate = 2 if quick else 4
    rep = BenchReport("snapshots", params={"sizes": list(sizes), "change_rates": list(RATES), "state": "value",
                                           "max_parallelism": MAX_PAR, "retain": 2,
                                           "epochs_per_rate": epochs_per_rate})
    results: dict[tuple[str, int], dict] = {}
    for backend_name, n in progress([(b, n) for n in sizes for b in BACKENDS], desc="snapshots"):
        results[(backend_name, n)], _ = run_isolated(measure, backend_name, n, epochs_per_rate)
    for n in sizes:
        res = {b: results[(b, n)] for b in BACKENDS}
        rep.add(f"full snapshot bytes ({n:,} keys)", "bytes", **{b: res[b]["full_bytes"] for b in BACKENDS})
        rep.add(f"full snapshot time ({n:,} keys)", "s", **{b: res[b]["full_seconds"] for b in BACKENDS})
        rep.add(f"restore time, full ({n:,} keys)", "s", **{b: res[b]["full_restore_seconds"] for b in BACKENDS})
        for rate in RATES:
            pct = f"{rate:.0%}"
            for b in BACKENDS:
                r = res[b][rate]
                kinds = sum(r["incremental"])
                kind = f"{kinds}/{len(r['incremental'])} epochs incremental"
                rep.add(f"{b} snapshot bytes @{pct} changed ({n:,} keys), mean", "bytes", **{b: _mean(r["bytes"])},
                        baseline=res[b]["full_bytes"], baseline_name=f"{b} full snapshot",
                        notes=f"{kind}; max {max(r['bytes']):,}")
                rep.add(f"{b} snapshot time @{pct} changed ({n:,} keys), mean", "s", **{b: _mean(r["seconds"])},
                        baseline=res[b]["full_seconds"], baseline_name=f"{b} full snapshot",
                        notes=f"max {max(r['seconds']):.3g} s")
                rep.add(f"{b} restore time after @{pct} epoch ({n:,} keys)", "s", **{b: r["restore_seconds"]},
                        baseline=res[b]["full_restore_seconds"], baseline_name=f"{b} full restore")
    n = sizes[-1]
    lines_b, lines_t = {}, {}
    for b in BACKENDS:
        res = results[(b, n)]
        lines_b[f"{b} incremental"] = [(rate * 100, _mean(res[rate]["bytes"])) for rate in RATES]
        lines_b[f"{b} full"] = [(rate * 100, res["full_bytes"]) for rate in RATES]
        lines_t[f"{b} incremental"] = [(rate * 100, _mean(res[rate]["seconds"])) for rate in RATES]
        lines_t[f"{b} full"] = [(rate * 100, res["full_seconds"]) for rate in RATES]
    rep.series(f"snapshot bytes vs change rate ({n:,} keys)", "% keys changed", "bytes", lines_b, log_x=True, log_y=True)
    rep.series(f"snapshot time vs change rate ({n:,} keys)", "% keys changed", "seconds", lines_t, log_x=True, log_y=True)
    return rep
