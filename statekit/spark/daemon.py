"""Spark's Python daemon with statekit's task modules loaded before it forks a worker.

Every Python worker of an executor is a fork of its daemon: what the daemon imported is shared with
each worker (copy-on-write), what a worker imports after the fork is its own. Spark's own daemon
imports almost nothing, so each worker held its own copy of pyarrow, numpy, pyspark's worker and
statekit: measured about 40 MiB of private memory a worker, against 1 MiB forked from a daemon that
had imported them (two workers' PSS with the daemon's: 146 MiB against 97). Workers also start
sooner. Its zip importers are swapped for ones that keep their archive's directory (``zip_importers``).
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
import sys

from .memory import allocator_environment
from .zip_importers import stabilize_zip_importers


def preload_task_modules() -> None:
    """Import what an epoch's router and tasks use, pandas deferred (a worker that runs only
    statekit's tasks never loads it); Spark's worker loop with them. Also what they load lazily while
    they run: numpy.ma, which ``pa.array`` of a numpy array imports (7 MiB of private memory in each
    process that loads it after the fork, measured), and pyarrow.parquet, which stages the outputs."""
    import numpy.ma  # noqa: F401
    import pyarrow.parquet  # noqa: F401
    import pyspark.worker  # noqa: F401

    from statekit import operators  # noqa: F401  (the operator classes a pickled job refers to)

    from . import records, tasks  # noqa: F401
    from .lazy_pandas import defer_pandas

    defer_pandas()


def main() -> None:
    """Preload, then run Spark's daemon. A failed preload is reported on stderr (the executor's log) and
    the daemon starts anyway: the task that needs the module then fails with the same error, in its place."""
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
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":
    main()
