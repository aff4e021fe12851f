"""A topic's JSON messages decoded with Arrow (``read_topic``'s default) give the columns and reasons Spark's own
``from_json`` gives, message for message: well-formed ones, and every kind of message Arrow must leave to Spark
(a type Spark reads its own way, a line break, an escaped code point, a byte order mark, two objects, a tombstone).
The records are Kafka's as Spark's connector reads them, made here without a broker (the broker's run:
tests/kafka)."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statekit.spark.kafka import KAFKA_KEY, KAFKA_TIMESTAMP, REASON, values_of
from statekit.spark import kafka_json
from statekit.spark.kafka_json import DECODED, arrow_fields, decode

TOPIC = "clicks"
SCHEMA = "user_id string, ts_ms bigint, n int"
EDGES = [
    b'{"user_id": "a", "ts_ms": 1, "n": 2}',
    b'{"n": 3, "ts_ms": -9223372036854775808, "user_id": "b", "extra": [1, {"x": null}], "z": NaN}',
    b'{"user_id": "\\"q\\" \\\\ \\/ \\t", "ts_ms": 0}',
    b'{"user_id": null, "ts_ms": null}',
    b'{}',
    b'{"User_Id": "case", "ts_ms": 1}',  # names are matched as written
    b'{"user_id": "a\\u00e9", "ts_ms": 7}',
    b'{"other": {"user_id": "x", "n": "y"}, "user_id": "nested"}',
    b'{"user\\u005fid": "escaped name", "ts_ms": 1}',
    b'{"user_id": "tab after", "ts_ms": 1}\t',
    b'{"user_id": 5, "ts_ms": 1}',  # Spark keeps a number's text as a string
    b'{"user_id": {"x": 1}, "ts_ms": 1}',
    b'{"user_id": "a", "ts_ms": "12"}',
    b'{"user_id": "a", "ts_ms": 1.5}',
    b'{"user_id": "a", "ts_ms": 1e3}',
    b'{"user_id": "a", "ts_ms": 9223372036854775808}',
    b'{"user_id": "a", "n": 2147483648}',
    b'{"user_id": "a", "ts_ms": 01}',
    b'{"user_id": "a", "ts_ms": 1, "ts_ms": 2}',
    b'{"user_id": "a",\n "ts_ms": 7}',
    b'{"user_id": "\\ud800", "ts_ms": 7}',
    b'\xef\xbb\xbf{"user_id": "bom", "ts_ms": 7}',
    b'  {"user_id": "lead", "ts_ms": 7}',
    b'{"user_id": "a"} {"user_id": "b"}',
    b'{"user_id": "a"} trailing',
    b'{"user_id": "a",}',
    b'[{"user_id": "a"}]',
    b'"a"',
    b'5',
    b'',
    b'   ',
    b'not json',
    b'{"user_id": "\xff\xfe", "ts_ms": 1}',
    b'{"user_id": true, "ts_ms": 1}',
    b'{"user_id": "a", "ts_ms": true}',
    b'{"user_id": "a", "ts_ms": -01}',
    b'{"user_id": "a", "ts_ms": 1, "big": 123456789012345678901234567890, "e": 1e999}',
    None,  # a tombstone
]


def _records(spark, values: list[bytes | None]):
    from pyspark.sql.types import (BinaryType, IntegerType, LongType, StringType, StructField, StructType,
                                   TimestampType)

    schema = StructType([StructField("key", BinaryType()), StructField("value", BinaryType()),
                         StructField("topic", StringType()), StructField("partition", IntegerType()),
                         StructField("offset", LongType()), StructField("timestamp", TimestampType())])
    t0 = dt.datetime(2026, 1, 1)
    rows = [(b"k%d" % (i % 3), v, TOPIC, i % 2, i, t0 + dt.timedelta(seconds=i)) for i, v in enumerate(values)]
    return spark.createDataFrame(rows, schema).repartition(2)


def _decoded(spark, values: list[bytes | None], decode_with: str, schema: str = SCHEMA) -> list[tuple]:
    from pyspark.sql.types import _parse_datatype_string

    df = values_of(_records(spark, values), _parse_datatype_string(schema), "json", decode_with, TOPIC)
    return sorted((tuple(r) for r in df.collect()), key=lambda r: r[df.columns.index(KAFKA_TIMESTAMP)])


def test_edge_messages_decode_as_spark_decodes_them(spark):
    arrow, spark_only = _decoded(spark, EDGES, "arrow"), _decoded(spark, EDGES, "spark")
    assert arrow == spark_only
    reasons = [r[-1] for r in arrow]
    last = len(EDGES) - 1
    assert reasons[0] is None and reasons[-1] == f"null message value: (topic clicks, partition {last % 2}, offset {last})"
    assert any(r and r.startswith("unparsable json message: (topic clicks") for r in reasons)


def test_a_message_of_two_objects_shifts_no_other_message(spark):
    values = [b'{"user_id": "a", "ts_ms": 1} {"user_id": "b", "ts_ms": 2}', b'{"user_id": "c", "ts_ms": 3}',
              b'{"user_id": "d", "ts_ms": 4}\n{"user_id": "e", "ts_ms": 5}', b'{"user_id": "f", "ts_ms": 6}']
    rows = _decoded(spark, values, "arrow")
    assert rows == _decoded(spark, values, "spark")
    assert [r[0] for r in rows] == ["a", "c", "d", "f"]  # Spark reads a message's first object


def test_arrow_decodes_the_well_formed_messages_and_leaves_the_rest_to_spark():
    values = pa.array(EDGES, pa.binary())
    batch = pa.RecordBatch.from_arrays([values, pa.array(range(len(EDGES)), pa.int64())], names=["v", "offset"])
    schema = pa.schema([("user_id", pa.string()), ("ts_ms", pa.int64()), ("n", pa.int32())])
    out = decode(batch, schema, "v")
    decoded = out.column(DECODED).to_pylist()
    assert decoded[:10] == [True] * 10  # the well-formed ones
    assert not any(decoded[10:])  # each of the rest is Spark's to read
    assert out.column("user_id").to_pylist()[:3] == ["a", "b", '"q" \\ / \t']
    assert out.column("v").to_pylist() == [None] * 10 + EDGES[10:]  # a message goes on only where Spark reads it
    assert out.column("offset").to_pylist() == list(range(len(EDGES)))


@pytest.mark.parametrize("values", [[], [None, None], [b"x", b"[1]", b" {}"]])
def test_a_batch_with_nothing_arrow_decodes_keeps_its_rows_for_spark(values):
    batch = pa.RecordBatch.from_arrays([pa.array(values, pa.binary())], names=["v"])
    out = decode(batch, pa.schema([("user_id", pa.string())]), "v")
    assert out.column(DECODED).to_pylist() == [False] * len(values)
    assert out.column("user_id").to_pylist() == [None] * len(values) and out.column("v").to_pylist() == values


def test_many_refused_messages_cost_a_bounded_number_of_reads(monkeypatch):
    values = [b'{"user_id": "u%d"}' % i if i % 2 else b"{'user_id': 'python repr'}" for i in range(1000)]
    reads = []
    read = kafka_json._read
    monkeypatch.setattr(kafka_json, "_read", lambda v, schema: reads.append(len(v)) or read(v, schema))
    batch = pa.RecordBatch.from_arrays([pa.array(values, pa.binary())], names=["v"])
    out = decode(batch, pa.schema([("user_id", pa.string())]), "v")
    decoded = out.column(DECODED).to_pylist()
    assert len(reads) == kafka_json.MAX_READS  # then the rest is Spark's
    assert any(decoded) and not any(decoded[0::2])
    assert [u for u, d in zip(out.column("user_id").to_pylist(), decoded) if d] == \
        [f"u{i}" for i, d in enumerate(decoded) if d]
    assert out.column("v").to_pylist() == [None if d else v for d, v in zip(decoded, values)]


def test_a_value_schema_with_other_types_is_decoded_by_spark_alone(spark):
    from pyspark.sql.types import _parse_datatype_string

    assert arrow_fields(_parse_datatype_string("a string, b double")) is None
    values = [b'{"a": "x", "b": 0.1}', b'{"a": "y", "b": 1e400}', b'{"a": "z", "b": "x"}']
    assert _decoded(spark, values, "arrow", "a string, b double") == _decoded(spark, values, "spark", "a string, b double")


def test_the_kafka_columns_asked_for_and_no_others(spark):
    from pyspark.sql.types import _parse_datatype_string

    records = _records(spark, EDGES[:2])
    for decode_with in ("arrow", "spark"):
        df = values_of(records, _parse_datatype_string(SCHEMA), "json", decode_with, TOPIC, kafka_columns=[KAFKA_KEY])
        assert df.columns == ["user_id", "ts_ms", "n", KAFKA_KEY, REASON]
    with pytest.raises(ValueError, match="'offset' is not one of"):
        values_of(records, _parse_datatype_string(SCHEMA), "json", "arrow", TOPIC, kafka_columns=["offset"])


_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)
_field_values = st.one_of(st.none(), st.booleans(), st.integers(-2**64, 2**64), _text,
                          st.floats(allow_nan=False, allow_infinity=False), st.lists(st.integers(), max_size=2))


@st.composite
def _message(draw) -> bytes | None:
    kind = draw(st.sampled_from(["object", "object", "object", "edge", "mutated"]))
    if kind == "edge":
        return draw(st.sampled_from(EDGES))
    fields = {}
    for name in draw(st.permutations(["user_id", "ts_ms", "n", "other"]))[:draw(st.integers(0, 4))]:
        if name == "user_id":
            fields[name] = draw(st.one_of(_text, _field_values))
        elif name in ("ts_ms", "n"):
            fields[name] = draw(st.one_of(st.integers(-2**40, 2**40), st.integers(-2**64, 2**64), _field_values))
        else:
            fields[name] = draw(_field_values)
    text = json.dumps(fields, ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, None, 1])))
    if kind == "mutated":  # a byte cut off, doubled or put in
        at = draw(st.integers(0, len(text)))
        text = draw(st.sampled_from([text[:at], text[:at] + text[at:at + 1] + text[at:],
                                     text[:at] + draw(st.sampled_from(['"', ",", "}", " ", "\\"])) + text[at:]]))
    return text.encode()


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(values=st.lists(_message(), min_size=1, max_size=150))  # few examples of many messages: 2 Spark jobs each
def test_any_messages_decode_as_spark_decodes_them(spark, values):
    assert _decoded(spark, values, "arrow") == _decoded(spark, values, "spark")

