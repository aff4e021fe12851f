"""Spark types of the built-in jobs' results: the session rows of ``statekit sessionize``."""

from __future__ import annotations

from typing import Any

from .errors import InputError


def aggregate_type(kind: str, column: str | None, input_type: Any) -> Any:
    """Spark type of an aggregate's output column (``kind`` of ``column``, whose type is ``input_type``)."""
    from pyspark.sql.types import DoubleType, FloatType, IntegralType, LongType

    if kind == "count":
        return LongType()
    if kind in ("sum", "avg") and not isinstance(input_type, (IntegralType, FloatType, DoubleType)):
        raise InputError(f"--agg {kind}:{column}: column {column!r} has type {input_type.simpleString()}, "
                         f"{kind} needs an integer or floating-point column")
    if kind == "avg":
        return DoubleType()
    if kind == "sum":
        return LongType() if isinstance(input_type, IntegralType) else DoubleType()
    return input_type


def session_result_schema(input_schema: Any, key: str, aggs: list[tuple[str, str, str | None]]) -> Any:
    """``<key>, window_start, window_end`` and one column per aggregate, given as (name, kind, column)."""
    from pyspark.sql.types import LongType, StructField, StructType

    types = {f.name: f.dataType for f in input_schema.fields}
    fields = [StructField(key, types[key], False), StructField("window_start", LongType(), False),
              StructField("window_end", LongType(), False)]
    fields += [StructField(name, aggregate_type(kind, column, types.get(column)), kind != "count")
               for name, kind, column in aggs]
    return StructType(fields)
