"""The checkpoint store's CheckpointSnapshotWriter and CheckpointSnapshotReader (``statekit.snapshots``' interfaces):
files of one snapshot on a ``Storage``, with size and sha256 checked on the way back.

Private files are named by the attempt (``<attempt>-<name>``) so concurrent attempts never collide;
shared files are content-addressed (``shared/<sha256><suffix>``) so an identical file is stored once.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from typing import TYPE_CHECKING

from .. import snapshots
from .errors import CorruptCheckpointError
from .manifest import FileEntry, Manifest, epoch_dir, partition_dir, shared_dir
from .policy import CheckpointPolicy

if TYPE_CHECKING:
    from .storage import Storage

_CHUNK = 1 << 20


def file_sha256(local_path: str) -> str:
    h = hashlib.sha256()
    with open(local_path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


class CheckpointSnapshotWriter(snapshots.SnapshotWriter):
    """Writes the files of one snapshot attempt and remembers them (in order) for the manifest."""

    def __init__(self, storage: "Storage", operator: str, key_groups: range, epoch: int, attempt: str,
                 base: Manifest | None, policy: CheckpointPolicy, force_full: bool) -> None:
        self.storage = storage
        self.operator = operator
        self.key_groups = key_groups
        self.epoch = epoch
        self.attempt = attempt
        self.base = base
        """The committed manifest this backend's state was last snapshotted to or restored from
        (same location, operator and partition), or None: then the snapshot must be self-contained."""
        self.policy = policy
        self.force_full = force_full
        self.files: list[FileEntry] = []
        self.bytes_written = 0
        self._dir = epoch_dir(operator, key_groups, epoch)

    def _private(self, name: str) -> str:
        return f"{self._dir}/{self.attempt}-{name}"

    def _add(self, entry: FileEntry, written: int) -> FileEntry:
        self.files.append(entry)
        self.bytes_written += written
        return entry

    def write(self, name: str, data: bytes, role: str) -> FileEntry:
        """A private file of this epoch holding ``data``."""
        path = self._private(name)
        self.storage.write(path, data)
        return self._add(FileEntry(path, len(data), hashlib.sha256(data).hexdigest(), role, self.epoch, name), len(data))

    def upload(self, local_path: str, name: str, role: str) -> FileEntry:
        """A private file of this epoch copied from ``local_path``."""
        path = self._private(name)
        size, sha = self.storage.upload(local_path, path)
        return self._add(FileEntry(path, size, sha, role, self.epoch, name), size)

    def upload_shared(self, local_path: str, name: str, role: str) -> FileEntry:
        """A content-addressed shared file: uploaded only when no identical file is stored yet."""
        sha = file_sha256(local_path)
        suffix = os.path.splitext(name)[1]
        path = f"{shared_dir(self.operator, self.key_groups)}/{sha}{suffix}"
        size = os.path.getsize(local_path)
        known = self.storage.info(path)
        if known is not None and known.size == size:
            return self._add(FileEntry(path, size, sha, role, self.epoch, name), 0)
        tmp = f"{partition_dir(self.operator, self.key_groups)}/_tmp/{self.attempt}-{uuid.uuid4().hex}{suffix}"
        up_size, up_sha = self.storage.upload(local_path, tmp)
        if up_sha != sha:
            self.storage.delete(tmp)
            raise CorruptCheckpointError(f"epoch {self.epoch}: {local_path} changed while it was uploaded")
        self.storage.move(tmp, path)
        return self._add(FileEntry(path, up_size, sha, role, self.epoch, name), up_size)

    def reuse(self, entry: FileEntry, name: str | None = None) -> FileEntry:
        """Reference a file an earlier committed epoch wrote (no upload)."""
        if name is not None and name != entry.name:
            entry = FileEntry(entry.path, entry.size, entry.sha256, entry.role, entry.epoch, name)
        return self._add(entry, 0)


class CheckpointSnapshotReader(snapshots.SnapshotReader):
    """Reads the files of one committed manifest, verifying size and sha256 of each."""

    def __init__(self, storage: "Storage", manifest: Manifest) -> None:
        self.storage = storage
        self.manifest = manifest

    def _check(self, entry: FileEntry, size: int, sha: str) -> None:
        if size != entry.size or sha != entry.sha256:
            raise CorruptCheckpointError(
                f"{self.manifest.where}: file {entry.path} is corrupt ({size} bytes, sha256 {sha[:12]}..., "
                f"expected {entry.size} bytes, sha256 {entry.sha256[:12]}...); {self._way_out()}")

    def _missing(self, entry: FileEntry) -> CorruptCheckpointError:
        return CorruptCheckpointError(f"{self.manifest.where}: file {entry.path} is missing; {self._way_out()}")

    def _way_out(self) -> str:
        """How to go on: restart the job from an earlier retained epoch (``statekit inspect`` lists them)."""
        where = self.storage.uri
        return (f"roll the job back to an earlier retained epoch: statekit checkpoint rollback {where} --to-epoch "
                f"<epoch before {self.manifest.epoch}> (statekit inspect {where} lists the retained epochs)")

    def read(self, entry: FileEntry) -> bytes:
        try:
            data = self.storage.read(entry.path)
        except FileNotFoundError:
            raise self._missing(entry) from None
        self._check(entry, len(data), hashlib.sha256(data).hexdigest())
        return data

    def download(self, entry: FileEntry, local_path: str) -> None:
        try:
            size, sha = self.storage.download(entry.path, local_path)
        except FileNotFoundError:
            raise self._missing(entry) from None
        self._check(entry, size, sha)
