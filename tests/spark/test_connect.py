"""statekit on a Spark Connect session (issue 36): a user's window operator through run_keyed, resumed in a
second Connect application; `statekit sessionize --remote`; one checkpoint moved from classic to Connect and
back; read_state_df and an EpochSink. Every Connect client is a new interpreter on the shared local server
(tests/connect_support.py) that fails if it reaches a classic-only API; results are exact against the
plain-Python sort-and-scan reference. `statekit bench spark --remote URL` runs here too, at smoke size, on the
same server (one server start for the module)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from statekit.bench.runner import run_parts
from statekit.checkpoint import inspect_checkpoint
from statekit.clickstream import sessionize_reference
from statekit.spark import find_java
from statekit.testing import BACKENDS
from tests.connect_support import client_env, parquet_rows, run_checked
from tests.spark_support import COLUMNS, StagedInput, clickstream, write_input

pytestmark = [pytest.mark.spark, pytest.mark.slow]

GAP_MS = 30_000
STATEKIT = str(Path(sys.executable).with_name("statekit"))


def staged(root: Path, events: int, keys: int, seed: int, files: int) -> StagedInput:
    """Clickstream csv files staged to be added one per application, and the sessions of all of them."""
    clicks = clickstream(events, keys, seed=seed)
    paths = write_input(clicks, root / "staged", files=files)
    inp = root / "in"
    inp.mkdir()
    return StagedInput(sorted(paths.iterdir()), sessionize_reference(clicks, GAP_MS), inp, root / "out")


def records(path: Path) -> int:
    """The records of a csv file (its lines after the header)."""
    return len(path.read_text().splitlines()) - 1


def read_once(stdout: str, path: Path) -> bool:
    """Whether a ``statekit sessionize`` run's closing line counts exactly the records of ``path``."""
    return f"epochs, {records(path):,} records, " in stdout and "0 late, 0 invalid" in stdout


def backends_of(checkpoint: Path) -> set[str]:
    info = inspect_checkpoint(str(checkpoint))
    return {e.backend for op in info.operators for p in op.partitions for e in p.epochs}


RUN_KEYED = '''
import json, sys
from pyspark.sql import SparkSession
from statekit import AggregateFunction
from statekit.operators import EventTimeSessionWindows, ProcessWindowFunction, WindowOperator
from statekit.spark import run_keyed


class SumCount(AggregateFunction):
    def create_accumulator(self):
        return (0, 0)

    def add(self, row, acc):
        return (acc[0] + row[0], acc[1] + 1)

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1])

    def get_result(self, acc):
        return acc


class Sessions(ProcessWindowFunction):
    def process(self, key, context, elements):
        for total, count in elements:
            yield (key, context.window.start, context.window.end, total, count)


url, inp, out, ckpt, backend, final = sys.argv[1:]
spark = SparkSession.builder.remote(url).getOrCreate()
try:
    df = spark.readStream.option("header", "true").schema("user_id STRING, ts_ms BIGINT, value BIGINT").csv(inp)
    summary = run_keyed(
        df, key="user_id", time="ts_ms", columns=["value"], checkpoint=ckpt, output=out, partitions=2,
        operator_factory=lambda: WindowOperator(EventTimeSessionWindows.with_gap(30_000), function=SumCount(),
                                                window_function=Sessions()),
        result_schema="user_id STRING, window_start BIGINT, window_end BIGINT, sum_value BIGINT, count BIGINT",
        watermark_delay="10s", final=final == "1", config={"backend": backend})
    print(json.dumps({"records": summary.total("records_in"), "late": summary.total("late")}))
finally:
    spark.stop()
'''


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_user_window_operator_resumes_in_a_second_connect_application(connect_spark, tmp_path, backend):
    """Session windows of a user's AggregateFunction + ProcessWindowFunction over a streaming csv directory:
    the first application reads the first file, the second (a new interpreter) the second and closes every
    session; each record is read once and the sessions are exactly the reference's."""
    job = staged(tmp_path, 400, 20, seed=36, files=2)
    ckpt = tmp_path / "ckpt"
    for i in range(2):
        job.add(i)
        r = connect_spark.run(RUN_KEYED, str(job.inp), str(job.out), str(ckpt), backend, "1" if i == 1 else "0")
        assert json.loads(r.stdout.strip().splitlines()[-1]) == {"records": records(job.files[i]), "late": 0}
    assert parquet_rows(job.out, COLUMNS) == job.reference
    assert backends_of(ckpt) == {backend}


