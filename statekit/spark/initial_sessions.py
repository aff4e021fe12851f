"""A table of open sessions as a job's initial state (``statekit sessionize --initial-state``): read (parquet, csv,
json, or a Delta table's current files), its columns checked against the job's and converted (the key to the
input's key type, the window bounds to milliseconds, the aggregates' state columns to their types), and every
row checked in one Spark job before anything is written: a null key, a value that does not convert, a session
that ends before it starts or is shorter than the gap, or one that touches an earlier session of its key (the
session rules would have merged them) is refused, naming the file and the row.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterator

from ..operators import RowAggregate
from ..operators.aggregates.builtin_aggregates import AGGREGATES
from .errors import InputError
from .event_time import MILLIS, TimeSpec
from .files import data_files
from .input_files import local_as_absolute
from .input_files import FORMATS, input_format
from .records import TIME_BOUND
from .schemas import declared_type

PARTITION_COLUMN = "epoch"
"""A column sessionize's output adds when read as a directory (the epoch that closed each session): left out."""
_FILE = "_statekit_file"


@dataclass(frozen=True)
class StateColumn:
    """A column of the table: its ``name``, the Spark type the job reads it as, and whether it may be null."""

    name: str
    dtype: Any
    nullable: bool = True


@dataclass(frozen=True)
class SessionRestore:
    """Puts a task's rows of a table of open sessions (``--initial-state``) into the session operator: the key,
    ``window_start`` and ``window_end`` in milliseconds, and the ``state`` columns, each aggregate of ``aggs``'
    ``STATE_FIELDS`` in order, which make the accumulators (``RowAggregate.accumulators_of``)."""

    aggs: tuple[tuple[str, int | None], ...]
    state: tuple[str, ...]

    def __call__(self, operator: Any, table: Any) -> int:
        restored = 0
        for part in key_slices(table, RESTORE_ROWS):  # Python values of one slice at a time, whatever the size
            accumulators = RowAggregate(list(self.aggs)).accumulators_of(
                [part.column(c).to_pylist() for c in self.state], part.num_rows)
            restored += operator.restore_sessions(part.column(0).to_pylist(), part.column("window_start").to_pylist(),
                                                  part.column("window_end").to_pylist(), accumulators)
        return restored


RESTORE_ROWS = 100_000
"""About how many sessions a task puts into its operator at a time (a key's sessions go together)."""


