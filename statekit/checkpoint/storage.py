"""Storage: a checkpoint location on any ``pyarrow.fs`` filesystem (plain paths, ``file://``, ``s3://``...).

Paths handed to it are relative to the location's root and always use ``/``. Committing a small
file atomically is the one operation that differs per filesystem: where ``rename`` is atomic
(local disks, HDFS) a temp file is renamed over the final name; on object stores a single put is
atomic by itself, so the file is written in place.

Every filesystem call is retried under a ``RetryPolicy`` (a location that is unavailable for a
while: network blips, throttling): exponential backoff between attempts, and after the last one
a ``CheckpointUnavailableError`` naming the location, the operation and the path. A missing file
is an answer, not a fault: ``FileNotFoundError`` is never retried. On S3 the client also retries each
request inside every attempt, as many times as ``AWS_MAX_ATTEMPTS`` says (``s3_retry``).
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, TypeVar

import pyarrow.fs as pafs

from .errors import CheckpointError, CheckpointUnavailableError
from .s3_retry import with_s3_attempts

T = TypeVar("T")

_CHUNK = 1 << 20
_RENAME_ATOMIC = frozenset({"local", "hdfs"})


@dataclass(frozen=True, slots=True)
class StoredFile:
    """One file of the location: path relative to the root, size in bytes, modification time."""

    path: str
    size: int
    mtime: datetime | None


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``attempts`` tries per filesystem operation (>= 1), sleeping ``backoff_ms`` after the first
    failure, multiplied by ``multiplier`` after each further one, at most ``max_backoff_ms``."""

    attempts: int = 5
    backoff_ms: int = 200
    multiplier: float = 2.0
    max_backoff_ms: int = 10_000
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.attempts, int) or self.attempts < 1:
            raise CheckpointError(f"retry attempts must be an int >= 1, got {self.attempts!r}")
        if self.backoff_ms < 0 or self.max_backoff_ms < 0 or self.multiplier < 1:
            raise CheckpointError(f"retry backoff must be >= 0 ms with a multiplier >= 1, got backoff_ms="
                                  f"{self.backoff_ms!r}, multiplier={self.multiplier!r}, max_backoff_ms={self.max_backoff_ms!r}")

    def delays_ms(self) -> list[float]:
        """The sleeps between the attempts."""
        return [min(self.backoff_ms * self.multiplier ** i, self.max_backoff_ms) for i in range(self.attempts - 1)]


S3_ALIASES = ("s3a://", "s3n://")
"""Hadoop's names for S3, which Spark users write out of habit: the same store as ``s3://``."""


def pyarrow_uri(uri: str) -> str:
    """``uri`` as pyarrow names its filesystem: ``s3a://`` and ``s3n://`` are ``s3://``. pyarrow's S3
    filesystem takes its settings from the standard AWS variables (``AWS_ENDPOINT_URL``,
    ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``, ...)."""
    for alias in S3_ALIASES:
        if uri.startswith(alias):
            return "s3://" + uri[len(alias):]
    return uri


