"""statekit benchmarks: each part compares the backends with raw baselines in one run."""

PARTS = {
    "ops": "statekit.bench.ops",
    "timers": "statekit.bench.timers",
    "windows": "statekit.bench.windows",
    "snapshots": "statekit.bench.snapshots",
    "memory": "statekit.bench.memory",
    "spark": "statekit.bench.spark",
    "open-sessions": "statekit.bench.open_sessions",
    "bootstrap": "statekit.bench.bootstrap",
}
"""Part name -> module with ``run(quick) -> BenchReport``, in the order ``all`` runs them."""

__all__ = ["PARTS"]  # the parts import the bench extra's packages: `statekit bench --help` must run without them
