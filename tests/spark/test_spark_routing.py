"""The map side of an epoch: rows checked and routed to the partition of their key group by Spark's
own hash shuffle (the routing value of each partition must agree with Spark's partitioner)."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from statekit.keygroups import key_group_for, partition_for_key_group
from statekit.spark.records import Router, routing_values, spark_hash_partition

pytestmark = pytest.mark.spark
MAX_PAR = 128


def test_hash_partition_agrees_with_spark(spark):
    values = list(range(-300, 1200)) + [2**31 - 1, -2**31]
    for n in (1, 2, 3, 4, 7, 16):
        rows = spark.createDataFrame([(v,) for v in values], "v int").selectExpr(
            "v", f"pmod(hash(v), {n}) as p").collect()
        spark_side = {r.v: r.p for r in rows}
        assert {v: spark_hash_partition(v, n) for v in values} == spark_side, n


def test_repartition_by_routing_value_lands_each_row_on_its_partition(spark):
    n = 5
    routing = routing_values(n)
    df = spark.createDataFrame([(routing[p], p) for p in range(n) for _ in range(3)], "r int, p int")
    seen = df.repartition(n, "r").rdd.mapPartitionsWithIndex(lambda i, it: [(i, row.p) for row in it]).collect()
    assert sorted(set(seen)) == [(p, p) for p in range(n)]


def router(time_limit: int | None = None, partitions: int = 3) -> Router:
    return Router("k", "t", partitions, MAX_PAR, routing_values(partitions), None, time_limit, "1d")


def test_keys_route_to_their_key_group_partition_and_bad_keys_get_reasons():
    r = router()
    keys = ["a", "b", None, "a", "zz"]
    parts, why = r._partitions(pa.array(keys))
    assert why == [None, None, "null key", None, None]
    for k, p in zip(keys, parts):
        if k is not None:
            assert p == partition_for_key_group(key_group_for(k, MAX_PAR), 3, MAX_PAR)
    parts, why = r._partitions(pa.array([1.5, math.nan, None], pa.float64()))
    assert why == [None, "NaN key", "null key"]
    parts, why = r._partitions(pa.array([[1, 2], None], pa.list_(pa.int64())))  # per-row fallback
    assert why == ["unhashable key", "null key"]
    assert r._partitions(pa.array([1, 2, 3]))[1] == []  # all valid: no reasons list


@settings(max_examples=60, deadline=None)
@given(keys=st.one_of(st.lists(st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)), max_size=40),
                      st.lists(st.one_of(st.none(), st.text(max_size=6)), max_size=40)),
       partitions=st.one_of(st.integers(1, 7), st.just(MAX_PAR)))  # MAX_PAR: a partition per key group
def test_str_and_int_keys_routed_in_bulk_equal_one_at_a_time(keys, partitions):
    """In bulk and one at a time, keys land alike (with MAX_PAR partitions, on their own key group's)."""
    r = router(partitions=partitions)
    parts, why = r._partitions(pa.array(keys))
    one_by_one = [r._route(k) if k is not None else (0, "null key") for k in keys]
    assert parts.tolist() == [p for p, _ in one_by_one]
    assert why == ([w for _, w in one_by_one] if None in keys else [])
