"""State hosts (issue 13): a partition's state stays open in its host whichever Python worker runs the
task, so every steady epoch takes the fast path; a host per core by default (``state_hosts`` sets how many); a host killed between epochs is started again and its partitions restore;
``state_host=worker`` keeps the state in the workers; a host ends after the final epoch of the last
partition it keeps, with its executor or when idle, and leaves nothing behind; a task whose host ended
before taking it starts another."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from multiprocessing import Pipe
from types import SimpleNamespace

import psutil
import pytest

from statekit.checkpoint import CheckpointStore
from statekit.jobs import sessionize
from statekit.spark.job_settings import default_state_hosts
from statekit.spark.plan import EpochPlan
from statekit.spark.runtime import StatePlacement, host, spawner
from statekit.spark.slots import LocalRun
from tests.spark_support import DELAY, GAP, clickstream, copy_in_name_order, output_rows, spark_sessions, write_input

pytestmark = pytest.mark.spark
FILES = 4


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return write_input(clickstream(3000, 70, seed=23), tmp_path_factory.mktemp("input"), files=FILES)


@pytest.fixture(scope="module")
def reference(spark, sample):
    return spark_sessions(spark, sample)


def run(spark, input_dir, out, backend, final=True):
    return sessionize(spark, input=str(input_dir), output=str(out), key="user_id", time="ts_ms", gap=GAP,
                      watermark_delay=DELAY, aggs=["sum:value", "count"], backend=backend, partitions=2, final=final)


def _hosts(spark, checkpoint, count: int = 1) -> list[str]:
    """Socket paths of hosts ``0..count-1`` of the checkpoint's operators in this application."""
    store, app = CheckpointStore(str(checkpoint)), spark.conf.get("spark.app.id")
    return [os.path.join(host.runtime_dir(), host.host_name(app, op, str(checkpoint), number)) + ".sock"
            for op in store.operators() for number in range(count)]


def _host_process(sock: str) -> psutil.Process:
    found = _hosts_of([sock])
    assert len(found) == 1, f"expected one host serving {sock}, found {found}"
    return found[0]


def _gone(p: psutil.Process) -> None:
    """Wait until ``p`` ended (a zombie until the worker that started it reaps it)."""
    deadline = time.monotonic() + 30
    while p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, f"{p} still runs"
        time.sleep(0.05)


def _hosts_of(socks: list[str]) -> list[psutil.Process]:
    """The running host processes serving any of ``socks`` (named in the pid file next to each)."""
    found = []
    for sock in socks:
        try:
            with open(sock[:-len(".sock")] + ".pid") as f:
                p = psutil.Process(int(f.read()))
            if p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except (FileNotFoundError, psutil.NoSuchProcess):
            continue
    return found


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_every_steady_epoch_takes_the_fast_path_and_the_hosts_end_after_the_final_one(spark, sample, reference,
                                                                                        tmp_path, backend):
    """Hosts keep the state for every steady epoch; once the final epoch is committed (every window fired)
    they end and leave nothing behind, so a finished job holds no memory."""
    summary = run(spark, sample, tmp_path / "out", backend)
    assert output_rows(spark, tmp_path / "out") == reference
    assert [m["fast_path_partitions"] for m in summary.epochs] == [0] + [2] * FILES
    socks = _hosts(spark, tmp_path / "out" / "_checkpoint")
    deadline = time.monotonic() + 5  # well within the shared session's host_idle_timeout (20s)
    while _hosts_of(socks) or any(os.path.exists(s) for s in socks):
        assert time.monotonic() < deadline, f"hosts still run after the final epoch: {_hosts_of(socks)}"
        time.sleep(0.05)


@pytest.mark.parametrize("hosts", [1, 2])
def test_a_host_killed_between_epochs_is_started_again_and_restores(spark, sample, reference, tmp_path, hosts):
    """With ``state_hosts=1`` one host serves both partitions; with 2 (the default on ``local[2]``) each has its
    own, and a kill costs only the victim's partition a restore."""
    growing, out = tmp_path / "in", tmp_path / "out"
    growing.mkdir()
    files = sorted(sample.iterdir())
    copy_in_name_order(files[:2], growing)
    spark.conf.set("spark.statekit.state_hosts", str(hosts))
    try:
        run(spark, growing, out, "heap", final=False)
        socks = _hosts(spark, out / "_checkpoint", hosts)
        assert len(_hosts_of(socks)) == hosts  # a run that is not final leaves its hosts open for the next one
        victim = _host_process(socks[0])
        assert victim.name() == spawner.HOST_NAME  # forked by the spawner of statekit's daemon
        assert not [m.path for m in victim.memory_maps() if "/pandas/" in m.path]  # two epochs run, pandas never loaded
        victim.send_signal(signal.SIGKILL)  # leaves its socket file behind
        _gone(victim)
        assert os.path.exists(socks[0])
        copy_in_name_order(files[2:], growing, first=2)
        summary = run(spark, growing, out, "heap")
    finally:
        spark.conf.unset("spark.statekit.state_hosts")
    assert output_rows(spark, out) == reference
    assert summary.epochs[0]["fast_path_partitions"] == 2 - 2 // hosts  # the other host's partition kept its state
    assert all(m["fast_path_partitions"] == 2 for m in summary.epochs[1:])  # the victim's were started again


