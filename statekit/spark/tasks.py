"""Executor side of an epoch: run the operator over one partition's key groups, commit, emit rows.

The task's worker checks its input, hands the partition's records to the process that keeps the
partition's state (``runtime.open_run``: its state host by default; the worker itself with
``state_host=worker``; ``slots`` holds the rules of kept state), injects the test faults around the
commit, and stages the outputs for the driver to publish (the results written as the operator hands them
over, a step at a time, into a local file staged once the commit is done).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
import uuid
from typing import Any, Iterable, Iterator

from ..checkpoint import Storage
from ..operators import gc_paused
from .errors import InjectedFault, InputError
from .plan import INVALID_TAG, LATE_TAG, EpochPlan, JobPlan
from .records import FUTURE_REASON, MARK, PART, SEQ, TS, WHY
from .runtime import executor_pid, open_run, task_scope
from .output_dir import RESULTS
from .slots import LocalRun


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
        os.kill(executor_pid(), signal.SIGKILL)
        os._exit(17)
    raise InjectedFault(f"injected fault at epoch {epoch} partition {partition} ({when})")


def run_partition(job: JobPlan, epoch: EpochPlan, batches: Iterable[Any]) -> Iterator[Any]:
    """mapInArrow function of the epoch's partitions: run the operator over this partition's records,
    commit its snapshot, stage its output files; yields one row of stats (JSON) for the driver. Then
    the memory the epoch freed goes back to the system (``task_scope``: the worker idles until the next epoch)."""
    with task_scope():
        yield _run_partition(job, epoch, batches)


def _run_partition(job: JobPlan, epoch: EpochPlan, batches: Iterable[Any]) -> Any:
    """``run_partition``'s work; returns its stats batch."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark import TaskContext

    t0 = time.perf_counter()
    index = TaskContext.get().partitionId()
    table = pa.Table.from_batches(list(batches), schema=job.routed_schema)
    marks = table.column(MARK)
    epoch.splits.check(job.sink, len(set(marks.drop_null().to_pylist())), epoch.epoch, index)
    rows = table.filter(pc.is_null(marks))
    del table, marks  # each copy of the epoch's records goes as soon as the next is made
    if pc.any(pc.not_equal(rows.column(PART), index)).as_py():
        raise RuntimeError(f"epoch {epoch.epoch} partition {index}: received rows routed to another partition")
    why = rows.column(WHY)
    invalid = rows.filter(pc.is_valid(why))
    if epoch.restore is not None and invalid.num_rows:  # an initial state is checked before: never half put in
        raise InputError(f"epoch {epoch.epoch} partition {index}: {invalid.num_rows} rows of the initial state are "
                         f"not state (the first: {invalid.column(WHY)[0].as_py()}); not committing")
    valid = rows.select([*job.columns, TS, SEQ]).filter(pc.is_null(why))
    del rows, why
    order = pc.sort_indices(valid, [(TS, "ascending"), (SEQ, "ascending")])  # replay-stable order
    valid = valid.select([*job.columns, TS]).take(order)  # what the operator reads: no routing columns
    t1 = time.perf_counter()
    attempt = f"p{index:05d}-{uuid.uuid4().hex[:12]}"
    run = open_run(job, epoch, index, LocalRun)
    # the results are written as the operator hands them over, a step at a time; staged once committed
    with job.sink.staging_file(epoch.epoch, f"{RESULTS}-{attempt}", job.result_schema) as staged:
        try:
            with gc_paused():  # no collections mid-epoch (in the snapshot either); one at its end
                done = run.process(valid, staged.write)
                t2 = time.perf_counter()
                _maybe_fail(job, epoch.epoch, index, "before-commit")
                timestamps = valid.column(TS)
                max_ts = timestamps[-1].as_py() if len(timestamps) else None
                committed = run.commit(max_ts)
        except BaseException:
            run.abort()
            raise
        _maybe_fail(job, epoch.epoch, index, "after-commit")
        files = {RESULTS: staged.put()}
    tables: dict[str, Any] = {}
    if done.late is not None:
        tables[LATE_TAG] = done.late
    if invalid.num_rows or done.refused is not None:
        parts = [invalid.select([*job.columns, WHY]).rename_columns(job.invalid_schema.names).cast(job.invalid_schema)]
        if done.refused is not None:
            parts.append(done.refused)
        tables[INVALID_TAG] = pa.concat_tables(parts)
    refused = 0 if done.refused is None else done.refused.num_rows
    files.update({tag: job.sink.stage(epoch.epoch, f"{tag}-{attempt}", table) for tag, table in tables.items()})
    future = (pc.sum(pc.starts_with(invalid.column(WHY), FUTURE_REASON)).as_py() or 0) if invalid.num_rows else 0
    handover = (t2 - t1) - done.restore_seconds - done.process_seconds  # reaching the host, records both ways
    stats = {
        "partition": index, "records": valid.num_rows - refused, "invalid": invalid.num_rows + refused,
        "future": future, "late": (0 if done.late is None else done.late.num_rows) + done.dropped,
        "results": done.results, "max_ts": max_ts, "fast_path": done.fast, "caught_up": done.caught_up,
        "migrated": done.migrated, "files": files, "state_entries": committed.state_entries,
        "state_process": committed.process, "state_bytes": committed.state_bytes,
        "memory_warning": committed.memory_warning,
        "snapshot_bytes": committed.bytes_written, "snapshot_seconds": round(committed.seconds, 6),
        "setup_seconds": round(t1 - t0 + handover, 6),  # the Arrow input, its sort, reaching a state host
        "restore_seconds": round(done.restore_seconds, 6),
        "process_seconds": round(done.process_seconds, 6),
        "worker": f"{socket.gethostname()}:{os.getppid()}",
    }
    return pa.RecordBatch.from_pydict({"stats": [json.dumps(stats)]})
