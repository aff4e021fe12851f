"""Spark's Python daemon with statekit's task modules loaded before it forks a worker.

Every Python worker of an executor is a fork of its daemon: what the daemon imported is shared with
each worker (copy-on-write), what a worker imports after the fork is its own. Spark's own daemon
imports almost nothing, so each worker held its own copy of pyarrow, numpy, pyspark's worker and
statekit; forked from this daemon they share one, and start sooner (docs/bench/runtime.md). Its zip importers are swapped for ones that keep their archive's directory (``zip_importers``).
It also forks the host spawner (``spawner``), so that state hosts share those pages too.
``spark_session`` names this module in ``spark.python.daemon.module``; a session made
otherwise can set it the same way.

Spark's daemon forks only while no thread of its own is busy: the threads these imports start
(numpy's BLAS pool, pyarrow's jemalloc background thread) are idle until a task runs, and both
libraries make their pools anew in a forked child.
"""

from __future__ import annotations

import gc
import os
import runpy
import sys

from .memory import allocator_environment
from .preload import preload_task_modules
from .pyspark_internals import spark_daemon_manager
from .zip_importers import stabilize_zip_importers

SPARK_DAEMON = "pyspark.daemon"
"""Spark's own daemon module, run as it is when this PySpark's is not the one statekit's was written for."""


def main() -> None:
    """Preload, then run Spark's daemon. A failed preload is reported on stderr (the executor's log) and
    the daemon starts anyway: the task that needs the module then fails with the same error, in its place. Where
    PySpark's daemon is not what it expects (``pyspark_internals.spark_daemon_manager``), Spark's runs unchanged."""
    manager = spark_daemon_manager()
    if manager is None:
        sys.modules.pop(SPARK_DAEMON, None)  # run afresh as __main__, as Spark runs it (the check imported it)
        runpy.run_module(SPARK_DAEMON, run_name="__main__", alter_sys=True)
        return
    os.environ.update(allocator_environment(os.environ))  # read by Arrow's allocator as pyarrow loads
    try:
        preload_task_modules()
    except Exception as e:  # noqa: BLE001 -- the tasks report it where it matters
        print(f"statekit daemon: preloading task modules failed: {type(e).__name__}: {e}", file=sys.stderr)
    stabilize_zip_importers()  # pyspark's worker invalidates import caches each task: no zip read again
    gc.freeze()  # the workers' collections then never walk (and so never copy) the preloaded objects
    try:
        from .host import main as host_main
        from .host import runtime_dir
        from .spawner import start_spawner

        start_spawner(runtime_dir(), host_main)
    except Exception as e:  # noqa: BLE001 -- workers then start hosts as new interpreters
        print(f"statekit daemon: no host spawner: {type(e).__name__}: {e}", file=sys.stderr)
    manager()


if __name__ == "__main__":
    main()
