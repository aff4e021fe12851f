"""The metrics of one committed epoch, as ``RunSummary.epochs``, ``progress`` and ``<output>/_metrics.jsonl`` give
them: made in one place from the tasks' stats (``tasks.run_partition``) and the epoch's plan."""

from __future__ import annotations

from time import perf_counter
from typing import Any, Callable

from .epochs import EpochRecord
from .executor_memory import memory_metrics

_SLOWEST = ("snapshot_seconds", "setup_seconds", "restore_seconds", "process_seconds")
"""Phases an epoch waits for its slowest task in: the maximum over its tasks."""


def epoch_metrics(record: EpochRecord, stats: list[dict[str, Any]], *, batch_id: int | None, final: bool,
                  watermark: int | None, time_limit: int | None, last: EpochRecord | None,
                  invalid_reasons: Callable[[], dict[str, int]], job_changes: list[str], initial: bool,
                  started: float) -> dict[str, Any]:
    """Epoch ``record``'s metrics from its tasks' ``stats`` (one per partition). ``batch_id``, ``final``,
    ``watermark``: as the epoch was asked to run (None: none); ``last``: the epoch committed before (None: none);
    ``invalid_reasons``: rows of the invalid output by reason, read only when there are some; ``job_changes``:
    reported by a run's first epoch; ``initial``: the epoch put an initial state in, its rows state, not records;
    ``started``: ``perf_counter()`` as the epoch began."""
    def total(name: str) -> int:
        return sum(s[name] for s in stats)

    records = total("records")
    return {
        "epoch": record.epoch, "batch_id": batch_id, "final": final, "watermark": watermark, "max_ts": record.max_ts,
        "time_limit": time_limit, "partitions": record.partitions,
        "records_in": 0 if initial else records + total("invalid"),
        "records": 0 if initial else records, "results": total("results"), "late": total("late"),
        "invalid": total("invalid"), "future": total("future"), "state_entries": total("state_entries"),
        **memory_metrics(stats),
        "invalid_reasons": invalid_reasons() if total("invalid") else {},  # kind -> rows
        "snapshot_bytes": total("snapshot_bytes"), "state_migrated": total("migrated"),
        **{k: max(s[k] for s in stats) for k in _SLOWEST},
        "fast_path_partitions": sum(1 for s in stats if s["fast_path"]),
        "caught_up_partitions": sum(1 for s in stats if s["caught_up"]),
        "workers": sorted({s["worker"] for s in stats}),
        "rescaled_from": last.partitions if last is not None and last.partitions != record.partitions else None,
        "job_changes": job_changes, "restored": records if initial else 0,
        "seconds": round(perf_counter() - started, 3),
    }
