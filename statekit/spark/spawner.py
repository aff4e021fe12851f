"""The host spawner: a fork of statekit's Python daemon that forks state hosts on a worker's request.

A state host started as a new interpreter imports pyarrow, numpy and statekit into memory of its own
(79 MiB before any state, measured). Forked from the daemon after its preload, a host shares those
pages with the daemon and every worker, as the workers do. A worker cannot fork the host itself: it
would hand the host its task's records and garbage. So the daemon forks this spawner once, before
it serves Spark, and the workers it forks later find the spawner's socket in ``SPAWNER_ENV``; a worker
without it (Spark's own daemon, no daemon at all) or whose spawner is gone starts a host as a new
interpreter instead (``host._connect``).

Hosts stay in the daemon's process group, as hosts its workers started do, so Spark's daemon hanging
up its group when it stops ends them. The spawner ends with the daemon.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import select
import signal
import socket
import sys
import traceback
from typing import Callable, Sequence

SPAWNER_ENV = "_STATEKIT_HOST_SPAWNER"
"""The spawner's socket, set in the daemon's environment before it forks workers (not a ``STATEKIT_*``
setting: ``StateConfig.from_env`` refuses names it does not know)."""
HOST_NAME, SPAWNER_NAME = "statekit-host", "statekit-spawn"
"""Process names (``/proc/<pid>/comm``) of forked hosts and of the spawner: their command line is the daemon's."""
_PR_SET_NAME = 15


def name_process(name: str) -> None:
    """Set this process's name as ``ps`` and ``/proc/<pid>/comm`` show it (Linux; elsewhere a no-op)."""
    try:
        ctypes.CDLL(None).prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)
    except (OSError, AttributeError):
        pass


def start_spawner(directory: str, host_main: Callable[[list[str]], None]) -> None:
    """Fork the spawner from this process (the daemon, before it forks workers), listening in
    ``directory``, and name its socket in ``SPAWNER_ENV`` for the workers forked from here on; each host
    it forks runs ``host_main(argv)``."""
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
    if os.fork() == 0:
        code = 0
        try:
            _serve(listener, path, host_main)
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


def _serve(listener: socket.socket, path: str, host_main: Callable[[list[str]], None]) -> None:
    """Fork a host for each request until the daemon ends."""
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
            conn, _ = listener.accept()
            with conn:
                conn.sendall(pickle.dumps(_fork_host(conn, listener, host_main)))
    finally:
        if os.getpid() == me:  # not a host just forked, stopped before it left this loop
            os.unlink(path)


def _fork_host(conn: socket.socket, listener: socket.socket, host_main: Callable[[list[str]], None]) -> int | None:
    """The pid of the host forked for the request on ``conn``; None for a request that is not one (or a
    fork that failed), reported on stderr: that worker starts its host itself, the spawner serves on."""
    try:
        argv, log = pickle.loads(_recv_all(conn))
        if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv) and isinstance(log, str)):
            raise ValueError(f"expected (argv: list[str], log: str), got {type(argv).__name__}, {type(log).__name__}")
        pid = os.fork()
    except Exception as e:  # noqa: BLE001 -- one bad request must not end the spawner for every later worker
        print(f"statekit host spawner: request refused: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        return None
    if pid == 0:
        conn.close()
        listener.close()
        _host(argv, log, host_main)
    return pid


class _Stopped(BaseException):
    """The spawner was hung up or terminated (Spark's daemon stopping its group): it stops cleanly. Not an
    ``Exception``: a request's handler, which refuses failed requests and serves on, lets it through."""


def _stop(signum: int, frame: object) -> None:
    raise _Stopped(signum)  # through ``_serve``'s cleanup


def _host(argv: Sequence[str], log: str, host_main: Callable[[list[str]], None]) -> None:
    """A forked host's process: its output to ``log``, then ``host_main(argv)``; never returns."""
    code = 1
    try:
        for signum in (signal.SIGCHLD, signal.SIGHUP, signal.SIGTERM):  # the spawner's are not a host's
            signal.signal(signum, signal.SIG_DFL)
        name_process(HOST_NAME)
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        host_main(list(argv))
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 -- its log is what the worker waiting for it reports
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _recv_all(conn: socket.socket) -> bytes:
    chunks = []
    while chunk := conn.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def spawn(argv: Sequence[str], log: str) -> int | None:
    """The pid of a host forked with ``argv`` (its ``host_main``'s) writing to ``log``; None when
    this process has no spawner (not forked from statekit's daemon) or it cannot be reached."""
    path = os.environ.get(SPAWNER_ENV)
    if not path:
        return None
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(path)
            conn.sendall(pickle.dumps((list(argv), log)))
            conn.shutdown(socket.SHUT_WR)
            return pickle.loads(_recv_all(conn))
    except (OSError, EOFError, pickle.UnpicklingError):
        return None
