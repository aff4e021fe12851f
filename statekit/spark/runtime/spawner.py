"""The host spawner: a fork of statekit's Python daemon that forks state hosts on a worker's request.

A state host started as a new interpreter imports pyarrow, numpy and statekit into memory of its own
before it holds any state. Forked from the daemon after its preload, a host shares those
pages with the daemon and every worker, as the workers do. A worker cannot fork the host itself: it
would hand the host its task's records and garbage. So the daemon forks this spawner once, before
it serves Spark, and the workers it forks later find the spawner's socket in ``SPAWNER_ENV``; a worker
without it (Spark's own daemon, no daemon at all) or whose spawner is gone starts a host as a new
interpreter instead (``host._connect``).

Hosts stay in the daemon's process group, as hosts its workers started do, so Spark's daemon hanging
up its group when it stops ends them. The spawner ends with the daemon.

Only the daemon's own processes may ask: the daemon makes a secret before it forks anything and keeps
it in memory (``_secret``: the workers and the spawner, its forks, inherit it; no file, argument or
environment holds it), and a peer proves it knows it (``handshake``) before the spawner reads a request.
Requests and replies are JSON, never pickle: ``{argv, log, secret}`` (the host's own secret, hex) ->
``{pid}``.
"""

from __future__ import annotations

import ctypes
import json
import os
import secrets
import select
import signal
import socket
import sys
import traceback
from multiprocessing.connection import Connection
from typing import Any, Callable, Sequence

from .handshake import HandshakeError, accept, connect

SPAWNER_ENV = "_STATEKIT_HOST_SPAWNER"
"""The spawner's socket, set in the daemon's environment before it forks workers (not a ``STATEKIT_*``
setting: ``StateConfig.from_env`` refuses names it does not know)."""
HOST_NAME, SPAWNER_NAME = "statekit-host", "statekit-spawn"
"""Process names (``/proc/<pid>/comm``) of forked hosts and of the spawner: their command line is the daemon's."""
_PR_SET_NAME = 15
_MAX_MESSAGE = 1 << 16
"""The longest request or reply read (a host's arguments and paths)."""
HostMain = Callable[[list[str], bytes], None]
"""A forked host's work: ``host_main(argv, secret)``, the secret its peers must prove they know."""

_secret: bytes | None = None
"""The spawner's secret: made by ``start_spawner`` in the daemon, inherited by the forks made after it."""


def name_process(name: str) -> None:
    """Set this process's name as ``ps`` and ``/proc/<pid>/comm`` show it (Linux; elsewhere a no-op)."""
    try:
        ctypes.CDLL(None).prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)
    except (OSError, AttributeError):
        pass


def start_spawner(directory: str, host_main: HostMain) -> None:
    """Fork the spawner from this process (the daemon, before it forks workers), listening in
    ``directory``, and name its socket in ``SPAWNER_ENV`` for the workers forked from here on; each host
    it forks runs ``host_main(argv, secret)``."""
    global _secret
    try:
        os.setpgid(0, 0)  # the group Spark's daemon makes for itself and its workers: hosts join it too
    except OSError:  # already leading its session: it leads its group too
        pass
    path = os.path.join(directory, f"spawner-{os.getpid()}.sock")
    if os.path.exists(path):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    _secret = secrets.token_bytes(32)
    if os.fork() == 0:
        code = 0
        try:
            _serve(listener, path, _secret, host_main)
        except _Stopped:  # hung up or terminated with its daemon's group: a clean stop, nothing to report
            pass
        except BaseException:  # noqa: BLE001 -- reported on the executor's stderr; workers start hosts themselves
            traceback.print_exc()
            code = 1
        finally:
            sys.stderr.flush()
            os._exit(code)
    listener.close()
    os.environ[SPAWNER_ENV] = path


