"""Input files as Spark DataFrames: a file or a directory of csv, parquet or json, batch or streaming."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlparse

from .columns import check_columns
from .errors import InputError
from .event_time import TimeSpec
from .parquet_schema import parquet_spark_schema
from .runtime import is_connect

FORMATS = ("csv", "parquet", "json")
_OPTIONS = {"csv": {"header": "true"}, "parquet": {}, "json": {}}


def data_files(spark: Any, path: str) -> list[str]:
    """Data files of ``path`` (itself, or the files of a directory not starting with _ or .), sorted."""
    return _listed(spark, path)[0]


def _listed(spark: Any, path: str) -> tuple[list[str], bool]:
    """``data_files`` of ``path`` and whether ``path`` is a file: by Hadoop's FileSystem on a classic session;
    on Spark Connect (no JVM on the client) as Spark's file sources list it on the server (``binaryFile``,
    whose content is not read for its paths)."""
    if is_connect(spark):
        return _listed_on_server(spark, path)
    jvm = spark.sparkContext._jvm
    p = jvm.org.apache.hadoop.fs.Path(path)
    fs = p.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not fs.exists(p):
        raise InputError(f"input {path} does not exist")
    if fs.getFileStatus(p).isFile():
        return [fs.makeQualified(p).toString()], True
    found = sorted(s.getPath().toString() for s in fs.listStatus(p)
                   if s.isFile() and not s.getPath().getName().startswith(("_", ".")))
    if not found:
        raise InputError(f"input directory {path} has no data files")
    return found, False


def _listed_on_server(spark: Any, path: str) -> tuple[list[str], bool]:
    """``_listed`` through a Spark Connect session."""
    location = local_as_absolute(path)
    try:
        found = sorted(r[0] for r in spark.read.format("binaryFile").load(location).select("path").collect())
    except Exception as e:  # noqa: BLE001 -- pyspark's AnalysisException, told by its error class
        if "PATH_NOT_FOUND" in str(e):
            raise InputError(f"input {path} does not exist") from None
        raise
    if not found:
        raise InputError(f"input directory {path} has no data files")
    return found, len(found) == 1 and urlparse(found[0]).path.rstrip("/") == urlparse(location).path.rstrip("/")


def local_as_absolute(path: str) -> str:
    """A local ``path`` made absolute here: a Spark Connect server resolves a relative one in its own directory."""
    return path if "://" in path else os.path.abspath(path)


def read_files(spark: Any, path: str, *, fmt: str | None, time: str, required: list[tuple[str, str]],
               stream: bool, time_spec: TimeSpec = TimeSpec()) -> tuple[Any, Any, Any]:
    """The input as a (streaming) DataFrame, its schema and the kind of its times (``TimeSpec.kind``, the
    type window bounds come back in): schema from the first file (a local parquet one's from its footer,
    without a Spark job: ``parquet_schema``), the time column read as text for csv/json so that bad times
    reach the invalid-records output instead of becoming nulls.
    ``required``: (column, what it is for) pairs that must exist."""
    from pyspark.sql.types import StringType, StructField, StructType

    path = local_as_absolute(path)
    files, is_file = _listed(spark, path)
    fmt = fmt or files[0].rsplit(".", 1)[-1].lower()
    if fmt not in FORMATS:
        raise InputError(f"input {files[0]}: unknown format; pass --format {'|'.join(FORMATS)}")
    options = dict(_OPTIONS[fmt])
    infer = {"inferSchema": "true"} if fmt == "csv" else {}
    footer = parquet_spark_schema(files[0]) if fmt == "parquet" and not is_connect(spark) else None
    first = None if footer else spark.read.format(fmt).options(**options, **infer).load(files[0])
    schema = footer or first.schema
    check_columns(files[0], schema.fieldNames(), required)
    kind = schema[time].dataType
    if fmt != "parquet":
        kind = time_spec.kind(first, time, kind)
        schema = StructType([StructField(f.name, StringType(), True) if f.name == time else f for f in schema.fields])
    if not stream:
        return spark.read.format(fmt).options(**options).schema(schema).load(path), schema, kind
    reader = spark.readStream.format(fmt).options(**options).schema(schema).option("maxFilesPerTrigger", 1)
    if is_file:  # a file source watches a directory: watch the file's, for this name only
        directory, _, name = files[0].rpartition("/")
        return reader.option("pathGlobFilter", name).load(directory), schema, kind
    return reader.load(path), schema, kind