class Storage:
    """Read, write, list and delete files below one root on a pyarrow filesystem."""

    def __init__(self, uri: str, retry: RetryPolicy | None = None) -> None:
        if not isinstance(uri, str) or not uri:
            raise CheckpointError(f"checkpoint location must be a non-empty path or URI, got {uri!r}")
        try:
            if "://" in uri:
                fs, root = pafs.FileSystem.from_uri(pyarrow_uri(uri))
            else:
                fs, root = pafs.LocalFileSystem(), os.path.abspath(uri)
        except Exception as e:  # pyarrow raises ArrowInvalid, OSError... for bad URIs
            raise CheckpointError(f"checkpoint location {uri!r} cannot be opened: {e}") from None
        self.uri = uri
        self.fs = with_s3_attempts(fs)
        self.root = root.rstrip("/") or "/"
        self.rename_is_atomic = fs.type_name in _RENAME_ATOMIC
        self.retry = retry if retry is not None else RetryPolicy()

    def _do(self, operation: str, rel: str, call: Callable[[], T]) -> T:
        """``call()`` under the retry policy; FileNotFoundError passes through at once."""
        for delay in [*self.retry.delays_ms(), None]:
            try:
                return call()
            except FileNotFoundError:
                raise
            except OSError as e:  # pyarrow reports I/O failures of every filesystem as OSError
                if delay is None:
                    raise CheckpointUnavailableError(
                        f"checkpoint location {self.uri!r}: {operation} {rel or '/'!r} failed after "
                        f"{self.retry.attempts} attempts: {e}") from e
                self.retry.sleep(delay / 1000)
        raise CheckpointError("retry policy without attempts")  # unreachable: attempts >= 1

    def full_path(self, rel: str) -> str:
        return f"{self.root}/{rel}" if rel else self.root

    def _parent(self, rel: str) -> None:
        parent = self.full_path(rel).rpartition("/")[0]
        if parent:
            self.fs.create_dir(parent, recursive=True)

    def read(self, rel: str) -> bytes:
        def call() -> bytes:
            with self.fs.open_input_stream(self.full_path(rel)) as f:
                return f.read()
        return self._do("read", rel, call)

    def write(self, rel: str, data: bytes) -> None:
        """Write ``data`` to ``rel`` (a name no one else writes: attempt-unique or content-addressed)."""
        def call() -> None:
            self._parent(rel)
            with self.fs.open_output_stream(self.full_path(rel)) as f:
                f.write(data)
        self._do("write", rel, call)

    def commit(self, rel: str, data: bytes, tmp_rel: str) -> None:
        """Make ``rel`` hold ``data`` atomically: readers see the old file or the whole new one."""
        if not self.rename_is_atomic:
            self.write(rel, data)
            return
        self.write(tmp_rel, data)
        self.move(tmp_rel, rel)

    def create(self, rel: str, data: bytes) -> bool:
        """Write ``data`` to ``rel`` only if no file is there, atomically (readers see no file or the whole
        one); False when one is. Local disks link a temp file to the name; S3 puts with ``If-None-Match``.
        Other filesystems have no such write here: ``ExclusiveCreateUnsupported``."""
        if self.fs.type_name == "local":
            return self._do("create", rel, lambda: _link_new(self.full_path(rel), data))
        if self.fs.type_name == "s3":
            return self._do("create", rel, lambda: _put_new(self.full_path(rel), data))
        raise ExclusiveCreateUnsupported(f"checkpoint location {self.uri!r}: no exclusive create on a "
                                         f"{self.fs.type_name} filesystem")

    def move(self, src_rel: str, dst_rel: str) -> None:
        def call() -> None:
            self._parent(dst_rel)
            self.fs.move(self.full_path(src_rel), self.full_path(dst_rel))
        self._do("move", f"{src_rel} -> {dst_rel}", call)

    def upload(self, local_path: str, rel: str) -> tuple[int, str]:
        """Copy a local file to ``rel``; returns its size and sha256 (hex), computed while copying."""
        def call() -> tuple[int, str]:
            self._parent(rel)
            with open(local_path, "rb") as src, self.fs.open_output_stream(self.full_path(rel)) as dst:
                return _copy(src, dst)
        return self._do("upload", rel, call)

    def download(self, rel: str, local_path: str) -> tuple[int, str]:
        """Copy ``rel`` to a local file; returns its size and sha256 (hex), computed while copying."""
        def call() -> tuple[int, str]:
            with self.fs.open_input_stream(self.full_path(rel)) as src, open(local_path, "wb") as dst:
                return _copy(src, dst)
        return self._do("download", rel, call)

    def info(self, rel: str) -> StoredFile | None:
        """The file at ``rel``, or None when there is none."""
        fi = self._do("stat", rel, lambda: self.fs.get_file_info(self.full_path(rel)))
        if fi.type != pafs.FileType.File:
            return None
        return StoredFile(rel, fi.size, fi.mtime)

    def list_dirs(self, rel: str) -> list[str]:
        """Names of the directories directly below ``rel`` (none when it does not exist)."""
        infos = self._list(rel, recursive=False)
        return sorted(fi.base_name for fi in infos if fi.type == pafs.FileType.Directory)

    def list_files(self, rel: str) -> list[StoredFile]:
        """Every file below ``rel``, recursively, with paths relative to the root."""
        cut = len(self.root) + 1
        infos = self._list(rel, recursive=True)
        return [StoredFile(fi.path[cut:], fi.size, fi.mtime) for fi in infos if fi.type == pafs.FileType.File]

    def _list(self, rel: str, recursive: bool) -> list:
        """The entries below ``rel`` (none when it does not exist). An empty answer is trusted only if
        the root is a directory or absent: a root that became a file (a broken mount, a moved
        directory) is an unavailable location, retried, never an empty checkpoint."""
        sel = pafs.FileSelector(self.full_path(rel), allow_not_found=True, recursive=recursive)

        def call() -> list:
            infos = self.fs.get_file_info(sel)
            if not infos and self.fs.get_file_info(self.root).type == pafs.FileType.File:
                raise NotADirectoryError(f"{self.root} is a file, not a directory")
            return infos
        return self._do("list", rel, call)

    def delete(self, rel: str) -> None:
        """Delete a file; a file already gone is fine (another GC got there first)."""
        try:
            self._do("delete", rel, lambda: self.fs.delete_file(self.full_path(rel)))
        except FileNotFoundError:
            pass

    def delete_dir(self, rel: str) -> None:
        try:
            self._do("delete directory", rel, lambda: self.fs.delete_dir(self.full_path(rel)))
        except FileNotFoundError:
            pass


class ExclusiveCreateUnsupported(CheckpointError):
    """The location's filesystem offers no write that fails when the file exists."""


def _link_new(path: str, data: bytes) -> bool:
    """Create ``path`` holding ``data`` unless it exists: written to a temp name, then hard-linked (fails on an
    existing name, never replaces it)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)


def _put_new(path: str, data: bytes) -> bool:
    """Put ``bucket/key`` unless it exists (S3's conditional write, through boto3: pyarrow has none)."""
    try:
        import boto3
        from botocore.exceptions import ClientError
    except ImportError:
        raise ExclusiveCreateUnsupported("an exclusive create on s3:// needs boto3: pip install 'statekit[s3]'") from None
    bucket, _, key = path.partition("/")
    try:
        boto3.client("s3").put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
        return True
    except ClientError as e:
        if e.response.get("Error", {}).get("Code") in ("PreconditionFailed", "ConditionalRequestConflict"):
            return False
        raise OSError(f"put {path}: {e}") from e


def _copy(src, dst) -> tuple[int, str]:
    """Copy stream to stream in chunks; returns the size and sha256 (hex) of what was copied."""
    h = hashlib.sha256()
    size = 0
    while chunk := src.read(_CHUNK):
        h.update(chunk)
        dst.write(chunk)
        size += len(chunk)
    return size, h.hexdigest()
