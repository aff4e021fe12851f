"""Executor side of an epoch: run the operator over one partition's key groups, commit, emit rows.

The backend and operator of a partition stay open in the Python worker between epochs (a small
LRU keyed by operator, checkpoint and key-group range) and are reused when the checkpoint store
confirms they hold exactly the state of the epoch to start from (its fast path). A worker's backend
of an earlier epoch of the partition (another worker ran it since) is brought forward in place when
the backend can (``IncrementalSnapshots.catch_up``: the heap applies the deltas committed since).
Anything else (a retried task, a rescaled job, a full snapshot in between) restores from the checkpoint. A slot is taken
out of the cache for the duration of a task and put back only after its commit, so a failure
mid-epoch never leaves a half-processed backend behind.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from ..checkpoint import CheckpointStore, Storage
from ..operators import KeyedOperator, Output
from ..config import StateConfig
from ..keygroups import key_groups_for_partition
from ..backend import create_backend
from .errors import InjectedFault
from .plan import INVALID_TAG, LATE_TAG, EpochPlan, JobPlan
from .results import output_table
from .worker_signals import ignore_interrupts
from .records import FUTURE_REASON, MARK, PART, SEQ, TS, WHY


@dataclass
class Slot:
    """An open operator on its backend, at committed epoch ``epoch``."""

    backend: Any
    operator: KeyedOperator
    output: Output
    epoch: int | None

    def close(self) -> None:
        try:
            self.operator.close()
        finally:
            self.backend.close()


_SLOTS: "OrderedDict[tuple, Slot]" = OrderedDict()


def _local_config(job: JobPlan, kgs: range) -> StateConfig:
    """The job's config with a private local directory for this backend (several may share a worker)."""
    config = StateConfig.from_dict(job.config)
    if config.local_dir is None:
        return config
    name = f"{job.operator_id}-kg{kgs.start}-{kgs.stop - 1}-{uuid.uuid4().hex[:8]}"
    return config.with_options(local_dir=os.path.join(config.local_dir, name))


def _open(job: JobPlan, backend: Any, metadata: list[dict]) -> Slot:
    op = job.operator_factory()  # a KeyedOperator: run_keyed checked the driver's copy
    out = Output()
    op.open(backend, out)
    if metadata:
        op.restore_metadata(metadata[0]["operator"])
    return Slot(backend, op, out, None)


def acquire(job: JobPlan, epoch: EpochPlan, store: CheckpointStore, kgs: range) -> tuple[Slot, bool, bool]:
    """The slot to run ``epoch`` on; whether it came from the worker's cache as it was (fast path); whether
    the worker's backend of an earlier epoch was brought forward in place (caught up) under a new operator."""
    cache_key = (job.operator_id, store.location, kgs.start, kgs.stop)
    kept = _SLOTS.pop(cache_key, None)
    config = _local_config(job, kgs)
    if epoch.restore_epoch is None:
        if kept is not None:
            kept.close()
        return _open(job, create_backend(config, kgs), []), False, False
    r = store.restore(job.operator_id, config, kgs, epoch=epoch.restore_epoch,
                      backend=kept.backend if kept is not None else None)
    if r.fast_path:
        return kept, True, False
    if kept is not None:
        kept.operator.close()  # its backend was closed by the store, or caught up (reopened below)
    return _open(job, r.backend, r.metadata), False, r.caught_up


def release(job: JobPlan, store: CheckpointStore, kgs: range, slot: Slot) -> None:
    """Keep ``slot`` for the next epoch; the least recently used slots beyond the bound are closed."""
    _SLOTS[(job.operator_id, store.location, kgs.start, kgs.stop)] = slot
    while len(_SLOTS) > job.cache_size:
        _SLOTS.popitem(last=False)[1].close()