def _sessionize_argv(job: StagedInput, ckpt: Path, backend: str, final: bool) -> list[str]:
    return ["sessionize", "--input", str(job.inp), "--output", str(job.out), "--checkpoint", str(ckpt),
            "--key", "user_id", "--time", "ts_ms", "--gap", "30s", "--watermark-delay", "10s", "--agg", "sum:value",
            "--agg", "count", "--backend", backend, "--partitions", "2", *(["--final"] if final else [])]


def test_sessionize_remote_from_the_command_line(connect_spark, tmp_path):
    """``statekit sessionize --remote sc://...``, then a rerun naming the server by ``SPARK_REMOTE`` with more input."""
    job = staged(tmp_path, 400, 20, seed=37, files=2)
    ckpt = tmp_path / "ckpt"
    job.add(0)
    r = run_checked([STATEKIT, *_sessionize_argv(job, ckpt, "rocksdb", final=False), "--remote", connect_spark.url])
    assert read_once(r.stdout, job.files[0])
    job.add(1)
    r = run_checked([STATEKIT, *_sessionize_argv(job, ckpt, "rocksdb", final=True)],
                    env=client_env(SPARK_REMOTE=connect_spark.url))
    assert read_once(r.stdout, job.files[1])
    assert parquet_rows(job.out, COLUMNS) == job.reference


def test_a_job_moves_from_classic_to_connect_and_back(spark, connect_spark, tmp_path, capsys):
    """One checkpoint: the first file on the suite's classic session, the second on Connect, the third (and
    the final epoch) on the classic session again."""
    from statekit.cli import main

    job = staged(tmp_path, 600, 20, seed=38, files=3)
    ckpt = tmp_path / "ckpt"
    job.add(0)
    assert main(_sessionize_argv(job, ckpt, "rocksdb", final=False)) == 0
    assert read_once(capsys.readouterr().out, job.files[0])
    job.add(1)
    r = run_checked([STATEKIT, *_sessionize_argv(job, ckpt, "rocksdb", final=False), "--remote", connect_spark.url])
    assert read_once(r.stdout, job.files[1])
    job.add(2)
    assert main(_sessionize_argv(job, ckpt, "rocksdb", final=True)) == 0
    assert read_once(capsys.readouterr().out, job.files[2])
    assert parquet_rows(job.out, COLUMNS) == job.reference


STATE_AND_SINK = '''
import json, sys
from pyspark.sql import SparkSession
from statekit.checkpoint import inspect_checkpoint
from statekit.spark import EpochSink, read_state_df, run_keyed
from statekit.operators import EventTimeSessionWindows, WindowOperator
from statekit.testing.contract import SumCount


class ValueSum(SumCount):
    def add(self, row, acc):
        return super().add(row[0], acc)


class Copy(EpochSink):
    """Each epoch's results and side outputs as parquet under ``target``, overwritten by a replay."""

    def __init__(self, target):
        self.target = target

    def write(self, results, epoch_id):
        results.write.mode("overwrite").parquet(f"{self.target}/results/epoch={epoch_id}")

    def write_side(self, tag, rows, epoch_id):
        rows.write.mode("overwrite").parquet(f"{self.target}/{tag}/epoch={epoch_id}")


url, inp, out, ckpt, target, state_out = sys.argv[1:]
spark = SparkSession.builder.remote(url).getOrCreate()
try:
    df = (spark.readStream.option("header", "true").option("maxFilesPerTrigger", 1)
          .schema("user_id STRING, ts_ms BIGINT, value BIGINT").csv(inp))
    run_keyed(df, key="user_id", time="ts_ms", columns=["value"], checkpoint=ckpt, output=out, partitions=2,
              operator_factory=lambda: WindowOperator(EventTimeSessionWindows.with_gap(30_000), function=ValueSum()),
              result_schema="sum_value BIGINT, count BIGINT", watermark_delay="10s", sink=Copy(target))
    info = inspect_checkpoint(ckpt)
    names = {n for op in info.operators for p in op.partitions for e in p.epochs for n in e.states}
    states = {n: sorted(tuple(r) for r in read_state_df(spark, ckpt, "operator", n).collect()) for n in names}
    with open(state_out, "w") as f:
        json.dump(states, f)
finally:
    spark.stop()
'''


