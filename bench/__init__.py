"""statekit benchmarks: each part compares the backends with raw baselines in one run."""

from .report import BenchReport, Figure, Series, machine_info, progress, rate, run_isolated

PARTS = {
    "ops": "bench.ops",
    "rocksdb_ops": "bench.rocksdb_ops",
    "timers": "bench.timers",
    "windows": "bench.windows",
    "snapshots": "bench.snapshots",
}

__all__ = ["BenchReport", "Figure", "PARTS", "Series", "machine_info", "progress", "rate", "run_isolated"]
