"""A Kafka topic as ``run_keyed``'s input: Spark's Kafka connector (``spark-sql-kafka-0-10``, from Maven Central
through ``spark.jars.packages``) reads it, and each message's value, JSON or CSV text, is parsed to columns.

A message whose value does not parse (or has none) keeps its place with null columns and a reason naming its
topic, partition and offset: ``run_keyed`` routes it to ``_invalid`` (its ``reason`` argument). Beside the value's
columns each row has Kafka's own ``kafka_key`` (text) and ``kafka_timestamp`` (the record's timestamp), either of
which can be the key or the event time. docs/kafka.md shows the shapes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any, Mapping, Sequence

from .errors import InputError
from .kafka_json import DECODED, arrow_fields, decoder
from .text_schema import CORRUPT, declared_schema, sample_frame

SPARK_KAFKA = "org.apache.spark:spark-sql-kafka-0-10_2.13"
CONNECTOR_VERSION_ENV = "STATEKIT_SPARK_KAFKA_VERSION"
CONNECTOR_PINS = {"4.3.0": "4.2.0", "4.2.1": "4.2.0", "4.1.4": "4.1.3", "4.0.5": "4.0.4"}
"""pyspark versions on PyPI whose connector Maven Central did not have when this was pinned: the newest of the same
line that it has (same Scala 2.13 and DataSource V2 API; tests/kafka runs it)."""
FORMATS = ("json", "csv")
DECODES = ("arrow", "spark")
"""``read_topic``'s ways to decode JSON values: Arrow where it can (the rest by Spark), or Spark alone."""
KAFKA_KEY, KAFKA_TIMESTAMP = "kafka_key", "kafka_timestamp"
REASON = "_kafka_reason"
"""The column holding why a message is invalid (null: it parsed), for ``run_keyed(reason=...)``."""
_SAMPLE = 1000
"""How many of the topic's first messages a JSON value schema is inferred from."""
_RAW = {name: f"_kafka_{name}" for name in ("value", "topic", "partition", "offset")}
"""The Kafka record's columns a row carries until its reason is made (beside the values' own columns)."""
_SHOWN = 80
"""How much of an unparsable value its reason shows."""
FETCH_WAIT_MS = "50"
"""The consumer's ``fetch.max.wait.ms`` unless ``options`` set it: a batch reads offsets that exist, so a fetch that
finds a partition's end (a batch read to the topic's end) need not wait Kafka's default 500 ms for more."""


def connector_package(pyspark_version: str | None = None) -> str:
    """The Maven coordinates of Spark's Kafka connector for ``pyspark_version`` (default: the installed pyspark's;
    ``$STATEKIT_SPARK_KAFKA_VERSION`` overrides the version)."""
    wanted = pyspark_version or version("pyspark")
    return f"{SPARK_KAFKA}:{os.environ.get(CONNECTOR_VERSION_ENV) or CONNECTOR_PINS.get(wanted, wanted)}"


def kafka_conf(conf: Mapping[str, str] | None = None) -> dict[str, str]:
    """``conf`` with the Kafka connector added to ``spark.jars.packages`` (a session that reads or writes Kafka
    through Spark; Spark resolves it with Ivy from Maven Central when the session starts)."""
    out = dict(conf or {})
    packages = [p for p in out.get("spark.jars.packages", "").split(",") if p.strip()]
    if not any(p.strip().startswith(SPARK_KAFKA + ":") for p in packages):
        packages.append(connector_package())
    out["spark.jars.packages"] = ",".join(packages)
    return out


@dataclass(frozen=True)
class KafkaInput:
    """Where and how to read a topic: ``starting_offsets`` as Spark's Kafka source takes it (``earliest``,
    ``latest`` or its JSON of offsets per partition); ``fmt``: the values' format; ``value_schema``: their
    columns as a DDL string (default for JSON: inferred from the topic's first messages; CSV needs it);
    ``options``: more of the source's options (``maxOffsetsPerTrigger``, ``kafka.security.protocol``...)."""

    bootstrap_servers: str
    topic: str
    starting_offsets: str = "earliest"
    fmt: str = "json"
    value_schema: str | None = None
    options: tuple[tuple[str, str], ...] = ()

    def check(self) -> None:
        """Refuse a value format other than JSON or CSV, or CSV without a schema."""
        if self.fmt not in FORMATS:
            raise InputError(f"--format {self.fmt!r} for a Kafka topic: its values are text, one of {', '.join(FORMATS)}")
        if self.fmt == "csv" and not self.value_schema:
            raise InputError("CSV messages have no header: pass their columns with --value-schema "
                             "(e.g. 'user_id STRING, ts_ms LONG, value DOUBLE')")

    def reader(self, spark: Any, stream: bool) -> Any:
        """Spark's Kafka reader (a stream or a batch) of this topic with its options: ``fetch.max.wait.ms`` is
        ``FETCH_WAIT_MS`` unless ``options`` set it."""
        reader = spark.readStream if stream else spark.read
        reader = (reader.format("kafka").option("kafka.bootstrap.servers", self.bootstrap_servers)
                  .option("subscribe", self.topic).option("startingOffsets", self.starting_offsets)
                  .option("kafka.fetch.max.wait.ms", FETCH_WAIT_MS))
        for k, v in self.options:
            reader = reader.option(k, v)
        return reader


