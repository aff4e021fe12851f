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

import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field, replace
from functools import partial
from operator import itemgetter
from time import perf_counter
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Callable, Mapping

from ..checkpoint import CheckpointError, CheckpointLease, ExclusiveCreateUnsupported, JobRecord
from ..config import DEFAULT_JOB_BACKEND, StateConfig
from ..durations import to_millis
from ..keygroups import check_parallelism
from ..memory_budget import process_share
from ..operators import KeyedOperator
from ..snapshot_header import job_formats
from ..timers import MAX_TIMESTAMP, MIN_TIMESTAMP
from .epochs import EpochLog, EpochRecord
from .executor_memory import executor_budget, memory_metrics
from .errors import InputError, StopRequested, task_failure
from .event_time import MILLIS, TimeSpec
from .initial_state import InitialState, refuse_started
from .interrupts import CtrlC
from .micro_batches import no_rows, run_stream
from .plan import INVALID_TAG, LATE_TAG, EpochPlan, Fault, JobPlan
from .connect_stream import LeaseToken, stream_on_server
from .records import REFUSED, ROUTE, Router, routed_schema, routing_values
from .recovery import check_epochs
from .schemas import arrow_schema
from .server_python import check_server_python
from .runtime import application_secret, is_connect, warm_up_workers
from .session_kind import application_id, default_parallelism, input_splits, job_canceller, master
from .output_dir import OUTPUTS, OutputDir, check_output_is_own
from .sinks import EpochSink, as_sink
from .settings import DEFAULT_MAX_AHEAD, ahead_limit_ms, host_idle_timeout_ms, lease_timeout_ms
from .stream_location import spark_settings, stream_checkpoint
from .spark_logs import SparkLogSilence
from .tasks import run_partition

FAULT_ENV = "STATEKIT_INJECT_FAULT"
_JOB_KEYS = ("checkpoint", "partitions", "retain", "cache_size", "max_ahead", "spark_checkpoint", "state_host",
             "host_idle_timeout", "state_hosts", "lease_timeout", "checkpoint_key", "memory_budget")
STATE_HOSTS = ("process", "worker")
"""How long a run's checkpoint lease outlives its last heartbeat (``spark.statekit.lease_timeout``): far above an
epoch's commit, so a writer that stalls never lands a commit after another run took over (``checkpoint.lease``)."""

_log = logging.getLogger("statekit")


def _version() -> str:
    try:
        return version("statekit")
    except PackageNotFoundError:
        return "unknown"


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


def resolve_config(spark: Any, config: StateConfig | Mapping[str, Any] | None) -> tuple[StateConfig, dict[str, str]]:
    """State config from defaults (rocksdb), then ``spark.statekit.*``, then ``config``; plus the
    job-level Spark settings (``checkpoint``, ``partitions``, ``retain``, ``cache_size``, ``state_host``,
    ``host_idle_timeout``, ``state_hosts``...)."""
    settings = spark_settings(spark)
    job = {k: settings.pop(k) for k in _JOB_KEYS if k in settings}
    data: dict[str, Any] = {"backend": DEFAULT_JOB_BACKEND, **settings}
    if config is not None:
        data.update(config.to_dict() if isinstance(config, StateConfig) else dict(config))
    return StateConfig.from_dict(data), job