def test_a_final_epoch_on_a_new_host_ends_it_and_loses_no_task(spark, sample, reference, tmp_path):
    """A new host keeps no state: the first partition's final commit leaves it none and it ends while the
    other partition's task waits for it; that task starts another host (one host serves both partitions)."""
    out = tmp_path / "out"
    spark.conf.set("spark.statekit.state_hosts", "1")
    try:
        run(spark, sample, out, "heap", final=False)
        victim = _host_process(_hosts(spark, out / "_checkpoint")[0])
        victim.send_signal(signal.SIGKILL)
        _gone(victim)
        first = _last_stage(spark, "before")
        summary = run(spark, sample, out, "heap")  # no new input: the final epoch only, both partitions restoring
        stages = range(first + 1, _last_stage(spark, "after"))
    finally:
        spark.conf.unset("spark.statekit.state_hosts")
    assert output_rows(spark, out) == reference
    assert [m["fast_path_partitions"] for m in summary.epochs] == [0]
    tracker = spark.sparkContext.statusTracker()
    assert sum(info.numFailedTasks for info in map(tracker.getStageInfo, stages) if info is not None) == 0


def _last_stage(spark, group: str) -> int:
    """The id of the stage of a one-task job run now (stage ids grow through the application)."""
    sc = spark.sparkContext
    sc.setJobGroup(group, group)
    try:
        spark.range(1).collect()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    tracker = sc.statusTracker()
    return max(stage for job in tracker.getJobIdsForGroup(group) for stage in tracker.getJobInfo(job).stageIds)


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_a_number_of_state_hosts_that_is_not_a_whole_number_of_at_least_one_is_refused(spark, sample, tmp_path, value):
    spark.conf.set("spark.statekit.state_hosts", value)
    try:
        with pytest.raises(ValueError, match=rf"spark.statekit.state_hosts='{value}': expected a whole number >= 1 or 'auto'"):
            run(spark, sample, tmp_path / "out", "heap")
    finally:
        spark.conf.unset("spark.statekit.state_hosts")


@pytest.mark.parametrize("master,slots,cores,hosts", [
    ("local[2]", 2, None, 2), ("local[8]", 8, None, 8), ("local[*,4]", 12, None, 12),
    ("local-cluster[2,1,1024]", 2, None, 1), ("yarn", 40, None, 1), ("yarn", 40, "16", 16), ("yarn", 40, "3", 3)])
def test_the_default_is_a_state_host_per_executor_core(master, slots, cores, hosts):
    conf = {"spark.executor.cores": cores} if cores else {}
    spark = SimpleNamespace(conf=SimpleNamespace(get=lambda key, default=None: conf.get(key, default)),
                            sparkContext=SimpleNamespace(master=master, defaultParallelism=slots))
    assert default_state_hosts(spark) == hosts


@pytest.mark.parametrize("layout", ["table", "cells"])
def test_each_task_slot_gets_a_host_by_default(spark, sample, tmp_path, layout):
    """On ``local[2]`` the two partitions of an epoch run at once, each in a host of its own, whatever the layout."""
    sessionize(spark, input=str(sample), output=str(tmp_path / "out"), key="user_id", time="ts_ms", gap=GAP,
               watermark_delay=DELAY, aggs=["count"], backend="heap", partitions=2, state_layout=layout)
    assert spark.sparkContext.defaultParallelism == 2
    assert len(_hosts_of(_hosts(spark, tmp_path / "out" / "_checkpoint", 2))) == 2


def _ended_host() -> object:
    """A connection to a host that stopped listening with it waiting: closed before a word."""
    ours, theirs = Pipe()
    theirs.close()
    return ours


def _live_host(seen: list) -> object:
    """A connection to a host that takes the task."""
    ours, theirs = Pipe()

    def serve():
        seen.append(theirs.recv())
        theirs.send(host.TAKEN)

    threading.Thread(target=serve, daemon=True).start()
    return ours


def _job(hosts: int) -> SimpleNamespace:
    return SimpleNamespace(placement=StatePlacement(state_hosts=hosts, app_id="app"), operator_id="op", checkpoint="ck")


