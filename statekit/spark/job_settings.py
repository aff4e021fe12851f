"""``run_keyed``'s arguments and the session's ``spark.statekit.*`` settings, checked in one place (``check_job``)
before anything runs, each bad value refused naming what was wrong; the checked ``JobSettings`` then make the
``JobPlan`` the tasks get and the description the checkpoint's job record keeps."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from functools import partial
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Callable, Mapping

from ..config import DEFAULT_JOB_BACKEND, StateConfig
from ..durations import to_millis
from ..keygroups import check_parallelism
from ..memory_budget import process_share
from ..operators import KeyedOperator
from ..snapshot_header import job_formats
from .errors import InputError
from .event_time import TimeSpec
from .executor_memory import executor_budget
from .initial_state import InitialState, refuse_started
from .output_dir import OutputDir, check_output_is_own
from .plan import Fault, JobPlan
from .records import OWN_COLUMNS, REFUSED, routed_schema
from .runtime import STATE_HOSTS, StatePlacement, application_secret
from .schemas import arrow_schema
from .session_kind import application_id, default_parallelism, master
from .settings import DEFAULT_MAX_AHEAD, ahead_limit_ms, host_idle_timeout_ms, lease_timeout_ms
from .stream_location import spark_settings, stream_checkpoint

FAULT_ENV = "STATEKIT_INJECT_FAULT"
_JOB_KEYS = ("checkpoint", "partitions", "retain", "cache_size", "max_ahead", "spark_checkpoint", "state_host",
             "host_idle_timeout", "state_hosts", "lease_timeout", "checkpoint_key", "memory_budget")


def _version() -> str:
    try:
        return version("statekit")
    except PackageNotFoundError:
        return "unknown"


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


@dataclass(frozen=True)
class JobSettings:
    """One ``run_keyed`` call, checked: its arguments with the session's ``spark.statekit.*`` settings filled in.
    ``columns``: key, time, then the rest of ``row_columns`` (the record's row, in the user's order);
    ``input_schema``, ``late_schema``, ``invalid_schema``: Spark schemas of those columns and of the side
    outputs; ``placement``: the executor runtime's settings but the application's (``job_plan`` adds them);
    ``arrow``: a Spark schema as Spark's Arrow batches have it (the session's time zone)."""

    operator_id: str
    operator_factory: Callable[[], Any]
    operator: KeyedOperator
    """The driver's copy of the operator: checked and described before anything runs."""
    mode: str
    final: bool
    columns: tuple[str, ...]
    row_columns: tuple[str, ...]
    reason: str | None
    time_spec: TimeSpec
    state_config: StateConfig
    delay_ms: int
    max_ahead: str
    max_ahead_ms: int | None
    checkpoint: str
    output: OutputDir
    spark_checkpoint: str | None
    partitions: int
    retain: int
    fault: Fault | None
    placement: StatePlacement
    checkpoint_key: bytes | None
    lease_seconds: float
    result_schema: Any
    input_schema: Any
    late_schema: Any
    invalid_schema: Any
    arrow: Callable[[Any], Any]

    def source(self, df: Any) -> Any:
        """``df`` as the epochs read it: ``columns``, then the reason column as ``records.REFUSED`` if any."""
        from pyspark.sql import functions as F

        if self.reason is None:
            return df.select(*self.columns)
        return df.select(*self.columns, F.col(self.reason).cast("string").alias(REFUSED))

    def job_plan(self, spark: Any) -> JobPlan:
        """What every task of the run gets: the job, its state placed on the hosts of ``spark``'s application."""
        application = application_id(spark)
        placement = replace(self.placement, app_id=application, secret=application_secret(application))
        arrow = self.arrow
        return JobPlan(self.operator_id, self.operator_factory, self.checkpoint, self.state_config.to_dict(),
                       self.partitions, self.state_config.max_parallelism, self.columns, self.row_columns,
                       arrow(routed_schema(self.input_schema)), arrow(self.result_schema), arrow(self.late_schema),
                       arrow(self.invalid_schema), self.output, self.retain, self.fault, placement,
                       checkpoint_key=self.checkpoint_key)

    def description(self) -> dict[str, Any]:
        """The job as its checkpoint's job record keeps it (``checkpoint.JobRecord``: a later run's changes)."""
        fields = {f.name: f.dataType.simpleString() for f in self.input_schema.fields}
        key, time = self.columns[:2]
        config = self.state_config
        return {
            "operator_id": self.operator_id, "operator": self.operator.describe(), "statekit": _version(),
            "key": {"column": key, "type": fields[key]},
            "time": {"column": time, "type": fields[time], **self.time_spec.describe()},
            "columns": [[c, fields[c]] for c in self.row_columns], "result_schema": self.result_schema.simpleString(),
            "max_parallelism": config.max_parallelism, "backend": config.backend, "partitions": self.partitions,
            "watermark_delay_ms": self.delay_ms, "max_ahead": self.max_ahead, "state_formats": job_formats(),
            "output": self.output.path, "spark_checkpoint": self.spark_checkpoint,  # for a rollback
        }


