"""Executor processes talk only to their own application (issue 35): state hosts keep their sockets only
in a directory of this user closed to everyone else (else a task keeps its state in the worker, with equal
results); a host and a worker, and the host spawner and its daemon's workers, prove a secret to each
other before either reads a pickle (the spawner reads JSON only), so a peer of the same user that knows
no secret is dropped unread and cannot stall a host; no secret is in any process's arguments or
environment."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path

import psutil
import pyarrow as pa
import pytest

from statekit.jobs.sessionize import SessionOperatorFactory
from statekit.spark.plan import EpochPlan, JobPlan
from statekit.spark.records import TS
from statekit.spark.runtime import StatePlacement, host, spawner
from statekit.spark.runtime.handshake import HANDSHAKE_SECONDS, accept
from statekit.spark.schemas import session_result_schema
from statekit.spark.slots import LocalRun
from statekit.timers import MAX_TIMESTAMP
from tests.spark_support import DELAY, GAP, clickstream, output_rows, spark_sessions, statekit_process, succeeded, write_input

pytestmark = pytest.mark.spark
COLUMNS = ("user_id", "ts_ms", "value")
RUNTIME = f"statekit-hosts-{os.geteuid()}"


class Payload:
    """A pickle whose loading creates ``marker``: proof that someone unpickled it."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


@pytest.fixture
def temp(monkeypatch):
    """A private temporary directory for ``tempfile.gettempdir()`` (short: socket paths have a length limit);
    the real one's state hosts' directory is never touched."""
    path = tempfile.mkdtemp(prefix="sk-")
    monkeypatch.setattr(tempfile, "tempdir", path)
    monkeypatch.delenv(spawner.SPAWNER_ENV, raising=False)  # hosts start as new interpreters here
    yield Path(path)
    shutil.rmtree(path, ignore_errors=True)


# -- the runtime directory ---------------------------------------------------------------------------------

def test_a_missing_runtime_directory_is_made_private(temp):
    path = host.runtime_dir()
    st = os.lstat(path)
    assert path == str(temp / RUNTIME)
    assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()
    assert host.runtime_dir() == path  # and used again as it is


def _open_to_all(path: Path) -> None:
    path.mkdir()
    path.chmod(0o777)


def _symlink(path: Path) -> None:
    target = path.with_name("elsewhere")
    target.mkdir(mode=0o700)
    path.symlink_to(target)


def _file(path: Path) -> None:
    path.write_text("")


def _another_users(path: Path) -> None:
    path.mkdir(mode=0o700)
    os.chown(path, 65534, 65534)


@pytest.mark.parametrize("make,problem", [
    (_open_to_all, r"\(owner uid \d+, mode 0777\) is open to its group or other users"),
    (_symlink, r"\(owner uid \d+, mode 0777\) is a symbolic link"),
    (_file, r"\(owner uid \d+, mode 0\d\d\d\) is not a directory"),
    (_another_users, r"\(owner uid 65534, mode 0700\) is owned by another user \(uid 65534, this process runs as uid"),
])
def test_a_runtime_directory_that_is_not_this_users_alone_is_refused(temp, monkeypatch, make, problem):
    path = temp / RUNTIME
    make(path)
    if make is _another_users and os.geteuid() != 0:  # chown needs root: the same stat result, as lstat shows it
        lstat, real = os.lstat, os.lstat(path)
        fake = os.stat_result((real.st_mode, real.st_ino, real.st_dev, real.st_nlink, 65534, 65534, *real[6:10]))
        monkeypatch.setattr(host.os, "lstat", lambda p: fake if str(p) == str(path) else lstat(p))
    with pytest.raises(host.RuntimeDirError, match=rf"directory {path} {problem}") as caught:
        host.runtime_dir()
    assert "Remove it" in str(caught.value)


# -- partitions' state below Spark: a job, its epochs, a host or the worker ------------------------------------

def _job(checkpoint: Path, secret: bytes) -> JobPlan:
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    fields = StructType([StructField("user_id", StringType(), True), StructField("ts_ms", LongType(), True),
                         StructField("value", LongType(), True)])
    with_reason = to_arrow_schema(StructType([*fields.fields, StructField("reason", StringType(), True)]))
    result = session_result_schema(fields, "user_id", [("sum_value", "sum", "value"), ("count", "count", None)])
    factory = SessionOperatorFactory(30_000, (("sum", 2), ("count", None)), ("sum_value", "count"))
    return JobPlan("sessionize", factory, str(checkpoint), {"backend": "heap"}, 1, 128, COLUMNS, COLUMNS, None,
                   to_arrow_schema(result), with_reason, with_reason, None,
                   placement=StatePlacement(host_idle_seconds=60.0, app_id=f"test-{checkpoint}", secret=secret))


