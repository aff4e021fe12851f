"""What the driver asks of its SparkSession, answered on a classic and on a Spark Connect session alike.

A classic session answers from its SparkContext (the fast way; ``jvm``); a Spark Connect session has none on the
client, so the same answer comes from the runtime conf or the DataFrame API (``docs/connect.md``).
"""

from __future__ import annotations

import os
import re
from typing import Any, Callable

from .jvm import classic_jvm, rdd_partitions
from .map_splits import MapSplits
from .output_dir import OutputDir
from .runtime import is_connect

CONNECT_DEFAULT_PARALLELISM = 8
"""State partitions of a run on a Spark Connect session whose conf names neither ``spark.default.parallelism``
nor a ``local[N]`` master (the client cannot see the cluster's cores): ``spark.statekit.partitions`` sets them."""
_LOCAL_MASTER = re.compile(r"^local\[(\d+|\*)")


def application_id(spark: Any) -> str:
    """Whose state hosts a run's tasks may use (``JobPlan.app_id``; its secret is made once per driver process):
    the Spark application on a classic session; on Connect, whose server is one application for many clients,
    the application and this client's session (``session_id``)."""
    app = spark.conf.get("spark.app.id")
    return f"{app}/{spark.session_id}" if is_connect(spark) else app


def master(spark: Any) -> str:
    """The session's master URL (``spark.master``; empty when a Connect server does not say)."""
    if is_connect(spark):
        return spark.conf.get("spark.master", None) or ""
    return classic_jvm(spark).master


def default_parallelism(spark: Any) -> int:
    """Spark's default parallelism: ``task_slots``, else (a Connect client that cannot tell)
    ``CONNECT_DEFAULT_PARALLELISM``."""
    return task_slots(spark) or CONNECT_DEFAULT_PARALLELISM


def task_slots(spark: Any) -> int | None:
    """How many tasks Spark runs at once, as far as the session can tell: the SparkContext's default parallelism on a
    classic session; on Connect ``spark.default.parallelism``, else the cores of a ``local[N]`` master, else None."""
    if not is_connect(spark):
        return classic_jvm(spark).default_parallelism
    configured = spark.conf.get("spark.default.parallelism", None)
    if configured:
        return int(configured)
    local = _LOCAL_MASTER.match(master(spark))
    if local is None:
        return None
    return (os.cpu_count() or 1) if local.group(1) == "*" else int(local.group(1))


def job_canceller(spark: Any) -> Callable[[], None]:
    """What cancels the session's running Spark jobs (a second Ctrl-C): ``cancelAllJobs`` on a classic session,
    ``interruptAll`` on Connect."""
    if is_connect(spark):
        return spark.interruptAll
    return classic_jvm(spark).cancel_all_jobs


def map_splits(df: Any, output: OutputDir, epoch: int) -> MapSplits:
    """The map splits of ``df`` whose end markers each of ``epoch``'s tasks must receive: on a classic session
    counted from the plan (no job); on Connect, which has no RDDs, counted by the tasks from the marks the splits
    leave in ``output``'s staging area of the epoch."""
    if not is_connect(df.sparkSession):
        return MapSplits(rdd_partitions(df))
    return MapSplits.counted(output.staging_dir(epoch, "map-splits"))
