"""The modules an epoch's router and tasks run with, imported ahead of them (by the daemon, or a warm-up task)."""

from __future__ import annotations

import importlib

from .startup import start_task

TASK_MODULES = ("numpy.ma", "pyarrow.parquet", "pyspark.worker", "statekit.operators", "statekit.spark.records",
                "statekit.spark.tasks")
"""Spark's worker loop, the operator classes a pickled job refers to, the router and the epoch task, and what they
load lazily as they run (numpy.ma, which ``pa.array`` of a numpy array imports; pyarrow.parquet, which stages the
outputs). Named, not imported here: the epoch protocol sits above the runtime."""


def preload_task_modules() -> None:
    """Import ``TASK_MODULES``, pandas deferred (a worker that runs only statekit's tasks never loads it)."""
    for name in TASK_MODULES:
        importlib.import_module(name)
    start_task()
