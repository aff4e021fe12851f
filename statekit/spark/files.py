"""Input files as Spark DataFrames: a file, a directory or a glob of a directory's files (``input_files``) of csv,
parquet or json, batch or streaming (a stream's files checked to be in name order first: ``file_order``)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, partial
from typing import Any, Sequence
from urllib.parse import urlparse

from .columns import check_columns
from .errors import InputError
from .event_time import TimeSpec
from .file_order import check_file_order
from .jvm import classic_jvm
from .input_files import (input_format, is_data_file, local_as_absolute, missing, name_glob, nothing_found,
                          refuse_written_inside, split_glob)
from .local_files import first_lines
from .parquet_schema import parquet_spark_schema
from .plain_csv import plain_csv_schema
from .runtime import is_connect
from .spark_checkpoint import files_read
from .text_schema import CORRUPT, misfit_reason, sample_frame

_OPTIONS = {"csv": {"header": "true", "enforceSchema": "false"}, "parquet": {}, "json": {}}


@dataclass(frozen=True)
class Listing:
    """The input's data files: (path as the filesystem lists it, modification time in ms) in name order;
    ``location`` and ``pattern``: what Spark's readers load (a file or directory) and the name glob they
    filter its files by (``pathGlobFilter``; None: every data file)."""

    files: list[tuple[str, int]]
    location: str
    pattern: str | None
    is_file: bool


def data_files(spark: Any, path: str) -> list[str]:
    """Data files of ``path`` (itself, or the files of a directory not starting with _ or ., those a glob in
    its last part matches), sorted."""
    return [f for f, _ in _listed(spark, path).files]


def _listed(spark: Any, path: str) -> Listing:
    """The ``Listing`` of ``path``: by Hadoop's FileSystem on a classic session; on Spark Connect (no JVM on
    the client) as Spark's file sources list it on the server (``binaryFile``, whose content is not read for
    its paths and times)."""
    if is_connect(spark):
        return _listed_on_server(spark, path)
    location, pattern = split_glob(path)
    hadoop, p, fs = classic_jvm(spark).hadoop_path(location)
    if not fs.exists(p):
        raise missing(path, location, pattern)
    status = fs.getFileStatus(p)
    if status.isFile() and pattern is None:
        return Listing([(fs.makeQualified(p).toString(), status.getModificationTime())], location, None, True)
    if status.isFile():
        raise InputError(f"input {path}: {location} is a file, not a directory")
    try:
        listed = fs.listStatus(p, hadoop.GlobFilter(pattern)) if pattern else fs.listStatus(p)
    except Exception as e:  # noqa: BLE001 -- py4j wraps Hadoop's IOException of a malformed glob
        raise InputError(f"input {path}: {pattern!r} is not a glob Hadoop takes: {e}") from None
    found = sorted((s.getPath().toString(), s.getModificationTime()) for s in listed
                   if s.isFile() and is_data_file(s.getPath().getName()))
    return _checked(Listing(found, location, pattern, False), path)


def _listed_on_server(spark: Any, path: str) -> Listing:
    """``_listed`` through a Spark Connect session."""
    location, pattern = split_glob(local_as_absolute(path))
    reader = spark.read.format("binaryFile")
    if pattern is not None:
        reader = reader.option("pathGlobFilter", pattern)
    try:
        rows = reader.load(location).selectExpr("path", "unix_millis(modificationTime)").collect()
    except Exception as e:  # noqa: BLE001 -- pyspark's AnalysisException, told by its error class
        if "PATH_NOT_FOUND" in str(e):
            raise missing(path, location, pattern) from None
        raise
    found = sorted((r[0], r[1]) for r in rows)
    is_file = (pattern is None and len(found) == 1
               and urlparse(found[0][0]).path.rstrip("/") == urlparse(location).path.rstrip("/"))
    return _checked(Listing(found, location, pattern, is_file), path)


def _checked(listing: Listing, path: str) -> Listing:
    """``listing``, refused when it holds no data file."""
    if not listing.files:
        raise nothing_found(path, listing.pattern)
    return listing


SAMPLE_LINES = 20_000
"""How many of the first file's lines (the header included) csv and json columns are typed from."""
REASON = "_file_reason"
"""The column of a csv or json record's reason to be invalid (null: its values fit), for ``run_keyed(reason=...)``."""


@dataclass(frozen=True)
class FileInput:
    """The input files as Spark reads them: ``df`` (a stream or a batch), its columns' ``schema``, the ``kind``
    of its times (``TimeSpec.kind``: the type window bounds come back in) and ``reason``: the column of
    ``df`` giving a record's reason to be invalid (None: parquet, whose values are typed in the files)."""

    df: Any
    schema: Any
    kind: Any
    reason: str | None