def _batches() -> list[pa.Table]:
    """Two epochs of records in replay order (a few hundred), then the final epoch's none."""
    clicks = sorted(clickstream(300, 12, seed=5), key=lambda c: c.ts_ms)
    tables = []
    for part in (clicks[:150], clicks[150:], []):
        ts = [c.ts_ms for c in part]
        tables.append(pa.table({"user_id": pa.array([c.user_id for c in part], pa.string()),
                                "ts_ms": pa.array(ts, pa.int64()),
                                "value": pa.array([c.value for c in part], pa.int64()), TS: pa.array(ts, pa.int64())}))
    return tables


def _epoch(job: JobPlan, number: int, batch: pa.Table) -> tuple[object, list[tuple], bool]:
    """Run epoch ``number`` (the last of ``_batches`` is final) through ``host.hosted_run``: the run it
    used, its result rows, whether it took the fast path."""
    final = batch.num_rows == 0
    ts = batch.column(TS).to_pylist()
    plan = EpochPlan(number, number - 1 if number else None, MAX_TIMESTAMP if final else max(ts) - 10_000, final=final)
    run = host.hosted_run(job, plan, 0, LocalRun)
    results: list[pa.Table] = []
    try:
        done = run.process(batch, results.append)
        run.commit(max(ts) if ts else None)
    except BaseException:
        run.abort()
        raise
    return run, [tuple(r.values()) for t in results for r in t.to_pylist()], done.fast


def _run_all(job: JobPlan) -> tuple[list[type], list[tuple]]:
    kinds, rows = [], []
    for number, batch in enumerate(_batches()):
        run, results, _ = _epoch(job, number, batch)
        kinds.append(type(run))
        rows += results
    return kinds, sorted(rows)


def _sock(job: JobPlan) -> str:
    """The socket of the job's (only) host."""
    return os.path.join(host.runtime_dir(), host.host_name(job.placement.app_id, job.operator_id, job.checkpoint, 0)) + ".sock"


def _host_pid(job: JobPlan) -> int:
    with open(_sock(job)[:-len(".sock")] + ".pid") as f:
        return int(f.read())


def test_where_the_runtime_directory_is_unusable_the_state_stays_in_the_worker_with_equal_results(temp, capfd,
                                                                                                monkeypatch):
    hosted_kinds, hosted = _run_all(_job(temp / "hosted", os.urandom(32)))
    (temp / RUNTIME).chmod(0o777)
    kinds, fallen_back = _run_all(_job(temp / "worker", os.urandom(32)))
    assert hosted_kinds == [host.HostedRun] * 3 and kinds == [LocalRun] * 3
    assert fallen_back == hosted and len(hosted) > 10  # every session fired by the final epoch
    said = [line for line in capfd.readouterr().err.splitlines() if "not in state hosts" in line]
    assert len(said) <= 1  # once a process (an earlier test of this process may have said it already)
    monkeypatch.setattr(host, "_fallback_reported", False)
    for _ in range(2):
        assert isinstance(host.hosted_run(_job(temp / "again", os.urandom(32)), EpochPlan(0, None, None), 0, LocalRun), LocalRun)
    [line] = [line for line in capfd.readouterr().err.splitlines() if "not in state hosts" in line]
    assert f"{temp / RUNTIME} (owner uid {os.geteuid()}, mode 0777) is open to its group or other users" in line


# -- peers of the same user that know no secret ---------------------------------------------------------------

def _framed(data: bytes) -> bytes:
    return struct.pack("!i", len(data)) + data


