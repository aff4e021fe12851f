"""State hosts: long-lived processes on an executor machine that keep partitions' state open.

Spark hands a task to whichever of its Python workers is idle, so a partition's state kept open in
the worker that ran its last epoch is found again only by chance, and every miss is a restore from
the checkpoint. A state host keeps partitions' slots (``LocalState``) in a process of its own, named by the
application, operator, checkpoint and host number, which every worker on the machine reaches over a
Unix socket: the task's worker sends the partition's records, the host runs the operator on its kept
state and commits, the worker stages the outputs. So the state stays open for every steady epoch,
whichever worker runs it, and exactly one copy of it is in memory. Workers forked from statekit's
daemon have the daemon's spawner fork the host, so it shares the modules the daemon loaded
(``spawner``); others start it as a new interpreter.

Partition ``i`` goes to host ``i % state_hosts`` (by default a host per executor core, for every operator).
A host serves one task at a time and holds its partitions' state plus one epoch's working memory, where a
host per partition held a Python process and an epoch's peak each (docs/bench/runtime.md).

Failure keeps the slot rules: a task that fails or whose worker goes away before its commit makes
the host drop the slot (the next attempt restores from the checkpoint); a host that dies is started
again and restores. A host ends when it committed a final epoch (every window fired: nothing is left to
keep open, and a finished job should not hold memory) and keeps no other partition's state, when the
JVM of the executor that started it ends, when its process group is hung up (Spark's Python daemon
stopping), or after ``host_idle_timeout`` without a task. A task takes a host only once the host
acknowledged it: one whose host ended before that starts another.

Who can reach a host. Its socket, lock, pid file and log live in ``runtime_dir``, which statekit uses
only when it is a real directory of this user that no one else may open (mode 0700): other local users
cannot reach, swap or read them. A worker whose runtime directory is not such keeps the state itself
(``hosted_run``). Other applications of the same user can open that directory, so a host and a worker
first prove to each other that they know the application's secret (``StatePlacement.secret``, made by the
driver; the host gets it on its stdin or in its spawner's authenticated request, never in its arguments,
environment or a file) before a pickle is read either way. Not stopped: a process of the same user that
can ptrace reads any process's memory, the secret too; one that renames a host's socket and relays both
directions of the handshake sits between them after it (the messages that follow carry no signature of
their own). Only separate users or containers keep applications apart from those.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import pickle
import secrets
import select
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any, Callable

from ...operators import gc_paused
from .handshake import HandshakeError, accept, connect
from .memory import allocator_environment, release_free_memory
from .placement import PlacedJob, StatePlacement, TaskEpoch
from .pyspark_internals import executor_pid, job_pickler
from .spawner import spawn
from .startup import start_task, task_scope
from .state_runs import LocalState, StateRun
from .wire import recv_table, send_table

_MAIN = "import sys; from statekit.spark.runtime.host import main; main(sys.argv[1:])"
TAKEN = "taken"
"""A host's answer to a task's first message: it serves this task."""
RESULTS = "results"
"""A host's message before a result table it streams to the task's worker (a step's results)."""
_START_SECONDS = 60.0
"""How long a worker waits for a host it started to listen."""
_RETRIED = ("the task fails; Spark retries it when spark.task.maxFailures allows, and a retry restores from the "
            "checkpoint")
"""What follows a host's failure (under ``local[N]`` masters, none: they do not retry)."""
_SECRETS: dict[str, bytes] = {}
_fallback_reported = False
_served: set[LocalState] = set()
"""The kinds of local state this host ran tasks with: what it closes as it ends."""


class HostError(RuntimeError):
    """A state host could not be started or reached."""


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a state host (the cause of the one re-raised in the task)."""


class RuntimeDirError(HostError):
    """The runtime directory is not a directory of this user closed to everyone else: no host is used."""


def runtime_dir() -> str:
    """This user's directory of host sockets, locks and logs on this machine: made with mode 0700, or
    one already there only if it is a real directory (not a link) of this user with no group or other
    permission; RuntimeDirError otherwise."""
    path = os.path.join(tempfile.gettempdir(), f"statekit-hosts-{os.geteuid()}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        raise RuntimeDirError(f"cannot make the state hosts' directory {path}: {e}") from None
    st = os.lstat(path)
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        problem = "a symbolic link"
    elif not stat.S_ISDIR(st.st_mode):
        problem = "not a directory"
    elif st.st_uid != os.geteuid():
        problem = f"owned by another user (uid {st.st_uid}, this process runs as uid {os.geteuid()})"
    elif mode & 0o077:
        problem = "open to its group or other users"
    else:
        return path
    raise RuntimeDirError(f"the state hosts' directory {path} (owner uid {st.st_uid}, mode {mode:04o}) is {problem}: "
                          f"another user could reach or swap the hosts' sockets there. Remove it (statekit makes it "
                          f"anew with mode 0700) or point TMPDIR at a directory of this user")


def application_secret(app_id: str) -> bytes:
    """The secret a Spark application's hosts and workers prove to each other (made once per application in
    the driver: a host one run left open serves the application's next run)."""
    return _SECRETS.setdefault(app_id, secrets.token_bytes(32))


def host_name(app_id: str, operator_id: str, checkpoint: str, number: int) -> str:
    """The name of host ``number`` of an operator and checkpoint in a Spark application."""
    ident = "\0".join((app_id, operator_id, checkpoint, str(number)))
    return hashlib.sha1(ident.encode()).hexdigest()[:24]


def hosted_run(job: PlacedJob, epoch: TaskEpoch, index: int, local: LocalState) -> StateRun:
    """One task's state work on the partition's state host, which runs it with ``local``; in this worker (as with
    ``state_host=worker``) where hosts cannot be used safely, said once a process on stderr, or where this
    PySpark cannot hand a job to a host (``pyspark_internals.job_pickler``)."""
    global _fallback_reported
    dumps = job_pickler()
    try:
        if dumps is not None:
            return HostedRun(job, epoch, index, local, dumps)
    except RuntimeDirError as e:
        if not _fallback_reported:
            print(f"statekit: keeping partitions' state in the Python workers, not in state hosts: {e}",
                  file=sys.stderr, flush=True)
            _fallback_reported = True
    return local(job.placed(job.placement.in_worker()), epoch, index)


class HostedRun:
    """One task's state work sent to the partition's state host, which runs it with ``local`` (the same steps)."""

    def __init__(self, job: PlacedJob, epoch: TaskEpoch, index: int, local: LocalState,
                 dumps: Callable[[Any], bytes]) -> None:
        self.job, self.epoch, self.index, self.local, self.dumps = job, epoch, index, local, dumps
        self.number = index % job.placement.state_hosts
        self.base = os.path.join(runtime_dir(), host_name(job.placement.app_id, job.operator_id, job.checkpoint,
                                                          self.number))
        self.conn: Connection | None = None

    def process(self, valid: Any, results: Callable[[Any], None]) -> Any:
        task = (self.dumps((self.local, self.job)), self.epoch, self.index, list(sys.path))
        release_free_memory()  # a worker waits for its host (busy with another task), then while it works:
        self._begin(task)      # at the size of its records, not of the copies that made them
        send_table(self.conn, valid)
        release_free_memory()  # nor of the buffer that sent them
        return self._reply(results)

    def _begin(self, task: tuple) -> None:
        """Hand ``task`` to the host, reached first; a host that ended without taking it (it committed a
        final epoch and kept nothing: the connection was waiting when it stopped listening) is started
        again once."""
        for _ in range(2):
            try:
                self.conn = _connect(self.base, self.job.placement)
                self.conn.send(task)
                if self.conn.recv() == TAKEN:
                    return
            except (EOFError, ConnectionError):
                pass
            self.abort()
        raise HostError(f"state host {self.number} of partition {self.index} ({self.base}.sock) did not take epoch "
                        f"{self.epoch.epoch}; {_RETRIED}")

    def commit(self, max_ts: int | None) -> Any:
        assert self.conn is not None, "commit before process"
        self.conn.send(max_ts)
        reply = self._reply()
        self.abort()
        return reply

    def abort(self) -> None:
        if self.conn is not None:  # the host drops the slot when the connection ends before a commit
            self.conn.close()
            self.conn = None

    def _reply(self, results: Callable[[Any], None] | None = None) -> Any:
        """The host's answer; the result tables it streams before it (``RESULTS``) go to ``results`` as they come."""
        assert self.conn is not None, "a reply before the task"
        try:
            status, value, text = self.conn.recv()
            while status == RESULTS:  # only before the reply to ``process``, which passes ``results``
                results(recv_table(self.conn))
                status, value, text = self.conn.recv()
        except (EOFError, OSError) as e:
            raise HostError(f"state host of partition {self.index} went away during epoch {self.epoch.epoch} "
                            f"({type(e).__name__}); {_RETRIED}") from None
        if status == "ok":
            return value
        try:
            error = pickle.loads(value)
        except Exception:  # its class is not importable here
            error = None
        if not isinstance(error, BaseException):  # not picklable, or not importable: its text stands for it
            error = HostError(text.strip().splitlines()[-1])
        raise error from RemoteTraceback(f"in the state host of partition {self.index}:\n{text}")


def _connect(base: str, placement: StatePlacement) -> Connection:
    """A connection to the host at ``base.sock`` once it proved it knows ``placement``'s secret, started
    first if none listens; EOFError or ConnectionError if it went away before the handshake."""
    try:
        return _client(base + ".sock", placement.secret)
    except (FileNotFoundError, ConnectionRefusedError):
        pass
    with open(base + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one worker starts the host; the others wait and connect
        try:
            return _client(base + ".sock", placement.secret)
        except (FileNotFoundError, ConnectionRefusedError):
            pass
        if os.path.exists(base + ".sock"):
            os.unlink(base + ".sock")  # left by a host that was killed
        ended = _start(base, [base + ".sock", str(executor_pid()), str(placement.host_idle_seconds)], placement.secret)
        deadline = time.monotonic() + _START_SECONDS
        while True:
            try:
                return _client(base + ".sock", placement.secret)
            except (FileNotFoundError, ConnectionRefusedError):
                if ended() or time.monotonic() > deadline:
                    with open(base + ".log", "rb") as f:
                        tail = f.read()[-2000:].decode(errors="replace")
                    raise HostError(f"state host {base}.sock did not start: {tail}") from None
                time.sleep(0.02)


def _client(sock: str, secret: bytes) -> Connection:
    """A connection to the host at ``sock`` once each side proved it knows ``secret``; HostError naming the
    socket if what listens there does not."""
    try:
        return connect(sock, secret)
    except HandshakeError as e:
        raise HostError(f"{sock} does not answer as a state host of this application: {e}. Nothing it sent was "
                        f"read. Another process of this user listens there: stop it or remove the socket; "
                        f"{_RETRIED}") from None


def _start(base: str, argv: list[str], secret: bytes) -> Callable[[], bool]:
    """Start host ``argv`` (``main``'s) with ``secret``, logging to ``base.log``: forked by the spawner when
    this worker has one, else a new interpreter that reads the secret on its stdin; returns whether it has ended."""
    log = base + ".log"
    open(log, "ab").close()  # there for the error message even if the host never starts
    pid = spawn(argv, log, secret)
    if pid is not None:
        return lambda: not _alive(pid)
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-c", _MAIN, *argv], stdin=subprocess.PIPE, stdout=out,
                                stderr=out, close_fds=True, env=allocator_environment(os.environ))
    try:
        proc.stdin.write(secret)
        proc.stdin.close()
    except BrokenPipeError:  # it ended before reading it: its log says why
        pass
    return lambda: proc.poll() is not None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _serve_task(conn: Connection) -> bool:
    """One task: process its records, then commit (or drop the slot if the task ends first); False when
    it committed a final epoch and no partition's state is kept (the host has nothing to keep open and ends)."""
    job_bytes, epoch, index, path = conn.recv()
    conn.send(TAKEN)
    valid = recv_table(conn)
    sys.path.extend(p for p in path if p not in sys.path)  # the worker's (Spark files, py-files)
    run: StateRun | None = None
    try:
        local, job = pickle.loads(job_bytes)
        _served.add(local)
        run = local(job, epoch, index)
        processed = run.process(valid, lambda table: send_results(conn, table))
        del valid  # the epoch's records: not kept through the commit
        conn.send(("ok", processed, None))
        del processed  # sent: its tables are not kept through the commit either
        conn.send(("ok", run.commit(conn.recv()), None))
        return not epoch.final or local.kept() > 0
    except (EOFError, OSError):
        if run is not None:
            run.abort()
    except Exception as e:
        if run is not None:
            run.abort()
        try:
            value = pickle.dumps(e)
        except Exception:
            value = pickle.dumps(None)
        conn.send(("error", value, traceback.format_exc()))
    return True


def send_results(conn: Connection, table: Any) -> None:
    """A step's result table to the task's worker, which stages it before the host's reply."""
    conn.send((RESULTS, None, None))
    send_table(conn, table)


def serve(path: str, executor_pid: int, idle_seconds: float, secret: bytes) -> None:
    """Serve tasks on the Unix socket ``path`` one at a time, each to a peer that proved it knows ``secret``
    (others are dropped), until the executor ends, no task came for ``idle_seconds``, or a task committed a
    final epoch and no state is kept."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(16)
    bound = os.stat(path).st_ino
    with open(path[:-len(".sock")] + ".pid", "w") as f:  # which process serves the socket (ps, tests)
        f.write(str(os.getpid()))
    last = time.monotonic()
    try:
        while True:
            if not _alive(executor_pid) or time.monotonic() - last > idle_seconds:
                return  # checked at each turn: peers that keep connecting and fail hold no host open
            if not select.select([server], [], [], 1.0)[0]:
                continue
            client, _ = server.accept()
            conn = Connection(client.detach())
            try:
                accept(conn, secret)
            except (HandshakeError, EOFError, OSError) as e:
                conn.close()
                print(f"statekit state host: dropped a peer: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
                continue
            more = True
            with task_scope():  # then idle until the next epoch at the size of its state, not of this epoch's peak
                try:
                    with gc_paused():  # no collections mid-task; the task's garbage is collected after its reply
                        more = _serve_task(conn)
                        if not more:
                            server.close()  # a retried task finds no listener at once and starts a new host
                except (EOFError, OSError):
                    pass  # the worker went away before sending its task
                finally:
                    conn.close()
            if not more:
                return
            last = time.monotonic()
    finally:
        server.close()
        try:
            for local in _served:
                local.close_all()
        finally:
            _retire(path[:-len(".sock")], bound)


def _retire(base: str, bound: int) -> None:
    """Remove the host's socket, pid file, lock and log, under its lock (a worker starting a host waits); not if
    a worker found this host unreachable and started another in its place."""
    with open(base + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if os.stat(base + ".sock").st_ino != bound:
                return
        except FileNotFoundError:
            return
        for suffix in (".sock", ".pid", ".log", ".lock"):
            try:
                os.unlink(base + suffix)
            except FileNotFoundError:
                pass


def _exit(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str], secret: bytes | None = None) -> None:
    """A host's process: ``main([SOCKET, EXECUTOR_PID, IDLE_SECONDS], secret)``; forked by the spawner
    with the job's secret, or a new interpreter (see ``_MAIN``) that reads it on its stdin."""
    start_task()
    signal.signal(signal.SIGTERM, _exit)
    signal.signal(signal.SIGHUP, _exit)
    if secret is None:
        secret = sys.stdin.buffer.read()
    serve(argv[0], int(argv[1]), float(argv[2]), secret)

