"""statekit benchmarks: each part compares the backends with raw baselines in one run."""

from .common import PeakRSS, progress, rate, run_isolated, timed
from .report import BenchReport, Figure, Series, machine_info

PARTS = {
    "ops": "statekit.bench.ops",
    "timers": "statekit.bench.timers",
    "windows": "statekit.bench.windows",
    "snapshots": "statekit.bench.snapshots",
    "spark": "statekit.bench.spark",
}
"""Part name -> module with ``run(quick) -> BenchReport``, in the order ``all`` runs them."""

__all__ = ["BenchReport", "Figure", "PARTS", "PeakRSS", "Series", "machine_info", "progress", "rate", "run_isolated",
           "timed"]
