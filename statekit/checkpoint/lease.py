"""One writer per checkpoint: a lease with a heartbeat and a fencing token.

A run takes its checkpoint's lease before it reads or writes anything there: the file
``_lease/lease-<token>.json``, created with an exclusive write (``Storage.create``) at one token more
than the newest lease file. The newest file names the holder (host, pid, start time, purpose) and its
last heartbeat, which the holder renews every third of the timeout. Another run finding that lease held
is refused at once, naming the checkpoint and the holder. A lease is free when its holder released it,
when its heartbeat is older than the timeout, or when its holder was a process of this host that is
gone; taking over one that was not released is logged. The token fences: a writer whose token is no
longer the newest lost its lease (it stalled past the timeout and another run took over) and commits
nothing more: the driver checks before it publishes and records an epoch, each task before it commits
its partition's state (``fence``). Check and write are two steps on a store without transactions, so a
writer that stalls between them for longer than the timeout can still land one write: the timeout is
chosen far above an epoch's commit.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import threading
import time
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from types import TracebackType

from .errors import CheckpointError
from .storage import Storage

LEASE_DIR = "_lease"
DEFAULT_TIMEOUT_SECONDS = 60.0
_NAME = re.compile(r"^lease-(\d{20})\.json$")
_KEEP = 4
"""Lease files kept below the newest: the tokens only grow, so old ones serve nothing but a look back."""

_log = logging.getLogger("statekit")


class LeaseHeldError(CheckpointError):
    """Another run holds the checkpoint's lease."""


