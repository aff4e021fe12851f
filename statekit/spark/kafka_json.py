"""A topic's JSON messages decoded with Arrow in a Python stage, the fast way to their columns: a batch of messages
is parsed at once (``pyarrow.json``) where each is one object on one line, of string and integer fields. A message
Arrow refuses, and every message of a value schema with other types, is left to Spark's ``from_json`` (its row's
``DECODED`` is false): what Arrow accepts it reads as ``from_json`` does, so the columns and reasons equal those
Spark alone gives (tests/spark/test_kafka_json.py checks both on the same messages)."""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

DECODED = "_kafka_decoded"
"""The column telling whether Arrow decoded the row's message (false: Spark parses it)."""
ARROW_TYPES = {"string": "string", "bigint": "int64", "int": "int32"}
"""The value types Arrow decodes exactly as Spark does (Spark's name: Arrow's); any other type leaves the topic to
Spark (a double's text may round apart, a timestamp has Spark's own formats)."""
MAX_READS = 64
"""How many times Arrow may read a batch's messages (each refused run halved) before the rest is left to Spark."""
_BREAKS = ("\n", "\r")
"""A message holding a line break is left to Spark without trying Arrow, which reads a line per row."""


def arrow_fields(schema: Any) -> list[tuple[str, str]] | None:
    """The value schema's (name, Arrow type) pairs; None when a field's type is not one Arrow decodes as Spark does."""
    fields = [(f.name, ARROW_TYPES.get(f.dataType.simpleString())) for f in schema.fields]
    return None if any(t is None for _, t in fields) else fields


def decoder(fields: list[tuple[str, str]],
            value: str) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function: each batch with its messages (column ``value``) decoded into ``fields`` and
    ``DECODED`` added; a message kept only where Arrow did not decode it (Spark's parse reads it there)."""
    return partial(_decode_batches, tuple(fields), value)


def _decode_batches(fields: tuple[tuple[str, str], ...], value: str,
                    batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    schema = pa.schema([(name, pa.type_for_alias(t)) for name, t in fields])
    for batch in batches:
        yield decode(batch, schema, value)


def decode(batch: pa.RecordBatch, schema: pa.Schema, value: str) -> pa.RecordBatch:
    """``batch`` with the columns of ``schema`` read from its messages (column ``value``; null where not decoded),
    then ``DECODED``, then its own columns, the message nulled where decoded."""
    values = batch.column(value)
    n = len(values)
    safe = pc.fill_null(pc.starts_with(values, "{"), False)
    for text in _BREAKS:
        safe = pc.and_(safe, pc.invert(pc.fill_null(pc.match_substring(values, text), True)))
    candidates = np.flatnonzero(safe.to_numpy(zero_copy_only=False))
    pieces = _runs(values.take(pa.array(candidates, pa.int64())), schema)
    take = np.full(n, -1, np.int64)
    decoded = np.zeros(n, bool)
    start = 0
    for lo, hi, _ in pieces:  # row positions in the pieces' tables, concatenated in this order
        rows = candidates[lo:hi]
        take[rows] = np.arange(start, start + hi - lo)
        decoded[rows] = True
        start += hi - lo
    parsed = pa.concat_tables([t for _, _, t in pieces]) if pieces else schema.empty_table()
    index = pa.array(take, mask=~decoded)
    columns = [parsed.column(name).take(index).combine_chunks() for name in schema.names]
    mask = pa.array(decoded)
    rest = [pc.if_else(mask, pa.nulls(n, values.type), values) if name == value else batch.column(name)
            for name in batch.schema.names]
    return pa.RecordBatch.from_arrays([*columns, mask, *rest], names=[*schema.names, DECODED, *batch.schema.names])


def _runs(values: pa.Array, schema: pa.Schema) -> list[tuple[int, int, pa.Table]]:
    """(lo, hi, table) for the runs of ``values`` Arrow decodes as one row per message: a run it refuses is halved
    down to the single messages it refuses, within ``MAX_READS`` reads (what is left then is Spark's to parse, so a
    batch of many refused messages costs a bounded number of reads)."""
    out: list[tuple[int, int, pa.Table]] = []
    todo, reads = [(0, len(values))] if len(values) else [], 0
    while todo and reads < MAX_READS:
        lo, hi = todo.pop()
        reads += 1
        table = _read(values.slice(lo, hi - lo), schema)
        if table is not None:
            out.append((lo, hi, table))
        elif hi - lo > 1:
            mid = (lo + hi) // 2
            todo += [(mid, hi), (lo, mid)]
    return out


def _read(values: pa.Array, schema: pa.Schema) -> pa.Table | None:
    """``values`` decoded by Arrow, a row per message; None when Arrow refuses one of them."""
    import pyarrow.json as pj

    text = b"\n".join(values.to_pylist())
    try:
        text.decode("utf-8")  # Arrow keeps a string's invalid bytes, where Spark's parse replaces them
        table = pj.read_json(pa.BufferReader(text),
                             read_options=pj.ReadOptions(use_threads=False, block_size=len(text) + 1),
                             parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"))
    except ValueError:  # Arrow refusing a message (ArrowInvalid), or bytes that are not UTF-8
        return None
    # each message starts with "{" and holds no line break, so it gives one row or more: as many rows, one each
    return table.select(schema.names) if table.num_rows == len(values) else None
