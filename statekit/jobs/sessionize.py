"""The sessionize job: session windows per key over files or a Kafka topic, through Spark, exactly once.

``sessionize(spark, input=..., output=..., key=..., time=..., gap="30s", ...)`` reads a file, a
directory or a glob of its files (csv, parquet or json), or with ``kafka=KafkaInput(...)`` a topic, builds a WindowOperator with event-time session windows and the
``--agg`` aggregates, and runs it with ``statekit.spark.run_keyed``. Output rows:
``<key>, window_start, window_end, <aggregates>`` with window bounds in the kind of the input's times
(``spark.event_time``): timestamps for timestamps and text, integers in the input's unit for numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from ..checkpoint import JobRecord
from ..durations import to_millis
from ..operators import STATE_LAYOUTS, EventTimeSessionWindows, WindowColumnsFunction, WindowOperator, state_layout_of
from ..spark import RunSummary, run_keyed, warm_up_workers
from ..spark.stream_location import stream_checkpoint
from ..spark.event_time import TimeSpec, from_millis
from ..spark.files import read_files
from ..spark.initial_sessions import SessionRestore, initial_sessions, session_state_columns
from ..spark.initial_state import InitialState, refuse_started
from ..spark.input_files import FORMATS
from ..spark.columns import check_columns
from ..spark.kafka import KAFKA_KEY, KAFKA_TIMESTAMP, REASON, KafkaInput, read_topic
from ..spark.plan import INVALID_TAG, LATE_TAG
from ..spark.schemas import session_result_schema
from ..spark.state_sessions import recorded_bounds
from ..spark.text_schema import declared_schema
from ..spark.server_python import probe_server_python
from ..spark.sinks import DeltaSink
from .aggregates import RowAggregate, parse_aggs
from .checkpoint_in_use import job_checkpoint
from .preflight import session_gap_ms

DEFAULT_STATE_LAYOUT = "table"
"""The layout of a new checkpoint's sessions: every key's sessions as columns (``operators.engines.session_table``),
the faster one; on RocksDB a table past its share of the memory budget moves to a stored cell per key, so memory
stays flat whatever the number of open sessions (docs/memory.md)."""


@dataclass(frozen=True)
class SessionOperatorFactory:
    """Builds the session WindowOperator in each task (shipped to executors by reference); ``names``,
    ``version`` and ``earlier`` (version -> aggregate names) say how the accumulators evolved;
    ``bounds_unit``: the unit the window bounds go out in (``TimeSpec.bounds_unit``)."""

    gap_ms: int
    aggs: tuple[tuple[str, int | None], ...]
    names: tuple[str, ...] = ()
    version: int = 1
    earlier: tuple[tuple[int, tuple[str, ...]], ...] = ()
    state_layout: str = "cells"
    bounds_unit: str = "ms"

    def __call__(self) -> WindowOperator:
        function = RowAggregate(list(self.aggs), self.names, self.version, dict(self.earlier))
        return WindowOperator(EventTimeSessionWindows.with_gap(self.gap_ms), function=function,
                              window_function=SessionRows(self.bounds_unit), late_output_tag=LATE_TAG,
                              invalid_output_tag=INVALID_TAG, state_layout=self.state_layout)


def recorded_sessions(checkpoint: str, gap: int | str) -> SessionOperatorFactory:
    """The session operator of the sessionize job ``checkpoint`` records (its aggregates and their versions, its
    layout, its bounds' unit), with sessions of ``gap`` (a changed gap is carried): what
    ``statekit.spark.write_checkpoint`` writes that job's state with."""
    job = JobRecord(checkpoint).read() or {}
    state = (job.get("operator") or {}).get("state", {})
    found = RowAggregate.recorded(state.get("function"), [c for c, _ in job.get("columns", [])])
    if found is None or state.get("assigner") != "EventTimeSessionWindows":
        raise ValueError(f"checkpoint {checkpoint} records no sessionize job (its operator: {state or 'none'})")
    return SessionOperatorFactory(session_gap_ms(gap), tuple((k, p) for k, p in state["function"]["aggregates"]),
                                  found.names, found.version, tuple(sorted(found.earlier.items())),
                                  state_layout_of(job["operator"]), recorded_bounds(job)[1])


def accumulator_evolution(recorded: dict[str, Any] | None, names: list[str],
                          migrate: bool) -> tuple[int, dict[int, tuple[str, ...]]]:
    """This run's accumulator version and the earlier versions' aggregate names, from the job its
    checkpoint recorded: the recorded ones when the aggregates are the same (or no migration is asked:
    then a changed job is refused), one version more, the recorded aggregates added to the earlier
    ones, when ``migrate`` and they changed."""
    function = ((recorded or {}).get("operator") or {}).get("state", {}).get("function")
    found = RowAggregate.recorded(function, [c for c, _ in (recorded or {}).get("columns", [])])
    if found is None:
        return 1, {}
    if not migrate or found.names == tuple(names):
        return found.version, found.earlier
    return found.version + 1, {**found.earlier, found.version: found.names}


class SessionRows(WindowColumnsFunction):
    """Emits ``(key, start, end, *aggregates)`` per fired session, its bounds in ``unit`` (``s``, ``ms`` or
    ``us``; the operator's are milliseconds)."""

    def __init__(self, unit: str = "ms") -> None:
        self.unit = unit

    def columns(self, keys: list, starts: Any, ends: Any, results: list[list]) -> list:
        return [keys, from_millis(starts, self.unit), from_millis(ends, self.unit), *results]


def sessionize(spark: Any, *, input: str | None = None, output: str, key: str, time: str, gap: int | str = "30s",
               watermark_delay: int | str = 0, aggs: Iterable[str] = ("count",), backend: str | None = None,
               checkpoint: str | None = None, partitions: int | None = None, fmt: str | None = None,
               mode: str = "stream", trigger: str = "available-now", final: bool = False,
               max_ahead: int | str | None = "default", output_format: str = "parquet",
               spark_checkpoint: str | None = None, sink: Any = None, migrate_state: bool = False,
               state_layout: str | None = None, progress: Callable[[dict], None] | None = None,
               time_unit: str = "ms", time_format: str | None = None, time_zone: str = "UTC",
               kafka: KafkaInput | None = None, initial_state: str | None = None, input_schema: str | None = None,
               initial_state_format: str | None = None) -> RunSummary:
    """Sessionize ``input`` into ``output`` (see the module doc); ``mode="batch"`` implies ``final``;
    ``max_ahead``, ``spark_checkpoint``, ``sink`` and ``time_unit``, ``time_format``, ``time_zone`` as for
    ``run_keyed``. ``output_format="delta"``: ``output`` is a Delta table getting one transaction per epoch;
    the epochs' parquet files stay under ``<output>/_statekit``.
    ``migrate_state``: aggregates added or removed since the checkpoint's last run migrate its open
    sessions (an added one counts their records from this run on) instead of refusing the run.
    ``state_layout``: ``table`` (all keys' sessions as columns, stored per key group: for millions of
    keys) or ``cells`` (a stored value per key); None: the layout the checkpoint was written with, and
    ``DEFAULT_STATE_LAYOUT`` for a new one. A checkpoint keeps its layout: another one
    is refused. ``kafka``: read this topic instead of ``input`` (``fmt`` is then ``kafka.fmt``); a message that
    does not parse goes to ``_invalid`` with its topic, partition and offset; ``final`` with
    ``trigger="available-now"``: up to the offsets at the run's start. ``initial_state``: a table of open
    sessions (parquet, csv, json or Delta; ``initial_state_format``, else by its files) a new checkpoint starts
    from, as if the job had sessionized the history that made them (``spark.initial_sessions``;
    docs/sessionize.md); a row that is not such a session is refused, naming it, before anything is written,
    and so is a checkpoint with committed epochs. ``input_schema``: csv or json files' columns as DDL
    (``'name TYPE, ...'``, every column in the files' order) instead of those typed from the first file's first
    lines; a record with a value that does not fit its column goes to ``_invalid``, naming its file."""
    if (input is None) == (kafka is None):
        raise ValueError("pass one input: input (files) or kafka (a topic)")
    if output_format not in ("parquet", "delta"):
        raise ValueError(f"--output-format must be parquet or delta, got {output_format!r}")
    if output_format == "delta" and sink is not None:
        raise ValueError("output_format='delta' is a sink already: pass one of them")
    gap_ms = session_gap_ms(gap)
    delay_ms = to_millis(watermark_delay, "--watermark-delay")
    if fmt is not None and fmt not in FORMATS and kafka is None:
        raise ValueError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    parsed = parse_aggs(aggs)
    time_spec = TimeSpec(time_unit, time_format, time_zone)
    required = [(key, "key"), (time, "time")] + [(a.column, f"--agg {a.kind}") for a in parsed if a.column]
    warm_up_workers(spark)  # overlaps reading the input's schema
    probe_server_python(spark)  # so does asking a Spark Connect server's Python for statekit
    delta = output_format == "delta"
    files = output.rstrip("/") + "/_statekit" if delta else output
    checkpoint = job_checkpoint(files, checkpoint)
    if initial_state is not None:  # before the input and the table are read
        refuse_started(checkpoint)
    stream = mode == "stream"
    if kafka is not None:
        needed = {column for column, _ in required}  # the Kafka record's own columns only where the job reads them
        df = read_topic(spark, kafka, stream=stream,
                        kafka_columns=[c for c in (KAFKA_KEY, KAFKA_TIMESTAMP) if c in needed])
        reason = REASON
        schema = df.schema
        check_columns(f"topic {kafka.topic}", list(dict.fromkeys([*schema.fieldNames(), KAFKA_KEY, KAFKA_TIMESTAMP])),
                      required)
        kind = schema[time].dataType
    else:
        read = read_files(spark, input, fmt=fmt, time=time, required=required, stream=stream, time_spec=time_spec,
                           spark_checkpoint=stream_checkpoint(spark, checkpoint, spark_checkpoint) if stream else None,
                           schema=None if input_schema is None else declared_schema(input_schema, "--schema"),
                           written=[("--output", output), ("--checkpoint", checkpoint)])
        df, schema, kind, reason = read.df, read.schema, read.kind, read.reason
    columns = list(dict.fromkeys([key, time] + [a.column for a in parsed if a.column]))
    bounds_unit = time_spec.bounds_unit(kind)
    if bounds_unit == "s" and gap_ms % 1000:
        raise ValueError(f"--gap {gap!r} is not a whole number of seconds: the session bounds of times in "
                         f"seconds (--time-unit s) are whole seconds; pass a gap in whole seconds")
    out_schema = session_result_schema(schema, key, [(a.name, a.kind, a.column) for a in parsed],
                                       time_spec.bounds_type(kind))
    positions = tuple((a.kind, columns.index(a.column) if a.column else None) for a in parsed)
    names = [a.name for a in parsed]
    recorded = JobRecord(checkpoint).read()
    version, earlier = accumulator_evolution(recorded, names, migrate_state)
    if state_layout is None:  # the checkpoint's own, so a run resumes whatever layout it was started with
        state_layout = (state_layout_of((recorded or {}).get("operator"))
                        or DEFAULT_STATE_LAYOUT)
    if state_layout not in STATE_LAYOUTS:
        raise ValueError(f"--state-layout must be one of {', '.join(STATE_LAYOUTS)}, got {state_layout!r}")
    factory = SessionOperatorFactory(gap_ms, positions, tuple(names), version, tuple(sorted(earlier.items())),
                                     state_layout, bounds_unit)
    initial = None
    if initial_state is not None:
        state = session_state_columns(schema, key, [(a.kind, a.column) for a in parsed], time_spec.bounds_type(kind))
        sessions = initial_sessions(spark, initial_state, initial_state_format, state, gap_ms, time_spec)
        initial = InitialState(sessions, SessionRestore(positions, tuple(c.name for c in state[3:])))
    return run_keyed(df, key=key, time=time, columns=columns, operator_factory=factory,
                     result_schema=out_schema, output=files, checkpoint=checkpoint,
                     watermark_delay=delay_ms, config={"backend": backend} if backend else None, partitions=partitions,
                     mode=mode, final=final or mode == "batch", trigger=trigger, operator_id="sessionize",
                     max_ahead=max_ahead, progress=progress, sink=DeltaSink(output) if delta else sink,
                     spark_checkpoint=spark_checkpoint, time_unit=time_unit, time_format=time_format,
                     time_zone=time_zone, reason=reason, initial_state=initial)
