"""A driver process of the Kafka tests: ``python kafka_driver.py SPEC_JSON`` sessionizes a topic once per run of
SPEC (``runs``: output, backend, sink topic, and optionally ``kill``: the epoch and ``before-commit`` or
``after-commit`` of its Kafka transactions, where the driver's whole process group, JVM included, gets SIGKILL)."""

from __future__ import annotations

import json
import os
import signal
import sys
from dataclasses import dataclass, field, fields
from typing import Any

from statekit.jobs import sessionize
from statekit.spark import KafkaInput, KafkaSink, kafka_conf, spark_session
from statekit.spark.kafka_transactions import PartitionWriter


@dataclass(frozen=True)
class KillingWriter(PartitionWriter):
    """A task's writer whose driver (its process group: Python and JVM) dies at ``kill``'s epoch, in the first
    sink partition's transaction with records: after they reached the broker, before the commit."""

    kill: dict = field(default_factory=dict)
    driver_group: int = 0

    def _send(self, producer: Any, records: Any) -> int:
        sent = super()._send(producer, records)
        if sent and self.epoch == self.kill["epoch"]:
            producer.flush(30)  # the records reach the broker inside the open transaction
            os.killpg(self.driver_group, signal.SIGKILL)
            os.kill(os.getpid(), signal.SIGKILL)  # Spark's Python workers have a process group of their own
        return sent


class KillingSink(KafkaSink):
    """A KafkaSink whose driver dies at ``epoch``: in a task, mid-transaction (``before-commit``: its records sent,
    the commit not; other sink partitions may have committed), or once every sink partition committed, before the
    epoch did (``after-commit``)."""

    def __init__(self, *args: Any, kill: dict, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kill = kill

    def partition_writer(self, epoch_id: int) -> PartitionWriter:
        writer = super().partition_writer(epoch_id)
        if self.kill["when"] != "before-commit":
            return writer
        return KillingWriter(**{f.name: getattr(writer, f.name) for f in fields(writer)}, kill=self.kill,
                             driver_group=os.getpgrp())

    def write(self, results: Any, epoch_id: int) -> None:
        super().write(results, epoch_id)
        if epoch_id == self.kill["epoch"] and self.kill["when"] == "after-commit":
            os.killpg(os.getpgrp(), signal.SIGKILL)


def main(spec: dict) -> None:
    spark = spark_session("local[2]", kafka_conf({"spark.sql.shuffle.partitions": "2",
                                                  "spark.statekit.host_idle_timeout": "5s"}))
    source = KafkaInput(spec["bootstrap"], spec["topic"], value_schema=spec["value_schema"],
                        options=(("maxOffsetsPerTrigger", str(spec["max_offsets"])),))
    for run in spec["runs"]:
        sink = None
        if run.get("sink_topic"):
            kind = KillingSink if run.get("kill") else KafkaSink
            extra = {"kill": run["kill"]} if run.get("kill") else {}
            sink = kind(spec["bootstrap"], run["sink_topic"], **extra)
        summary = sessionize(spark, kafka=source, output=run["output"], key="user_id", time="ts_ms", gap="30s",
                             watermark_delay=spec["watermark_delay"], aggs=["sum:value", "count"],
                             backend=run["backend"], partitions=2, final=True, sink=sink)
        print(json.dumps({"output": run["output"], "epochs": len(summary.epochs)}), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
