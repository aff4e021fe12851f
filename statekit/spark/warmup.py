"""Python workers started while the driver plans a run.

An application's first Python job pays for starting each executor's Python daemon and workers and
importing statekit in them: measured 3.6 s for a first ``mapInArrow`` job of two tasks against 0.2 s
for the next. A run starts one tiny job in the background at its beginning, so that this start-up
overlaps the driver's own (reading the input's schema, starting the streaming query) instead of
delaying the first epoch; workers are reused, so the epochs' tasks find them started.
"""

from __future__ import annotations

import threading
from typing import Any, Iterable, Iterator

_warmed: set[str] = set()
"""Applications whose workers a warm-up job was started for (one per application)."""
_lock = threading.Lock()


def warm_up_workers(spark: Any) -> threading.Thread | None:
    """Start, once per Spark application, a background job of one task per default-parallelism slot
    that imports the epoch tasks' modules in the Python workers; returns its thread (None when one
    was started before). A failed warm-up costs nothing but the time it would have saved."""
    sc = spark.sparkContext
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
    from .daemon import preload_task_modules

    preload_task_modules()
    yield from batches
