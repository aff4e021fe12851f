"""Storage: a checkpoint location on any ``pyarrow.fs`` filesystem (plain paths, ``file://``, ``s3://``...).

Paths handed to it are relative to the location's root and always use ``/``. Committing a small
file atomically is the one operation that differs per filesystem: where ``rename`` is atomic
(local disks, HDFS) a temp file is renamed over the final name; on object stores a single put is
atomic by itself, so the file is written in place.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from datetime import datetime

import pyarrow.fs as pafs

from .errors import CheckpointError

_CHUNK = 1 << 20
_RENAME_ATOMIC = frozenset({"local", "hdfs"})


@dataclass(frozen=True, slots=True)
class StoredFile:
    """One file of the location: path relative to the root, size in bytes, modification time."""

    path: str
    size: int
    mtime: datetime | None


class Storage:
    """Read, write, list and delete files below one root on a pyarrow filesystem."""

    def __init__(self, uri: str) -> None:
        if not isinstance(uri, str) or not uri:
            raise CheckpointError(f"checkpoint location must be a non-empty path or URI, got {uri!r}")
        try:
            if "://" in uri:
                fs, root = pafs.FileSystem.from_uri(uri)
            else:
                fs, root = pafs.LocalFileSystem(), os.path.abspath(uri)
        except Exception as e:  # pyarrow raises ArrowInvalid, OSError... for bad URIs
            raise CheckpointError(f"checkpoint location {uri!r} cannot be opened: {e}") from None
        self.uri = uri
        self.fs = fs
        self.root = root.rstrip("/") or "/"
        self.rename_is_atomic = fs.type_name in _RENAME_ATOMIC

    def full_path(self, rel: str) -> str:
        return f"{self.root}/{rel}" if rel else self.root

    def _parent(self, rel: str) -> None:
        parent = self.full_path(rel).rpartition("/")[0]
        if parent:
            self.fs.create_dir(parent, recursive=True)

    def read(self, rel: str) -> bytes:
        with self.fs.open_input_stream(self.full_path(rel)) as f:
            return f.read()

    def write(self, rel: str, data: bytes) -> None:
        """Write ``data`` to ``rel`` (a name no one else writes: attempt-unique or content-addressed)."""
        self._parent(rel)
        with self.fs.open_output_stream(self.full_path(rel)) as f:
            f.write(data)

    def commit(self, rel: str, data: bytes, tmp_rel: str) -> None:
        """Make ``rel`` hold ``data`` atomically: readers see the old file or the whole new one."""
        if not self.rename_is_atomic:
            self.write(rel, data)
            return
        self.write(tmp_rel, data)
        self._parent(rel)
        self.fs.move(self.full_path(tmp_rel), self.full_path(rel))

    def move(self, src_rel: str, dst_rel: str) -> None:
        self._parent(dst_rel)
        self.fs.move(self.full_path(src_rel), self.full_path(dst_rel))

    def upload(self, local_path: str, rel: str) -> tuple[int, str]:
        """Copy a local file to ``rel``; returns its size and sha256 (hex), computed while copying."""
        self._parent(rel)
        h = hashlib.sha256()
        size = 0
        with open(local_path, "rb") as src, self.fs.open_output_stream(self.full_path(rel)) as dst:
            while chunk := src.read(_CHUNK):
                h.update(chunk)
                dst.write(chunk)
                size += len(chunk)
        return size, h.hexdigest()

    def download(self, rel: str, local_path: str) -> tuple[int, str]:
        """Copy ``rel`` to a local file; returns its size and sha256 (hex), computed while copying."""
        h = hashlib.sha256()
        size = 0
        with self.fs.open_input_stream(self.full_path(rel)) as src, open(local_path, "wb") as dst:
            while chunk := src.read(_CHUNK):
                h.update(chunk)
                dst.write(chunk)
                size += len(chunk)
        return size, h.hexdigest()

    def info(self, rel: str) -> StoredFile | None:
        """The file at ``rel``, or None when there is none."""
        fi = self.fs.get_file_info(self.full_path(rel))
        if fi.type != pafs.FileType.File:
            return None
        return StoredFile(rel, fi.size, fi.mtime)

    def list_dirs(self, rel: str) -> list[str]:
        """Names of the directories directly below ``rel`` (none when it does not exist)."""
        sel = pafs.FileSelector(self.full_path(rel), allow_not_found=True)
        return sorted(fi.base_name for fi in self.fs.get_file_info(sel) if fi.type == pafs.FileType.Directory)

    def list_files(self, rel: str) -> list[StoredFile]:
        """Every file below ``rel``, recursively, with paths relative to the root."""
        sel = pafs.FileSelector(self.full_path(rel), allow_not_found=True, recursive=True)
        cut = len(self.root) + 1
        return [StoredFile(fi.path[cut:], fi.size, fi.mtime) for fi in self.fs.get_file_info(sel)
                if fi.type == pafs.FileType.File]

    def delete(self, rel: str) -> None:
        """Delete a file; a file already gone is fine (another GC got there first)."""
        try:
            self.fs.delete_file(self.full_path(rel))
        except FileNotFoundError:
            pass

    def delete_dir(self, rel: str) -> None:
        try:
            self.fs.delete_dir(self.full_path(rel))
        except FileNotFoundError:
            pass