def key_slices(table: Any, rows: int) -> Iterator[Any]:
    """``table`` sorted by its first column (the key) in slices of about ``rows`` rows, each key's rows in one
    slice (a table whose keys Arrow cannot sort: in one)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = table.num_rows
    if n <= rows:
        yield table
        return
    keys = table.column(0)
    try:
        table = table.take(pc.sort_indices(keys))
    except pa.ArrowNotImplementedError:
        yield table
        return
    keys = table.column(0)
    changes = np.flatnonzero(pc.not_equal(keys.slice(1), keys.slice(0, n - 1)).to_numpy(zero_copy_only=False)) + 1
    cuts = np.unique(changes[np.searchsorted(changes, np.arange(rows, n, rows)).clip(max=len(changes) - 1)]) \
        if len(changes) else np.array([], np.int64)
    for start, stop in zip([0, *cuts.tolist()], [*cuts.tolist(), n]):
        yield table.slice(start, stop - start)


def session_state_columns(input_schema: Any, key: str, aggs: list[tuple[str, str | None]], bounds: Any) -> list[StateColumn]:
    """The columns of a table of open sessions of a job: its key (of the input's type), ``window_start`` and
    ``window_end`` (of Spark type ``bounds``, as its results have them), then each aggregate's (``kind``,
    ``column``) state columns (``Aggregate.STATE_FIELDS``: its result, or for avg its accumulator)."""
    types = {f.name: f.dataType for f in input_schema.fields}
    found = [StateColumn(key, types[key], False), StateColumn("window_start", bounds, False),
             StateColumn("window_end", bounds, False)]
    for kind, column in aggs:
        aggregate, input_type = AGGREGATES[kind], types.get(column)
        given = None if input_type is None else input_type.simpleString()
        for suffix, name in zip(aggregate.STATE_FIELDS, aggregate.state_types(given)):
            found.append(StateColumn(aggregate.output_name(column) + suffix,
                                     declared_type(name, input_type, f"--agg {kind}:{column}"), aggregate.STATE_NULLABLE))
    return found


def read_table(spark: Any, path: str, fmt: str | None) -> Any:
    """The table at ``path`` as a batch DataFrame: a Delta table's current files (a directory holding
    ``_delta_log``, or ``fmt`` delta), else a file, a directory or a glob of files of one format (``fmt``, or
    their extension), csv read as text with a header."""
    path = local_as_absolute(path)
    if fmt == "delta" or (fmt is None and "://" not in path and os.path.isdir(os.path.join(path, "_delta_log"))):
        return spark.read.parquet(*_delta_files(path))
    if fmt is not None and fmt not in FORMATS:
        raise InputError(f"--initial-state-format must be one of {', '.join(FORMATS)} or delta, got {fmt!r}")
    fmt = input_format(data_files(spark, path), fmt, path)
    reader = spark.read.format(fmt)
    return (reader.option("header", "true") if fmt == "csv" else reader).load(path)


def _delta_files(path: str) -> list[str]:
    """The parquet files of a Delta table's current version; refused where its rows are not all in them as
    they are (partition columns, deletion vectors)."""
    try:
        import deltalake
    except ImportError:
        raise ImportError("a Delta initial state needs the delta extra: pip install 'statekit[delta]'") from None
    table = deltalake.DeltaTable(path)
    if table.metadata().partition_columns:
        raise InputError(f"--initial-state {path}: a partitioned Delta table ({table.metadata().partition_columns}); "
                         f"write the sessions to an unpartitioned one, or as parquet")
    if "deletionVectors" in (table.protocol().writer_features or []):
        raise InputError(f"--initial-state {path}: a Delta table with deletion vectors; write the sessions as parquet")
    files = table.file_uris()
    if not files:
        raise InputError(f"--initial-state {path}: the Delta table has no data files")
    return files


def initial_sessions(spark: Any, path: str, fmt: str | None, columns: list[StateColumn], gap_ms: int,
                     time_spec: TimeSpec) -> Any:
    """The open sessions of the table at ``path`` as a DataFrame of ``columns`` (the key, ``window_start`` and
    ``window_end`` in milliseconds, then the aggregates' state columns) and ``MILLIS``, each session's last record
    (its end minus the gap); ``InputError`` naming the column or the row when the table does not fit."""
    return checked_sessions(read_table(spark, path, fmt), f"--initial-state {path}", columns, gap_ms, time_spec)


def checked_sessions(table: Any, where: str, columns: list[StateColumn], gap_ms: int, time_spec: TimeSpec) -> Any:
    """``initial_sessions`` of a DataFrame ``table`` (``where`` names it in errors: a file or table the rows come
    from is named with each bad row)."""
    from pyspark.sql import functions as F

    names = [c.name for c in columns]
    missing = [n for n in names if n not in table.columns]
    extra = [n for n in table.columns if n not in names and n != PARTITION_COLUMN]
    if missing or extra:
        said = f"has no column {', '.join(map(repr, missing))}" if missing else f"has columns the job does not: {extra}"
        raise InputError(f"{where} {said}; a table of open sessions has the columns {names} (the key, "
                         f"the window bounds, each aggregate's result, and for avg its accumulator: avg_COL_sum, "
                         f"avg_COL_count)")
    table = table.withColumn(_FILE, F.input_file_name())
    key, start, end = columns[:3]
    converted = [_key(table, key, where)] + [_bounds(table, c, time_spec, where) for c in (start, end)]
    converted += [_value(table, c, where) for c in columns[3:]]
    checked = table.select(*[F.col(c.name).alias(f"_in{i}") for i, c in enumerate(columns)], _FILE,
                           *[v.alias(c.name) for v, c in zip(converted, columns)])
    _refuse_bad_rows(checked, columns, gap_ms, where)
    return checked.select(*names, (F.col(end.name) - F.lit(gap_ms)).alias(MILLIS))


def _type_error(path: str, column: StateColumn, actual: Any) -> InputError:
    return InputError(f"{path}: column {column.name!r} has type {actual.simpleString()}; the job "
                      f"reads it as {column.dtype.simpleString()} (or text that converts to it)")


def _key(table: Any, column: StateColumn, path: str) -> Any:
    """The key column as the input's key type: the same type, text, or integers for an integer or text key."""
    from pyspark.sql.types import IntegralType, StringType

    actual, c = table.schema[column.name].dataType, table[column.name]
    if actual == column.dtype:
        return c
    if isinstance(actual, StringType) or (isinstance(actual, IntegralType)
                                          and isinstance(column.dtype, (IntegralType, StringType))):
        return c.try_cast(column.dtype)
    raise _type_error(path, column, actual)


def _bounds(table: Any, column: StateColumn, time_spec: TimeSpec, path: str) -> Any:
    """A window bound in milliseconds: of the job's bounds type (epoch numbers in ``--time-unit``, timestamps), or
    text of one (ISO-8601 text without a zone in ``--time-zone``; TIMESTAMP_NTZ's wall-clock times in UTC)."""
    from pyspark.sql.types import IntegralType, LongType, StringType, TimestampNTZType

    actual = table.schema[column.name].dataType
    fits = isinstance(actual, IntegralType) if isinstance(column.dtype, LongType) else actual == column.dtype
    if not (fits or isinstance(actual, StringType)):
        raise _type_error(path, column, actual)
    spec = TimeSpec(time_spec.unit, None, "UTC" if isinstance(column.dtype, TimestampNTZType) else time_spec.zone)
    return spec.millis(column.name, actual)


def _value(table: Any, column: StateColumn, path: str) -> Any:
    """An aggregate's state column as its type: the same type, text, integers for numbers, or numbers for doubles."""
    from pyspark.sql.types import DoubleType, FloatType, IntegralType, NumericType, StringType

    actual, c = table.schema[column.name].dataType, table[column.name]
    if actual == column.dtype:
        return c
    wider = (isinstance(column.dtype, IntegralType) and isinstance(actual, IntegralType)) or \
        (isinstance(column.dtype, (DoubleType, FloatType)) and isinstance(actual, NumericType))
    if isinstance(actual, StringType) or wider:
        return c.try_cast(column.dtype)
    raise _type_error(path, column, actual)


def _refuse_bad_rows(checked: Any, columns: list[StateColumn], gap_ms: int, path: str) -> None:
    """Raise ``InputError`` naming the first row of ``checked`` (the given values ``_in<i>`` and the converted
    ones, by name) that is not an open session the job could have left, and how many such rows there are."""
    from pyspark.sql import Window, functions as F

    key, start, end = (F.col(c.name) for c in columns[:3])
    given = [F.col(f"_in{i}") for i in range(len(columns))]

    def shown(i: int) -> Any:
        return F.coalesce(given[i].cast("string"), F.lit("null"))

    reasons = [F.when(given[0].isNull(), F.lit("null key"))]
    for i, c in enumerate(columns):
        if not c.nullable or i < 3:
            reasons.append(F.when(given[i].isNull(), F.lit(f"{c.name} is null")))
        reasons.append(F.when(given[i].isNotNull() & F.col(c.name).isNull(),
                              F.concat(F.lit(f"{c.name} "), shown(i), F.lit(f" is not a {c.dtype.simpleString()}"
                                                                           + (" time" if 0 < i < 3 else "")))))
    reasons += [
        F.when(end < start, F.lit("the session ends before it starts")),
        F.when(end - start < gap_ms, F.lit(f"the session is shorter than the gap ({gap_ms} ms): its window_end is "
                                           f"its last record's time plus the gap")),
        F.when((start < -TIME_BOUND) | (end - gap_ms > TIME_BOUND), F.lit("a window bound is out of range")),
    ]
    earlier = Window.partitionBy(key).orderBy(start, end).rowsBetween(Window.unboundedPreceding, -1)
    reasons.append(F.when(F.max(end).over(earlier) >= start,
                          F.concat(F.lit("it touches or overlaps an earlier session of its key, which ends at "),
                                   F.max_by(shown(2), end).over(earlier),
                                   F.lit(": the session rules would have merged them"))))
    bad = checked.select(_FILE, *[shown(i).alias(f"_s{i}") for i in range(3)], F.coalesce(*reasons).alias("why"))
    bad = bad.filter(F.col("why").isNotNull())
    first = bad.first()
    if first is None:
        return
    count = bad.count()
    rows = f"{count:,} rows are" if count > 1 else "1 row is"
    names = [c.name for c in columns[:3]]
    raise InputError(f"{path}: {rows} not an open session, nothing was written; the first: "
                     f"{first[_FILE] + ': ' if first[_FILE] else ''}{names[0]}={first['_s0']}, {names[1]}={first['_s1']}, {names[2]}="
                     f"{first['_s2']}: {first['why']}")