def default_state_hosts(spark: Any) -> int:
    """State hosts a machine by default: one per core of an executor (a local master: its task slots). A host
    runs one task at a time, so the tasks of an epoch that share one wait for each other's operator work, on
    the epoch's critical path (docs/spark.md, State hosts)."""
    cores = spark.conf.get("spark.executor.cores", None)
    if cores is None:
        cores = default_parallelism(spark) if master(spark).startswith("local[") else 1
    return max(1, int(cores))


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
        t0 = perf_counter()
        job = self.job if initial is None else initial[1]
        last = self.log.last()
        if last is not None and batch_id is not None and batch_id <= last.last_batch_id:
            return None
        if last is not None and final and last.final and df is None:
            return None
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
        inputs = input_splits(source)
        plan = EpochPlan(epoch, None if last is None else last.epoch, watermark, inputs, final,
                         None if initial is None else initial[0].restore)
        time_column = job.columns[1]
        router = Router(job.columns[0], time_column, job.partitions, job.max_parallelism, self.routing,
                        job.routed_schema, limit, self.max_ahead, self.time_spec,
                        initial is None and REFUSED in self.input_schema.names)
        if initial is None:
            timed = source.withColumn(MILLIS, self.time_spec.millis(time_column, self.input_schema[time_column].dataType))
            routed = self.routed_schema
        else:  # the initial state holds its times in MILLIS already
            timed, routed = source, routed_schema(source.drop(MILLIS).schema)
        tasks = (timed.mapInArrow(router, routed).repartition(job.partitions, ROUTE)
                 .mapInArrow(partial(run_partition, job, plan), "stats string"))
        try:
            rows = tasks.collect()
        except Exception as e:
            failure = task_failure(e)
            if failure is e:
                raise
            raise failure from e
        stats = sorted((json.loads(r[0]) for r in rows), key=itemgetter("partition"))
        sink = job.sink
        self._fence()
        for tag, sub in OUTPUTS.items():
            sink.publish(epoch, {s["partition"]: s["files"][tag] for s in stats if tag in s["files"]}, sub)
        sink.drop_staging(epoch)
        if self.sink is not None:  # before the epoch commits: a replay writes the same rows again (foreachBatch)
            for tag, schema, struct in ((LATE_TAG, job.late_schema, self.late_struct),
                                        (INVALID_TAG, job.invalid_schema, self.invalid_struct)):
                sub = OUTPUTS[tag]
                side = sink.read(epoch, schema, sub).to_pandas()
                self.sink.write_side(tag, self.spark.createDataFrame(side, schema=struct), epoch)
            rows = sink.read(epoch, job.result_schema).to_pandas()
            self.sink.write(self.spark.createDataFrame(rows, schema=self.result_struct), epoch)
        seen = [s["max_ts"] for s in stats if s["max_ts"] is not None]
        if last is not None and last.max_ts is not None:
            seen.append(last.max_ts)
        record = EpochRecord(epoch, MIN_TIMESTAMP if watermark is None else watermark, max(seen) if seen else None,
                             batch_id if batch_id is not None else (-1 if last is None else last.last_batch_id),
                             final or (last is not None and last.final), job.partitions, job.operator_id)
        total = lambda name: sum(s[name] for s in stats)  # noqa: E731
        metrics = {
            "epoch": epoch, "batch_id": batch_id, "final": final, "watermark": watermark, "max_ts": record.max_ts,
            "time_limit": limit, "partitions": job.partitions, "records_in": total("records") + total("invalid"),
            "records": total("records"), "results": total("results"), "late": total("late"),
            "invalid": total("invalid"), "future": total("future"), "state_entries": total("state_entries"),
            **memory_metrics(stats),
            "invalid_reasons": sink.reasons(epoch, OUTPUTS[INVALID_TAG]) if total("invalid") else {},  # kind -> rows
            "snapshot_bytes": total("snapshot_bytes"), "state_migrated": total("migrated"),
            **{k: max(s[k] for s in stats) for k in ("snapshot_seconds", "setup_seconds", "restore_seconds", "process_seconds")},
            "fast_path_partitions": sum(1 for s in stats if s["fast_path"]),
            "caught_up_partitions": sum(1 for s in stats if s["caught_up"]),
            "workers": sorted({s["worker"] for s in stats}),
            "rescaled_from": last.partitions if last is not None and last.partitions != job.partitions else None,
            "job_changes": [] if self.committed else self.job_changes, "restored": 0,
            "seconds": round(perf_counter() - t0, 3),
        }
        if initial is not None:  # its rows were state (sessions, values...), not records
            metrics.update(restored=metrics["records"], records=0, records_in=0)
        if metrics["memory_warning"] is not None and not self.memory_warned:
            _log.warning("%s", metrics["memory_warning"])
            self.memory_warned = True
        sink.record_metrics(metrics)
        self._fence()
        self.log.commit(record)
        self.committed.append(metrics)
        if self.progress is not None:
            self.progress(metrics)
        return metrics

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
    from pyspark.sql import functions as F
    from pyspark.sql.types import DataType, StringType, StructField, StructType

    spark = df.sparkSession
    warm_up_workers(spark)  # the workers start while the run is planned (once per application)
    streaming = df.isStreaming
    mode = mode or ("stream" if streaming else "batch")
    if mode not in ("stream", "batch"):
        raise ValueError(f"mode must be 'stream' or 'batch', got {mode!r}")
    if mode == "batch" and streaming:
        raise ValueError("mode='batch' needs a batch DataFrame; this one is streaming (use spark.read)")
    if trigger not in ("available-now", "continuous"):
        raise ValueError(f"trigger must be 'available-now' or 'continuous', got {trigger!r}")
    if final and trigger == "continuous":
        raise ValueError("final needs a bounded input: use trigger 'available-now' (a continuous query never ends)")
    row_columns = list(df.columns if columns is None else columns)
    if len(set(row_columns)) != len(row_columns):
        raise InputError(f"columns {row_columns} name a column twice")
    if reason is not None:
        row_columns = [c for c in row_columns if c != reason] if columns is None else row_columns
        if reason in (key, time, *row_columns):
            raise InputError(f"reason column {reason!r} is the key, the time or a row column")
    missing = [c for c in (key, time, *row_columns, *([reason] if reason else [])) if c not in df.columns]
    if missing:
        raise InputError(f"column {missing[0]!r} not found; available columns: {', '.join(df.columns)}")
    time_spec = TimeSpec(time_unit, time_format, time_zone)
    time_spec.check(spark, time, df.schema[time].dataType)
    columns = [key, time, *(c for c in row_columns if c not in (key, time))]
    selected = df.select(*columns)
    source = selected if reason is None else df.select(*columns, F.col(reason).cast("string").alias(REFUSED))
    state_config, settings = resolve_config(spark, config)
    delay_ms = to_millis(watermark_delay, "watermark_delay")
    if delay_ms < 0:
        raise ValueError(f"watermark_delay must be >= 0, got {watermark_delay!r}")
    ahead_from = "max_ahead"
    if max_ahead == "default":
        ahead_from = "spark.statekit.max_ahead"
        max_ahead = settings.get("max_ahead", DEFAULT_MAX_AHEAD)
    max_ahead_ms = ahead_limit_ms(max_ahead, ahead_from)
    checkpoint = checkpoint or settings.get("checkpoint") or output.rstrip("/") + "/_checkpoint"
    if "://" not in checkpoint:
        checkpoint = os.path.abspath(checkpoint)  # executors run in other working directories
    if initial_state is not None:
        refuse_started(checkpoint)
    partitions = int(partitions or settings.get("partitions") or default_parallelism(spark))
    check_parallelism(partitions, state_config.max_parallelism)
    fault = os.environ.get(FAULT_ENV)
    state_host = settings.get("state_host", "process")
    if state_host not in STATE_HOSTS:
        raise ValueError(f"spark.statekit.state_host={state_host!r}: expected one of {', '.join(STATE_HOSTS)}")
    host_idle_ms = host_idle_timeout_ms(settings)
    probe = operator_factory()  # the driver's copy: checked and described before anything runs
    if not isinstance(probe, KeyedOperator):
        raise TypeError(f"operator_factory {operator_factory!r} returned a {type(probe).__name__}, not a "
                        f"statekit.operators.KeyedOperator (WindowOperator, KeyedProcessOperator or a subclass)")
    hosts = settings.get("state_hosts", "auto")
    if hosts == "auto":
        hosts = str(default_state_hosts(spark))
    if not hosts.isdigit() or int(hosts) < 1:
        raise ValueError(f"spark.statekit.state_hosts={hosts!r}: expected a whole number >= 1 or 'auto'")
    budget = executor_budget(spark, state_config.memory_budget or settings.get("memory_budget"))
    state_config = state_config.with_options(memory_budget=process_share(budget, int(hosts)))  # each host's share
    if isinstance(result_schema, str):
        result_schema = DataType.fromDDL(result_schema)
    if not isinstance(result_schema, StructType):
        raise TypeError(f"result_schema must be a StructType or a DDL string, got {result_schema!r}")
    why = StructField("reason", StringType(), True)
    invalid_schema = StructType(list(selected.schema.fields) + [why])
    late_schema = StructType([selected.schema[c] for c in row_columns] + [why])
    check_output_is_own(output, checkpoint)  # before anything is written below it
    files = OutputDir(output)
    arrow = partial(arrow_schema, timezone=spark.conf.get("spark.sql.session.timeZone"))  # as Spark's batches have it
    application = application_id(spark)
    job = JobPlan(operator_id, operator_factory, checkpoint, state_config.to_dict(), partitions,
                  state_config.max_parallelism, tuple(columns), tuple(row_columns),
                  arrow(routed_schema(selected.schema)), arrow(result_schema), arrow(late_schema), arrow(invalid_schema), files,
                  int(settings.get("retain", 3)), int(settings.get("cache_size", 8)), Fault.parse(fault) if fault else None,
                  state_host, host_idle_ms / 1000, application, int(hosts),
                  checkpoint_key=settings.get("checkpoint_key", "").encode() or None,
                  secret=application_secret(application))
    fields = {f.name: f.dataType.simpleString() for f in selected.schema.fields}
    description = {
        "operator_id": operator_id, "operator": probe.describe(), "statekit": _version(),
        "key": {"column": key, "type": fields[key]}, "time": {"column": time, "type": fields[time], **time_spec.describe()},
        "columns": [[c, fields[c]] for c in row_columns], "result_schema": result_schema.simpleString(),
        "max_parallelism": state_config.max_parallelism, "backend": state_config.backend, "partitions": partitions,
        "watermark_delay_ms": delay_ms, "max_ahead": str(max_ahead), "state_formats": job_formats(),
    }
    spark_checkpoint = stream_checkpoint(spark, checkpoint, spark_checkpoint) if mode == "stream" else None
    description.update(output=files.path, spark_checkpoint=spark_checkpoint)  # for a rollback
    check_server_python(spark)  # on Spark Connect: its workers can run statekit, or a clear error before any epoch
    epoch_sink = as_sink(sink)
    lease = take_lease(checkpoint, settings, operator_id)
    try:
        job = replace(job, lease_token=lease.token)
        log = EpochLog(checkpoint)
        check_epochs(log, job, spark_checkpoint)  # a lost record rebuilt, or refused
        changes = JobRecord(checkpoint).check(description, has_state=log.last() is not None)
        if changes:
            _log.warning("statekit: continuing checkpoint %s with changes it carries: %s", checkpoint, "; ".join(changes))
        if epoch_sink is not None:
            epoch_sink.open(checkpoint, operator_id)
        runner = EpochRunner(spark, job, delay_ms, source.schema, log, max_ahead_ms, str(max_ahead), progress, changes,
                             epoch_sink, (result_schema, late_schema, invalid_schema), lease, time_spec)
        t0 = perf_counter()
        with CtrlC(runner, job_canceller(spark)):
            if initial_state is not None and runner.resumed_after is None:  # (else check_epochs rebuilt its lost record)
                runner.run(initial_state.df, initial=(initial_state, initial_state.job(job, arrow)))
            if mode == "batch":
                try:
                    runner.run(source)
                except StopRequested:  # stopped before the epoch began: it is left whole for the next run
                    pass
            elif is_connect(spark):
                stream_on_server(source, runner, runner.server_copy(), spark_checkpoint, trigger, trigger_interval)
            else:
                run_stream(source, runner, spark_checkpoint, trigger, trigger_interval)
            if (final or mode == "batch") and not runner.stop_requested:  # stopped early: the rest is for the next run
                runner.run(None, final=True)
        return RunSummary(files.path, checkpoint, runner.committed, round(perf_counter() - t0, 3), runner.stop_requested)
    finally:
        if epoch_sink is not None:
            epoch_sink.close()
        lease.release()


