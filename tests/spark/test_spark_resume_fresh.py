"""Resume and rescale in new applications: each run of `statekit sessionize` is a new interpreter and a
new SparkSession whose Python workers are never reused and fork from Spark's own daemon (statekit's
preloads the operators), so a restore cannot lean on modules an earlier task or the daemon imported
(windows are restored before anything imports the operators); state hosts start as new interpreters.
Every run after the first moves the job to another partition count, so each restore reads the logical
snapshot: a chain of runs alternating backends has each backend restore what the other wrote. A first run
restores nothing: it may run in the shared session."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import pytest

from statekit.jobs import sessionize
from statekit.memory_budget import TABLE_FRACTION, TABLE_ROW_BYTES
from statekit.spark import run_keyed
from statekit.testing import BACKENDS
from tests.spark_support import (FRESH_WORKERS, clickstream, code_module, copy_in_name_order, output_rows,
                                 spark_sessions, staged_input, statekit_process, succeeded, write_input)

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _sessionize(inp, out, ckpt, backend, partitions, final=False, confs=()):
    succeeded(statekit_process("sessionize", *confs, "--input", str(inp), "--output", str(out), "--checkpoint", str(ckpt),
                               "--key", "user_id", "--time", "ts_ms", "--gap", "30s", "--watermark-delay", "10s",
                               "--agg", "sum:value", "--agg", "count", "--backend", backend, "--partitions",
                               str(partitions), "--master", "local[2]", "--trigger", "available-now", *FRESH_WORKERS,
                               *(["--final"] if final else [])))


CHAIN = [*BACKENDS, BACKENDS[0]]
"""The backend of each run of a cells checkpoint: each one restores what another wrote."""
PARTITIONS = (2, 3, 1)  # then 2 -> 3 (a split) and 3 -> 1 (a merge), over and over


MOVES = ["--conf", f"spark.statekit.memory_budget={round(2 * 5 * TABLE_ROW_BYTES / TABLE_FRACTION)}"]
"""A budget whose table holds 5 session rows in each of a run's 2 state hosts: past them it moves to cells."""


@pytest.mark.parametrize("layout,backends,moves", [("cells", CHAIN, False), ("table", ["rocksdb"] * 3, False),
                                                  ("table", ["rocksdb"] * 3, True)], ids=["cells", "table", "table-moves"])
def test_resume_and_rescale_in_new_applications(spark, tmp_path, layout, backends, moves):
    """Only the first run names its layout: the later ones carry the checkpoint's (into another backend too).
    ``moves``: the later runs' budget moves the restored table to cells, and the rescales after that restore
    cells and moved pages."""
    clicks = clickstream(1500, 30, seed=11)
    staged = write_input(clicks, tmp_path / "staged", files=len(backends))
    reference = spark_sessions(spark, staged)
    inp, out, ckpt = tmp_path / "in", tmp_path / "out", tmp_path / "ckpt"
    inp.mkdir()
    files = sorted(staged.iterdir())
    for i, (f, backend, partitions) in enumerate(zip(files, backends, itertools.cycle(PARTITIONS))):
        copy_in_name_order([f], inp, first=i)
        if i == 0:  # nothing to restore yet
            sessionize(spark, input=str(inp), output=str(out), checkpoint=str(ckpt), key="user_id", time="ts_ms",
                       gap="30s", watermark_delay="10s", aggs=["sum:value", "count"], backend=backend,
                       partitions=partitions, state_layout=layout)
        else:
            _sessionize(inp, out, ckpt, backend, partitions, final=i == len(files) - 1, confs=MOVES if moves else ())
    assert output_rows(spark, out) == reference
    from statekit.checkpoint import inspect_checkpoint
    info = inspect_checkpoint(str(ckpt))
    held = {name for op in info.operators for p in op.partitions for e in p.epochs for name, n in e.states.items() if n["entries"]}
    assert ("session-table" in held) == (layout == "table")  # pages, or a cell per key
    assert ("sessions" in held) == (layout == "cells" or moves)  # a table that moved holds cells too


FACTORY = '''
from statekit import AggregateFunction


class SumCount(AggregateFunction):
    def create_accumulator(self):
        return (0, 0)

    def add(self, row, acc):
        return (acc[0] + row[-1], acc[1] + 1)  # value is the last of the columns

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1])

    def get_result(self, acc):
        return acc


class Factory:
    """Imports the operators only when called: a restore that needs them must not rely on it."""

    def __call__(self):
        from statekit.operators import EventTimeSessionWindows, ProcessWindowFunction, WindowOperator

        class Rows(ProcessWindowFunction):
            def process(self, key, context, elements):
                for s, c in elements:
                    yield (key, context.window.start, context.window.end, s, c)

        return WindowOperator(EventTimeSessionWindows.with_gap(30_000), function=SumCount(), window_function=Rows())
'''

RUN = '''
import sys
from statekit.spark import run_keyed, spark_session
from lazy_factory import Factory

inp, out, ckpt, backend, partitions, final = sys.argv[1:7]
spark = spark_session("local[2]", {{"spark.python.worker.reuse": "false", "spark.ui.enabled": "false",
                                   "spark.python.daemon.module": "pyspark.daemon", "spark.statekit.backend": backend}})
df = spark.readStream.option("header", "true").schema("{schema}").csv(inp)
run_keyed(df.select("user_id", "ts_ms", "value"), key="user_id", time="ts_ms", columns=["value"],
          operator_factory=Factory(), checkpoint=ckpt, output=out, partitions=int(partitions),
          watermark_delay="10s", final=final == "1", result_schema="{result_schema}")
'''
SCHEMA = "user_id STRING, ts_ms BIGINT, value BIGINT"
RESULT_SCHEMA = "user_id STRING, window_start BIGINT, window_end BIGINT, sum_value BIGINT, count BIGINT"


def test_run_keyed_rescale_in_a_new_application_with_a_lazy_factory(spark, tmp_path):
    """Each backend restores (in a new application, rescaled) what the other wrote with the lazy factory; the
    first run restores nothing: in the shared session."""
    staged = staged_input(spark, tmp_path, 1200, 25, seed=13, files=len(CHAIN))
    code, ckpt = tmp_path / "code", tmp_path / "ckpt"
    code.mkdir()
    (code / "lazy_factory.py").write_text(FACTORY)
    (code / "run.py").write_text(RUN.format(schema=SCHEMA, result_schema=RESULT_SCHEMA))
    for i, (backend, partitions) in enumerate(zip(CHAIN, itertools.cycle(PARTITIONS))):
        staged.add(i)
        if i == 0:
            with code_module(code, "lazy_factory") as lazy_factory:
                stream = spark.readStream.option("header", "true").schema(SCHEMA).csv(str(staged.inp))
                run_keyed(stream.select("user_id", "ts_ms", "value"), key="user_id", time="ts_ms", columns=["value"],
                          operator_factory=lazy_factory.Factory(), checkpoint=str(ckpt), output=str(staged.out),
                          partitions=partitions, watermark_delay="10s", result_schema=RESULT_SCHEMA,
                          config={"backend": backend})
        else:
            r = subprocess.run([sys.executable, str(code / "run.py"), str(staged.inp), str(staged.out), str(ckpt),
                                backend, str(partitions), "1" if i == len(CHAIN) - 1 else "0"], capture_output=True,
                               text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(code)})
            assert r.returncode == 0, r.stderr[-4000:]
    assert output_rows(spark, staged.out) == staged.reference
