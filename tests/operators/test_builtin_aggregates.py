"""The built-in aggregates' registry (``operators.aggregates.builtin_aggregates``): one class per aggregate is
all a new one takes (RowAggregate, ``--agg`` parsing and help, the Spark result type read it), and what each
declares."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pytest

from statekit.jobs.aggregates import agg_help, parse_aggs
from statekit.jobs.sessionize import accumulator_evolution
from statekit.operators import RowAggregate
from statekit.operators.aggregates import builtin_aggregates
from statekit.operators.aggregates.builtin_aggregates import AGGREGATES, ValueAggregate
from statekit.spark.errors import InputError
from statekit.spark.schemas import aggregate_type


class Product(ValueAggregate):
    """A new aggregate, declared in one class: the product of the non-null values."""

    NAME = "product"
    HELP = "product"
    NUMERIC = True

    def result_type(self, input_type: str | None) -> str | None:
        return "double"

    def _add(self, slot: Any, value: Any) -> Any:
        return slot * value

    def _reduced(self, values: np.ndarray, valid: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        return np.multiply.reduceat(np.where(valid, values, 1), starts) if len(values) else np.zeros(len(starts), values.dtype)

    def merge_packed(self, words: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> list[np.ndarray] | None:
        return None  # products overflow where sums do not: merged row by row


@pytest.fixture
def product(monkeypatch) -> Product:
    agg = Product()
    monkeypatch.setitem(AGGREGATES, agg.NAME, agg)
    return agg


def test_a_new_aggregate_is_one_class(product):
    aggs = parse_aggs(["product:x", "count"])
    assert [(a.kind, a.column, a.name) for a in aggs] == [("product", "x", "product_x"), ("count", None, "count")]
    assert "product:COL (product)" in agg_help()
    fn = RowAggregate([("product", 0), ("count", None)])
    rows = [(2,), (None,), (3,), (4,)]
    acc = fn.create_accumulator()
    for row in rows:
        acc = fn.add(row, acc)
    assert fn.get_result(acc) == (24, 4)
    columns: Sequence[list] = [[r[0] for r in rows]]
    order, starts = np.arange(4), np.array([0, 2])
    assert fn.accumulate(columns, order, starts) == [[2, 2], [12, 2]]
    packed = fn.accumulate_packed(columns, order, starts)
    assert fn.unpack(packed) == [[2, 2], [12, 2]]
    assert fn.merge(*fn.unpack(packed)) == [24, 4]
    from pyspark.sql.types import DoubleType, IntegerType, StringType
    assert aggregate_type("product", "x", IntegerType()) == DoubleType()
    with pytest.raises(InputError, match="product needs an integer or floating-point column"):
        aggregate_type("product", "x", StringType())


def test_the_help_names_every_aggregate():
    help_text = agg_help()
    for agg in AGGREGATES.values():
        assert f"{agg.spec()} ({agg.HELP})" in help_text
    assert "first:COL" in help_text and "last:COL" in help_text


def test_declared_spark_result_types():
    from pyspark.sql.types import (ByteType, DecimalType, DoubleType, FloatType, IntegerType, LongType, StringType,
                                   TimestampType)
    assert aggregate_type("count", None, None) == LongType()
    assert aggregate_type("sum", "v", ByteType()) == LongType()
    assert aggregate_type("sum", "v", FloatType()) == DoubleType()
    assert aggregate_type("avg", "v", IntegerType()) == DoubleType()
    for kind in ("min", "max", "first", "last"):
        assert aggregate_type(kind, "v", TimestampType()) == TimestampType()
        assert aggregate_type(kind, "v", DecimalType(10, 2)) == DecimalType(10, 2)
    for kind in ("sum", "avg"):
        with pytest.raises(InputError, match=f"column 'v' has type string, {kind} needs an integer"):
            aggregate_type(kind, "v", StringType())


def test_parse_refuses_what_no_aggregate_takes():
    for spec, problem in (("median:x", "median"), ("count:x", "count"), ("sum", "sum")):
        with pytest.raises(ValueError, match=f"--agg '{problem}.*expected count or KIND:COLUMN with KIND one of "
                                             f"sum, min, max, avg, first, last"):
            parse_aggs([spec])


def job(aggregates: list, columns: list[str], version: int = 1, earlier: dict | None = None) -> dict:
    """A job record as a checkpoint keeps it, of a sessionize run with these aggregates over ``columns``."""
    layout = RowAggregate(aggregates, None if earlier is None else ["n"] * len(aggregates), version,
                          earlier).state_layout()
    return {"operator": {"state": {"function": layout}}, "columns": [[c, "string"] for c in columns]}


def test_accumulator_evolution_reads_the_recorded_names():
    recorded = job([("count", None), ("sum", 2)], ["user", "ts", "value"])
    assert accumulator_evolution(recorded, ["count", "sum_value"], migrate=True) == (1, {})
    assert accumulator_evolution(recorded, ["count", "max_value"], migrate=False) == (1, {})
    assert accumulator_evolution(recorded, ["count", "max_value"], migrate=True) == (2, {1: ("count", "sum_value")})
    later = job([("count", None), ("max", 2)], ["user", "ts", "value"], 2, {1: ["count", "sum_value"]})
    assert accumulator_evolution(later, ["first_value"], migrate=True) == \
        (3, {1: ("count", "sum_value"), 2: ("count", "max_value")})
    assert accumulator_evolution(None, ["count"], migrate=True) == (1, {})


def test_a_damaged_recorded_layout_is_named_not_trusted():
    bad_column = job([("sum", 5)], ["user", "ts"])
    with pytest.raises(ValueError, match=r"name columns beyond the recorded row \['user', 'ts'\].*damaged"):
        accumulator_evolution(bad_column, ["sum_value"], migrate=True)
    for aggregates in ([["median", 1]], [["sum", "1"]], "sum", [["sum"]]):
        layout = {"class": "RowAggregate", "aggregates": aggregates}
        assert RowAggregate.from_layout(layout) is None
        assert RowAggregate.recorded(layout, ["a", "b"]) is None


def test_unknown_aggregates_are_refused_by_name():
    with pytest.raises(ValueError, match="no built-in aggregate 'median': one of sum, count, min, max, avg, first, last"):
        RowAggregate([("median", 0)])
    assert builtin_aggregates.aggregate_of_output("first_value").NAME == "first"
