"""The driver's loop of one ``run_keyed`` job: each epoch planned, executed, published and committed.

``plan``: the epoch's number, watermark and time limit (a replay keeps its first), and the Spark job that routes
its rows to the partitions' tasks; ``execute``: that job collected, the tasks' stats in partition order;
``publish``: the staged files made the epoch's output (and handed to the run's sink); ``commit``: the epoch's
metrics recorded and its record written under ``<checkpoint>/_driver``, both fenced by the checkpoint's lease.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from functools import partial
from operator import itemgetter
from time import perf_counter
from typing import Any, Callable

from ..checkpoint import CheckpointError, CheckpointLease
from ..timers import MAX_TIMESTAMP, MIN_TIMESTAMP
from .connect_stream import LeaseToken
from .epoch_metrics import epoch_metrics
from .epochs import EpochLog, EpochRecord
from .errors import StopRequested, task_failure
from .event_time import MILLIS, TimeSpec
from .initial_state import InitialState
from .micro_batches import no_rows
from .output_dir import OUTPUTS
from .plan import INVALID_TAG, LATE_TAG, EpochPlan, JobPlan
from .records import POSITION, REFUSED, ROUTE, Router, routed_schema, routing_values
from .session_kind import map_splits, task_slots
from .sinks import EpochSink
from .spark_logs import SparkLogSilence
from .tasks import run_partition

_log = logging.getLogger("statekit")


@dataclass(frozen=True)
class PlannedEpoch:
    """An epoch about to run: what its tasks get (``plan``), the time limit of its records (None: none) and the
    Spark job of its tasks, one row of stats each."""

    plan: EpochPlan
    time_limit: int | None
    tasks: Any


class EpochRunner:
    """Runs epochs of one job on the driver; ``run`` is called per input batch and once for ``final``."""

    def __init__(self, spark: Any, job: JobPlan, delay_ms: int, input_schema: Any, log: EpochLog,
                 max_ahead_ms: int | None, max_ahead: str, progress: Callable[[dict], None] | None = None,
                 job_changes: list[str] | None = None, sink: EpochSink | None = None,
                 structs: tuple[Any, Any, Any] = (None, None, None), lease: CheckpointLease | LeaseToken | None = None,
                 time_spec: TimeSpec = TimeSpec()) -> None:
        self.spark, self.job, self.delay_ms = spark, job, delay_ms
        self.input_schema, self.routed_schema = input_schema, routed_schema(input_schema)
        self.routing = routing_values(job.partitions)
        self.slots = task_slots(spark)
        """The map stage's most splits: a split pays for Python workers of its own (the router's, a decode's before
        it), so an input of more partitions than Spark has task slots is read in one split per slot (``coalesce``;
        None: a Connect client that cannot tell, which leaves the input's partitions as they are)."""
        self.max_ahead_ms, self.max_ahead = max_ahead_ms, max_ahead
        self.log, self.progress = log, progress
        self.committed: list[dict[str, Any]] = []
        self.job_changes = job_changes or []
        """Changes of the job its checkpoint carries: reported in the metrics of this run's first epoch."""
        self.sink = sink
        self.result_struct, self.late_struct, self.invalid_struct = structs
        """Spark schemas of the results and the side outputs, for the DataFrames the sink gets."""
        self.lease = lease
        """The checkpoint's lease (its token, in a Connect server's foreachBatch): checked before an epoch is
        published and before it is recorded."""
        self.time_spec = time_spec
        """How the time column's values become event-time milliseconds (``event_time``)."""
        time_column = job.columns[1]
        self.millis = time_spec.millis(time_column, input_schema[time_column].dataType).alias(MILLIS)
        """The records' event time in milliseconds, a Spark column built once: text times take tens of JVM calls."""
        self.busy = threading.Lock()
        self.stop_requested = False
        self.quiet = SparkLogSilence(spark)
        self.memory_warned = False
        """The memory budget's warning was logged in this run (once)."""
        last = log.last()
        self.resumed_after = None if last is None else last.epoch
        """The epoch committed before this run (None: none): epochs after it are this run's."""

    def run(self, df: Any | None, batch_id: int | None = None, final: bool = False,
            initial: tuple[InitialState, JobPlan] | None = None) -> dict[str, Any] | None:
        """Process one epoch (``df`` None: no records); None when it was committed before (a replay). ``initial``:
        the first epoch puts this state in, run as this job (``InitialState.job``), instead of records."""
        with self.busy:  # checked under the lock: a stop taken while an epoch waits for it leaves that epoch whole
            if self.stop_requested:
                raise StopRequested("stop requested: this batch is left for the next run")
            return self._run(df, batch_id, final, initial)

    def _run(self, df: Any | None, batch_id: int | None, final: bool,
             initial: tuple[InitialState, JobPlan] | None = None) -> dict[str, Any] | None:
        started = perf_counter()
        job = self.job if initial is None else initial[1]
        last = self.log.last()
        if last is not None and batch_id is not None and batch_id <= last.last_batch_id:
            return None
        if last is not None and final and last.final and df is None:
            return None
        planned = self._plan(job, last, df, final, initial)
        stats = self._execute(planned)
        epoch = planned.plan.epoch
        self._publish(job, epoch, stats)
        seen = [s["max_ts"] for s in stats if s["max_ts"] is not None]
        if last is not None and last.max_ts is not None:
            seen.append(last.max_ts)
        watermark = planned.plan.watermark
        record = EpochRecord(epoch, MIN_TIMESTAMP if watermark is None else watermark, max(seen) if seen else None,
                             batch_id if batch_id is not None else (-1 if last is None else last.last_batch_id),
                             final or (last is not None and last.final), job.partitions, job.operator_id)
        metrics = epoch_metrics(record, stats, batch_id=batch_id, final=final, watermark=watermark,
                                time_limit=planned.time_limit, last=last,
                                invalid_reasons=partial(job.sink.reasons, epoch, OUTPUTS[INVALID_TAG]),
                                job_changes=[] if self.committed else self.job_changes, initial=initial is not None,
                                started=started)
        self._commit(job, record, metrics)
        return metrics

    def _plan(self, job: JobPlan, last: EpochRecord | None, df: Any | None, final: bool,
              initial: tuple[InitialState, JobPlan] | None) -> PlannedEpoch:
        """The epoch after ``last``: its watermark, its time limit (recorded as its intent, which a replay
        keeps), and the Spark job that checks and routes its rows (``records.Router``) and runs its tasks."""
        from pyspark.sql import functions as F

        epoch = 0 if last is None else last.epoch + 1
        if not self.committed:
            self._check_output(epoch)
        if final:
            watermark = MAX_TIMESTAMP
        else:
            watermark = None if last is None else last.next_watermark(self.delay_ms)
        clock = int(time.time() * 1000)
        limit = None if self.max_ahead_ms is None else clock + self.max_ahead_ms
        limit = self.log.intent(epoch, {"time_limit": limit})["time_limit"]  # a replay keeps its first limit
        source = df if df is not None else no_rows(self.spark, self.input_schema)
        time_column = MILLIS if initial is not None else job.columns[1]  # an initial state's times: MILLIS
        # each row's position is taken before the splits are merged: a retry's splits may group them otherwise;
        # one projection adds it and the times in milliseconds (an initial state holds its times in MILLIS already)
        added = [F.monotonically_increasing_id().alias(POSITION)]
        if initial is None:
            added.append(self.millis)
        timed = source.select("*", *added)
        if self.slots is not None:
            timed = timed.coalesce(self.slots)
        splits = map_splits(timed, job.sink, epoch)
        plan = EpochPlan(epoch, None if last is None else last.epoch, watermark, splits, final,
                         None if initial is None else initial[0].restore)
        router = Router(job.columns[0], time_column, job.partitions, job.max_parallelism, self.routing,
                        job.routed_schema, limit, self.max_ahead, self.time_spec,
                        initial is None and REFUSED in self.input_schema.names,
                        None if splits.marks is None else partial(splits.mark, job.sink))
        routed = self.routed_schema if initial is None else routed_schema(source.drop(MILLIS).schema)
        tasks = (timed.mapInArrow(router, routed).repartition(job.partitions, ROUTE)
                 .mapInArrow(partial(run_partition, job, plan), "stats string"))
        return PlannedEpoch(plan, limit, tasks)

    @staticmethod
    def _execute(planned: PlannedEpoch) -> list[dict[str, Any]]:
        """Run the epoch's tasks: their stats, in partition order; a task's failure as the error it stands for."""
        try:
            rows = planned.tasks.collect()
        except Exception as e:
            failure = task_failure(e)
            if failure is e:
                raise
            raise failure from e
        return sorted((json.loads(r[0]) for r in rows), key=itemgetter("partition"))

    def _publish(self, job: JobPlan, epoch: int, stats: list[dict[str, Any]]) -> None:
        """Make the tasks' staged files the epoch's outputs, then hand them to the run's sink: before the epoch
        commits, so a replay writes the same rows again (foreachBatch's contract)."""
        output = job.sink
        self._fence()
        for tag, sub in OUTPUTS.items():
            output.publish(epoch, {s["partition"]: s["files"][tag] for s in stats if tag in s["files"]}, sub)
        output.drop_staging(epoch)
        if self.sink is None:
            return
        for tag, schema, struct in ((LATE_TAG, job.late_schema, self.late_struct),
                                    (INVALID_TAG, job.invalid_schema, self.invalid_struct)):
            side = output.read(epoch, schema, OUTPUTS[tag]).to_pandas()
            self.sink.write_side(tag, self.spark.createDataFrame(side, schema=struct), epoch)
        rows = output.read(epoch, job.result_schema).to_pandas()
        self.sink.write(self.spark.createDataFrame(rows, schema=self.result_struct), epoch)

    def _commit(self, job: JobPlan, record: EpochRecord, metrics: dict[str, Any]) -> None:
        """Record the epoch's metrics beside its output, then commit its record: the epoch is done."""
        if metrics["memory_warning"] is not None and not self.memory_warned:
            _log.warning("%s", metrics["memory_warning"])
            self.memory_warned = True
        job.sink.record_metrics(metrics)
        self._fence()
        self.log.commit(record)
        self.committed.append(metrics)
        if self.progress is not None:
            self.progress(metrics)

    def follow_commits(self) -> None:
        """Take in the epochs of this run another process committed (a Spark Connect server's foreachBatch): their
        metrics join ``committed`` and go to ``progress``."""
        last = self.log.last()
        if last is None:
            return
        done = {m["epoch"] for m in self.committed}
        after = -1 if self.resumed_after is None else self.resumed_after
        for metrics in self.job.sink.metrics():
            if after < metrics["epoch"] <= last.epoch and metrics["epoch"] not in done:
                self.committed.append(metrics)
                if self.progress is not None:
                    self.progress(metrics)

    def server_copy(self) -> Callable[[Any], "EpochRunner"]:
        """A picklable maker of this runner in a Spark Connect server's foreachBatch process, given that process's
        session: the same job and epochs, fenced by this run's lease token, reporting no progress."""
        return partial(_runner_on_server, self.job, self.delay_ms, self.input_schema, self.max_ahead_ms,
                       self.max_ahead, self.job_changes, self.sink,
                       (self.result_struct, self.late_struct, self.invalid_struct), self.time_spec)

    def _fence(self) -> None:
        if self.lease is not None:
            self.lease.check()

    def _check_output(self, epoch: int) -> None:
        """Refuse an output that is ahead of the checkpoint (its metrics show epochs after ``epoch``, the
        one about to run): the checkpoint is unavailable or belongs to another output."""
        ahead = [m["epoch"] for m in self.job.sink.metrics() if m["epoch"] > epoch]
        if ahead:
            raise CheckpointError(
                f"output {self.job.sink.path} holds epoch {max(ahead)} but checkpoint {self.job.checkpoint} is "
                f"{f'at epoch {epoch - 1}' if epoch else 'empty'}: the checkpoint location is unavailable or not "
                f"this output's; use the checkpoint those epochs were written with, or another output")


def _runner_on_server(job: JobPlan, delay_ms: int, input_schema: Any, max_ahead_ms: int | None, max_ahead: str,
                      job_changes: list[str], sink: EpochSink | None, structs: tuple[Any, Any, Any],
                      time_spec: TimeSpec, spark: Any) -> EpochRunner:
    """``EpochRunner.server_copy``'s runner, made in the server's process on ``spark``, its session there."""
    return EpochRunner(spark, job, delay_ms, input_schema, EpochLog(job.checkpoint), max_ahead_ms, max_ahead, None,
                       job_changes, sink, structs, LeaseToken(job.checkpoint, job.lease_token), time_spec)
