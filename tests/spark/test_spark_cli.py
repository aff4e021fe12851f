"""`statekit sessionize` and `statekit demo` end to end on small data (csv and parquet, stream and
batch), and clear errors for a missing input, a missing column, an unparsable duration, no Java."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from statekit.cli import main
from tests.spark_support import clickstream, output_rows, spark_sessions, write_input

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def clicks():
    return clickstream(2000, 40, seed=5)


@pytest.mark.parametrize("fmt,mode", [("csv", "stream"), ("parquet", "batch"), ("csv", "batch"), ("parquet", "stream")])
def test_sessionize_cli(spark, clicks, tmp_path, fmt, mode, capsys):
    d = write_input(clicks, tmp_path / "in", files=3, fmt=fmt)
    csv_copy = write_input(clicks, tmp_path / "csv", files=1)  # Spark's reference reads csv
    argv = ["sessionize", "--input", str(d), "--output", str(tmp_path / "out"), "--key", "user_id", "--time", "ts_ms",
            "--gap", "30s", "--watermark-delay", "10s", "--agg", "sum:value", "--agg", "count", "--partitions", "2",
            "--mode", mode, "--final", "--backend", "heap" if mode == "batch" else "rocksdb"]
    assert main(argv) == 0
    assert output_rows(spark, tmp_path / "out") == spark_sessions(spark, csv_copy)
    out = capsys.readouterr().out
    assert f"{len(clicks):,} records" in out and "0 late, 0 invalid" in out


@pytest.mark.parametrize("args,message", [
    (["--input", "{tmp}/nope"], "input {tmp}/nope does not exist"),
    (["--key", "uid"], "key column 'uid' not found; columns: user_id, ts_ms, value"),
    (["--agg", "sum:price"], "--agg sum column 'price' not found"),
    (["--gap", "30 parsecs"], "--gap: cannot parse duration '30 parsecs'"),
    (["--watermark-delay", "soon"], "--watermark-delay: cannot parse duration 'soon'"),
])
def test_sessionize_cli_errors(spark, clicks, tmp_path, capsys, args, message):
    d = write_input(clicks[:100], tmp_path / "in", files=1)
    base = {"--input": str(d), "--output": str(tmp_path / "out"), "--key": "user_id", "--time": "ts_ms"}
    for flag, value in zip(args[::2], args[1::2]):
        base[flag] = value.format(tmp=tmp_path)
    argv = ["sessionize"] + [x for kv in base.items() for x in kv]
    assert main(argv) == 2
    assert message.format(tmp=tmp_path) in capsys.readouterr().err


@pytest.mark.slow
def test_a_glob_input_beside_a_stray_file_gives_exact_sessions_in_a_fresh_process(spark, clicks, tmp_path):
    d = write_input(clicks, tmp_path / "in", files=3)
    (d / "README.md").write_text("# clicks\n")  # beside the data: the glob leaves it out
    r = subprocess.run([sys.executable, "-m", "statekit.cli", "sessionize", "--input", f"{d}/*.csv", "--output",
                        str(tmp_path / "out"), "--key", "user_id", "--time", "ts_ms", "--gap", "30s", "--watermark-delay",
                        "10s", "--agg", "sum:value", "--agg", "count", "--final", "--partitions", "2"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"4 epochs, {len(clicks):,} records" in r.stdout and "0 late, 0 invalid" in r.stdout
    assert output_rows(spark, tmp_path / "out") == spark_sessions(spark, write_input(clicks, tmp_path / "csv", files=1))


def test_java_missing_is_a_clear_error_before_spark_starts(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = os.path.dirname(sys.executable)  # the venv's bin: python and statekit, no java
    r = subprocess.run([sys.executable, "-m", "statekit.cli", "sessionize", "--input", str(tmp_path), "--output",
                        str(tmp_path / "out"), "--key", "k", "--time", "t"], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2
    assert "Spark needs Java 17+: no 'java' on PATH and JAVA_HOME is not set" in r.stderr
    assert "Traceback" not in r.stderr


def test_demo_end_to_end(spark, tmp_path, capsys):
    assert main(["demo", "--events", "3000", "--keys", "50", "--files", "3", "--output", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "identical to the sort-and-scan reference" in out and str(tmp_path / "output") in out
    assert (tmp_path / "input" / "part-00002.csv").exists() and (tmp_path / "output" / "_metrics.jsonl").exists()
