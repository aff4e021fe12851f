"""A committed checkpoint as the source of state as data (``state_transform``): the job its record describes, its
last committed epoch (the driver's record, the commit point), and that epoch's partitions read on the executors,
one task per key-group range, so a checkpoint's state never passes through the driver."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable

from ..checkpoint import CheckpointStore, JobRecord
from ..logical_snapshot import LogicalSnapshot, read_logical
from .epochs import EpochLog, EpochRecord
from .errors import InputError
from .event_time import TimeSpec
from .read_state import checkpoint_key
from .schemas import arrow_schema

_RANGES = "start INT, stop INT"


@dataclass(frozen=True)
class SourceJob:
    """The checkpoint at ``checkpoint``: its recorded job ``description`` and ``last`` committed epoch; ``key``: the
    checkpoint key its manifests are signed with (``spark.statekit.checkpoint_key``; None: unsigned)."""

    checkpoint: str
    description: dict[str, Any]
    last: EpochRecord
    key: bytes | None = field(default=None, repr=False)

    @classmethod
    def of(cls, spark: Any, checkpoint: str, operator: str | None = None) -> "SourceJob":
        """The checkpoint's job and last epoch; ``InputError`` when it has none, or records another ``operator``."""
        if "://" not in checkpoint:
            checkpoint = os.path.abspath(checkpoint)  # executors run in other working directories
        description, last = JobRecord(checkpoint).read(), EpochLog(checkpoint).last()
        if description is None or last is None:
            raise InputError(f"checkpoint {checkpoint} has no committed epoch (or no job record): no state to read")
        if operator is not None and operator != description.get("operator_id"):
            raise InputError(f"checkpoint {checkpoint} holds operator {description.get('operator_id')!r}, "
                             f"not {operator!r}")
        return cls(checkpoint, description, last, checkpoint_key(spark))

    @property
    def operator_id(self) -> str:
        return self.description["operator_id"]

    @property
    def key_column(self) -> str:
        return self.description["key"]["column"]

    def input_schema(self) -> Any:
        """The Spark schema of the job's input columns: key, time, then the row's other columns, as recorded."""
        from pyspark.sql.types import DataType, StructField, StructType

        d = self.description
        named = [(d["key"]["column"], d["key"]["type"]), (d["time"]["column"], d["time"]["type"]),
                 *((c, t) for c, t in d["columns"])]
        return StructType([StructField(c, DataType.fromDDL(t), True) for c, t in dict(named).items()])

    def time_spec(self) -> TimeSpec:
        """How the job reads its time column (``TimeSpec.describe`` as recorded)."""
        return TimeSpec.recorded(self.description["time"])

    def per_partition(self, spark: Any, rows: Callable[[LogicalSnapshot], dict[str, list]], schema: Any) -> Any:
        """A DataFrame of ``schema`` (Spark's): ``rows`` of each partition's logical snapshot of the last epoch (a
        dict of column lists), a task reading each partition."""
        store = CheckpointStore(self.checkpoint, key=self.key)
        manifests = store.covering(self.operator_id, range(0, self.description["max_parallelism"]), self.last.epoch)
        ranges = [(m.key_groups.start, m.key_groups.stop) for m in manifests]
        arrow = arrow_schema(schema, spark.conf.get("spark.sql.session.timeZone"))
        reader = PartitionReader(self.checkpoint, self.operator_id, self.last.epoch, self.key, rows, arrow)
        return spark.createDataFrame(ranges, _RANGES).repartition(max(1, len(ranges))).mapInArrow(reader, schema)

    def collect_json(self, spark: Any, facts: Callable[[LogicalSnapshot], Any]) -> list[Any]:
        """``facts`` of each partition's logical snapshot (small, JSON-able), gathered on the driver."""
        from pyspark.sql.types import StringType, StructField, StructType

        found = self.per_partition(spark, lambda snap: {"facts": [json.dumps(facts(snap))]},
                                   StructType([StructField("facts", StringType())]))
        return [json.loads(r[0]) for r in found.collect()]


@dataclass(frozen=True)
class PartitionReader:
    """mapInArrow function over rows ``start, stop`` of key-group ranges: each range's committed snapshot of
    ``epoch``, verified (and its signature checked with ``key``), as a batch of ``rows(snapshot)``."""

    checkpoint: str
    operator: str
    epoch: int
    key: bytes | None = field(repr=False)
    rows: Callable[[LogicalSnapshot], dict[str, list]]
    schema: Any

    def __call__(self, batches: Any) -> Any:
        import pyarrow as pa

        store = CheckpointStore(self.checkpoint, key=self.key)
        for batch in batches:
            for start, stop in zip(batch.column("start").to_pylist(), batch.column("stop").to_pylist()):
                snap = read_logical(store.logical_snapshot(store.manifest(self.operator, range(start, stop),
                                                                               self.epoch)))
                columns = self.rows(snap)
                yield pa.RecordBatch.from_arrays([pa.array(columns[f.name], f.type) for f in self.schema],
                                                 schema=self.schema)