def test_read_state_df_and_an_epoch_sink_on_connect(spark, connect_spark, tmp_path):
    """A streaming run on Connect with an EpochSink (two epochs, not final: the second fires the sessions the
    first one's watermark closed): the sink gets each epoch's results and its invalid rows (a record without a
    key) as the output directory holds them; read_state_df on Connect reads the open sessions'
    state as it does on the classic session."""
    from statekit.spark import read_state_df

    job = staged(tmp_path, 300, 15, seed=39, files=2)
    with open(job.files[1], "a") as f:
        f.write(f",{job.reference[-1][1]},7\n")  # no key (at a time of the input): invalid
    target, state_out = tmp_path / "sink", tmp_path / "state.json"
    job.add(0)
    job.add(1)
    connect_spark.run(STATE_AND_SINK, str(job.inp), str(job.out), str(tmp_path / "ckpt"), str(target), str(state_out))
    got = json.loads(state_out.read_text())
    assert got
    for name, rows in got.items():
        classic = sorted(tuple(r) for r in read_state_df(spark, str(tmp_path / "ckpt"), "operator", name).collect())
        assert [tuple(r) for r in rows] == classic and classic, name
    results = parquet_rows(job.out, ["sum_value", "count", "epoch"])
    assert results and parquet_rows(target / "results", ["sum_value", "count", "epoch"]) == results
    assert parquet_rows(target / "invalid", ["user_id", "reason"]) == [(None, "null key")]


SERVER_PYTHON = '''
import sys
from statekit.spark import run_keyed, spark_session
from statekit.spark.server_python import ServerPythonError
from statekit.operators import EventTimeSessionWindows, WindowOperator
from statekit.testing.contract import SumCount

spark = spark_session(remote="local[2]")
try:
    print(spark.conf.get("spark.python.daemon.module"))
    df = spark.createDataFrame([("u1", 1_000, 5)], "user_id STRING, ts_ms BIGINT, value BIGINT")
    run_keyed(df, key="user_id", time="ts_ms", columns=["value"], output=sys.argv[1], partitions=1,
              operator_factory=lambda: WindowOperator(EventTimeSessionWindows.with_gap(30_000), function=SumCount()),
              result_schema="sum_value BIGINT, count BIGINT")
except ServerPythonError as e:
    print(e)
finally:
    spark.stop()
'''


def test_a_connect_server_whose_python_lacks_statekit_is_named_before_any_epoch(tmp_path):
    """A Connect server started here (``remote="local[2]"``) whose workers run ``python3`` from the PATH, a Python
    without statekit (as when a script runs the virtualenv's python without activating it): ``run_keyed`` refuses
    before any epoch, naming PYSPARK_PYTHON and the fix; the session gets no static setting it would refuse
    (pyspark's CANNOT_MODIFY_CONFIG warnings), which the server's JVM got instead."""
    system_python = "/usr/bin/python3"
    assert subprocess.run([system_python, "-c", "import statekit"], capture_output=True).returncode != 0
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "python3").symlink_to(system_python)
    java_bin = os.path.dirname(find_java())
    env = client_env(PYSPARK_PYTHON="python3", PATH=os.pathsep.join([str(shim), java_bin, "/usr/bin", "/bin"]))
    r = run_checked([sys.executable, "-c", SERVER_PYTHON, str(tmp_path / "out")], env=env)
    daemon, message = r.stdout.strip().splitlines()[-2:]
    assert daemon == "statekit.spark.runtime.daemon"
    assert message.startswith("the Spark Connect server's Python workers cannot run a task ("), message
    assert "they run PYSPARK_PYTHON of the server's environment, else python3 on its PATH" in message
    assert f"set PYSPARK_PYTHON={sys.executable} in the environment before the session starts its server" in message
    assert not (tmp_path / "out" / "_checkpoint").exists()  # refused before the run took its checkpoint
    assert "CANNOT_MODIFY_CONFIG" not in r.stderr, r.stderr[-3000:]


def test_remote_applies_to_the_spark_part_only(tmp_path):
    with pytest.raises(SystemExit, match="--remote sc://localhost:1 applies to the spark part only"):
        run_parts(["windows"], True, tmp_path, remote="sc://localhost:1")


def test_bench_spark_on_connect_reports_every_variant_on_the_reference(connect_spark, tmp_path):
    """The bench's runs and report on Connect sessions (issue 36), on this module's server: every variant's
    sessions are the reference's."""
    written = run_parts(["spark"], True, tmp_path, remote=connect_spark.url)
    assert written["spark"]["json"].name == "spark-connect.json"
    data = json.loads(written["spark"]["json"].read_text())
    assert data["params"]["master"] == connect_spark.url and data["params"]["session"].startswith("Spark Connect")
    sessions = [f for f in data["figures"] if f["name"].startswith("sessions vs")]
    assert sessions
    for f in sessions:
        assert "DIFFERS" not in f["notes"] and "not compared" not in f["notes"], f["notes"]
        assert f["heap"] == f["rocksdb"] == f["baseline"] and f["heap"]