def read_files(spark: Any, path: str, *, fmt: str | None, time: str, required: list[tuple[str, str]],
               stream: bool, time_spec: TimeSpec = TimeSpec(), spark_checkpoint: str | None = None,
               schema: Any = None, written: Sequence[tuple[str, str | None]] = ()) -> FileInput:
    """The input as a ``FileInput``. Parquet's columns come from the first file (a local one's footer, without a
    Spark job: ``parquet_schema``); csv and json columns are ``schema`` (a StructType) or typed from the first
    ``SAMPLE_LINES`` lines of the first file, never from a pass over all of it (a plain csv sample by the driver:
    ``plain_csv``). Their time column is read as
    text, so that a bad time reaches the invalid output instead of becoming a null, and so is any record with a
    value that does not fit its column's type (``text_schema.misfit_reason``, naming its file); a csv file
    whose header does not name the columns in their order fails the run. A stream's files not read yet must have
    modification times in name order (``file_order``); ``spark_checkpoint``: the Spark checkpoint of the stream a
    run resumes, whose file source lists the files read already. ``required``: (column, what it is for) pairs
    that must exist; ``written``: (flag, location) of what the run writes, refused inside an input directory."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    given, path = path, local_as_absolute(path)
    listing = _listed(spark, path)
    files = [f for f, _ in listing.files]
    fmt = input_format(files, fmt, given)
    if stream:
        check_file_order(listing.files, given, read=files_read(spark_checkpoint) if spark_checkpoint else ())
    if schema is not None and fmt == "parquet":
        raise InputError(f"input {given}: parquet files carry their columns' types; --schema is for csv and json")
    options = dict(_OPTIONS[fmt])
    if fmt == "parquet":
        footer = None if is_connect(spark) else parquet_spark_schema(files[0])
        schema = footer or spark.read.format(fmt).load(files[0]).schema
    else:
        lines = _first_lines(spark, files[0])
        plain = plain_csv_schema(lines) if fmt == "csv" and schema is None else None  # no Spark job to type them
        sample = cache(partial(_sample, spark, files[0], lines, fmt, options, schema if plain is None else plain))
        schema = plain if plain is not None else sample().schema
    check_columns(files[0], schema.fieldNames(), required)
    kind = schema[time].dataType
    reason = None
    if fmt != "parquet":
        kind = time_spec.kind(sample, time, kind)
        schema = StructType([StructField(f.name, StringType(), True) if f.name == time else f for f in schema.fields])
        options["columnNameOfCorruptRecord"] = CORRUPT
        reason = REASON
    location, pattern = listing.location, listing.pattern
    if pattern is None and not listing.is_file:
        refuse_written_inside(location, [(flag, local_as_absolute(w)) for flag, w in written if w is not None])
    if listing.is_file and stream:  # a file source lists a directory or a glob: a glob of this file alone
        location, _, name = files[0].rpartition("/")
        pattern = name_glob(name)
    reader = spark.readStream.option("maxFilesPerTrigger", 1) if stream else spark.read
    read_schema = schema if reason is None else StructType([*schema.fields, StructField(CORRUPT, StringType(), True)])
    reader = reader.format(fmt).options(**options).schema(read_schema)
    if pattern is not None:  # the glob lists its directory's level only (not an output below it)
        reader = reader.option("basePath", location)
        location = f"{location.rstrip('/')}/{pattern}"
    df = reader.load(location)
    if reason is not None:
        df = df.withColumn(REASON, misfit_reason(fmt, F.col("_metadata.file_path"))).drop(CORRUPT)
    return FileInput(df, schema, kind, reason)


def _first_lines(spark: Any, file: str) -> list[str]:
    """The first ``SAMPLE_LINES`` lines of ``file``: a classic driver reads a local file's lines itself
    (``local_files.first_lines``: no Spark job before the run's), else Spark's text source."""
    lines = None if is_connect(spark) else first_lines(file, SAMPLE_LINES)
    return lines if lines is not None else [row[0] for row in spark.read.text(file).limit(SAMPLE_LINES).collect()]


def _sample(spark: Any, file: str, lines: list[str], fmt: str, options: dict[str, str], schema: Any) -> Any:
    """``lines``, the first of csv or json ``file``, as a DataFrame, of ``schema`` or of the columns they show (where
    the session cannot read text it is given, the whole file)."""
    sample = sample_frame(spark, lines, fmt, options, schema)
    if sample is not None:
        return sample
    reader = spark.read.format(fmt).options(**options)
    return (reader.schema(schema) if schema is not None else reader.option("inferSchema", "true")).load(file)
