"""Checkpoints and output on a real S3 endpoint (moto's server on 127.0.0.1), configured by the standard AWS
variables only: commit, restart, rescale, an outage of the store mid-run and retention through new applications
(one chain of them: each application's start costs a JVM); s3a:// is the same store;
Spark's own checkpoint on a scheme Hadoop cannot write is refused before anything runs."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pyarrow.dataset as ds
import pytest

from statekit.checkpoint import inspect_checkpoint
from tests.spark_support import COLUMNS, clickstream, copy_in_name_order, spark_sessions, write_input

pytestmark = [pytest.mark.spark, pytest.mark.slow]


class S3Server:
    """moto's S3 server on 127.0.0.1; ``stop``/``start`` keep its port and its data (moto's state lives in
    this process), as an outage of the store and its recovery."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self._make = ThreadedMotoServer
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        self.host, self.port = self.server.get_host_and_port()

    def stop(self) -> None:
        self.server.stop()

    def start(self) -> None:
        self.server = self._make(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()


@pytest.fixture(scope="module")
def s3_server():
    server = S3Server()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def s3_env(s3_server):
    import boto3

    host, port = s3_server.host, s3_server.port
    env = {"AWS_ENDPOINT_URL": f"http://{host}:{port}", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
           "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true",
           "AWS_MAX_ATTEMPTS": "1"}  # each S3 request once: statekit's RetryPolicy alone retries (the outage)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    boto3.client("s3").create_bucket(Bucket="statekit")
    yield env
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def _s3fs(env):
    import pyarrow.fs as pafs

    return pafs.S3FileSystem(endpoint_override=env["AWS_ENDPOINT_URL"], scheme="http", access_key="test",
                             secret_key="test", region="us-east-1")


def _argv(inp, *extra):
    """``statekit sessionize`` over ``inp`` as a new process (a new application)."""
    return [sys.executable, "-m", "statekit.cli", "sessionize", "--input", str(inp), "--key", "user_id", "--time",
            "ts_ms", "--gap", "30s", "--watermark-delay", "10s", "--agg", "sum:value", "--agg", "count",
            "--master", "local[2]", "--trigger", "available-now", "--conf", "spark.ui.enabled=false", *extra]


def _sessionize(inp, *extra):
    return subprocess.run(_argv(inp, *extra), capture_output=True, text=True, timeout=300, env=dict(os.environ))


def test_sessionize_on_s3_commit_restart_rescale_through_an_outage(spark, tmp_path, s3_env, s3_server):
    """Three applications on one S3 checkpoint (s3a:// for s3://), each at another partition count: the first
    commits; the second restores (rescaled) and the store goes away while it commits its epochs (uploads fail,
    the run fails); after it is back, the third restores (rescaled again) and finishes: every session exactly
    once, and the checkpoint keeps at most three epochs."""
    import boto3

    clicks = clickstream(1500, 25, seed=41)
    staged = write_input(clicks, tmp_path / "staged", files=5)
    reference = spark_sessions(spark, staged)
    inp = tmp_path / "in"
    inp.mkdir()
    files = sorted(staged.iterdir())

    def add(*indexes: int) -> None:
        for i in indexes:
            copy_in_name_order([files[i]], inp, first=i)

    where = ["--output", "s3://statekit/out", "--checkpoint", "s3a://statekit/ckpt",
             "--spark-checkpoint", str(tmp_path / "spark-ckpt"), "--backend", "rocksdb"]
    add(0)
    r = _sessionize(inp, *where, "--partitions", "2")
    assert r.returncode == 0, r.stderr[-3000:]
    add(1, 2, 3)  # three epochs: the store goes away once the first of them is committed
    run = subprocess.Popen(_argv(inp, *where, "--partitions", "3"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env=dict(os.environ))
    s3 = boto3.client("s3")
    deadline = time.time() + 240
    while time.time() < deadline and run.poll() is None:
        keys = s3.list_objects_v2(Bucket="statekit", Prefix="ckpt/_driver/").get("Contents", [])
        if any(k["Key"].endswith("epoch=1.json") for k in keys):
            break
        time.sleep(0.05)
    s3_server.stop()
    try:
        _, err = run.communicate(timeout=300)
    finally:
        s3_server.start()
    assert run.returncode != 0, f"the run must fail while the store is away: {err[-2000:]}"
    add(4)
    r = _sessionize(inp, *where, "--partitions", "2", "--final")
    assert r.returncode == 0, r.stderr[-3000:]
    fs = _s3fs(s3_env)
    table = ds.dataset("statekit/out", filesystem=fs, format="parquet", partitioning="hive",
                       exclude_invalid_files=True).to_table(columns=COLUMNS)
    assert sorted(tuple(r[c] for c in COLUMNS) for r in table.to_pylist()) == reference
    info = inspect_checkpoint("s3://statekit/ckpt")
    [op] = info.operators
    assert len(op.partitions) >= 2 and all(len(p.epochs) <= 3 for p in op.partitions)  # retention (retain=3)


def test_spark_checkpoint_on_s3_without_a_connector_is_refused_before_anything_runs(tmp_path, s3_env):
    write_input(clickstream(100, 5, seed=1), tmp_path / "in", files=1)
    r = _sessionize(tmp_path / "in", "--output", "s3://statekit/other", "--checkpoint", "s3://statekit/other-ckpt")
    assert r.returncode == 2, r.stderr[-3000:]
    assert "--spark-checkpoint" in r.stderr and "Hadoop" in r.stderr and "Traceback" not in r.stderr


def test_delta_output_on_s3_from_the_aws_variables_alone(spark, tmp_path, s3_env):
    """The Delta sink writes from the driver, so a local checkpoint with a Delta table on S3 (s3a:// too)."""
    from deltalake import DeltaTable

    from statekit.jobs import sessionize
    from statekit.spark import DeltaSink

    clicks = clickstream(600, 12, seed=45)
    d = write_input(clicks, tmp_path / "in", files=2)
    sink = DeltaSink("s3a://statekit/delta-sessions")
    args = dict(input=str(d), output=str(tmp_path / "out"), key="user_id", time="ts_ms", gap="30s",
                watermark_delay="10s", aggs=["sum:value", "count"], backend="heap", partitions=2, final=True)
    sessionize(spark, sink=sink, **args)
    sessionize(spark, sink=sink, **args)  # a rerun on the same checkpoint adds nothing
    rows = DeltaTable("s3://statekit/delta-sessions").to_pandas()[COLUMNS]
    assert sorted(map(tuple, rows.itertuples(index=False))) == spark_sessions(spark, d)


def test_one_writer_on_s3_the_lease_is_taken_by_a_conditional_put(s3_env):
    from statekit.checkpoint import CheckpointLease, LeaseHeldError, Storage

    storage = Storage("s3://statekit/lease-test")
    assert storage.create("_x/one", b"first") is True
    assert storage.create("_x/one", b"second") is False  # never replaced
    assert storage.read("_x/one") == b"first"
    holder = CheckpointLease("s3://statekit/lease-test", timeout_seconds=60).held("run on s3")
    try:
        with pytest.raises(LeaseHeldError, match="s3a://statekit/lease-test is in use by another run: run on s3"):
            CheckpointLease("s3a://statekit/lease-test").acquire("second run")
    finally:
        holder.release()
    assert CheckpointLease("s3://statekit/lease-test").acquire("after release") == 2
