"""``run_keyed``: run a keyed operator over a Spark DataFrame in epochs, exactly once, with its state
in a statekit backend that is checkpointed per epoch.

Per epoch the driver (1) routes the epoch's rows to ``partitions`` tasks by key group, invalid rows
aside with a reason; (2) each task runs the operator for its key groups from the state of the
previous committed epoch (kept open in the worker, or restored from the checkpoint), feeds the
rows, advances the watermark of this epoch and commits its snapshot as this epoch; (3) the driver
replaces ``<output>/epoch=<e>`` (and ``_late/``, ``_invalid/``) with the epoch's rows, records its
metrics, and (4) commits the epoch record under ``<checkpoint>/_driver``. A replay of an epoch
(task retry, restarted query) starts again from the previous committed epoch with the same rows
and watermark, so it writes the same output over the same directories: no duplicates, no loss.
"""

from __future__ import annotations

import os
import signal
import threading
from time import perf_counter
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Callable, Mapping

from ..config import StateConfig
from ..durations import to_millis
from ..keygroups import check_parallelism
from ..timers import MAX_TIMESTAMP, MIN_TIMESTAMP
from .epochs import EpochLog, EpochRecord
from .errors import InputError, StopRequested
from .plan import EpochPlan, Fault, JobPlan
from .records import route
from .sink import OutputDir
from .tasks import run_partition

FAULT_ENV = "STATEKIT_INJECT_FAULT"
_JOB_KEYS = ("checkpoint", "partitions", "retain", "cache_size")


@dataclass
class RunSummary:
    """What one ``run_keyed`` call did: the metrics of each epoch it committed, and where things are."""

    output: str
    checkpoint: str
    epochs: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    def total(self, name: str) -> int:
        return sum(m[name] for m in self.epochs)


def _spark_settings(spark: Any) -> dict[str, str]:
    conf = spark.conf.getAll
    items = conf() if callable(conf) else conf
    return {k[len("spark.statekit."):]: v for k, v in dict(items).items() if k.startswith("spark.statekit.")}


def resolve_config(spark: Any, config: StateConfig | Mapping[str, Any] | None) -> tuple[StateConfig, dict[str, str]]:
    """State config from defaults (rocksdb), then ``spark.statekit.*``, then ``config``; plus the
    job-level Spark settings (``checkpoint``, ``partitions``, ``retain``, ``cache_size``)."""
    settings = _spark_settings(spark)
    job = {k: settings.pop(k) for k in _JOB_KEYS if k in settings}
    data: dict[str, Any] = {"backend": "rocksdb", **settings}
    if config is not None:
        data.update(config.to_dict() if isinstance(config, StateConfig) else dict(config))
    return StateConfig.from_dict(data), job