def _serve(listener: socket.socket, path: str, secret: bytes, host_main: HostMain) -> None:
    """Fork a host for each request of a peer that knows ``secret`` until the daemon ends; a peer that
    does not is dropped, reported on stderr."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # hosts are reaped as they end
    signal.signal(signal.SIGHUP, _stop)  # Spark's daemon hangs up its group as it stops
    signal.signal(signal.SIGTERM, _stop)
    name_process(SPAWNER_NAME)  # after the handlers: a spawner seen by its name stops cleanly
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)  # the daemon's stdout is how it tells the JVM its port: not written here
    daemon, me = os.getppid(), os.getpid()
    try:
        while os.getppid() == daemon:
            if not select.select([listener], [], [], 1.0)[0]:
                continue
            client, _ = listener.accept()
            with Connection(client.detach()) as conn:
                try:
                    accept(conn, secret)
                except (HandshakeError, EOFError, OSError) as e:
                    print(f"statekit host spawner: dropped a peer: {type(e).__name__}: {e}", file=sys.stderr,
                          flush=True)
                    continue
                pid = _fork_host(conn, listener, host_main)
                try:
                    conn.send_bytes(json.dumps({"pid": pid}).encode())
                except OSError:  # the worker went away: its host, if forked, ends when idle
                    pass
    finally:
        if os.getpid() == me:  # not a host just forked, stopped before it left this loop
            os.unlink(path)


def _fork_host(conn: Connection, listener: socket.socket, host_main: HostMain) -> int | None:
    """The pid of the host forked for the request on ``conn``; None for a request that is not one (or a
    fork that failed), reported on stderr: that worker starts its host itself, the spawner serves on."""
    try:
        argv, log, secret = _parse(conn.recv_bytes(_MAX_MESSAGE))
        pid = os.fork()
    except Exception as e:  # noqa: BLE001 -- one bad request must not end the spawner for every later worker
        print(f"statekit host spawner: request refused: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        return None
    if pid == 0:
        conn.close()
        listener.close()
        _host(argv, log, secret, host_main)
    return pid


def _parse(request: bytes) -> tuple[list[str], str, bytes]:
    """A request's host arguments, log and host secret; ValueError naming what is wrong (never a value)."""
    message: Any = json.loads(request)
    if not isinstance(message, dict) or set(message) != {"argv", "log", "secret"}:
        raise ValueError(f"expected an object of argv, log and secret, got {type(message).__name__} "
                         f"{sorted(message) if isinstance(message, dict) else ''}")
    argv, log, secret = message["argv"], message["log"], message["secret"]
    if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv) and isinstance(log, str)
            and isinstance(secret, str)):
        raise ValueError(f"expected argv: list[str], log: str, secret: str (hex), got {type(argv).__name__}, "
                         f"{type(log).__name__}, {type(secret).__name__}")
    return argv, log, bytes.fromhex(secret)


class _Stopped(BaseException):
    """The spawner was hung up or terminated (Spark's daemon stopping its group): it stops cleanly. Not an
    ``Exception``: a request's handler, which refuses failed requests and serves on, lets it through."""


def _stop(signum: int, frame: object) -> None:
    raise _Stopped(signum)  # through ``_serve``'s cleanup


def _host(argv: Sequence[str], log: str, secret: bytes, host_main: HostMain) -> None:
    """A forked host's process: its output to ``log``, then ``host_main(argv, secret)``; never returns."""
    code = 1
    try:
        for signum in (signal.SIGCHLD, signal.SIGHUP, signal.SIGTERM):  # the spawner's are not a host's
            signal.signal(signum, signal.SIG_DFL)
        name_process(HOST_NAME)
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        host_main(list(argv), secret)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 -- its log is what the worker waiting for it reports
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def spawn(argv: Sequence[str], log: str, secret: bytes) -> int | None:
    """The pid of a host forked with ``argv`` and ``secret`` (its ``host_main``'s) writing to ``log``;
    None when this process has no spawner (not forked from statekit's daemon after it started one), or
    it cannot be reached or does not prove it is the daemon's."""
    path = os.environ.get(SPAWNER_ENV)
    if not path or _secret is None:
        return None
    try:
        with connect(path, _secret) as conn:
            conn.send_bytes(json.dumps({"argv": list(argv), "log": log, "secret": secret.hex()}).encode())
            reply = json.loads(conn.recv_bytes(_MAX_MESSAGE))
    except (OSError, EOFError, HandshakeError, ValueError):
        return None
    pid = reply.get("pid") if isinstance(reply, dict) else None
    return pid if type(pid) is int else None
