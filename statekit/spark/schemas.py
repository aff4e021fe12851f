"""Spark types of the built-in jobs' results: the session rows of ``statekit sessionize``."""

from __future__ import annotations

import inspect
from typing import Any

from ..operators.aggregates.builtin_aggregates import AGGREGATES, NUMERIC_TYPES
from .errors import InputError


def aggregate_type(kind: str, column: str | None, input_type: Any) -> Any:
    """Spark type of an aggregate's output column (``kind`` of ``column``, whose type is ``input_type``), as the
    built-in aggregate declares it by name (``operators.aggregates.builtin_aggregates``)."""
    aggregate = AGGREGATES[kind]
    given = None if input_type is None else input_type.simpleString()
    if aggregate.NUMERIC and given not in NUMERIC_TYPES:
        raise InputError(f"--agg {kind}:{column}: column {column!r} has type {given}, "
                         f"{kind} needs an integer or floating-point column")
    return declared_type(aggregate.result_type(given), input_type, f"--agg {kind}:{column}")


def declared_type(name: str | None, input_type: Any, what: str) -> Any:
    """The Spark type an aggregate declares by ``name`` for a column of Spark type ``input_type``: that type
    itself, a long or a double (``what``: the aggregate, as errors name it)."""
    from pyspark.sql.types import DoubleType, LongType

    if input_type is not None and name == input_type.simpleString():
        return input_type
    declared = {t.simpleString(): t for t in (LongType(), DoubleType())}
    if name not in declared:
        raise InputError(f"{what}: the aggregate declares the type {name!r}, which statekit.spark.schemas does not "
                         f"make (one of {', '.join(declared)})")
    return declared[name]


def session_result_schema(input_schema: Any, key: str, aggs: list[tuple[str, str, str | None]],
                          bounds: Any = None) -> Any:
    """``<key>, window_start, window_end`` and one column per aggregate, given as (name, kind, column); the
    window bounds of Spark type ``bounds`` (``event_time.TimeSpec.bounds_type``; None: a long, milliseconds)."""
    from pyspark.sql.types import LongType, StructField, StructType

    types = {f.name: f.dataType for f in input_schema.fields}
    bounds = LongType() if bounds is None else bounds
    fields = [StructField(key, types[key], False), StructField("window_start", bounds, False),
              StructField("window_end", bounds, False)]
    fields += [StructField(name, aggregate_type(kind, column, types.get(column)), kind != "count")
               for name, kind, column in aggs]
    return StructType(fields)


def arrow_schema(schema: Any, timezone: str) -> Any:
    """``schema`` (Spark's) as the Arrow schema of Spark's batches, timestamps in the session's ``timezone``
    (pyspark before 4.2 has no ``timezone`` in ``to_arrow_schema`` and labels them UTC: same instants, another label)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    if "timezone" in inspect.signature(to_arrow_schema).parameters:
        return to_arrow_schema(schema, timezone=timezone)
    return pa.schema([f.with_type(_zoned(f.type, timezone)) for f in to_arrow_schema(schema)])


def _zoned(t: Any, timezone: str) -> Any:
    """Arrow type ``t`` with every zoned timestamp in it (nested ones too) in ``timezone``."""
    import pyarrow as pa

    if pa.types.is_timestamp(t) and t.tz is not None:
        return pa.timestamp(t.unit, tz=timezone)
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(_zoned(t.field(i).type, timezone)) for i in range(t.num_fields)])
    if pa.types.is_map(t):
        return pa.map_(t.key_field.with_type(_zoned(t.key_type, timezone)),
                       t.item_field.with_type(_zoned(t.item_type, timezone)))
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_zoned(t.value_type, timezone)))
    if pa.types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(_zoned(t.value_type, timezone)))
    return t
