"""Manifests and the checkpoint layout: which files make up one (operator, partition, epoch) snapshot.

A manifest is a small JSON document carrying its own sha256; it lists every file the snapshot
needs (its own new files, and files of earlier epochs it builds on) with size and sha256, the
backend's own section, the operator's metadata and statistics for inspection.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from .errors import CheckpointError, CorruptCheckpointError

FORMAT = 1
MANIFEST_NAME = "manifest.json"
_PARTITION_RE = re.compile(r"^kg=(\d+)-(\d+)$")
_EPOCH_RE = re.compile(r"^epoch=(\d+)$")
_OPERATOR_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._=-]*$")


def check_operator(operator_id: str) -> str:
    """Operator ids become directory names: letters, digits, ``._=-``, not starting with ``_`` or ``.``."""
    if not isinstance(operator_id, str) or not _OPERATOR_RE.match(operator_id):
        raise CheckpointError(f"operator id must match {_OPERATOR_RE.pattern} (it names a directory), got {operator_id!r}")
    return operator_id


def partition_name(key_groups: range) -> str:
    """``kg=<first>-<last>`` (both inclusive)."""
    return f"kg={key_groups.start}-{key_groups.stop - 1}"


def parse_partition(name: str) -> range | None:
    m = _PARTITION_RE.match(name)
    return range(int(m.group(1)), int(m.group(2)) + 1) if m else None


def parse_epoch(name: str) -> int | None:
    m = _EPOCH_RE.match(name)
    return int(m.group(1)) if m else None


def partition_dir(operator_id: str, key_groups: range) -> str:
    return f"{operator_id}/{partition_name(key_groups)}"


def epoch_dir(operator_id: str, key_groups: range, epoch: int) -> str:
    return f"{partition_dir(operator_id, key_groups)}/epoch={epoch}"


def manifest_path(operator_id: str, key_groups: range, epoch: int) -> str:
    return f"{epoch_dir(operator_id, key_groups, epoch)}/{MANIFEST_NAME}"


def shared_dir(operator_id: str, key_groups: range) -> str:
    return f"{partition_dir(operator_id, key_groups)}/shared"


def tmp_dir(operator_id: str) -> str:
    return f"{operator_id}/_tmp"


@dataclass(frozen=True, slots=True)
class FileEntry:
    """A file a snapshot needs: ``path`` from the location root, ``role`` for the backend
    (e.g. full, delta, sst, db), ``name`` the backend's local name, ``epoch`` the epoch that wrote it."""

    path: str
    size: int
    sha256: str
    role: str
    epoch: int
    name: str = ""


@dataclass
class Manifest:
    """The committed description of one snapshot of one partition at one epoch."""

    operator: str
    epoch: int
    key_groups: range
    max_parallelism: int
    backend: str
    kind: str
    attempt: str
    created_ms: int
    files: list[FileEntry]
    snapshot: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)
    """The serializer's registered types when the snapshot was taken (code -> ``module:qualname``),
    so a restore in any process can import them (``statekit.expect_types``)."""

    @property
    def path(self) -> str:
        return manifest_path(self.operator, self.key_groups, self.epoch)

    @property
    def where(self) -> str:
        """How errors name this snapshot."""
        return f"operator {self.operator!r} epoch {self.epoch} partition {partition_name(self.key_groups)}"

    def files_with_role(self, role: str) -> list[FileEntry]:
        return [f for f in self.files if f.role == role]

    def total_bytes(self) -> int:
        """Bytes of every file the snapshot needs."""
        return sum(f.size for f in self.files)

    def written_bytes(self) -> int:
        """Bytes this epoch wrote (the incremental cost); the rest was reused from earlier epochs."""
        return sum(f.size for f in self.files if f.epoch == self.epoch)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["key_groups"] = [self.key_groups.start, self.key_groups.stop - 1]
        d["format"] = FORMAT
        return d

    def to_bytes(self) -> bytes:
        body = self.to_dict()
        body["checksum"] = _checksum(body)
        return json.dumps(body, indent=1, sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes, where: str) -> "Manifest":
        """Parse and verify a manifest; ``where`` (its path) goes into every error."""
        try:
            body = json.loads(data)
            checksum = body.pop("checksum")
        except (ValueError, KeyError, AttributeError, TypeError):
            raise CorruptCheckpointError(f"manifest {where} is not valid JSON or lacks its checksum") from None
        if checksum != _checksum(body):
            raise CorruptCheckpointError(f"manifest {where} fails its checksum (corrupt or edited)")
        if body.pop("format", None) != FORMAT:
            raise CheckpointError(f"manifest {where} has an unsupported format")
        first, last = body.pop("key_groups")
        files = [FileEntry(**f) for f in body.pop("files")]
        return cls(key_groups=range(first, last + 1), files=files, **body)


def _checksum(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
