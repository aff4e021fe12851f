"""Pre-flight of ``statekit sessionize``: the mistakes a run would otherwise meet only after Spark started
(a bad flag or duration, no Java, a missing input, files of more than one kind, a stream's files whose
modification times are not in name order, a wrong column, a time column of an unusable type, someone else's
files in the output directory) found before the JVM starts, from the first input file's schema read with
pyarrow, with the messages the run itself gives. Locations given as URIs (``s3://...``) are left to the run, and so
is the input of a run on a Spark Connect server (``sc://``: it lists the input on its own side, and needs no Java here)."""

from __future__ import annotations

import glob
import os
from contextlib import contextmanager
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from ..durations import to_millis
from ..spark.settings import ahead_limit_ms, check_duration_settings
from ..spark.columns import check_columns
from ..spark.errors import InputError
from ..spark.event_time import NO_DATE, PATTERNS, UNIT_NAMES, TimeSpec, apparent_unit
from ..spark.file_order import check_file_order
from ..spark.input_files import (FORMATS, input_format, is_data_file, local_as_absolute, missing, nothing_found,
                                 refuse_written_inside, split_glob)
from ..spark.java import find_java
from ..spark.initial_state import refuse_started
from ..spark.kafka import KafkaInput
from ..spark.output_dir import check_output_is_own
from ..spark.spark_checkpoint import BELOW_CHECKPOINT, files_read
from .aggregates import parse_aggs
from .checkpoint_in_use import job_checkpoint, refuse_checkpoint_in_use

_SAMPLE_BYTES = 1 << 20
"""How much of a json file is read for its schema (whole lines): the first rows name the columns."""
_SAMPLE_ROWS = 1000
"""How many of the first file's time values pre-flight looks at."""


def session_gap_ms(gap: int | str) -> int:
    """``--gap`` in milliseconds, refused unless positive."""
    gap_ms = to_millis(gap, "--gap")
    if gap_ms <= 0:
        raise ValueError(f"--gap must be positive, got {gap!r}")
    return gap_ms


def check_flags(*, gap: int | str, watermark_delay: int | str, max_ahead: str | None, partitions: int | None,
                aggs: Iterable[str], conf: Mapping[str, str] | None = None) -> None:
    """The durations, counts and aggregates of a sessionize run, each refused with the flag it came from, and the
    durations among its ``--conf`` Spark settings (``spark.statekit.*``)."""
    session_gap_ms(gap)
    if to_millis(watermark_delay, "--watermark-delay") < 0:
        raise ValueError(f"--watermark-delay must be >= 0, got {watermark_delay!r}")
    if max_ahead is not None and max_ahead.strip().lower() != "default":
        ahead_limit_ms(max_ahead, "--max-ahead")
    if partitions is not None and partitions < 1:
        raise ValueError(f"--partitions must be at least 1, got {partitions}")
    parse_aggs(aggs)
    check_duration_settings(conf or {})


def local(path: str) -> bool:
    """Whether ``path`` is on this machine's filesystem (no URI scheme): only those are checked here."""
    return "://" not in path


def data_files(path: str) -> list[Path]:
    """The input's data files as Spark's reader takes them (``spark.files.data_files``): the file itself, or
    the files of the directory whose names do not start with ``_`` or ``.`` (and match a glob in the last
    part of ``path``, as ``fnmatch`` reads it), in name order."""
    directory, pattern = split_glob(path)
    p = Path(directory)
    if not p.exists():
        raise missing(path, directory, pattern)
    if p.is_file() and pattern is None:
        return [p]
    if p.is_file():
        raise InputError(f"input {path}: {directory} is a file, not a directory")
    found = sorted(f for f in p.iterdir()
                   if f.is_file() and is_data_file(f.name) and (pattern is None or fnmatchcase(f.name, pattern)))
    if not found:
        raise nothing_found(path, pattern)
    return found


def json_head(path: Path) -> Any:
    """The first rows of a json file (one object a line) as a pyarrow table: its whole lines in the first
    ``_SAMPLE_BYTES``."""
    import pyarrow as pa
    import pyarrow.json as pjson

    with open(path, "rb") as f:
        head = f.read(_SAMPLE_BYTES)
    lines = head if len(head) < _SAMPLE_BYTES else head[:head.rfind(b"\n") + 1]
    return pjson.read_json(pa.BufferReader(lines))


