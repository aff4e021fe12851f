"""An executor's memory budget from the Spark conf, and the memory fields of an epoch's metrics.

``spark.statekit.memory_budget`` when set; else the budget's default rule (``statekit.memory_budget``) on the
executor's memory: ``spark.executor.memory`` (Spark's default ``1g`` when unset) on a cluster master, unknown
on a ``local[N]`` master (its Python processes share the machine, which no JVM heap setting bounds).
"""

from __future__ import annotations

from typing import Any

from ..config import parse_budget, parse_size
from ..memory_budget import BUDGET_SETTING, default_budget
from .session_kind import master

_SPARK_EXECUTOR_MEMORY = "1g"
"""Spark's default ``spark.executor.memory``."""


def executor_memory(spark: Any) -> int | None:
    """Bytes of an executor's memory as the Spark conf gives it; None on a local master (not known)."""
    url = master(spark)
    if url == "local" or url.startswith("local["):  # local-cluster[...] has executors of their own memory
        return None
    value = str(spark.conf.get("spark.executor.memory", None) or _SPARK_EXECUTOR_MEMORY).strip()
    return parse_size(value + "m" if value.isdigit() else value)  # Spark reads a bare number as MiB


def executor_budget(spark: Any, setting: Any | None) -> int:
    """Bytes of the memory budget of each executor: ``setting`` (``spark.statekit.memory_budget``, or
    ``run_keyed``'s config) when given, else the default rule's."""
    if setting is not None:
        return parse_budget(setting, BUDGET_SETTING)
    return default_budget(executor_memory(spark))


def memory_metrics(stats: list[dict[str, Any]]) -> dict[str, Any]:
    """An epoch's ``state_bytes`` (what the processes keeping its partitions grew by, each counted once) and
    ``memory_warning`` (the first process's warning past ``WARN_FRACTION`` of its budget, or None)."""
    grown: dict[str, int] = {}
    for s in stats:
        grown[s["state_process"]] = max(grown.get(s["state_process"], 0), s["state_bytes"])
    warnings = [s["memory_warning"] for s in stats if s["memory_warning"] is not None]
    return {"state_bytes": sum(grown.values()), "memory_warning": warnings[0] if warnings else None}
