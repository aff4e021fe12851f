"""Map side of an epoch: check the rows of Arrow batches and tag each with the partition of its key group.

Every row leaves with the routing columns below; Spark's own hash shuffle (``repartition`` on
``_r``) then brings it to its partition, so records never cross the JVM/Python border as pickled
rows. Event times arrive as milliseconds that Spark SQL computed (``event_time``); checks are
vectorized where Arrow allows (times, one key-group computation per distinct key of a batch) and
fall back to per-row Python for other key types and for the reasons of invalid rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from ..errors import SerializationError
from ..key_identity import key_problem
from ..keygroups import fmix32, key_group_for, key_groups_and_bytes, partition_for_key_group
from ..operators import MAX_EVENT_TIMESTAMP
from .event_time import MILLIS, OUT_OF_RANGE, TimeSpec
from .runtime import start_task

TIME_BOUND = MAX_EVENT_TIMESTAMP  # the operators' bound: window ends and timers never overflow int64
TS, PART, ROUTE, SEQ, WHY, MARK = "_ts", "_p", "_r", "_seq", "_why", "_m"
ROUTING_COLUMNS = ((TS, "long"), (PART, "int"), (ROUTE, "int"), (SEQ, "long"), (WHY, "string"), (MARK, "int"))
"""Added to each row: event time (ms), partition, its routing value for Spark's hash partitioner,
a replay-stable sequence number, why the row is invalid (null: valid), and the end-of-split marker."""
POSITION = "_pos"
"""An input column of each row's place in the epoch's input as Spark planned it (``monotonically_increasing_id``
before the map stage's ``coalesce``): the same in every attempt whichever split reads the row, it becomes ``SEQ``."""
REFUSED = "_refused"
"""An input column of reasons given with the rows (``run_keyed(reason=...)``: a parser's verdict): where not null the
row is invalid for that reason, before its key and time are looked at. It does not go on."""
FUTURE_REASON = "time ahead of the clock"
OWN_COLUMNS = frozenset({MILLIS, POSITION, REFUSED, *(name for name, _ in ROUTING_COLUMNS)})
"""The names of the columns an epoch adds to its input: no routed column of the input may have one."""


@dataclass(frozen=True)
class Router:
    """Routes the rows of one epoch: ``routing[p]`` is a value Spark's hash partitioner sends to
    partition ``p``; rows with event times after ``time_limit`` (ms, None: no limit) are refused.
    Each batch holds the event time in milliseconds as column ``event_time.MILLIS`` (null where the
    ``time`` column's value did not convert by ``spec``, which names why) and each row's ``POSITION``, its
    ``SEQ``; neither goes on, nor does column ``REFUSED`` when ``refused`` (reasons given with the rows).
    ``routed(split)``: called once a split routed all its rows, before its end markers (``map_splits``: where the
    epoch's splits are counted)."""

    key: str
    time: str
    partitions: int
    max_parallelism: int
    routing: tuple[int, ...]
    schema: Any  # pyarrow schema of the output: the input's columns, then ROUTING_COLUMNS
    time_limit: int | None = None
    max_ahead: str = ""
    spec: TimeSpec = TimeSpec()
    refused: bool = False
    routed: Callable[[int], None] | None = None

    def __call__(self, batches: Iterable[Any]) -> Iterator[Any]:
        """mapInArrow function: each batch with the routing columns, then one marker row per partition."""
        import pyarrow as pa
        from pyspark import TaskContext

        start_task()
        split, schema = TaskContext.get().partitionId(), self.schema
        dropped = [MILLIS, POSITION, REFUSED] if self.refused else [MILLIS, POSITION]
        for batch in batches:
            n = batch.num_rows
            if n == 0:
                continue
            parts, why_key = self._partitions(batch.column(self.key))
            ts, why_time = self._times(batch.column(MILLIS), batch.column(self.time))
            given = batch.column(REFUSED) if self.refused else None
            why_given = given.to_pylist() if given is not None and given.null_count < n else []
            found = [w for w in (why_given, why_key, why_time) if w]  # the first reason of a row is its reason
            if len(found) > 1:
                why = pa.array([next((w for w in row if w is not None), None) for row in zip(*found)], pa.string())
            else:
                why = pa.array(found[0], pa.string()) if found else pa.nulls(n, pa.string())
            yield pa.RecordBatch.from_arrays(
                [*batch.drop_columns(dropped).columns, ts, pa.array(parts, pa.int32()),
                 pa.array(np.asarray(self.routing, np.int32)[parts]), batch.column(POSITION), why,
                 pa.nulls(n, pa.int32())], schema=schema)
        if self.routed is not None:
            self.routed(split)
        P = self.partitions
        yield pa.RecordBatch.from_arrays(
            [*(pa.nulls(P, f.type) for f in list(schema)[:-len(ROUTING_COLUMNS)]), pa.nulls(P, pa.int64()),
             pa.array(range(P), pa.int32()), pa.array(self.routing, pa.int32()), pa.nulls(P, pa.int64()),
             pa.nulls(P, pa.string()), pa.array([split] * P, pa.int32())], schema=schema)

    def _partitions(self, keys: Any) -> tuple[np.ndarray, list[str | None]]:
        """Partition of each row's key (0 for invalid keys) and the reasons (empty list: all valid)."""
        import pyarrow as pa

        try:
            encoded = keys.dictionary_encode()
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
            encoded = None
        if encoded is None:
            routed = [self._route(k) for k in keys.to_pylist()]
        else:
            indices, null = encoded.indices, (0, "null key")
            parts = self._plain_partitions(encoded.dictionary)
            if parts is not None:  # str or int keys, all valid: routed in bulk
                if not indices.null_count:
                    return parts[indices.to_numpy()], []
                at = indices.to_numpy(zero_copy_only=False)  # nulls come as NaN
                valid = ~np.isnan(at)
                rows = np.zeros(len(at), np.int64)
                rows[valid] = parts[at[valid].astype(np.int64)]
                return rows, [None if ok else null[1] for ok in valid.tolist()]
            distinct = [self._route(k) for k in encoded.dictionary.to_pylist()]
            routed = [distinct[i] if i is not None else null for i in indices.to_pylist()]
        reasons = [r for _, r in routed]
        return np.array([p for p, _ in routed], np.int64), (reasons if any(r is not None for r in reasons) else [])

    def _plain_partitions(self, distinct: Any) -> np.ndarray | None:
        """The partitions of distinct str or int keys, their key groups computed together; None for keys
        of other types, or any that cannot be serialized (they are routed one by one, with reasons)."""
        import pyarrow as pa

        t = distinct.type
        if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t)):
            return None
        try:
            kgs, _ = key_groups_and_bytes(distinct.to_pylist(), self.max_parallelism)
        except SerializationError:
            return None
        return partition_for_key_group(kgs, self.partitions, self.max_parallelism)

    def _route(self, key: Any) -> tuple[int, str | None]:
        reason = key_problem(key)
        if reason is not None:
            return 0, reason
        try:
            kg = key_group_for(key, self.max_parallelism)
        except Exception as e:  # the key serializer names the type it cannot encode
            return 0, f"unserializable key: {e}"
        return partition_for_key_group(kg, self.partitions, self.max_parallelism), None

    def _times(self, millis: Any, values: Any) -> tuple[Any, list[str | None]]:
        """The event times ``millis`` (int64 ms, null where a value of the time column ``values`` did not
        convert), null where invalid, and the reasons (empty list: all valid)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        ts = millis.cast(pa.int64())
        bad = pc.or_(pc.greater(ts, TIME_BOUND), pc.less(ts, -TIME_BOUND))
        if self.time_limit is not None:
            bad = pc.or_(bad, pc.greater(ts, self.time_limit))
        bad = pc.fill_null(bad, True)  # null: no event time
        if not pc.any(bad).as_py():
            return ts, []
        reasons: list[str | None] = [None] * len(ts)
        for i in np.flatnonzero(bad.to_numpy(zero_copy_only=False)).tolist():
            reasons[i] = self._reason(ts[i].as_py(), values[i].as_py())
        return pc.if_else(bad, pa.scalar(None, pa.int64()), ts), reasons

    def _reason(self, ts: int | None, value: Any) -> str:
        """Why a row with event time ``ts`` (ms, None: none) from time value ``value`` is invalid."""
        if ts is None:
            return "null time" if value is None else self.spec.reason(value)
        if not -TIME_BOUND <= ts <= TIME_BOUND:
            return OUT_OF_RANGE
        return f"{FUTURE_REASON}: {ts} > {self.time_limit} (max_ahead {self.max_ahead})"


def spark_hash_partition(value: int, partitions: int) -> int:
    """The partition ``repartition(partitions, col)`` gives an int column value: Spark's
    ``Murmur3_x86_32.hashInt`` with seed 42, then ``pmod``."""
    m = 0xFFFFFFFF
    k = (value & m) * 0xCC9E2D51 & m
    k = ((k << 15) | (k >> 17)) & m
    k = k * 0x1B873593 & m
    h = 42 ^ k
    h = ((h << 13) | (h >> 19)) & m
    h = fmix32((h * 5 + 0xE6546B64 & m) ^ 4)
    return (h - (1 << 32) if h & 0x80000000 else h) % partitions


def routing_values(partitions: int) -> tuple[int, ...]:
    """For each partition p the smallest int that Spark's hash partitioning sends to p."""
    found: dict[int, int] = {}
    value = 0
    while len(found) < partitions:
        found.setdefault(spark_hash_partition(value, partitions), value)
        value += 1
    return tuple(found[p] for p in range(partitions))


def routed_schema(input_schema: Any) -> Any:
    """The router's output as a Spark schema: the input columns (nullable, for the marker rows), then
    the routing columns (their types by name, without a JVM or Spark Connect session to parse them)."""
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    types = {"long": LongType(), "int": IntegerType(), "string": StringType()}
    return StructType([StructField(f.name, f.dataType, True) for f in input_schema.fields if f.name != REFUSED]
                      + [StructField(n, types[t], True) for n, t in ROUTING_COLUMNS])