def _parent_pid(pid: int) -> int:
    """The parent of process ``pid`` (Linux /proc; the executor-killing fault is a test tool)."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _maybe_fail(job: JobPlan, epoch: int, partition: int, when: str) -> None:
    f = job.fault
    if f is None or f.epoch != epoch or f.partition != partition or f.when != when:
        return
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if not f.always and ctx is not None and ctx.attemptNumber() > 0:
        return
    storage = Storage(job.checkpoint)
    marker = f"epoch={epoch}-partition={partition}-"
    # attempt numbers restart at 0 on a new executor: a one-shot fault must not fire again (a repeatedly
    # killed executor makes the standalone master remove the whole application)
    if not f.always and any(fi.path.rsplit("/", 1)[-1].startswith(marker) for fi in storage.list_files("_faults")):
        return
    storage.write(f"_faults/{marker}{uuid.uuid4().hex}", when.encode())
    if f.action == "exit":
        os._exit(17)
    if f.action == "kill-executor":
        os.kill(_parent_pid(os.getppid()), signal.SIGKILL)  # worker -> daemon -> executor JVM
        os._exit(17)
    raise InjectedFault(f"injected fault at epoch {epoch} partition {partition} ({when})")


def run_partition(job: JobPlan, epoch: EpochPlan, batches: Iterable[Any]) -> Iterator[Any]:
    """mapInArrow function of the epoch's partitions: run the operator over this partition's records,
    commit its snapshot, stage its output files; yields one row of stats (JSON) for the driver."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ignore_interrupts()
    from pyspark import TaskContext

    t0 = time.perf_counter()
    index = TaskContext.get().partitionId()
    table = pa.Table.from_batches(list(batches), schema=job.routed_schema)
    marks = table.column(MARK)
    ends = len(set(marks.drop_null().to_pylist()))
    if ends != epoch.inputs:  # an orphaned worker of a lost executor sees its input end early
        raise RuntimeError(f"epoch {epoch.epoch} partition {index}: input truncated ({ends} of {epoch.inputs} "
                           f"map outputs received); not committing")
    rows = table.filter(pc.is_null(marks))
    if pc.any(pc.not_equal(rows.column(PART), index)).as_py():
        raise RuntimeError(f"epoch {epoch.epoch} partition {index}: received rows routed to another partition")
    why = rows.column(WHY)
    invalid = rows.filter(pc.is_valid(why))
    valid = rows.filter(pc.is_null(why))
    valid = valid.take(pc.sort_indices(valid, [(TS, "ascending"), (SEQ, "ascending")]))  # replay-stable order
    kgs = key_groups_for_partition(index, job.partitions, job.max_parallelism)
    store = CheckpointStore(job.checkpoint, retain=job.retain)
    slot, fast, caught_up = acquire(job, epoch, store, kgs)
    t1 = time.perf_counter()
    try:
        op = slot.operator
        migrated = 0 if fast else op.metrics.get("state_migrated", 0)  # migrations run as a restored operator opens
        late_before = op.metrics.get("late_dropped", 0)
        watermark_before = op.current_watermark()
        keys = valid.column(job.columns[0]).to_pylist()
        timestamps = valid.column(TS).to_numpy()
        op.process_columns(keys, timestamps, [valid.column(c).to_pylist() for c in job.row_columns])
        if epoch.watermark is not None:
            op.process_watermark(epoch.watermark)
        results = output_table([v for v, _ in slot.output.drain()], job.result_schema, "result")
        reason = f"late: behind watermark {watermark_before}"
        late = [tuple(row) + (reason,) for row, _ in slot.output.drain_side(LATE_TAG)]
        refused = [_invalid_row(job, r) for r, _ in slot.output.drain_side(INVALID_TAG)]
        tables = {"r": results}
        if late:
            tables["l"] = output_table(late, job.late_schema, "late")
        if invalid.num_rows or refused:
            parts = [invalid.select([*job.columns, WHY]).rename_columns(job.invalid_schema.names).cast(job.invalid_schema)]
            if refused:
                parts.append(output_table(refused, job.invalid_schema, "invalid"))
            tables["i"] = pa.concat_tables(parts)
        dropped = op.metrics.get("late_dropped", 0) - late_before
        t2 = time.perf_counter()
        _maybe_fail(job, epoch.epoch, index, "before-commit")
        max_ts = int(timestamps[-1]) if len(timestamps) else None
        committed = store.commit(job.operator_id, epoch.epoch, slot.backend,
                                 metadata={"operator": op.snapshot_metadata(), "max_ts": max_ts, **epoch.extra})
        _maybe_fail(job, epoch.epoch, index, "after-commit")
    except BaseException:
        slot.close()
        raise
    slot.epoch = epoch.epoch
    release(job, store, kgs, slot)
    attempt = f"p{index:05d}-{uuid.uuid4().hex[:12]}"
    files = {tag: job.sink.stage(epoch.epoch, f"{tag}-{attempt}", table) for tag, table in tables.items()}
    future = (pc.sum(pc.starts_with(invalid.column(WHY), FUTURE_REASON)).as_py() or 0) if invalid.num_rows else 0
    stats = {
        "partition": index, "records": valid.num_rows - len(refused), "invalid": invalid.num_rows + len(refused),
        "future": future, "late": len(late) + dropped, "results": results.num_rows, "max_ts": max_ts, "fast_path": fast,
        "caught_up": caught_up,
        "migrated": migrated,
        "files": files, "state_entries": sum(committed.manifest.stats.get("states", {}).values()),
        "snapshot_bytes": committed.bytes_written, "snapshot_seconds": round(committed.seconds, 6),
        "restore_seconds": round(t1 - t0, 6), "process_seconds": round(t2 - t1, 6),
        "worker": f"{socket.gethostname()}:{os.getppid()}",
    }
    yield pa.RecordBatch.from_pydict({"stats": [json.dumps(stats)]})



def _invalid_row(job: JobPlan, refused: Any) -> tuple:
    """A record the operator refused, laid out as the routed input columns plus the reason."""
    values = dict(zip(job.row_columns, refused.value)) if isinstance(refused.value, tuple) else {}
    values[job.columns[0]], values[job.columns[1]] = refused.key, refused.timestamp
    return tuple(values.get(c) for c in job.columns) + (f"{refused.field}: {refused.reason}",)
