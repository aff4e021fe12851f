"""Python workers started while the driver plans a run.

An application's first Python job pays for starting each executor's Python daemon and workers and
importing statekit in them, many times what the next job's start costs (docs/bench/runtime.md). A run starts one tiny job in the background at its beginning, so that this start-up
overlaps the driver's own (reading the input's schema, starting the streaming query) instead of
delaying the first epoch; workers are reused, so the epochs' tasks find them started.
"""

from __future__ import annotations

import threading
from typing import Any, Iterable, Iterator

from .preload import preload_task_modules
from .pyspark_internals import spark_context

_warmed: set[str] = set()
"""Applications whose workers a warm-up job was started for (one per application)."""
_lock = threading.Lock()


def warm_up_workers(spark: Any) -> threading.Thread | None:
    """Start, once per Spark application, a background job of one task per default-parallelism slot
    that imports the epoch tasks' modules in the Python workers; returns its thread (None when one
    was started before, or on a Spark Connect session, which has no SparkContext to size it by: said once). A
    failed warm-up costs nothing but the time it would have saved."""
    sc = spark_context(spark, "worker warm-up")
    if sc is None:
        return None
    with _lock:
        if sc.applicationId in _warmed:
            return None
        _warmed.add(sc.applicationId)
    slots = max(1, sc.defaultParallelism)

    def run() -> None:
        try:
            spark.range(0, slots, 1, slots).mapInArrow(_import_task_modules, "id long").collect()
        except Exception:  # the run's own jobs report a real failure of Spark or of its workers
            return

    thread = threading.Thread(target=run, name="statekit-worker-warm-up", daemon=True)
    thread.start()
    return thread


def _import_task_modules(batches: Iterable[Any]) -> Iterator[Any]:
    """mapInArrow function: what an epoch's router and tasks import, imported in this worker (already
    there when the worker was forked from statekit's daemon)."""
    preload_task_modules()
    yield from batches
