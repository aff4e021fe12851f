"""Operator outputs as Arrow tables, checked against their schema before anything is staged.

Every output row must be a tuple (or list) with one value per schema column, each convertible to
its column's type: a row of the wrong arity or a value of the wrong type fails the epoch with an
error naming the schema, the column and the offending row, so nothing of the epoch is committed.
"""

from __future__ import annotations

from typing import Any

_SHOWN = 200
_ROW_TYPES = {tuple, list}


class ResultSchemaError(TypeError):
    """An operator output that does not fit its schema (arity or type)."""


def _short(row: Any) -> str:
    text = repr(row)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def _schema_text(schema: Any) -> str:
    return ", ".join(f"{f.name} {f.type}" for f in schema)


def output_table(rows: list[Any], schema: Any, what: str) -> Any:
    """``rows`` as a table of ``schema`` (a pyarrow schema); ``what`` names the output in errors."""
    import pyarrow as pa

    if not rows:
        return schema.empty_table()
    width = len(schema)
    if not set(map(type, rows)) <= _ROW_TYPES or set(map(len, rows)) != {width}:  # the rare case: find the row
        for i, row in enumerate(rows):
            if not isinstance(row, (tuple, list)) or len(row) != width:
                got = f"{len(row)} values" if isinstance(row, (tuple, list)) else f"a {type(row).__name__}, not a tuple"
                raise ResultSchemaError(f"{what} row {i} {_short(row)} does not fit the {what} schema "
                                        f"({_schema_text(schema)}): {width} values expected, got {got}")
    columns = list(zip(*rows))  # transposed in C, not row by row
    return pa.Table.from_arrays([_array(schema, field, values, rows.__getitem__, what)
                                 for field, values in zip(schema, columns)], schema=schema)


def columns_table(columns: list[Any], schema: Any, what: str) -> Any:
    """Rows given as columns (lists or arrays, one per schema field) as a table of ``schema``, with
    ``output_table``'s checks and errors; numpy columns convert without a Python object per value."""
    import pyarrow as pa

    width = len(schema)
    if len(columns) != width:
        raise ResultSchemaError(f"{what} columns do not fit the {what} schema ({_schema_text(schema)}): "
                                f"{width} columns expected, got {len(columns)}")
    row_of = lambda i: tuple(c[i] for c in columns)  # noqa: E731 (only for an error's message)
    return pa.Table.from_arrays([_array(schema, field, values, row_of, what) for field, values in zip(schema, columns)],
                                schema=schema)


def parts_table(parts: list[Any], schema: Any, what: str) -> Any:
    """An ``Output``'s drained parts (``Output.drain_parts``) as one table: lists of ``(row, timestamp)``
    through ``output_table``, ``Columns`` through ``columns_table``."""
    import pyarrow as pa

    from ..operators import Columns

    tables = [columns_table(p.columns, schema, what) if isinstance(p, Columns) else output_table([v for v, _ in p], schema, what)
              for p in parts]
    return pa.concat_tables(tables) if tables else schema.empty_table()


def _array(schema: Any, field: Any, values: Any, row_of: Any, what: str) -> Any:
    """One column as an Arrow array of its field's type; a value that does not convert is an error
    naming the schema, the column and the row."""
    import pyarrow as pa

    try:
        return pa.array(values, field.type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
        bad = _first_bad(values, field.type)
        raise ResultSchemaError(f"{what} column {field.name!r} ({field.type}) of schema ({_schema_text(schema)}): "
                                f"{e}; offending row {bad}: {_short(row_of(bad)) if bad is not None else '?'}") from None


def _first_bad(values: list[Any], arrow_type: Any) -> int | None:
    """Index of the first value that does not convert to ``arrow_type`` on its own."""
    import pyarrow as pa

    for i, v in enumerate(values):
        try:
            pa.array([v], arrow_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            return i
    return None
