"""``spark.statekit.checkpoint_key`` through run_keyed: the tasks sign every manifest they commit and check every
manifest they restore from, so a manifest edited between runs (its plain checksum recomputed) stops the next run
with an error naming it."""

from __future__ import annotations

import hashlib
import hmac
import json
import sys

import pytest
from pyspark import cloudpickle

from statekit import ValueStateDescriptor
from statekit.operators import KeyedProcessFunction, KeyedProcessOperator
from statekit.spark import run_keyed
from tests.checkpoint_support import edit_manifest

pytestmark = pytest.mark.spark
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import this test module

KEY = "a checkpoint key"


class Count(KeyedProcessFunction):
    def open(self, context):
        self.count = context.get_state(ValueStateDescriptor("count", default=0))

    def process_element(self, row, ctx):
        self.count.update(self.count.value() + 1)
        yield ctx.get_current_key(), self.count.value()


def _run(spark, tmp_path, rows: list[tuple]) -> None:
    df = spark.createDataFrame(rows, "k STRING, ts BIGINT, value BIGINT")
    run_keyed(df, key="k", time="ts", columns=["value"], operator_factory=lambda: KeyedProcessOperator(Count()),
              result_schema="k STRING, count BIGINT", output=str(tmp_path / "out"), checkpoint=str(tmp_path / "ckpt"),
              partitions=2, config={"backend": "heap"}, watermark_delay=0)


def test_a_manifest_edited_between_runs_stops_the_next_run(spark, tmp_path):
    rows = [(f"k{i % 6}", 1_000 + i, i) for i in range(120)]
    spark.conf.set("spark.statekit.checkpoint_key", KEY)
    try:
        _run(spark, tmp_path, rows[:60])
        _run(spark, tmp_path, rows[60:])  # restores the signed manifests of the first run
        manifests = sorted((tmp_path / "ckpt").glob("*/kg=*/epoch=*/manifest.json"))
        assert len({m.parent.name for m in manifests}) >= 2 and len({m.parent.parent for m in manifests}) == 2
        for m in manifests:
            body = json.loads(m.read_text())
            signature = body.pop("signature")
            body.pop("checksum")
            canonical = json.dumps(body, sort_keys=True).encode()
            assert signature == hmac.new(KEY.encode(), canonical, hashlib.sha256).hexdigest()
        counts = sorted(tuple(r) for r in spark.read.parquet(str(tmp_path / "out")).select("k", "count").collect())
        assert counts == sorted((f"k{k}", n) for k in range(6) for n in range(1, 21))  # state carried over
        edited = manifests[-1]  # the newest epoch of one partition: the next run restores from it
        edit_manifest(edited, lambda body: body["metadata"]["operator"].update(watermark=10**12))
        with pytest.raises(Exception) as err:
            _run(spark, tmp_path, [("k0", 5_000, 1)])
    finally:
        spark.conf.unset("spark.statekit.checkpoint_key")
    assert f"manifest {edited} fails its signature (edited, or written with another key)" in str(err.value)
    assert KEY not in str(err.value)
