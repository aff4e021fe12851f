"""A changed job on an existing checkpoint, each run on it a new application with fresh Python workers
(the first run, which restores nothing, runs in the shared session): an aggregate added to `statekit
sessionize` is refused before anything runs (checkpoint and output untouched), then migrated with
--migrate-state while the job also moves backend and partition count; and a run_keyed job whose own
AggregateFunction declares a new accumulator version with a migration."""

from __future__ import annotations

import csv
import hashlib
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from statekit.checkpoint import JobChangeError
from statekit.jobs import sessionize
from statekit.spark import run_keyed
from tests.spark_support import COLUMNS, DELAY, FRESH_WORKERS, GAP, code_module, metrics, staged_input, statekit_process

pytestmark = [pytest.mark.spark, pytest.mark.slow]

def _sessionize(inp: Path, out: Path, backend: str, partitions: int, *extra: str) -> subprocess.CompletedProcess:
    return statekit_process("sessionize", "--input", str(inp), "--output", str(out), "--key", "user_id", "--time",
                            "ts_ms", "--gap", GAP, "--watermark-delay", DELAY, "--backend", backend, "--partitions",
                            str(partitions), "--master", "local[2]", "--trigger", "available-now", *FRESH_WORKERS, *extra)


def _records(path: Path) -> list[tuple[str, int, int]]:
    with open(path) as f:
        return [(r["user_id"], int(r["ts_ms"]), int(r["value"])) for r in csv.DictReader(f)]


def _check_max(spark, out: Path, rows: list[tuple], later: list[tuple[str, int, int]]) -> dict:
    """Sessions fired before the migration have no max; the others the max of their records that came
    after it (a session open across the change aggregates from there on). Returns the migration epoch's metrics."""
    lines = metrics(out)
    at = next(i for i, m in enumerate(lines) if m["job_changes"])
    before = [str(out / f"epoch={m['epoch']}") for m in lines[:at] if m["results"]]
    fired_before = {tuple(r) for r in spark.read.parquet(*before).select(*COLUMNS[:3]).collect()} if before else set()
    by_key = defaultdict(list)
    for key, ts, value in later:
        by_key[key].append((ts, value))
    for k, s, e, *_, got in rows:
        expected = None if (k, s, e) in fired_before else max((v for ts, v in by_key[k] if s <= ts < e), default=None)
        assert got == expected, (k, s, e, got, expected)
    assert fired_before and any(r[-1] is not None for r in rows)  # both kinds of sessions were met
    assert all(m["state_migrated"] == 0 for m in lines[:at] + lines[at + 1:])  # migrated once, as restored
    return lines[at]


def _tree(root: Path) -> dict[str, str]:
    """Every file's digest; the checkpoint's lease files aside (a refused run took the lease, then released it)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "_lease" not in p.parts}


@pytest.mark.parametrize("first,then", [("rocksdb", "heap"), ("heap", "heap")], ids=["rocksdb-to-heap", "heap"])
def test_sessionize_refuses_then_migrates_an_added_aggregate(spark, tmp_path, first, then):
    """``then`` == ``first``: the backend's own snapshots are migrated; else the logical one, into the other."""
    staged = staged_input(spark, tmp_path, 1500, 30, seed=5, files=4)
    inp, out, files, add = staged.inp, staged.out, staged.files, staged.add
    aggs = ["--agg", "sum:value", "--agg", "count"]

    add(0)
    add(1)
    sessionize(spark, input=str(inp), output=str(out), key="user_id", time="ts_ms", gap=GAP, watermark_delay=DELAY,
               aggs=["sum:value", "count"], backend=first, partitions=2)  # two epochs: the second fires sessions
    before = _tree(out)
    add(2)
    add(3)  # two more epochs, then the final one
    if first != then:  # once: without --migrate-state the added aggregate is refused before anything runs
        refused = _sessionize(inp, out, first, 2, *aggs, "--agg", "max:value")
        assert refused.returncode == 2, refused.stderr[-3000:]
        msg = refused.stderr
        assert "Traceback" not in msg and "Py4J" not in msg
        assert "operator state layout" in msg and '["max", 2]' in msg and "result schema" in msg
        assert "new checkpoint" in msg and "--final" in msg and "--migrate-state" in msg
        assert _tree(out) == before  # checkpoint (under the output) and output untouched
    migrated = _sessionize(inp, out, then, 3, *aggs, "--agg", "max:value", "--migrate-state", "--final")
    assert migrated.returncode == 0, migrated.stderr[-3000:]

    table = spark.read.option("mergeSchema", "true").parquet(str(out))
    rows = sorted(tuple(r) for r in table.select(*COLUMNS, "max_value").collect())
    assert [r[:5] for r in rows] == staged.reference  # every session, its sum and count carried across the change
    migration = _check_max(spark, out, rows, _records(files[2]) + _records(files[3]))
    assert migration["state_migrated"] > 0 and migration["rescaled_from"] == 2
    changes = migration["job_changes"]
    assert "partitions: 2 -> 3" in changes and "state migrated from version 1 to 2" in changes
    assert (f'backend: "{first}" -> "{then}"' in changes) == (first != then)


