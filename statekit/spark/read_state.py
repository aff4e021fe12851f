"""Committed keyed state as a Spark DataFrame, for debugging and audits."""

from __future__ import annotations

import json
from typing import Any

from ..checkpoint import JobRecord, read_state
from ..checkpoint.signing import KEY_SPARK_CONF
from ..checkpoint.readable_state import readable_state

STATE_SCHEMA = "key_group INT, key STRING, namespace STRING, value STRING, ttl_timestamp BIGINT"


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, default=repr)


def checkpoint_key(spark: Any) -> bytes | None:
    """The checkpoint key the session's conf names (``spark.statekit.checkpoint_key``), as a run takes it."""
    return (spark.conf.get(KEY_SPARK_CONF, None) or "").encode() or None


def read_state_df(spark: Any, checkpoint: str, operator: str, state: str, epoch: int | None = None) -> Any:
    """Rows ``key_group, key, namespace, value, ttl_timestamp`` of one state at ``epoch`` (default: the
    newest); keys, namespaces and values rendered as text (JSON for structured ones), values as the
    operator the checkpoint's job recorded reads them (``statekit.checkpoint.readable_state``)."""
    job = JobRecord(checkpoint).read() or {}
    described = job.get("operator") if job.get("operator_id") == operator else None
    rows = [(r["key_group"], _text(r["key"]), _text(r["namespace"]), _text(readable_state(described, state, r["value"])),
             r["ttl_timestamp"]) for r in read_state(checkpoint, operator, state, epoch, key=checkpoint_key(spark))]
    return spark.createDataFrame(rows, STATE_SCHEMA)
