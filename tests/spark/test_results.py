"""Operator outputs to Arrow: the columns as given, and a clear error naming the row that does not fit."""

from __future__ import annotations

from typing import NamedTuple

import pyarrow as pa
import pytest

import numpy as np

from statekit.operators import Columns
from statekit.spark.results import ResultSchemaError, columns_table, output_table, parts_table

SCHEMA = pa.schema([("user_id", pa.string()), ("start", pa.int64()), ("sum", pa.float64())])


class Row(NamedTuple):
    user_id: str
    start: int
    sum: float | None


def test_tuples_lists_and_named_tuples_become_the_same_columns():
    rows = [("a", 1, 2.5), ["b", 2, None], Row("c", 3, 4.0)]
    table = output_table(rows, SCHEMA, "result")
    assert table.schema == SCHEMA
    assert table.to_pylist() == [dict(zip(SCHEMA.names, r)) for r in rows]
    assert output_table([], SCHEMA, "result").num_rows == 0


@pytest.mark.parametrize("bad,message", [
    (("x", 1), r"result row 1 \('x', 1\) does not fit the result schema .*3 values expected, got 2 values"),
    ({"user_id": "x"}, r"result row 1 .* 3 values expected, got a dict, not a tuple"),
    (("x", "not a number", 1.0), r"result column 'start' \(int64\) .*offending row 1: \('x', 'not a number', 1.0\)"),
])
def test_a_row_that_does_not_fit_is_named(bad, message):
    with pytest.raises(ResultSchemaError, match=message):
        output_table([("a", 1, 2.5), bad, ("c", 3, 4.0)], SCHEMA, "result")


def test_rows_and_columns_of_an_output_make_one_table_in_order():
    """An operator's drained parts (rows, then columns with numpy arrays, then rows) as one table."""
    parts = [[(("a", 1, 2.5), 10)], Columns([["b", "c"], np.array([2, 3]), [None, 4.0]], np.array([11, 12])),
             [(("d", 4, 1.0), 13)]]
    table = parts_table(parts, SCHEMA, "result")
    assert table.schema == SCHEMA
    assert [tuple(r.values()) for r in table.to_pylist()] == [("a", 1, 2.5), ("b", 2, None), ("c", 3, 4.0), ("d", 4, 1.0)]
    assert parts_table([], SCHEMA, "result").num_rows == 0


def test_columns_that_do_not_fit_are_named():
    with pytest.raises(ResultSchemaError, match=r"result columns do not fit .*3 columns expected, got 2"):
        columns_table([["a"], [1]], SCHEMA, "result")
    with pytest.raises(ResultSchemaError, match=r"result column 'start' \(int64\) .*offending row 1: \('b', 'x', 2.0\)"):
        columns_table([["a", "b"], [1, "x"], [1.0, 2.0]], SCHEMA, "result")
