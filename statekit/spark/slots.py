"""The state side of a task, run in the process that keeps the partition's state open.

A partition's backend and operator stay open between epochs in a small LRU (a *slot* per operator,
checkpoint and key-group range) and are reused when the checkpoint store confirms they hold exactly
the state of the epoch to start from (its fast path). A backend of an earlier epoch of the partition
(another process ran it since) is brought forward in place when the backend can
(``IncrementalSnapshots.catch_up``: the heap applies the deltas committed since). Anything else (a
retried task, a rescaled job, a full snapshot in between) restores from the checkpoint. A slot is
taken out of the cache for the duration of a task and put back only after its commit, so a failure
mid-epoch never leaves a half-processed backend behind.

The process is the partition's state host or, with ``state_host=worker``, the Python worker that runs
the task: ``LocalRun`` is the runtime's ``LocalState`` (``runtime.open_run`` chooses the process). It
stays here, in the epoch protocol, not in the runtime: it restores, runs the operator and commits
snapshots with the protocol's columns and result schemas, the same in either process.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable

from ..keyed_backend import create_backend
from ..checkpoint import CheckpointStore, fence
from ..config import StateConfig
from ..keygroups import key_groups_for_partition
from ..memory_budget import budget_of, check_budget
from ..operators import KeyedOperator, Output
from .plan import INVALID_TAG, LATE_TAG, EpochPlan, JobPlan
from .records import TS
from .results import output_table, parts_table
from .runtime import release_free_memory, take_peak


@dataclass
class OpenOperator:
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


@dataclass
class Processed:
    """What a partition's records and watermark produced, before the commit: how many results (handed
    over step by step as they were made), the late
    records kept (``late``, rows with a reason) and the records the operator refused (``refused``), as
    tables of the job's schemas; records dropped as late without a side output; how the state was had
    (``fast``: kept open as it was; ``caught_up``: brought forward; ``migrated``: cells migrated) and
    the seconds spent getting it and running the operator."""

    results: int
    late: Any | None
    refused: Any | None
    dropped: int
    fast: bool
    caught_up: bool
    migrated: int
    restore_seconds: float
    process_seconds: float


@dataclass(frozen=True)
class Commit:
    """A partition's committed snapshot: bytes written, seconds taken, state entries it holds; and the process
    that keeps it (``host:pid``), the bytes that process grew by at its peak since its last check (``take_peak``, its
    state's estimate) and the memory budget's warning about them (None: within ``WARN_FRACTION`` of the budget)."""

    bytes_written: int
    seconds: float
    state_entries: int
    process: str
    state_bytes: int
    memory_warning: str | None


_SLOTS: "OrderedDict[tuple, OpenOperator]" = OrderedDict()


def _cache_key(job: JobPlan, store: CheckpointStore, kgs: range) -> tuple:
    return job.operator_id, store.location, kgs.start, kgs.stop


def _local_config(job: JobPlan, kgs: range) -> StateConfig:
    """The job's config with a private local directory for this backend (several may share a process)."""
    config = StateConfig.from_dict(job.config)
    if config.local_dir is None:
        return config
    name = f"{job.operator_id}-kg{kgs.start}-{kgs.stop - 1}-{uuid.uuid4().hex[:8]}"
    return config.with_options(local_dir=os.path.join(config.local_dir, name))


def _open(op: KeyedOperator, backend: Any, metadata: list[dict]) -> OpenOperator:
    out = Output()
    op.open(backend, out)
    if metadata:
        op.restore_metadata(metadata[0]["operator"])
    return OpenOperator(backend, op, out, None)


def acquire(job: JobPlan, epoch: EpochPlan, store: CheckpointStore, kgs: range) -> tuple[OpenOperator, bool, bool]:
    """The slot to run ``epoch`` on; whether it came from the cache as it was (fast path); whether the
    process's backend of an earlier epoch was brought forward in place (caught up) under a new operator."""
    kept = _SLOTS.pop(_cache_key(job, store, kgs), None)
    config = _local_config(job, kgs)
    if epoch.restore_epoch is None:
        if kept is not None:
            kept.close()
        return _open(job.operator_factory(), create_backend(config, kgs), []), False, False
    # Made before the restore: making it imports the job's modules, which register the types its state holds (a
    # checkpoint only names them). A process with a kept slot made one already, so a fast path makes none.
    op = job.operator_factory() if kept is None else None
    r = store.restore(job.operator_id, config, kgs, epoch=epoch.restore_epoch,
                      backend=kept.backend if kept is not None else None)
    if r.fast_path:
        return kept, True, False
    if kept is not None:
        kept.operator.close()  # its backend was closed by the store, or caught up (reopened below)
    return _open(op if op is not None else job.operator_factory(), r.backend, r.metadata), False, r.caught_up


def release(job: JobPlan, store: CheckpointStore, kgs: range, slot: OpenOperator) -> None:
    """Keep ``slot`` for the next epoch; the least recently used slots beyond the bound are closed."""
    _SLOTS[_cache_key(job, store, kgs)] = slot
    while len(_SLOTS) > job.placement.slots_kept(job.partitions):
        _SLOTS.popitem(last=False)[1].close()


class LocalRun:
    """One task's state work in this process: ``process`` the partition's records on its slot, then
    ``commit`` (the slot is kept for the next epoch) or ``abort`` (the slot is closed)."""

    @staticmethod
    def kept() -> int:
        """How many slots this process keeps open for a next epoch."""
        return len(_SLOTS)

    @staticmethod
    def close_all() -> None:
        """Close every kept slot (a state host shutting down)."""
        while _SLOTS:
            _SLOTS.popitem()[1].close()

    def __init__(self, job: JobPlan, epoch: EpochPlan, index: int) -> None:
        self.job, self.epoch = job, epoch
        self.kgs = key_groups_for_partition(index, job.partitions, job.max_parallelism)
        self.store = CheckpointStore(job.checkpoint, retain=job.retain, key=job.checkpoint_key)
        self.slot: OpenOperator | None = None

    def process(self, valid: Any, results: Callable[[Any], None]) -> Processed:
        """Run the operator over ``valid`` (the partition's records in replay-stable order) and the
        epoch's watermark; its results go to ``results`` as tables of the result schema, a bounded step
        of the operator's work at a time (``Output.end_step``), in order."""
        job = self.job
        t0 = time.perf_counter()
        self.slot, fast, caught_up = acquire(job, self.epoch, self.store, self.kgs)
        t1 = time.perf_counter()
        op, out = self.slot.operator, self.slot.output
        if self.epoch.restore is not None:  # the rows are state to put in (an initial state), not records
            self.epoch.restore(op, valid)
            return Processed(0, None, None, 0, False, False, 0, t1 - t0, time.perf_counter() - t1)
        migrated = 0 if fast else op.metrics.get("state_migrated", 0)  # migrations run as a restored operator opens
        late_before = op.metrics.get("late_dropped", 0)
        watermark_before = op.current_watermark()
        timestamps = valid.column(TS).to_numpy()
        count = 0

        def hand_over(parts: list) -> None:
            nonlocal count
            table = parts_table(parts, job.result_schema, "result")
            count += table.num_rows
            results(table)

        out.hand_over(hand_over)
        try:
            # Arrow in: the operator makes Python values only of what it hands to Python code
            op.process_columns(valid.column(job.columns[0]), timestamps, [valid.column(c) for c in job.row_columns])
            release_free_memory()  # the records' working memory, freed: the watermark's fires do not stack on it
            if self.epoch.watermark is not None:
                op.process_watermark(self.epoch.watermark)
            out.end_step()  # what the last step (or an operator that hands over at once) left
        finally:
            out.hand_over(None)
        reason = f"late: behind watermark {watermark_before}"
        late = [tuple(row) + (reason,) for row, _ in out.drain_side(LATE_TAG)]
        refused = [_invalid_row(job, r) for r, _ in out.drain_side(INVALID_TAG)]
        return Processed(count, output_table(late, job.late_schema, "late") if late else None,
                         output_table(refused, job.invalid_schema, "invalid") if refused else None,
                         op.metrics.get("late_dropped", 0) - late_before, fast, caught_up, migrated,
                         t1 - t0, time.perf_counter() - t1)

    def commit(self, max_ts: int | None) -> Commit:
        """Commit the processed state as the epoch's snapshot and keep the slot for the next epoch (after
        a final epoch, close it: the run is over and every window fired; a later run restores)."""
        slot = self.slot
        assert slot is not None, "commit before process"
        release_free_memory()  # nor the snapshot's pages on the epoch's fires and outputs
        # the highest memory since the last check (the snapshot it was followed by, this epoch's work), not only
        # the last: past the budget on the heap, the epoch fails here, before its commit
        state_bytes = take_peak()
        config = StateConfig.from_dict(self.job.config)
        warning = check_budget(state_bytes, budget_of(config), config.backend, self.job.placement.state_hosts)
        fence(self.store.storage, self.job.lease_token, self.job.checkpoint)  # a run that lost its lease commits nothing
        committed = self.store.commit(self.job.operator_id, self.epoch.epoch, slot.backend,
                                      metadata={"operator": slot.operator.snapshot_metadata(), "max_ts": max_ts})
        slot.epoch, self.slot = self.epoch.epoch, None
        if self.epoch.final:
            slot.close()
        else:
            release(self.job, self.store, self.kgs, slot)
        return Commit(committed.bytes_written, committed.seconds,
                      sum(committed.manifest.stats.get("states", {}).values()),
                      f"{socket.gethostname()}:{os.getpid()}", state_bytes, warning)

    def abort(self) -> None:
        """Drop the slot of a task that failed or went away before its commit."""
        if self.slot is not None:
            slot, self.slot = self.slot, None
            slot.close()


def _invalid_row(job: JobPlan, refused: Any) -> tuple:
    """A record the operator refused, laid out as the routed input columns plus the reason."""
    values = dict(zip(job.row_columns, refused.value)) if isinstance(refused.value, tuple) else {}
    values[job.columns[0]], values[job.columns[1]] = refused.key, refused.timestamp
    return tuple(values.get(c) for c in job.columns) + (f"{refused.field}: {refused.reason}",)
