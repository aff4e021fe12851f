"""A Spark Connect server for the tests, in a process of its own, and clients of it in fresh interpreters.

The server is not started in the test process: a Connect client there would clash with the suite's
classic SparkContext (pyspark refuses a Connect session beside it and, once one exists, routes every
``pyspark.sql.functions`` call to Connect). So the test session starts one server (``spark-submit``
of pyspark's own ``SparkConnectServer``) and each Connect client runs as a new interpreter: a new
Connect application each time, as a restore from a checkpoint must be tested anyway."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pyarrow.dataset as pads

from statekit.spark import find_java
from statekit.spark.session import QUIET_LOG_CONFIG

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
MASTER = "local[2]"
START_TIMEOUT_S = 180
CLIENT_TIMEOUT_S = 300

GUARD = '''
import atexit, sys
from pyspark.sql.connect.dataframe import DataFrame as _ConnectFrame
from pyspark.sql.connect.session import SparkSession as _ConnectSession

CLASSIC_ONLY = []


def _guarded(cls, names):
    original = cls.__getattr__

    def __getattr__(self, name):
        if name in names:
            CLASSIC_ONLY.append(f"{cls.__name__}.{name}")
        return original(self, name)

    cls.__getattr__ = __getattr__


_guarded(_ConnectSession, {"sparkContext", "_jvm", "_jsc", "_jconf", "_jsparkSession"})
_guarded(_ConnectFrame, {"rdd", "_jdf", "_jseq", "_jmap", "_jcols"})
_rdd = _ConnectFrame.rdd


def _rdd_reached(self):
    CLASSIC_ONLY.append("DataFrame.rdd")
    return _rdd.fget(self)


_ConnectFrame.rdd = property(_rdd_reached)


@atexit.register
def _report():
    if CLASSIC_ONLY:
        print(f"classic-only API reached on a Connect session: {sorted(set(CLASSIC_ONLY))}", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        import os
        os._exit(9)
'''
"""Prepended to a client script: a classic-only attribute reached on a Connect session or DataFrame is
recorded (even where the caller catches the error it raises) and fails the client with exit status 9."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("localhost", port)) == 0


def _spark_home() -> str:
    from pyspark.find_spark_home import _find_spark_home

    return _find_spark_home()


def client_env(**extra: str) -> dict[str, str]:
    """This environment without what would turn a new interpreter's pyspark to another server or a
    classic gateway; ``extra`` added."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET")}
    return {**env, **extra}


@dataclass
class ConnectServer:
    """A running Connect server (``local[2]``) whose Python workers run this interpreter (statekit installed)."""

    port: int
    process: subprocess.Popen
    log: Path

    @property
    def url(self) -> str:
        return f"sc://localhost:{self.port}"

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def stop(self) -> None:
        """Stop the server and what it started (its process group, started here)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()

    def run(self, script: str, *args: str) -> subprocess.CompletedProcess:
        """Run ``script`` (Python; its ``sys.argv[1]`` is this server's URL, then ``args``) in a new
        interpreter that fails when it reaches a classic-only API (``GUARD``). Asserts it succeeded."""
        return run_checked([sys.executable, "-c", GUARD + script, self.url, *args])


def run_checked(argv: Sequence[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``argv`` (environment ``env``, default ``client_env()``) with a deadline; assert exit status 0,
    showing its output's tail otherwise."""
    r = subprocess.run(list(argv), capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S,
                       env=env or client_env())
    assert r.returncode == 0, f"exit {r.returncode}\n--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-6000:]}"
    return r


def start_connect_server(work: Path) -> ConnectServer:
    """Start a Connect server on a free port with quiet logs (log in ``work``); return once it accepts."""
    home, port, log = _spark_home(), _free_port(), work / "connect-server.log"
    java_bin = os.path.dirname(find_java())
    env = client_env(SPARK_HOME=home, SPARK_CONNECT_MODE="0", PYSPARK_PYTHON=sys.executable,
                     PATH=f"{java_bin}{os.pathsep}{os.environ.get('PATH', '')}")
    argv = [os.path.join(home, "bin", "spark-submit"), "--class", SERVER_CLASS, "--master", MASTER,
            "--name", "statekit-connect-tests", "--conf", f"spark.connect.grpc.binding.port={port}",
            "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
            "--conf", "spark.default.parallelism=2",
            "--driver-java-options", f"-Dlog4j2.configurationFile={QUIET_LOG_CONFIG.as_uri()}"]
    with open(log, "wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=work,
                                   start_new_session=True)
    server = ConnectServer(port, process, log)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not _accepts(port):
        if process.poll() is not None or time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"the Connect server did not start on port {port} "
                               f"(exit {process.poll()}):\n{server.log_tail()}")
        time.sleep(0.5)
    return server


def parquet_rows(path: Path | str, columns: Sequence[str]) -> list[tuple]:
    """``columns`` of every row of the parquet files under ``path`` (those named ``_*``/``.*`` skipped),
    sorted; read with pyarrow, no Spark session needed."""
    table = pads.dataset(str(path), format="parquet", partitioning="hive").to_table(columns=list(columns))
    return sorted(zip(*(table.column(c).to_pylist() for c in columns)))
