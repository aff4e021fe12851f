"""How ``KafkaInput`` asks Spark's connector for a topic: its options, with statekit's defaults under the user's."""

from __future__ import annotations

from statekit.spark.kafka import FETCH_WAIT_MS, KafkaInput


class _Reader:
    """Records what a DataFrameReader (or DataStreamReader) is told; the last value of an option stands, as Spark's."""

    def __init__(self) -> None:
        self.options: dict[str, str] = {}
        self.source = None

    def format(self, source: str) -> "_Reader":
        self.source = source
        return self

    def option(self, key: str, value: str) -> "_Reader":
        self.options[key] = value
        return self


class _Spark:
    def __init__(self) -> None:
        self.read, self.readStream = _Reader(), _Reader()


def test_a_fetch_at_a_partitions_end_waits_briefly_unless_the_options_say_otherwise():
    spark = _Spark()
    default = KafkaInput("broker:9092", "clicks").reader(spark, stream=True)
    assert default is spark.readStream and default.source == "kafka"
    assert default.options == {"kafka.bootstrap.servers": "broker:9092", "subscribe": "clicks",
                               "startingOffsets": "earliest", "kafka.fetch.max.wait.ms": FETCH_WAIT_MS}
    assert int(FETCH_WAIT_MS) < 500  # Kafka's own default
    given = KafkaInput("broker:9092", "clicks", options=(("kafka.fetch.max.wait.ms", "900"), ("maxOffsetsPerTrigger", "7")))
    batch = given.reader(spark, stream=False)
    assert batch is spark.read
    assert batch.options["kafka.fetch.max.wait.ms"] == "900" and batch.options["maxOffsetsPerTrigger"] == "7"