def _runner_on_server(job: JobPlan, delay_ms: int, input_schema: Any, max_ahead_ms: int | None, max_ahead: str,
                      job_changes: list[str], sink: EpochSink | None, structs: tuple[Any, Any, Any],
                      time_spec: TimeSpec, spark: Any) -> EpochRunner:
    """``EpochRunner.server_copy``'s runner, made in the server's process on ``spark``, its session there."""
    return EpochRunner(spark, job, delay_ms, input_schema, EpochLog(job.checkpoint), max_ahead_ms, max_ahead, None,
                       job_changes, sink, structs, LeaseToken(job.checkpoint, job.lease_token), time_spec)


def take_lease(checkpoint: str, settings: Mapping[str, str], operator_id: str) -> CheckpointLease:
    """The checkpoint's lease, held (and renewed) for this run: ``LeaseHeldError`` naming the holder when another
    run writes the checkpoint. Where the location's filesystem has no exclusive create, a warning says that one
    writer is not enforced there, and the run goes on without a lease."""
    lease = CheckpointLease(checkpoint, lease_timeout_ms(settings) / 1000)
    try:
        lease.held(f"a run of operator {operator_id!r}")
    except ExclusiveCreateUnsupported as e:
        _log.warning("statekit: %s: one writer per checkpoint is not enforced there", e)
    return lease