FACTORY = '''
from statekit import AggregateFunction


class Stats(AggregateFunction):
    """(sum, count) in version 1; version 2 adds the max of the values added since."""

    def __init__(self, version):
        self.version = version

    def create_accumulator(self):
        return [0, 0] if self.version == 1 else [0, 0, None]

    def add(self, row, acc):
        acc[0] += row[-1]
        acc[1] += 1
        if self.version == 2:
            acc[2] = row[-1] if acc[2] is None else max(acc[2], row[-1])
        return acc

    def merge(self, a, b):
        out = [a[0] + b[0], a[1] + b[1]]
        if self.version == 2:
            out.append(b[2] if a[2] is None else (a[2] if b[2] is None else max(a[2], b[2])))
        return out

    def get_result(self, acc):
        return tuple(acc) if self.version == 2 else (*acc, None)

    def state_layout(self):
        return {"class": "Stats", "slots": self.version + 1}

    def accumulator_version(self):
        return self.version

    def accumulator_migration(self):
        return (lambda version, acc: acc + [None]) if self.version == 2 else None


class Factory:
    def __init__(self, version):
        self.version = version

    def __call__(self):
        from statekit.operators import EventTimeSessionWindows, ProcessWindowFunction, WindowOperator

        class Rows(ProcessWindowFunction):
            def process(self, key, context, elements):
                for s, c, m in elements:
                    yield (key, context.window.start, context.window.end, s, c, m)

        return WindowOperator(EventTimeSessionWindows.with_gap(30_000), function=Stats(self.version),
                              window_function=Rows())
'''

SCHEMA = "user_id STRING, window_start BIGINT, window_end BIGINT, sum_value BIGINT, count BIGINT, max_value BIGINT"

RUN = '''
import sys
from statekit.spark import run_keyed, spark_session
from stats_factory import Factory

inp, out, ckpt, backend, version, final = sys.argv[1:7]
spark = spark_session("local[2]", {"spark.python.worker.reuse": "false", "spark.ui.enabled": "false",
                                   "spark.python.daemon.module": "pyspark.daemon", "spark.statekit.backend": backend})
df = (spark.readStream.option("header", "true").option("maxFilesPerTrigger", 1)
      .schema("user_id STRING, ts_ms BIGINT, value BIGINT").csv(inp))
run_keyed(df.select("user_id", "ts_ms", "value"), key="user_id", time="ts_ms", columns=["value"],
          operator_factory=Factory(int(version)), checkpoint=ckpt, output=out, partitions=2,
          watermark_delay="10s", final=final == "1", result_schema="%s")
''' % SCHEMA


def test_run_keyed_migrates_a_user_aggregate(spark, tmp_path):
    """Heap writes version 1; RocksDB restores it in a new application (another backend: through the logical
    snapshot) and migrates."""
    staged = staged_input(spark, tmp_path, 1200, 25, seed=8, files=3)
    inp, out, files, ckpt, code = staged.inp, staged.out, staged.files, tmp_path / "ckpt", tmp_path / "code"
    code.mkdir()
    (code / "stats_factory.py").write_text(FACTORY)
    (code / "run.py").write_text(RUN)
    env_path = os.pathsep.join([str(code), os.environ.get("PYTHONPATH", "")])

    staged.add(0)
    staged.add(1)
    with code_module(code, "stats_factory") as stats_factory:  # the first run restores nothing: in the shared
        Factory, Stats = stats_factory.Factory, stats_factory.Stats  # session; two epochs, the second fires sessions
        stream = (spark.readStream.option("header", "true").option("maxFilesPerTrigger", 1)
                  .schema("user_id STRING, ts_ms BIGINT, value BIGINT").csv(str(inp)))
        run_keyed(stream.select("user_id", "ts_ms", "value"), key="user_id", time="ts_ms", columns=["value"],
                  operator_factory=Factory(1), checkpoint=str(ckpt), output=str(out), partitions=2,
                  watermark_delay="10s", result_schema=SCHEMA, config={"backend": "heap"})
    staged.add(2)
    before = sorted(p.name for p in out.rglob("*"))

    # version 2 without its migration: refused by the driver before anything runs (nothing written)
    class Unmigrated(Stats):
        def accumulator_migration(self):
            return None

    class UnmigratedFactory(Factory):
        def __call__(self):
            op = super().__call__()
            op.function = Unmigrated(2)
            return op

    df = spark.read.option("header", "true").schema("user_id STRING, ts_ms BIGINT, value BIGINT").csv(str(inp))
    with pytest.raises(JobChangeError, match=r'operator state layout.*"slots": 2.*"slots": 3.*"version": 2.*accumulator_migration'):
        run_keyed(df, key="user_id", time="ts_ms", columns=["value"], operator_factory=UnmigratedFactory(2),
                  checkpoint=str(ckpt), output=str(out), partitions=2, watermark_delay="10s", result_schema=SCHEMA,
                  mode="batch")
    assert sorted(p.name for p in out.rglob("*")) == before

    argv = [sys.executable, str(code / "run.py"), str(inp), str(out), str(ckpt), "rocksdb", "2", "1"]
    migrated = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=str(code),
                              env={**os.environ, "PYTHONPATH": env_path, "PYTHONHASHSEED": "0"})
    assert migrated.returncode == 0, (migrated.stdout[-2000:], migrated.stderr[-4000:])
    rows = sorted(tuple(r) for r in spark.read.parquet(str(out)).select(*COLUMNS, "max_value").collect())
    assert [r[:5] for r in rows] == staged.reference
    migration = _check_max(spark, out, rows, _records(files[2]))
    assert migration["state_migrated"] > 0
    assert "state migrated from version 1 to 2" in migration["job_changes"]