def test_a_task_whose_host_ended_before_taking_it_starts_another(monkeypatch):
    seen: list = []
    made = iter([_ended_host(), _live_host(seen)])
    monkeypatch.setattr(host, "_connect", lambda base, placement: next(made))
    run_ = host.HostedRun(_job(1), EpochPlan(3, 2, None), 1, LocalRun, pickle.dumps)
    run_._begin(("task",))
    assert seen == [("task",)]


def test_a_task_whose_new_host_ends_too_fails_naming_the_host_and_epoch(monkeypatch):
    made = iter([_ended_host(), _ended_host()])
    monkeypatch.setattr(host, "_connect", lambda base, placement: next(made))
    run_ = host.HostedRun(_job(2), EpochPlan(3, 2, None), 1, LocalRun, pickle.dumps)
    with pytest.raises(host.HostError, match=r"state host 1 of partition 1 \(.*\.sock\) did not take epoch 3; "
                                             r"the task fails; Spark retries it when spark.task.maxFailures allows"):
        run_._begin(("task",))


def test_a_hosts_results_reach_the_task_a_step_at_a_time_before_its_reply(monkeypatch):
    """The host streams each step's result table as the operator hands it over; the worker takes each as it
    comes (to its staging file), in order, then the host's reply."""
    import pyarrow as pa

    steps = [pa.table({"x": [1, 2]}), pa.table({"x": [3]})]
    ours, theirs = Pipe()

    def serve():
        theirs.recv()
        theirs.send(host.TAKEN)
        host.recv_table(theirs)  # the records
        for table in steps:
            host.send_results(theirs, table)
        theirs.send(("ok", "processed", None))

    threading.Thread(target=serve, daemon=True).start()
    monkeypatch.setattr(host, "_connect", lambda base, placement: ours)
    got: list = []
    run_ = host.HostedRun(_job(1), EpochPlan(3, 2, None), 1, LocalRun, pickle.dumps)
    assert run_.process(pa.table({"k": [1]}), got.append) == "processed"
    assert [t.to_pydict() for t in got] == [{"x": [1, 2]}, {"x": [3]}]


def test_state_host_worker_keeps_the_state_in_the_workers(spark, sample, reference, tmp_path):
    spark.conf.set("spark.statekit.state_host", "worker")
    try:
        run(spark, sample, tmp_path / "out", "rocksdb")
    finally:
        spark.conf.unset("spark.statekit.state_host")
    assert output_rows(spark, tmp_path / "out") == reference
    assert not any(os.path.exists(s) for s in _hosts(spark, tmp_path / "out" / "_checkpoint"))


def test_an_unknown_state_host_is_refused(spark, sample, tmp_path):
    spark.conf.set("spark.statekit.state_host", "thread")
    try:
        with pytest.raises(ValueError, match=r"spark.statekit.state_host='thread': expected one of process, worker"):
            run(spark, sample, tmp_path / "out", "heap")
    finally:
        spark.conf.unset("spark.statekit.state_host")


@pytest.mark.parametrize("timeout", ["0s", "-5s", "soon", "600"])
def test_a_host_idle_timeout_that_is_not_a_positive_duration_is_refused(spark, sample, tmp_path, timeout):
    spark.conf.set("spark.statekit.host_idle_timeout", timeout)
    try:
        with pytest.raises(ValueError, match="spark.statekit.host_idle_timeout"):
            run(spark, sample, tmp_path / "out", "heap")
    finally:
        spark.conf.set("spark.statekit.host_idle_timeout", "20s")  # the shared session's setting


def _start(sock: str, executor: int, idle_seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", host._MAIN, sock, str(executor), str(idle_seconds)],
                            stdin=subprocess.PIPE)
    proc.stdin.write(b"s" * 32)  # the secret, as a worker hands it
    proc.stdin.close()
    deadline = time.monotonic() + 60
    while not os.path.exists(sock):
        assert proc.poll() is None and time.monotonic() < deadline, "the host did not start"
        time.sleep(0.05)
    return proc


def test_a_host_ends_when_idle_and_removes_its_files():
    sock = os.path.join(host.runtime_dir(), f"test-idle-{os.getpid()}.sock")
    proc = _start(sock, os.getpid(), 1.0)
    assert proc.wait(30) == 0
    assert not any(os.path.exists(sock[:-5] + s) for s in (".sock", ".lock", ".log"))


def test_a_host_ends_with_its_executor():
    executor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    sock = os.path.join(host.runtime_dir(), f"test-executor-{os.getpid()}.sock")
    proc = _start(sock, executor.pid, 600.0)
    time.sleep(1.5)
    assert proc.poll() is None  # its executor lives, it is not idle long enough
    executor.kill()
    executor.wait()
    assert proc.wait(30) == 0
    assert not os.path.exists(sock)