class LeaseLostError(CheckpointError):
    """This run's lease was taken over: it must not commit anything more."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _process_start(pid: int) -> str | None:
    """The start time of process ``pid`` in clock ticks since boot (tells a reused pid apart); None when
    there is no such process (or no /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


@dataclass(frozen=True)
class LeaseRecord:
    """One lease file: who holds (or held) the checkpoint, since when, and its last heartbeat."""

    token: int
    host: str
    pid: int
    process_start: str | None
    purpose: str
    started_ms: int
    heartbeat_ms: int
    timeout_ms: int
    released: bool = False

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes, where: str) -> "LeaseRecord":
        try:
            record = cls(**json.loads(data))
        except (ValueError, TypeError) as e:
            raise CheckpointError(f"lease file {where} is not a statekit lease ({e}): remove it if no run holds "
                                  f"this checkpoint") from None
        if not isinstance(record.token, int) or not isinstance(record.heartbeat_ms, int):
            raise CheckpointError(f"lease file {where} is not a statekit lease: remove it if no run holds this checkpoint")
        return record

    def holder(self) -> str:
        """How messages name the holder."""
        started = datetime.fromtimestamp(self.started_ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"{self.purpose} on host {self.host}, pid {self.pid}, started {started} (lease token {self.token})"

    def free_because(self, now_ms: int) -> str | None:
        """Why this lease may be taken, or None while it is held."""
        if self.released:
            return "released"
        age = now_ms - self.heartbeat_ms
        if age > self.timeout_ms:
            return f"its last heartbeat is {age / 1000:.0f}s old (timeout {self.timeout_ms / 1000:.0f}s)"
        if self.host == socket.gethostname():
            start = _process_start(self.pid)
            if start is None or (self.process_start is not None and start != self.process_start):
                return f"its process {self.pid} on this host is gone"
        return None


class CheckpointLease:
    """The lease of one checkpoint location, as one run takes, renews, checks and releases it."""

    def __init__(self, checkpoint: str, timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS) -> None:
        if timeout_seconds <= 0:
            raise CheckpointError(f"lease timeout must be > 0 seconds, got {timeout_seconds!r}")
        self.checkpoint = checkpoint
        self.storage = Storage(checkpoint)
        self.timeout_ms = int(timeout_seconds * 1000)
        self.record: LeaseRecord | None = None
        self._lost: LeaseLostError | None = None
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def token(self) -> int:
        """This run's fencing token (0 when it holds no lease)."""
        return self.record.token if self.record is not None else 0

    def newest(self) -> LeaseRecord | None:
        """The newest lease file of the checkpoint, or None when there is none."""
        token = newest_token(self.storage)
        if token == 0:
            return None
        path = _path(token)
        return LeaseRecord.from_bytes(self.storage.read(path), self.storage.full_path(path))

    def acquire(self, purpose: str) -> int:
        """Take the lease for ``purpose`` (what a holder is doing, as messages name it); returns the token.
        Raises ``LeaseHeldError`` naming the holder when another run holds it."""
        newest = None
        for _ in range(3):  # a lost race to create a token reads the winner, which then holds it
            newest = self.newest()
            now = _now_ms()
            why = None if newest is None else newest.free_because(now)
            if newest is not None and why is None:
                break
            mine = LeaseRecord((newest.token if newest else 0) + 1, socket.gethostname(), os.getpid(),
                               _process_start(os.getpid()), purpose, now, now, self.timeout_ms)
            if self.storage.create(_path(mine.token), mine.to_bytes()):
                if newest is not None and not newest.released:
                    _log.warning("statekit: took over the lease of checkpoint %s from %s: %s",
                                 self.checkpoint, newest.holder(), why)
                self.record = mine
                self._prune(mine.token)
                return mine.token
        assert newest is not None
        raise self._held_error(newest)

    def refuse_if_held(self) -> None:
        """Raise ``LeaseHeldError`` naming the holder, as ``acquire`` would, when another run holds the lease now;
        takes nothing (a run checks this before it starts Spark, then takes the lease)."""
        newest = self.newest()
        if newest is not None and newest.free_because(_now_ms()) is None:
            raise self._held_error(newest)

    def _held_error(self, newest: LeaseRecord) -> LeaseHeldError:
        return LeaseHeldError(f"checkpoint {self.checkpoint} is in use by another run: {newest.holder()}, last "
                              f"heartbeat {max(0, _now_ms() - newest.heartbeat_ms) / 1000:.0f}s ago. One run at a "
                              f"time may write a checkpoint: wait for that run to end, or stop it; a run that died "
                              f"leaves a lease that is free after {newest.timeout_ms / 1000:.0f}s without a heartbeat")

    def renew(self) -> None:
        """Write a new heartbeat; ``LeaseLostError`` when another run took the lease over."""
        with self._lock:
            if self.record is None:
                return
            self.check()
            record = replace(self.record, heartbeat_ms=_now_ms())
            self.storage.commit(_path(record.token), record.to_bytes(), f"{LEASE_DIR}/_tmp-{record.token}-{os.getpid()}")
            self.record = record

    def check(self) -> None:
        """Raise ``LeaseLostError`` unless this run still holds the newest lease (the fence before a commit)."""
        if self._lost is not None:
            raise self._lost
        if self.record is not None:
            fence(self.storage, self.record.token, self.checkpoint)

    def release(self) -> None:
        """Stop renewing and mark the lease released (unless it was lost: then the new holder's stays)."""
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
            self._beat = None
        with self._lock:
            record, self.record = self.record, None
            if record is None or newest_token(self.storage) != record.token:
                return
            done = replace(record, heartbeat_ms=_now_ms(), released=True)
            self.storage.commit(_path(done.token), done.to_bytes(), f"{LEASE_DIR}/_tmp-{done.token}-{os.getpid()}")

    def start_heartbeat(self) -> None:
        """Renew the lease every third of its timeout in a background thread until ``release``."""
        self._stop.clear()
        self._beat = threading.Thread(target=self._heartbeat, name="statekit-lease-heartbeat", daemon=True)
        self._beat.start()

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.timeout_ms / 3000):
            try:
                self.renew()
            except LeaseLostError as e:
                self._lost = e
                _log.error("statekit: %s", e)
                return
            except Exception as e:  # noqa: BLE001 -- a location down for a while: the next beat tries again
                _log.warning("statekit: renewing the lease of checkpoint %s failed: %s", self.checkpoint, e)

    def __enter__(self) -> "CheckpointLease":
        return self

    def __exit__(self, kind: type | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.release()

    def held(self, purpose: str) -> "CheckpointLease":
        """Acquire and keep renewing; use as ``with CheckpointLease(ck).held("rollback"):``."""
        self.acquire(purpose)
        self.start_heartbeat()
        return self

    def _prune(self, token: int) -> None:
        for old in _tokens(self.storage):
            if old < token - _KEEP:
                self.storage.delete(_path(old))


def _path(token: int) -> str:
    return f"{LEASE_DIR}/lease-{token:020d}.json"


def _tokens(storage: Storage) -> list[int]:
    for attempt in range(5):  # a local listing fails when a file vanishes under it (another run's temp file)
        try:
            names = [f.path.rsplit("/", 1)[-1] for f in storage.list_files(LEASE_DIR)]
            break
        except FileNotFoundError:
            if attempt == 4:
                raise
            time.sleep(0.01)
    return sorted(int(m.group(1)) for m in map(_NAME.match, names) if m)


def newest_token(storage: Storage) -> int:
    """The newest lease token at ``storage``'s checkpoint (0: none was ever taken)."""
    tokens = _tokens(storage)
    return tokens[-1] if tokens else 0


def fence(storage: Storage, token: int, checkpoint: str) -> None:
    """Raise ``LeaseLostError`` when ``token`` is not the checkpoint's newest lease: a writer that lost its
    lease commits nothing. Token 0 (a run without a lease, as tests below Spark make) is not fenced."""
    if token == 0:
        return
    newest = newest_token(storage)
    if newest == token:
        return
    holder = "someone"
    if newest:
        path = _path(newest)
        holder = LeaseRecord.from_bytes(storage.read(path), storage.full_path(path)).holder()
    raise LeaseLostError(f"checkpoint {checkpoint}: this run's lease (token {token}) was taken over by {holder}; "
                         f"not committing: this run stalled past the lease timeout and another run writes the "
                         f"checkpoint now")