def _hostile(sock: str, data: bytes) -> bytes:
    """Send ``data`` to ``sock`` as a peer that knows no secret; what it got back until the server hung up
    (a timeout fails the test: the server must drop such a peer)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(HANDSHAKE_SECONDS + 20)
        s.connect(sock)
        s.sendall(data)
        got = b""
        try:
            while chunk := s.recv(4096):
                got += chunk
        except ConnectionResetError:  # hung up with some of ``data`` unread
            pass
    return got


def test_a_peer_sending_a_pickle_to_a_host_is_dropped_unread_and_the_host_serves_on(temp):
    job, batches, marker = _job(temp / "ck", os.urandom(32)), _batches(), temp / "marker"
    _epoch(job, 0, batches[0])  # the host started, keeps the partition open
    payload = pickle.dumps(Payload(marker))
    for data in (_framed(payload), payload, _framed(pickle.dumps((payload, None, 0, [])))):  # a task, as once read
        _hostile(_sock(job), data)
    pid = _host_pid(job)
    _, _, fast = _epoch(job, 1, batches[1])  # served by the same host, its state kept: it neither died nor lost it
    assert fast and _host_pid(job) == pid
    assert not marker.exists()
    with open(_sock(job)[:-5] + ".log") as f:
        assert f.read().count("statekit state host: dropped a peer: HandshakeError") == 3
    _epoch(job, 2, batches[2])


def test_a_silent_peer_holds_a_host_no_longer_than_the_handshake_timeout(temp):
    job, batches = _job(temp / "ck", os.urandom(32)), _batches()
    _epoch(job, 0, batches[0])
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:
        silent.settimeout(HANDSHAKE_SECONDS + 20)
        silent.connect(_sock(job))
        assert silent.recv(4096)  # the host took it: its challenge, which it never answers
        done: list = []
        task = threading.Thread(target=lambda: done.append(_epoch(job, 1, batches[1])), daemon=True)
        start = time.monotonic()
        task.start()
        assert silent.recv(4096) == b""  # dropped
        task.join(HANDSHAKE_SECONDS + 30)
    assert done and done[0][2], "the next task was not served on its kept state"
    assert time.monotonic() - start < HANDSHAKE_SECONDS + 30
    _epoch(job, 2, batches[2])


def _fake_host(sock: str, behaviour: str, marker: Path) -> threading.Thread:
    """A listener swapped in at a host's socket that answers the first connection with a pickle."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sock)
    listener.listen(1)
    listener.settimeout(60)

    def serve():
        with listener:
            client, _ = listener.accept()
            conn = Connection(client.detach())
            try:
                if behaviour == "raw":
                    os.write(conn.fileno(), pickle.dumps(("ok", Payload(marker), "")))
                elif behaviour == "framed":
                    conn.send(Payload(marker))
                else:  # a host of another application: it proves another secret
                    accept(conn, os.urandom(32))
                    conn.send(Payload(marker))
                time.sleep(0.5)
            except Exception:  # noqa: BLE001 -- the worker hung up on it, as it should
                pass
            finally:
                conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("behaviour", ["raw", "framed", "another-secret"])
def test_a_fake_listener_at_a_hosts_socket_gets_nothing_unpickled(temp, behaviour):
    job, marker = _job(temp / "ck", os.urandom(32)), temp / "marker"
    host.runtime_dir()
    sock = _sock(job)
    fake = _fake_host(sock, behaviour, marker)
    with pytest.raises(host.HostError, match=rf"{sock} does not answer as a state host of this application: .*"
                                             r"Nothing it sent was read"):
        _epoch(job, 0, _batches()[0])
    fake.join(30)
    assert not marker.exists()


def _no_secret_in(pid: int, *secrets: bytes) -> None:
    process = psutil.Process(pid)
    shown = open(f"/proc/{pid}/cmdline", "rb").read() + open(f"/proc/{pid}/environ", "rb").read()
    assert shown and process.is_running()
    for secret in secrets:
        assert secret not in shown and secret.hex().encode() not in shown


def test_a_host_started_as_a_new_interpreter_has_its_secret_in_no_argument_or_environment(temp):
    """Nor in the job's repr (what a log or an error would show)."""
    secret = os.urandom(32)
    job, batches = _job(temp / "ck", secret), _batches()
    assert repr(secret) not in repr(job) and secret.hex() not in repr(job) and "secret" not in repr(job)
    _epoch(job, 0, batches[0])
    _no_secret_in(_host_pid(job), secret)
    _epoch(job, 1, batches[1])
    _epoch(job, 2, batches[2])


DAEMON = '''
import json, os, secrets, sys, time
from statekit.spark.runtime import host, spawner

directory, sock = sys.argv[1], sys.argv[2]
spawner.start_spawner(directory, host.main)
print(json.dumps({"spawner": os.environ[spawner.SPAWNER_ENV], "key": spawner._secret.hex()}), flush=True)
sys.stdin.readline()  # the test's hostile peers have been
secret = secrets.token_bytes(32)
pid = spawner.spawn([sock, str(os.getpid()), "30"], sock[:-5] + ".log", secret)
deadline = time.monotonic() + 60
while not os.path.exists(sock[:-5] + ".pid") and time.monotonic() < deadline:
    time.sleep(0.05)
print(json.dumps({"pid": pid, "secret": secret.hex()}), flush=True)
sys.stdin.read()
'''