@contextmanager
def read_as(path: Path, fmt: str) -> Iterator[None]:
    """Reading ``path`` as ``fmt``: a file that is not one is an ``InputError`` naming it and the formats."""
    import pyarrow as pa

    try:
        yield
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"input {path}: cannot be read as {fmt}: {e}; pass --format {'|'.join(FORMATS)} if it "
                         f"is another") from None


def file_schema(path: Path, fmt: str) -> Any:
    """The pyarrow schema of a csv (header row), json (one object a line) or parquet file, from its first rows."""
    with read_as(path, fmt):
        if fmt == "parquet":
            import pyarrow.parquet as pq

            return pq.read_schema(path)
        if fmt == "csv":
            import pyarrow.csv as pcsv

            with pcsv.open_csv(path) as reader:
                return reader.schema
        return json_head(path).schema


def usable_time_type(arrow_type: Any) -> bool:
    """Whether a time column of ``arrow_type`` can hold event times: integers, floating numbers and decimals
    (epoch values), text, timestamps and dates (a column with no value in the rows read: not known yet); times
    of day too, as text in a csv file would be (their values are then refused: they have no date)."""
    import pyarrow.types as t

    return any(check(arrow_type) for check in (t.is_integer, t.is_floating, t.is_decimal, t.is_string,
                                                t.is_large_string, t.is_timestamp, t.is_date, t.is_time, t.is_null))


