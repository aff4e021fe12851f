"""Operator outputs to Arrow: the columns as given, and a clear error naming the row that does not fit."""

from __future__ import annotations

from typing import NamedTuple

import pyarrow as pa
import pytest

from statekit.spark.results import ResultSchemaError, output_table

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