def test_the_spawner_drops_a_peer_that_knows_no_secret_reads_no_pickle_and_serves_on(temp):
    """Also: neither the spawner's secret nor the host's is in the arguments or environment of the daemon,
    the spawner or the host it forked."""
    runtime, marker = host.runtime_dir(), temp / "marker"
    sock = os.path.join(runtime, "spawned.sock")
    daemon = subprocess.Popen([sys.executable, "-c", DAEMON, runtime, sock], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        started = json.loads(daemon.stdout.readline())
        payload = pickle.dumps(Payload(marker))
        for data in (payload, _framed(payload)):
            assert b"pid" not in _hostile(started["spawner"], data)  # dropped, unanswered
        daemon.stdin.write("go\n")
        daemon.stdin.flush()
        spawned = json.loads(daemon.stdout.readline())
        assert isinstance(spawned["pid"], int) and psutil.Process(spawned["pid"]).name() == spawner.HOST_NAME
        [spawner_process] = psutil.Process(daemon.pid).children()  # the host is the spawner's child
        secrets = bytes.fromhex(started["key"]), bytes.fromhex(spawned["secret"])
        for pid in (daemon.pid, spawner_process.pid, spawned["pid"]):
            _no_secret_in(pid, *secrets)
        os.kill(spawned["pid"], 15)
    finally:
        daemon.stdin.close()
        daemon.wait(30)
    assert not marker.exists()
    assert daemon.stderr.read().count("statekit host spawner: dropped a peer: HandshakeError") == 2


# -- through Spark -------------------------------------------------------------------------------------------

def _ours(sock: Path, family: set[int]) -> bool:
    """Whether ``sock`` is served by a process of this test session (its spawner, or a host with a pid file)."""
    if sock.name.startswith("spawner-"):
        return int(sock.name[len("spawner-"):-len(".sock")]) in family
    try:
        return int(sock.with_suffix(".pid").read_text()) in family
    except (OSError, ValueError):
        return False


def test_a_run_under_attack_by_a_peer_of_the_same_user_equals_the_reference(spark, tmp_path):
    """While a sessionize run goes, a thread keeps sending pickles to every socket of this session's
    state hosts and host spawners in the runtime directory: the output equals Spark's own, nothing is
    unpickled. (Other sessions' sockets there are left alone: they belong to other tests.)"""
    from statekit.jobs import sessionize

    sample = write_input(clickstream(400, 20, seed=31), tmp_path / "input", files=3)
    reference = spark_sessions(spark, sample)
    marker, stop, hit = tmp_path / "marker", threading.Event(), {"host": 0, "spawner": 0}
    payloads = [pickle.dumps(Payload(marker)), _framed(pickle.dumps(Payload(marker)))]

    def attack():
        runtime = Path(host.runtime_dir())
        while not stop.is_set():
            family = {p.pid for p in psutil.Process().children(recursive=True)}
            for sock in runtime.glob("*.sock"):
                if not _ours(sock, family):
                    continue
                try:
                    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                        s.settimeout(2)
                        s.connect(str(sock))
                        s.sendall(payloads[sum(hit.values()) % 2])
                        s.recv(4096)
                    hit["spawner" if sock.name.startswith("spawner-") else "host"] += 1
                except OSError:
                    continue
            time.sleep(0.05)

    attacker = threading.Thread(target=attack, daemon=True)
    attacker.start()
    try:
        sessionize(spark, input=str(sample), output=str(tmp_path / "out"), key="user_id", time="ts_ms", gap=GAP,
                   watermark_delay=DELAY, aggs=["sum:value", "count"], backend="heap", partitions=2, final=True)
    finally:
        stop.set()
        attacker.join(30)
    assert output_rows(spark, tmp_path / "out") == reference
    assert not marker.exists()
    assert hit["host"] > 0 and hit["spawner"] > 0, hit  # the attack reached both kinds of socket


@pytest.mark.slow
def test_a_run_whose_runtime_directory_is_open_to_all_keeps_state_in_the_workers(spark, tmp_path):
    """A new application (CLI) whose TMPDIR holds a state hosts' directory of mode 0777: the daemon runs without
    a spawner, the tasks keep their state in the workers and say so, the output equals Spark's own, and
    nothing is made in that directory."""
    sample = write_input(clickstream(400, 20, seed=37), tmp_path / "input", files=2)
    temp = Path(tempfile.mkdtemp(prefix="sk-"))
    try:
        (temp / RUNTIME).mkdir()
        (temp / RUNTIME).chmod(0o777)
        r = succeeded(statekit_process("sessionize", "--input", str(sample), "--output", str(tmp_path / "out"),
                                       "--key", "user_id", "--time", "ts_ms", "--gap", "30s", "--watermark-delay",
                                       "10s", "--agg", "sum:value", "--agg", "count", "--backend", "heap",
                                       "--partitions", "2", "--master", "local[2]", "--trigger", "available-now",
                                       "--final", "--conf", "spark.ui.enabled=false",
                                       env={**os.environ, "TMPDIR": str(temp)}))
        assert list((temp / RUNTIME).iterdir()) == []
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    assert output_rows(spark, tmp_path / "out") == spark_sessions(spark, sample)
    problem = f"{temp / RUNTIME} (owner uid {os.geteuid()}, mode 0777) is open to its group or other users"
    assert f"statekit daemon: no host spawner: RuntimeDirError: the state hosts' directory {problem}" in r.stderr
    assert f"statekit: keeping partitions' state in the Python workers, not in state hosts: the state hosts' " \
           f"directory {problem}" in r.stderr
