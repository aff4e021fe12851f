"""``run_keyed``: run a keyed operator over a Spark DataFrame in epochs, exactly once, with its state
in a statekit backend that is checkpointed per epoch.

Each epoch is one Spark job over Arrow batches: (1) a map stage checks every row and tags it with
the partition of its key group (``records.Router``; invalid rows keep a reason); Spark's hash
shuffle brings each row to that partition; (2) each task runs the operator for its key groups
from the state of the previous committed epoch (kept open in the worker, or restored from the
checkpoint), feeds the rows, advances the watermark of this epoch, commits its snapshot as this
epoch and stages its output files; (3) the driver publishes the staged files as
``<output>/epoch=<e>`` (and ``_late/``, ``_invalid/``), records the epoch's metrics, and (4)
commits the epoch record under ``<checkpoint>/_driver``. A replay of an epoch (task retry,
restarted query) starts again from the previous committed epoch with the same rows, watermark and
time limit, so it publishes the same output over the same directories: no duplicates, no loss.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from time import perf_counter
from typing import Any, Callable, Mapping

from ..checkpoint import CheckpointLease, ExclusiveCreateUnsupported, JobRecord
from ..config import StateConfig
from .connect_stream import stream_on_server
from .epoch_runner import EpochRunner
from .epochs import EpochLog
from .errors import StopRequested
from .initial_state import InitialState
from .interrupts import CtrlC
from .job_settings import FAULT_ENV, JobSettings, check_job, resolve_config
from .micro_batches import run_stream
from .recovery import check_epochs
from .server_python import check_server_python, probe_server_python
from .runtime import is_connect, warm_up_workers
from .session_kind import job_canceller
from .sinks import EpochSink, as_sink

__all__ = ["FAULT_ENV", "RunSummary", "resolve_config", "run_keyed"]

_log = logging.getLogger("statekit")


@dataclass
class RunSummary:
    """What one ``run_keyed`` call did: the metrics of each epoch it committed, and where things are."""

    output: str
    checkpoint: str
    epochs: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    stopped: bool = False
    """Stopped by Ctrl-C before its input was drained: a rerun on the same checkpoint goes on from the last epoch."""

    def total(self, name: str) -> int:
        return sum(m[name] for m in self.epochs)


def run_keyed(df: Any, *, key: str, time: str, operator_factory: Callable[[], Any], result_schema: Any, output: str,
              checkpoint: str | None = None, columns: list[str] | None = None,
              watermark_delay: int | str = 0, config: StateConfig | Mapping[str, Any] | None = None,
              partitions: int | None = None, mode: str | None = None, final: bool = False,
              trigger: str = "available-now", trigger_interval: str = "5 seconds", operator_id: str = "operator",
              max_ahead: int | str | None = "default",
              progress: Callable[[dict], None] | None = None,
              sink: EpochSink | Callable[[Any, int], None] | None = None,
              spark_checkpoint: str | None = None, time_unit: str = "ms", time_format: str | None = None,
              time_zone: str = "UTC", reason: str | None = None, initial_state: InitialState | None = None) -> RunSummary:
    """Run the operator made by ``operator_factory`` over ``df`` keyed by ``key`` with event time ``time``,
    writing its results under ``output``; returns the epochs' metrics.

    ``time``: a TIMESTAMP or TIMESTAMP_NTZ (or DATE) column, epoch numbers in ``time_unit`` (``s``, ``ms``,
    ``us``; seconds may have a fraction), or text: ISO-8601 with a date (or epoch numbers), or by ``time_format``
    (Spark's datetime pattern), text without a zone read in ``time_zone``. The operator sees event times as
    integer milliseconds (the ``ts`` of its records; a finer part is dropped); values that do not convert go to
    the invalid output.

    Each operator record is ``(key, row, ts)`` where ``row`` is the tuple of ``columns`` (default: every
    column of ``df``); the operator's outputs must be tuples matching ``result_schema`` (a StructType or
    DDL string), its side output ``"late"`` carries late rows. ``mode``: ``"stream"`` (default for a
    streaming ``df``: one epoch per Structured Streaming batch, ``trigger`` ``available-now`` or
    ``continuous``) or ``"batch"`` (one epoch, then the final one). ``final``: after the input, one
    epoch with the maximum watermark fires and cleans every window. ``watermark_delay`` and ``max_ahead`` are
    durations: an int of milliseconds, a ``timedelta``, or text with a unit (``"10s"``; ``statekit.to_millis``).
    ``checkpoint`` default:
    ``spark.statekit.checkpoint``, else ``<output>/_checkpoint``; ``partitions`` default:
    ``spark.statekit.partitions``, else Spark's default parallelism. Rerunning with the same
    checkpoint resumes after its last committed epoch. ``max_ahead`` (``"default"``: ``spark.statekit.max_ahead``,
    else 7 days; None or ``"none"``: no limit): records whose event time is further ahead of the
    driver's clock go to the invalid output, so that one bogus timestamp cannot move the watermark
    past every open window. ``sink``: an ``EpochSink`` or a function ``(results_df, epoch_id)`` called for
    each epoch with foreachBatch's contract (a replayed epoch calls it again with the same id and rows).
    ``spark_checkpoint``: where Spark's own streaming checkpoint goes (default ``spark.statekit.spark_checkpoint``,
    else ``<checkpoint>/_spark``), anywhere Hadoop can write; ``checkpoint`` and ``output`` are local paths
    or pyarrow URIs (``s3://``; ``s3a://`` and ``s3n://`` are the same store). ``reason``: a text column of ``df``
    saying why a row is invalid (null: it is not), as a parser gives it (``kafka.read_topic``): such rows go to the
    invalid output with that reason; the column is no row column. ``initial_state``: a new checkpoint's first epoch
    puts this state in (``InitialState``; a checkpoint with committed epochs is refused), and the run goes on from it
    as from an epoch it ran."""
    spark = df.sparkSession
    warm_up_workers(spark)  # the workers start while the run is planned (once per application)
    probe_server_python(spark)  # on Spark Connect: its workers' Python is asked while the run is planned
    settings = check_job(df, key=key, time=time, operator_factory=operator_factory, result_schema=result_schema,
                         output=output, checkpoint=checkpoint, columns=columns, watermark_delay=watermark_delay,
                         config=config, partitions=partitions, mode=mode, final=final, trigger=trigger,
                         operator_id=operator_id, max_ahead=max_ahead, spark_checkpoint=spark_checkpoint,
                         time_unit=time_unit, time_format=time_format, time_zone=time_zone, reason=reason,
                         initial_state=initial_state)
    source = settings.source(df)
    job = settings.job_plan(spark)
    check_server_python(spark)  # on Spark Connect: its workers can run statekit, or a clear error before any epoch
    epoch_sink = as_sink(sink)
    lease = take_lease(settings.checkpoint, settings.lease_seconds, operator_id)
    try:
        job = replace(job, lease_token=lease.token)
        log = EpochLog(job.checkpoint)
        check_epochs(log, job, settings.spark_checkpoint)  # a lost record rebuilt, or refused
        changes = JobRecord(job.checkpoint).check(settings.description(), has_state=log.last() is not None)
        if changes:
            _log.warning("statekit: continuing checkpoint %s with changes it carries: %s", job.checkpoint,
                         "; ".join(changes))
        if epoch_sink is not None:
            epoch_sink.open(job.checkpoint, operator_id)
        runner = EpochRunner(spark, job, settings.delay_ms, source.schema, log, settings.max_ahead_ms,
                             settings.max_ahead, progress, changes, epoch_sink,
                             (settings.result_schema, settings.late_schema, settings.invalid_schema), lease,
                             settings.time_spec)
        t0 = perf_counter()
        with CtrlC(runner, job_canceller(spark)):
            _run_epochs(runner, settings, source, initial_state, trigger, trigger_interval)
        return RunSummary(job.sink.path, job.checkpoint, runner.committed, round(perf_counter() - t0, 3),
                          runner.stop_requested)
    finally:
        if epoch_sink is not None:
            epoch_sink.close()
        lease.release()


def _run_epochs(runner: EpochRunner, settings: JobSettings, source: Any, initial_state: InitialState | None,
                trigger: str, trigger_interval: str) -> None:
    """The run's epochs: the initial state's first (alone when it says ``only``), then one for the batch input or
    per streaming batch, then the final one (``final``, or a batch input)."""
    if initial_state is not None and runner.resumed_after is None:  # (else check_epochs rebuilt its lost record)
        runner.run(initial_state.df, initial=(initial_state, initial_state.job(runner.job, settings.arrow)))
    if initial_state is not None and initial_state.only:
        return
    if settings.mode == "batch":
        try:
            runner.run(source)
        except StopRequested:  # stopped before the epoch began: it is left whole for the next run
            pass
    elif is_connect(runner.spark):
        stream_on_server(source, runner, runner.server_copy(), settings.spark_checkpoint, trigger, trigger_interval)
    else:
        run_stream(source, runner, settings.spark_checkpoint, trigger, trigger_interval)
    if (settings.final or settings.mode == "batch") and not runner.stop_requested:  # stopped early: the rest is next
        runner.run(None, final=True)


def take_lease(checkpoint: str, timeout_seconds: float, operator_id: str) -> CheckpointLease:
    """The checkpoint's lease, held (and renewed) for this run, lapsing ``timeout_seconds`` after its last renewal
    (``spark.statekit.lease_timeout``): ``LeaseHeldError`` naming the holder when another run writes the
    checkpoint. Where the location's filesystem has no exclusive create, a warning says that one writer is not
    enforced there, and the run goes on without a lease."""
    lease = CheckpointLease(checkpoint, timeout_seconds)
    try:
        lease.held(f"a run of operator {operator_id!r}")
    except ExclusiveCreateUnsupported as e:
        _log.warning("statekit: %s: one writer per checkpoint is not enforced there", e)
    return lease
