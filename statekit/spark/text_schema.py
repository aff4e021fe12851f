"""Columns of text records (csv lines, JSON objects) typed from a sample, as Spark's readers type them from whole
files, and the reason a record gets when it does not fit them: read with ``columnNameOfCorruptRecord``, a value
that does not convert leaves its record's text beside the nulls, so the row goes to the invalid output with a
reason instead of counting as a null (``misfit_reason``)."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

from .errors import InputError
from .jvm import classic_jvm
from .runtime import is_connect

CORRUPT = "_corrupt_record"
"""The column Spark's csv and json readers put a record's text in when a value of it does not convert."""
SHOWN = 80
"""How much of a record's text its reason shows."""
_DATAFRAME_INPUT = tuple(int(p) for p in version("pyspark").split(".")[:2]) >= (4, 2)
"""Whether this pyspark's csv and json readers parse a DataFrame of text (classic and Connect); before 4.2 only a
classic session's RDD of text."""


def declared_schema(ddl: str, flag: str) -> Any:
    """``ddl`` (``'name TYPE, ...'``, given as ``flag``) as a Spark StructType; an ``InputError`` naming the flag
    when it is not a list of columns."""
    from pyspark.sql.types import DataType, StructType

    try:
        schema = DataType.fromDDL(ddl)
    except Exception as e:  # noqa: BLE001 -- Spark's parse error names the position
        raise InputError(f"{flag} {ddl!r} is not a list of columns: {e}") from None
    if not isinstance(schema, StructType):
        raise InputError(f"{flag} {ddl!r}: expected columns ('name TYPE, ...')")
    return schema


def sample_frame(spark: Any, lines: list[str], fmt: str, options: dict[str, str], schema: Any = None) -> Any | None:
    """``lines`` (csv lines, the header first, or JSON objects) read as ``fmt`` into a DataFrame: with ``schema``,
    or with columns inferred from them. None where this session cannot read text it is given (Spark Connect
    before pyspark 4.2): the caller reads its source for the schema instead."""
    reader = spark.read.options(**options)
    reader = reader.schema(schema) if schema is not None else reader.option("inferSchema", "true")
    read = reader.csv if fmt == "csv" else reader.json
    if _DATAFRAME_INPUT:
        import pyarrow as pa

        return read(spark.createDataFrame(pa.table({"value": pa.array(lines, pa.string())})))
    if is_connect(spark):
        return None
    return read(classic_jvm(spark).text_rdd(lines))


def misfit_reason(fmt: str, where: Any) -> Any:
    """The reason (a Spark Column) of a record that is malformed or has a value not of its column's type, null
    where its ``CORRUPT`` column is; ``where``: a string Column saying where the record is."""
    from pyspark.sql import functions as F

    return F.when(F.col(CORRUPT).isNotNull(), F.concat(
        F.lit(f"{fmt} record not readable as the columns' types (malformed, or a value of another type: declare "
              f"the types with --schema): "), where, F.lit(" '"),
        F.substring(F.col(CORRUPT), 1, SHOWN), F.lit("'")))