class EpochRunner:
    """Runs epochs of one job on the driver; ``run`` is called per input batch and once for ``final``."""

    def __init__(self, spark: Any, job: JobPlan, delay_ms: int, input_schema: Any, result_schema: Any,
                 sink: OutputDir, log: EpochLog, progress: Callable[[dict], None] | None = None) -> None:
        from pyspark.sql.types import StringType, StructField, StructType

        self.spark, self.job, self.delay_ms = spark, job, delay_ms
        self.result_schema = result_schema
        self.side_schema = StructType(list(input_schema.fields) + [StructField("reason", StringType(), False)])
        self.sink, self.log, self.progress = sink, log, progress
        self.committed: list[dict[str, Any]] = []
        self.busy = threading.Lock()
        self.stop_requested = False

    def run(self, df: Any | None, batch_id: int | None = None, final: bool = False) -> dict[str, Any] | None:
        """Process one epoch (``df`` None: no records); None when it was committed before (a replay)."""
        if self.stop_requested:
            raise StopRequested("stop requested: this batch is left for the next run")
        with self.busy:
            return self._run(df, batch_id, final)

    def _run(self, df: Any | None, batch_id: int | None, final: bool) -> dict[str, Any] | None:
        from pyspark import StorageLevel

        t0 = perf_counter()
        job, sc = self.job, self.spark.sparkContext
        last = self.log.last()
        if last is not None and batch_id is not None and batch_id <= last.last_batch_id:
            return None
        if last is not None and final and last.final and df is None:
            return None
        epoch = 0 if last is None else last.epoch + 1
        if final:
            watermark = MAX_TIMESTAMP
        else:
            watermark = None if last is None else last.next_watermark(self.delay_ms)
        P, maxp, ki, ti = job.partitions, job.max_parallelism, job.key_index, job.time_index
        if df is None:
            rows, routed = None, sc.parallelize([], P)
        else:
            rows = df.rdd
            routed = (rows.mapPartitionsWithIndex(lambda split, it: route(it, split, P, maxp, ki, ti))
                      .partitionBy(P, _identity))
        plan = EpochPlan(epoch, None if last is None else last.epoch, watermark,
                         0 if rows is None else rows.getNumPartitions())
        out = routed.mapPartitionsWithIndex(
            lambda i, items: run_partition(job, plan, i, (v for _, v in items))).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            stats = out.filter(_tagged("s")).map(itemgetter(1)).collect()
            results = sum(s["results"] for s in stats)
            self.sink.write_epoch(self._frame(out, "r", self.result_schema), epoch)
            for tag, sub, count in (("l", "_late/", sum(s["late"] for s in stats)),
                                    ("i", "_invalid/", sum(s["invalid"] for s in stats))):
                if count:
                    self.sink.write_epoch(self._frame(out, tag, self.side_schema), epoch, sub)
                else:
                    self.sink.remove_epoch(epoch, sub)
        finally:
            out.unpersist()
        seen = [s["max_ts"] for s in stats if s["max_ts"] is not None]
        if last is not None and last.max_ts is not None:
            seen.append(last.max_ts)
        record = EpochRecord(epoch, MIN_TIMESTAMP if watermark is None else watermark, max(seen) if seen else None,
                             batch_id if batch_id is not None else (-1 if last is None else last.last_batch_id),
                             final or (last is not None and last.final), P, job.operator_id)
        metrics = {
            "epoch": epoch, "batch_id": batch_id, "final": final, "watermark": watermark, "max_ts": record.max_ts,
            "partitions": P, "records_in": sum(s["records"] for s in stats) + sum(s["invalid"] for s in stats),
            "records": sum(s["records"] for s in stats), "results": results,
            "late": sum(s["late"] for s in stats), "invalid": sum(s["invalid"] for s in stats),
            "state_entries": sum(s["state_entries"] for s in stats),
            "snapshot_bytes": sum(s["snapshot_bytes"] for s in stats),
            "snapshot_seconds": max(s["snapshot_seconds"] for s in stats),
            "fast_path_partitions": sum(1 for s in stats if s["fast_path"]),
            "workers": sorted({s["worker"] for s in stats}),
            "rescaled_from": last.partitions if last is not None and last.partitions != P else None,
            "seconds": round(perf_counter() - t0, 3),
        }
        self.sink.record_metrics(metrics)
        self.log.commit(record)
        self.committed.append(metrics)
        if self.progress is not None:
            self.progress(metrics)
        return metrics

    def _frame(self, out: Any, tag: str, schema: Any) -> Any:
        return self.spark.createDataFrame(out.filter(_tagged(tag)).map(itemgetter(1)), schema, verifySchema=False)


def _identity(p: int) -> int:
    return p


def _tagged(tag: str) -> Callable[[tuple], bool]:
    return lambda t: t[0] == tag


