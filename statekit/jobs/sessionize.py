"""The sessionize job: session windows per key over files, through Spark, exactly once.

``sessionize(spark, input=..., output=..., key=..., time=..., gap="30s", ...)`` reads a file or a
directory (csv, parquet or json), builds a WindowOperator with event-time session windows and the
``--agg`` aggregates, and runs it with ``statekit.spark.run_keyed``. Output rows:
``<key>, window_start, window_end, <aggregates>`` with window bounds in the input's milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from ..durations import to_millis
from ..spark import InputError, RunSummary, run_keyed
from ..spark.plan import INVALID_TAG, LATE_TAG
from .aggregates import Agg, RowAggregate, parse_aggs, result_type

FORMATS = ("csv", "parquet", "json")
_OPTIONS = {"csv": {"header": "true"}, "parquet": {}, "json": {}}


@dataclass(frozen=True)
class SessionOperatorFactory:
    """Builds the session WindowOperator in each task (shipped to executors by reference)."""

    gap_ms: int
    aggs: tuple[tuple[str, int | None], ...]

    def __call__(self) -> Any:
        from statekit.operators import EventTimeSessionWindows, WindowOperator

        return WindowOperator(EventTimeSessionWindows.with_gap(self.gap_ms), function=RowAggregate(list(self.aggs)),
                              window_function=_session_rows()(), late_output_tag=LATE_TAG,
                              invalid_output_tag=INVALID_TAG)


_ROWS: type | None = None


def _session_rows() -> type:
    """The ProcessWindowFunction emitting ``(key, start, end, *aggregates)`` (operators imported lazily)."""
    global _ROWS
    if _ROWS is None:
        from statekit.operators import ProcessWindowFunction

        class SessionRows(ProcessWindowFunction):
            def process(self, key: Any, context: Any, elements: Iterable[tuple]) -> Iterable[tuple]:
                w = context.window
                for result in elements:
                    yield (key, w.start, w.end, *result)

        _ROWS = SessionRows
    return _ROWS


def _files(spark: Any, path: str) -> list[str]:
    """Data files of ``path`` (itself, or the files of a directory not starting with _ or .), sorted."""
    jvm = spark.sparkContext._jvm
    p = jvm.org.apache.hadoop.fs.Path(path)
    fs = p.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not fs.exists(p):
        raise InputError(f"input {path} does not exist")
    if fs.getFileStatus(p).isFile():
        return [fs.makeQualified(p).toString()]
    found = sorted(s.getPath().toString() for s in fs.listStatus(p)
                   if s.isFile() and not s.getPath().getName().startswith(("_", ".")))
    if not found:
        raise InputError(f"input directory {path} has no data files")
    return found


def read_input(spark: Any, path: str, *, fmt: str | None, key: str, time: str, aggs: list[Agg],
               stream: bool) -> Any:
    """The input as a (streaming) DataFrame: schema from the first file, the time column read as text
    for csv/json so that bad times reach the invalid-records output instead of becoming nulls."""
    from pyspark.sql.types import StringType, StructField, StructType

    files = _files(spark, path)
    fmt = fmt or files[0].rsplit(".", 1)[-1].lower()
    if fmt not in FORMATS:
        raise InputError(f"input {files[0]}: unknown format; pass --format {'|'.join(FORMATS)}")
    options = dict(_OPTIONS[fmt])
    infer = {"inferSchema": "true"} if fmt == "csv" else {}
    schema = spark.read.format(fmt).options(**options, **infer).load(files[0]).schema
    names = schema.fieldNames()
    for col, what in [(key, "key"), (time, "time")] + [(a.column, f"--agg {a.kind}") for a in aggs if a.column]:
        if col not in names:
            raise InputError(f"input {files[0]}: {what} column {col!r} not found; columns: {', '.join(names)}")
    if fmt != "parquet":
        schema = StructType([StructField(f.name, StringType(), True) if f.name == time else f for f in schema.fields])
    if not stream:
        return spark.read.format(fmt).options(**options).schema(schema).load(path), schema
    reader = spark.readStream.format(fmt).options(**options).schema(schema).option("maxFilesPerTrigger", 1)
    if _is_file(spark, path):  # a file source watches a directory: watch the file's, for this name only
        directory, _, name = files[0].rpartition("/")
        return reader.option("pathGlobFilter", name).load(directory), schema
    return reader.load(path), schema


def _is_file(spark: Any, path: str) -> bool:
    jvm = spark.sparkContext._jvm
    p = jvm.org.apache.hadoop.fs.Path(path)
    return p.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).getFileStatus(p).isFile()


def result_schema(input_schema: Any, key: str, aggs: list[Agg]) -> Any:
    """``<key>, window_start, window_end`` and one column per aggregate."""
    from pyspark.sql.types import LongType, StructField, StructType

    types = {f.name: f.dataType for f in input_schema.fields}
    fields = [StructField(key, types[key], False), StructField("window_start", LongType(), False),
              StructField("window_end", LongType(), False)]
    fields += [StructField(a.name, result_type(a, types.get(a.column)), a.kind != "count") for a in aggs]
    return StructType(fields)


def sessionize(spark: Any, *, input: str, output: str, key: str, time: str, gap: int | str = "30s",
               watermark_delay: int | str = 0, aggs: Iterable[str] = ("count",), backend: str | None = None,
               checkpoint: str | None = None, partitions: int | None = None, fmt: str | None = None,
               mode: str = "stream", trigger: str = "available-now", final: bool = False,
               max_ahead: int | str | None = "default", progress: Callable[[dict], None] | None = None) -> RunSummary:
    """Sessionize ``input`` into ``output`` (see the module doc); ``mode="batch"`` implies ``final``;
    ``max_ahead`` as for ``run_keyed``."""
    gap_ms = to_millis(gap, "--gap")
    if gap_ms <= 0:
        raise ValueError(f"--gap must be positive, got {gap!r}")
    delay_ms = to_millis(watermark_delay, "--watermark-delay")
    if mode not in ("stream", "batch"):
        raise ValueError(f"--mode must be stream or batch, got {mode!r}")
    if fmt is not None and fmt not in FORMATS:
        raise ValueError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    parsed = parse_aggs(aggs)
    df, schema = read_input(spark, input, fmt=fmt, key=key, time=time, aggs=parsed, stream=mode == "stream")
    columns = list(dict.fromkeys([key, time] + [a.column for a in parsed if a.column]))
    out_schema = result_schema(schema, key, parsed)
    positions = tuple((a.kind, columns.index(a.column) if a.column else None) for a in parsed)
    return run_keyed(df, key=key, time=time, columns=columns, operator_factory=SessionOperatorFactory(gap_ms, positions),
                     result_schema=out_schema, output=output, checkpoint=checkpoint, watermark_delay=delay_ms,
                     config={"backend": backend} if backend else None, partitions=partitions, mode=mode,
                     final=final or mode == "batch", trigger=trigger, operator_id="sessionize", max_ahead=max_ahead,
                     progress=progress)
