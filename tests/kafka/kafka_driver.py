"""A driver process of the Kafka tests: ``python kafka_driver.py SPEC_JSON`` sessionizes a topic once per run of
SPEC (``runs``: output, backend, sink topic, and optionally ``kill``: the epoch and ``before-commit`` or
``after-commit`` of its Kafka transaction, where the driver's whole process group, JVM included, gets SIGKILL)."""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

from statekit.jobs import sessionize
from statekit.spark import KafkaInput, KafkaSink, kafka_conf, spark_session


class KillingSink(KafkaSink):
    """A KafkaSink whose driver dies at ``epoch``: mid-transaction (its records sent, the commit not) or between
    the transaction's commit and the epoch's."""

    def __init__(self, *args: Any, kill: dict, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kill = kill

    def _commit(self, producer: Any, epoch_id: int) -> None:
        if epoch_id == self.kill["epoch"] and self.kill["when"] == "before-commit":
            producer.flush(30)  # the records reach the broker inside the open transaction
            os.killpg(os.getpgrp(), signal.SIGKILL)
        super()._commit(producer, epoch_id)
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