def check_input(path: str, *, fmt: str | None, time: str, required: list[tuple[str, str]],
                read: list[str] | None = None, time_spec: TimeSpec = TimeSpec(), unit_given: bool = True) -> None:
    """The input exists, holds data files of one known format, and its first file has the ``required`` columns,
    the time column of a usable type, with times among its first values. ``read``: for a stream, the files its
    Spark checkpoint read already; the others must have modification times in name order (``file_order``).
    None: no order to check."""
    files = data_files(path)
    first = files[0]
    fmt = input_format([str(f) for f in files], fmt, path)
    if read is not None:
        check_file_order([(os.path.abspath(f), f.stat().st_mtime_ns // 1_000_000) for f in files], path, read=read)
    schema = file_schema(first, fmt)
    check_columns(str(first), schema.names, required)
    time_type = schema.field(time).type
    if not usable_time_type(time_type):
        raise InputError(f"input {first}: time column {time!r} has type {time_type}: it must hold event times "
                         f"(epoch numbers, text, a timestamp or a date)")
    check_time_values(first, fmt, time, time_spec, unit_given)


def first_values(path: Path, fmt: str, column: str) -> list[Any]:
    """The first values of ``column`` of a csv (as text), json or parquet file (its first block or row batch), as
    pyarrow reads them."""
    import pyarrow as pa

    if fmt == "parquet":
        import pyarrow.parquet as pq

        batch = next(pq.ParquetFile(path).iter_batches(batch_size=_SAMPLE_ROWS, columns=[column]), None)
        return [] if batch is None else batch.column(0).to_pylist()
    if fmt == "csv":
        import pyarrow.csv as pcsv

        as_text = pcsv.ConvertOptions(include_columns=[column], column_types={column: pa.string()})  # as Spark reads it
        with pcsv.open_csv(path, convert_options=as_text) as reader:
            batch = next(iter(reader), None)
        return [] if batch is None else batch.column(0).to_pylist()[:_SAMPLE_ROWS]
    return json_head(path).column(column).to_pylist()[:_SAMPLE_ROWS]


def check_time_values(path: Path, fmt: str, time: str, time_spec: TimeSpec, unit_given: bool = True) -> None:
    """Refuse a time column most of whose first values give no event time under ``time_spec`` (most rows of the
    run would go to ``_invalid``: a wrong ``--time-unit`` or ``--time-format``, or times without a date), naming
    the file, the column, a value and the flag or fix that helps. Unless ``unit_given`` (``--time-unit`` passed),
    also epoch numbers that are all of another unit than the default's (``apparent_unit``): seconds read as
    milliseconds would make valid sessions in January 1970."""
    with read_as(path, fmt):
        values = [v for v in first_values(path, fmt, time) if v is not None]
    apparent = None if unit_given or time_spec.format is not None else apparent_unit(values)
    if apparent is not None and apparent != time_spec.unit:
        shown = next(v for v in values if apparent_unit([v]) == apparent)
        raise InputError(f"input {path}: time column {time!r}: its first values are epoch numbers that look like "
                         f"{UNIT_NAMES[apparent]} (e.g. {shown}; read as {UNIT_NAMES[time_spec.unit]}, the default, "
                         f"they would be times in {'1970' if apparent == 's' else 'a far future'}); pass "
                         f"--time-unit {apparent}, or --time-unit {time_spec.unit} to read them as "
                         f"{UNIT_NAMES[time_spec.unit]} after all")
    bad = [v for v in values if not time_spec.may_convert(v)]
    if len(bad) * 2 <= len(values):
        return
    why = time_spec.reason(bad[0])
    if why.startswith(NO_DATE):
        fix = "write the times with their date (e.g. 2026-03-01T12:00:00)"
    elif "--time-unit s" in why:
        fix = "pass --time-unit s for epoch seconds"
    else:
        fix = f"pass --time-format PATTERN for text written another way (see {PATTERNS})"
    raise InputError(f"input {path}: time column {time!r}: {len(bad):,} of its first {len(values):,} values are "
                     f"not times ({why}); {fix}")


def preflight_sessionize(*, input: str | None, output: str, key: str, time: str, aggs: Iterable[str], gap: int | str,
                         watermark_delay: int | str, fmt: str | None, max_ahead: str | None, partitions: int | None,
                         checkpoint: str | None, output_format: str, connect_server: bool = False,
                         mode: str = "stream", spark_checkpoint: str | None = None,
                         conf: Mapping[str, str] | None = None, time_spec: TimeSpec = TimeSpec(),
                         unit_given: bool = True, initial_state: str | None = None,
                         kafka: KafkaInput | None = None) -> None:
    """Everything of a ``sessionize`` run that can be checked without Spark (see the module doc); raises
    ``ValueError`` (``InputError`` for the input and output) naming the flag, file or column at fault.
    ``connect_server``: the run's Spark is a Spark Connect server reached at ``sc://``; ``spark_checkpoint``:
    the one given (flag or Spark conf), whose file source a resumed stream read its first files by; ``conf``:
    its ``--conf`` Spark settings; ``time_spec``: how its times are read (``--time-unit``, ``--time-format``,
    ``--time-zone``); ``unit_given``: ``--time-unit`` was passed (else epoch numbers of another unit are refused);
    ``initial_state``: the table of open sessions a new checkpoint starts from (it must exist, the checkpoint be new);
    ``kafka``: the run reads this topic instead of ``input`` (its flags checked here, the topic by the run)."""
    aggs = list(aggs)
    check_flags(gap=gap, watermark_delay=watermark_delay, max_ahead=max_ahead, partitions=partitions, aggs=aggs,
                conf=conf)
    if not connect_server:
        find_java()  # what Spark needs first
    files = output.rstrip("/") + "/_statekit" if output_format == "delta" else output
    if local(in_use := job_checkpoint(files, checkpoint)):  # a second run is refused at once, before its input is read
        refuse_checkpoint_in_use(in_use)
        if initial_state is not None:
            refuse_started(in_use)
    if initial_state is not None and local(initial_state) and not glob.has_magic(initial_state) \
            and not os.path.exists(initial_state):
        raise InputError(f"--initial-state {initial_state}: no such file or directory")
    if kafka is not None:
        kafka.check()
    elif local(input) and not connect_server:
        required = [(key, "key"), (time, "time")]
        required += [(a.column, f"--agg {a.kind}") for a in parse_aggs(aggs) if a.column]
        spark_dir = spark_checkpoint or f"{job_checkpoint(files, checkpoint).rstrip('/')}/{BELOW_CHECKPOINT}"
        read = files_read(spark_dir) if mode == "stream" and local(spark_dir) else None  # else the run checks it
        check_input(input, fmt=fmt, time=time, required=required, read=read, time_spec=time_spec,
                    unit_given=unit_given)
        if os.path.isdir(input):
            refuse_written_inside(os.path.abspath(input), [("--output", local_as_absolute(files)), (
                "--checkpoint", local_as_absolute(job_checkpoint(files, checkpoint)))])
    if local(files):
        check_output_is_own(files, checkpoint)
