"""The host spawner: a fork of the daemon that forks state hosts sharing its loaded modules; it ends with
the daemon; a worker without one (or whose spawner is gone) starts a host as a new interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import psutil

from statekit.spark.runtime import StatePlacement, host, spawner

DAEMON = '''
import json, os, secrets, socket, sys, time
from statekit.spark.runtime import host, spawner
from statekit.spark.runtime.handshake import connect

directory, sock = sys.argv[1], sys.argv[2]
spawner.start_spawner(directory, host.main)
with socket.socket(socket.AF_UNIX) as bad:  # no handshake: dropped unread, and the spawner serves on
    bad.connect(os.environ[spawner.SPAWNER_ENV])
    bad.sendall(b"not a request")
    bad.shutdown(socket.SHUT_WR)
    dropped = bad.recv(100)
with connect(os.environ[spawner.SPAWNER_ENV], spawner._secret) as malformed:  # authenticated, not a request
    malformed.send_bytes(b'{"argv": "x"}')
    refused = json.loads(malformed.recv_bytes())
pid = spawner.spawn([sock, str(os.getpid()), "1.0"], sock[:-5] + ".log", secrets.token_bytes(32))
deadline = time.monotonic() + 60
while not os.path.exists(sock[:-5] + ".pid") and time.monotonic() < deadline:
    time.sleep(0.05)
with open(f"/proc/{pid}/comm") as f:
    name = f.read().strip()
print(json.dumps({"dropped": dropped.hex(), "refused": refused, "pid": pid, "name": name,
                  "group": os.getpgid(pid) == os.getpgid(0), "spawner": os.environ[spawner.SPAWNER_ENV]}), flush=True)
sys.stdin.read()  # the daemon lives until the test closes its stdin
'''


def _ended(pid: int, seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_forked_host_serves_ends_when_idle_and_the_spawner_ends_with_its_daemon(tmp_path):
    """A peer that does not prove it knows the spawner's secret is dropped unanswered, an authenticated request
    that is not one is refused (``{"pid": null}``), both reported; the next one still gets its host."""
    sock = os.path.join(host.runtime_dir(), f"test-spawned-{os.getpid()}.sock")
    daemon = subprocess.Popen([sys.executable, "-c", DAEMON, str(tmp_path), sock], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        got = json.loads(daemon.stdout.readline())
        assert got["refused"] == {"pid": None}
        assert got["name"] == spawner.HOST_NAME and got["group"]  # forked, in the daemon's process group
        assert os.path.exists(got["spawner"])
        assert _ended(got["pid"])  # idle for its 1 s: it ends and removes its files
        assert not any(os.path.exists(sock[:-5] + s) for s in (".sock", ".lock", ".log", ".pid"))
    finally:
        daemon.stdin.close()
        daemon.wait(30)
    reported = daemon.stderr.read()
    assert "dropped a peer: HandshakeError" in reported
    assert "request refused: ValueError: expected an object of argv, log and secret" in reported
    deadline = time.monotonic() + 10
    while os.path.exists(got["spawner"]):  # the spawner sees its daemon gone within a second
        assert time.monotonic() < deadline, "the spawner outlived its daemon"
        time.sleep(0.05)


def test_without_a_spawner_a_worker_starts_its_host_as_a_new_interpreter(monkeypatch, tmp_path):
    """No spawner named, or one named that is gone: ``host._connect`` starts ``python -c`` instead."""
    for value in (None, str(tmp_path / "gone.sock")):
        if value is None:
            monkeypatch.delenv(spawner.SPAWNER_ENV, raising=False)
        else:
            monkeypatch.setenv(spawner.SPAWNER_ENV, value)
        assert spawner.spawn(["unused"], str(tmp_path / "unused.log"), b"unused") is None
        placement = StatePlacement(host_idle_seconds=1.0, app_id=f"test-{os.getpid()}-{value}", secret=b"s" * 32)
        base = os.path.join(host.runtime_dir(), host.host_name(placement.app_id, "op", str(tmp_path), 0))
        conn = host._connect(base, placement)
        conn.close()
        with open(base + ".pid") as f:
            started = psutil.Process(int(f.read()))
        assert base + ".sock" in started.cmdline()
        assert started.environ().get("MIMALLOC_PURGE_DELAY") == "0"  # Arrow's freed pages go back at once
        assert _ended(started.pid)


HUNG_UP = '''
import os, sys
from statekit.spark.runtime import spawner

spawner.start_spawner(sys.argv[1], lambda argv, secret: None)
print(os.environ[spawner.SPAWNER_ENV], flush=True)
sys.stdin.read()
'''


def test_a_spawner_hung_up_with_its_daemons_group_stops_cleanly(tmp_path):
    """Spark's daemon stopping hangs up its process group: the spawner removes its socket and ends with no
    traceback on the executor's stderr (a stop is not a failure)."""
    import signal

    daemon = subprocess.Popen([sys.executable, "-c", HUNG_UP, str(tmp_path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        path = daemon.stdout.readline().strip()
        [spawned] = psutil.Process(daemon.pid).children()
        assert _named(spawned)
        spawned.send_signal(signal.SIGHUP)
        assert _ended(spawned.pid)
        assert not os.path.exists(path)
    finally:
        daemon.stdin.close()
        daemon.wait(30)
    assert daemon.stderr.read() == ""


def _named(process: psutil.Process) -> bool:
    """The spawner names itself once its signal handlers are in place: wait for that."""
    deadline = time.monotonic() + 10
    while process.name() != spawner.SPAWNER_NAME:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