def read_topic(spark: Any, source: KafkaInput, *, stream: bool, decode: str = "arrow",
               kafka_columns: Sequence[str] = (KAFKA_KEY, KAFKA_TIMESTAMP)) -> Any:
    """The topic as a DataFrame of the values' columns, ``kafka_columns`` (of ``kafka_key``, ``kafka_timestamp``)
    and ``REASON``: a stream from ``starting_offsets`` (``trigger="available-now"`` reads up to the offsets at its
    start), or a batch up to the latest offsets now. ``decode="arrow"``: JSON values of string and integer columns
    are decoded in a Python stage with Arrow where it can (``kafka_json``), the rest by Spark, to the same columns
    and reasons; ``"spark"``: Spark's ``from_json`` or ``from_csv`` for every message."""
    source.check()
    if decode not in DECODES:
        raise ValueError(f"decode must be one of {', '.join(DECODES)}, got {decode!r}")
    schema = value_schema(spark, source)
    raw = source.reader(spark, stream)
    raw = raw.load() if stream else raw.option("endingOffsets", "latest").load()
    return values_of(raw, schema, source.fmt, decode, source.topic, kafka_columns)


def values_of(records: Any, schema: Any, fmt: str, decode: str, topic: str,
              kafka_columns: Sequence[str] = (KAFKA_KEY, KAFKA_TIMESTAMP)) -> Any:
    """``read_topic``'s DataFrame from ``records``, a DataFrame of Kafka records as Spark's connector reads them
    (``key``, ``value``, ``topic``, ``partition``, ``offset``, ``timestamp``) from ``topic`` (Kafka's ``subscribe``:
    a comma-separated list, or one topic, whose records' reasons name it without carrying their column): their
    ``fmt`` values parsed to the columns of ``schema``, a StructType (a column named as one the input adds is
    refused)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType, StringType, StructField, StructType

    clash = set(schema.names) & {KAFKA_KEY, KAFKA_TIMESTAMP, REASON, CORRUPT, DECODED, *_RAW.values()}
    if clash:
        raise InputError(f"the value schema of topic {topic} has a column named {sorted(clash)[0]!r}, which "
                         f"the Kafka input adds itself: rename it in --value-schema")
    parse_schema = StructType(list(schema.fields) + [StructField(CORRUPT, StringType(), True)])
    carried = {name: alias for name, alias in _RAW.items() if name != "topic" or "," in topic}  # one topic: its name
    unknown = set(kafka_columns) - {KAFKA_KEY, KAFKA_TIMESTAMP}
    if unknown:
        raise ValueError(f"kafka_columns: {sorted(unknown)[0]!r} is not one of {KAFKA_KEY!r}, {KAFKA_TIMESTAMP!r}")
    kafka = [c for c in (KAFKA_KEY, KAFKA_TIMESTAMP) if c in kafka_columns]
    made = {KAFKA_KEY: F.col("key").cast("string"), KAFKA_TIMESTAMP: F.col("timestamp")}
    raw = records.select(*(made[c].alias(c) for c in kafka),
                         *(F.col(name).alias(alias) for name, alias in carried.items()))
    fields = arrow_fields(schema) if decode == "arrow" and fmt == "json" else None
    if fields is not None:
        decoded = StructType([*schema.fields, StructField(DECODED, BooleanType(), False), *raw.schema.fields])
        raw = raw.mapInArrow(decoder(fields, _RAW["value"]), decoded)
    value = F.col(_RAW["value"])
    text = value.cast("string")
    options = {"columnNameOfCorruptRecord": CORRUPT, "mode": "PERMISSIVE"}
    parsed = (F.from_json if fmt == "json" else F.from_csv)(text, parse_schema.simpleString(), options)
    where = F.format_string("(topic %s, partition %d, offset %d)", F.col(_RAW["topic"]) if "topic" in carried
                            else F.lit(topic), _RAW["partition"], _RAW["offset"])
    shown = F.substring(F.col("_v." + CORRUPT), 1, _SHOWN)
    reason = (F.when(value.isNull(), F.concat(F.lit("null message value: "), where))
              .when(F.col("_v").isNull() | F.col("_v." + CORRUPT).isNotNull(),
                    F.concat(F.lit(f"unparsable {fmt} message: "), where, F.lit(" '"),
                             F.coalesce(shown, F.substring(text, 1, _SHOWN)), F.lit("'"))))
    if fields is None:
        return (raw.select(*kafka, *carried.values(), parsed.alias("_v"))
                .select(*(F.col("_v." + f.name).alias(f.name) for f in schema.fields), *kafka, reason.alias(REASON)))
    ok = F.col(DECODED)
    return (raw.select(*schema.names, DECODED, *kafka, *carried.values(),
                       F.when(~ok, parsed).alias("_v"))
            .select(*(F.when(ok, F.col(f.name)).otherwise(F.col("_v." + f.name)).alias(f.name) for f in schema.fields),
                    *kafka, F.when(ok, F.lit(None)).otherwise(reason).alias(REASON)))


def value_schema(spark: Any, source: KafkaInput) -> Any:
    """The values' columns as a Spark StructType: ``value_schema`` parsed, or inferred from the first messages of
    a JSON topic (an empty topic, or one with no JSON object among them, is an error asking for the schema)."""
    from pyspark.sql.types import StructType

    if source.value_schema:
        return declared_schema(source.value_schema, "--value-schema")
    sample = (source.reader(spark, stream=False).option("endingOffsets", "latest").load()
              .selectExpr("CAST(value AS STRING) AS value").where("value IS NOT NULL").limit(_SAMPLE))
    inferred = sample_frame(spark, [row[0] for row in sample.collect()], "json", {})
    fields = [] if inferred is None else [f for f in inferred.schema.fields if f.name != CORRUPT]
    if not fields:
        raise InputError(f"topic {source.topic} at {source.bootstrap_servers}: no JSON object among its first "
                         f"{_SAMPLE} messages to infer the values' columns from (or a Spark Connect session "
                         f"before pyspark 4.2, which cannot): pass --value-schema")
    return StructType(fields)