def check_job(df: Any, *, key: str, time: str, operator_factory: Callable[[], Any], result_schema: Any, output: str,
              checkpoint: str | None, columns: list[str] | None, watermark_delay: int | str,
              config: StateConfig | Mapping[str, Any] | None, partitions: int | None, mode: str | None, final: bool,
              trigger: str, operator_id: str, max_ahead: int | str | None, spark_checkpoint: str | None,
              time_unit: str, time_format: str | None, time_zone: str, reason: str | None,
              initial_state: InitialState | None) -> JobSettings:
    """``run_keyed``'s arguments (see there) over ``df`` with its session's ``spark.statekit.*`` settings, checked:
    ValueError, TypeError or InputError naming the first value that is wrong."""
    from pyspark.sql.types import DataType, StringType, StructField, StructType

    spark = df.sparkSession
    mode = _mode(mode, df.isStreaming, trigger, final)
    key_time_rest, row_columns = _columns(df, key, time, columns, reason)
    time_spec = TimeSpec(time_unit, time_format, time_zone)
    time_spec.check(spark, time, df.schema[time].dataType)
    selected = df.select(*key_time_rest)
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
    placement = _placement(settings)
    operator = operator_factory()  # the driver's copy: checked and described before anything runs
    if not isinstance(operator, KeyedOperator):
        raise TypeError(f"operator_factory {operator_factory!r} returned a {type(operator).__name__}, not a "
                        f"statekit.operators.KeyedOperator (WindowOperator, KeyedProcessOperator or a subclass)")
    placement = replace(placement, state_hosts=_state_hosts(spark, settings))
    budget = executor_budget(spark, state_config.memory_budget or settings.get("memory_budget"))
    state_config = state_config.with_options(memory_budget=process_share(budget, placement.state_hosts))  # a host's
    if isinstance(result_schema, str):
        result_schema = DataType.fromDDL(result_schema)
    if not isinstance(result_schema, StructType):
        raise TypeError(f"result_schema must be a StructType or a DDL string, got {result_schema!r}")
    why = StructField("reason", StringType(), True)
    check_output_is_own(output, checkpoint)  # before anything is written below it
    fault = os.environ.get(FAULT_ENV)
    injected = Fault.parse(fault) if fault else None
    stream_location = stream_checkpoint(spark, checkpoint, spark_checkpoint) if mode == "stream" else None
    return JobSettings(
        operator_id, operator_factory, operator, mode, final, tuple(key_time_rest), tuple(row_columns), reason,
        time_spec, state_config, delay_ms, str(max_ahead), max_ahead_ms, checkpoint, OutputDir(output),
        stream_location, partitions, int(settings.get("retain", 3)), injected, placement,
        settings.get("checkpoint_key", "").encode() or None, lease_timeout_ms(settings) / 1000, result_schema,
        selected.schema, StructType([selected.schema[c] for c in row_columns] + [why]),
        StructType(list(selected.schema.fields) + [why]),
        partial(arrow_schema, timezone=spark.conf.get("spark.sql.session.timeZone")))  # as Spark's batches have it


def _mode(mode: str | None, streaming: bool, trigger: str, final: bool) -> str:
    """``run_keyed``'s ``mode`` (None: ``stream`` for a streaming DataFrame, else ``batch``), checked with the
    ``trigger`` and ``final`` it takes."""
    mode = mode or ("stream" if streaming else "batch")
    if mode not in ("stream", "batch"):
        raise ValueError(f"mode must be 'stream' or 'batch', got {mode!r}")
    if mode == "batch" and streaming:
        raise ValueError("mode='batch' needs a batch DataFrame; this one is streaming (use spark.read)")
    if trigger not in ("available-now", "continuous"):
        raise ValueError(f"trigger must be 'available-now' or 'continuous', got {trigger!r}")
    if final and trigger == "continuous":
        raise ValueError("final needs a bounded input: use trigger 'available-now' (a continuous query never ends)")
    return mode


def _columns(df: Any, key: str, time: str, columns: list[str] | None,
             reason: str | None) -> tuple[list[str], list[str]]:
    """The columns routed to the tasks (key, time, then the rest of the row's) and the row's columns (``columns``,
    default every column of ``df`` but ``reason``), checked against ``df``."""
    row_columns = list(df.columns if columns is None else columns)
    if len(set(row_columns)) != len(row_columns):
        raise InputError(f"columns {row_columns} name a column twice")
    if reason is not None:
        row_columns = [c for c in row_columns if c != reason] if columns is None else row_columns
        if reason in (key, time, *row_columns):
            raise InputError(f"reason column {reason!r} is the key, the time or a row column")
    own = [c for c in (key, time, *row_columns) if c in OWN_COLUMNS]
    if own:
        raise InputError(f"column {own[0]!r} has a name statekit gives a column of its own beside the input's "
                         f"({', '.join(sorted(OWN_COLUMNS))}): rename it (withColumnRenamed)")
    missing = [c for c in (key, time, *row_columns, *([reason] if reason else [])) if c not in df.columns]
    if missing:
        raise InputError(f"column {missing[0]!r} not found; available columns: {', '.join(df.columns)}")
    return [key, time, *(c for c in row_columns if c not in (key, time))], row_columns


def _placement(settings: Mapping[str, str]) -> StatePlacement:
    """``spark.statekit.state_host``, ``host_idle_timeout`` and ``cache_size``, checked (``state_hosts`` after
    the operator: ``_state_hosts``)."""
    state_host = settings.get("state_host", "process")
    if state_host not in STATE_HOSTS:
        raise ValueError(f"spark.statekit.state_host={state_host!r}: expected one of {', '.join(STATE_HOSTS)}")
    return StatePlacement(state_host, host_idle_seconds=host_idle_timeout_ms(settings) / 1000,
                          cache_size=int(settings.get("cache_size", 8)))


def _state_hosts(spark: Any, settings: Mapping[str, str]) -> int:
    """``spark.statekit.state_hosts``: a whole number >= 1, or ``auto`` (``default_state_hosts``)."""
    hosts = settings.get("state_hosts", "auto")
    if hosts == "auto":
        hosts = str(default_state_hosts(spark))
    if not hosts.isdigit() or int(hosts) < 1:
        raise ValueError(f"spark.statekit.state_hosts={hosts!r}: expected a whole number >= 1 or 'auto'")
    return int(hosts)