def run_keyed(df: Any, *, key: str, time: str, operator_factory: Callable[[], Any], result_schema: Any, output: str,
              checkpoint: str | None = None, columns: list[str] | None = None,
              watermark_delay: int | str = 0, config: StateConfig | Mapping[str, Any] | None = None,
              partitions: int | None = None, mode: str | None = None, final: bool = False,
              trigger: str = "available-now", trigger_interval: str = "5 seconds", operator_id: str = "operator",
              progress: Callable[[dict], None] | None = None) -> RunSummary:
    """Run the operator made by ``operator_factory`` over ``df`` keyed by ``key`` with event time ``time``
    (integer milliseconds), writing its results under ``output``; returns the epochs' metrics.

    Each operator record is ``(key, row, ts)`` where ``row`` is the tuple of ``columns`` (default: every
    column of ``df``); the operator's outputs must be tuples matching ``result_schema`` (a StructType or
    DDL string), its side output ``"late"`` carries late rows. ``mode``: ``"stream"`` (default for a
    streaming ``df``: one epoch per Structured Streaming batch, ``trigger`` ``available-now`` or
    ``continuous``) or ``"batch"`` (one epoch, then the final one). ``final``: after the input, one
    epoch with the maximum watermark fires and cleans every window. ``checkpoint`` default:
    ``spark.statekit.checkpoint``, else ``<output>/_checkpoint``; ``partitions`` default:
    ``spark.statekit.partitions``, else Spark's default parallelism. Rerunning with the same
    checkpoint resumes after its last committed epoch."""
    from pyspark.sql.types import StructType, _parse_datatype_string

    spark = df.sparkSession
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
    columns = list(dict.fromkeys(columns or df.columns))
    missing = [c for c in (key, time, *columns) if c not in df.columns]
    if missing:
        raise InputError(f"column {missing[0]!r} not found; available columns: {', '.join(df.columns)}")
    columns = [c for c in columns if c not in (key, time)]
    columns = [key, time, *columns]
    selected = df.select(*columns)
    state_config, settings = resolve_config(spark, config)
    delay_ms = to_millis(watermark_delay, "watermark delay")
    if delay_ms < 0:
        raise ValueError(f"watermark delay must be >= 0, got {watermark_delay!r}")
    checkpoint = checkpoint or settings.get("checkpoint") or output.rstrip("/") + "/_checkpoint"
    if "://" not in checkpoint:
        checkpoint = os.path.abspath(checkpoint)  # executors run in other working directories
    partitions = int(partitions or settings.get("partitions") or spark.sparkContext.defaultParallelism)
    check_parallelism(partitions, state_config.max_parallelism)
    fault = os.environ.get(FAULT_ENV)
    job = JobPlan(operator_id, operator_factory, checkpoint, state_config.to_dict(), partitions,
                  state_config.max_parallelism, 0, 1, int(settings.get("retain", 3)), int(settings.get("cache_size", 8)),
                  Fault.parse(fault) if fault else None)
    if isinstance(result_schema, str):
        result_schema = _parse_datatype_string(result_schema)
    if not isinstance(result_schema, StructType):
        raise TypeError(f"result_schema must be a StructType or a DDL string, got {result_schema!r}")
    sink = OutputDir(spark, output)
    runner = EpochRunner(spark, job, delay_ms, selected.schema, result_schema, sink, EpochLog(checkpoint), progress)
    t0 = perf_counter()
    if mode == "batch":
        runner.run(selected)
        runner.run(None, final=True)
    else:
        _stream(selected, runner, checkpoint, trigger, trigger_interval)
        if final:
            runner.run(None, final=True)
    return RunSummary(sink.path, checkpoint, runner.committed, round(perf_counter() - t0, 3))


def _stream(df: Any, runner: EpochRunner, checkpoint: str, trigger: str, interval: str) -> None:
    """Run a streaming query whose batches are epochs until the input is drained (available-now) or
    until Ctrl-C (continuous: the epoch in progress completes, then the query stops)."""
    errors: list[BaseException] = []

    def batch(batch_df: Any, batch_id: int) -> None:
        try:
            runner.run(batch_df, batch_id)
        except BaseException as e:
            errors.append(e)
            raise

    writer = df.writeStream.foreachBatch(batch).option("checkpointLocation", checkpoint.rstrip("/") + "/_spark")
    writer = writer.trigger(availableNow=True) if trigger == "available-now" else writer.trigger(processingTime=interval)
    query = writer.start()
    previous = None
    if trigger == "continuous" and threading.current_thread() is threading.main_thread():
        def request_stop(signum: int, frame: Any) -> None:
            runner.stop_requested = True
        previous = signal.signal(signal.SIGINT, request_stop)
    try:
        while query.isActive and not runner.stop_requested:
            query.awaitTermination(0.5)
        if runner.stop_requested:
            with runner.busy:  # let the epoch in progress finish, then stop before the next one
                query.stop()
    except Exception:
        if not errors:
            raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if errors and not (runner.stop_requested and isinstance(errors[0], StopRequested)):
        raise errors[0]
    if not runner.stop_requested and query.exception() is not None:
        raise RuntimeError(f"streaming query failed: {query.exception()}")
