"""Manifests and the checkpoint layout: which files make up one (operator, partition, epoch) snapshot.

A manifest is a small JSON document carrying its own sha256 (and, with a checkpoint key, an HMAC of
the same body: ``signing``); it lists every file the snapshot needs (its own new files, and files of
earlier epochs it builds on) with size and sha256, the snapshot header (``statekit.snapshot_header``:
every format they are written in, checked first), the backend's own section, the operator's metadata
and statistics for inspection.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from ..snapshot_header import MANIFEST_FORMAT, NO_HEADER, SnapshotFormatError, SnapshotHeader, read_header
from .errors import CheckpointError, CorruptCheckpointError
from .signing import KEY_SOURCES, sign, signed_by

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
    """The serializer's registered types when the snapshot was taken (code -> ``module:qualname``): a restore
    checks them against its own and names them in errors (``statekit.check_recorded_types``), never imports them."""
    header: SnapshotHeader = NO_HEADER
    """Every format the snapshot's files are in (``statekit.snapshot_header``); version 0: written before it."""

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
        d["header"] = self.header.to_dict()
        return d

    def to_bytes(self, key: bytes | None = None) -> bytes:
        """The committed JSON: the body with its sha256 and, with ``key``, its HMAC (``signature``)."""
        body = self.to_dict()
        canonical = _canonical(body)
        body["checksum"] = hashlib.sha256(canonical).hexdigest()
        if key is not None:
            body["signature"] = sign(canonical, key)
        return json.dumps(body, indent=1, sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes, where: str, key: bytes | None = None) -> "Manifest":
        """Parse and verify a manifest (its checksum; with ``key``, its signature, which it must carry);
        ``where`` (its path) goes into every error."""
        try:
            body = json.loads(data)
            checksum = body.pop("checksum")
            signature = body.pop("signature", None)
        except (ValueError, KeyError, AttributeError, TypeError):
            raise CorruptCheckpointError(f"manifest {where} is not valid JSON or lacks its checksum") from None
        canonical = _canonical(body)
        if checksum != hashlib.sha256(canonical).hexdigest():
            raise CorruptCheckpointError(f"manifest {where} fails its checksum (corrupt or edited)")
        if key is not None and not signed_by(canonical, signature, key):
            unsigned = "" if signature is not None else (": it carries no signature (written without a key: read it "
                                                         "without one, or start a new checkpoint)")
            raise CorruptCheckpointError(f"manifest {where} fails its signature (edited, or written with another "
                                         f"key){unsigned}")
        if key is None and signature is not None:
            raise CheckpointError(f"manifest {where} is signed: reading it needs the checkpoint's key ({KEY_SOURCES})")
        header = read_header(body.pop("header", None), f"manifest {where}")
        legacy_format = body.pop("format", None) if header.version == 0 else MANIFEST_FORMAT
        if legacy_format != MANIFEST_FORMAT:
            raise SnapshotFormatError(f"manifest {where}: no snapshot header, and manifest format "
                                      f"{json.dumps(legacy_format)[:100]}; this statekit reads {MANIFEST_FORMAT}")
        _check_types(body.get("types", {}), where)
        try:
            first, last = body.pop("key_groups")
            files = [FileEntry(**f) for f in body.pop("files")]
            return cls(key_groups=range(first, last + 1), files=files, header=header, **body)
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptCheckpointError(f"manifest {where} lacks a field or has one of the wrong shape: {e}") from None


def _canonical(body: dict[str, Any]) -> bytes:
    """The bytes the checksum and the signature are of: the body without either, keys sorted."""
    return json.dumps(body, sort_keys=True).encode()


def _check_types(types: Any, where: str) -> None:
    """``types`` must map extension codes (digits) to ``module:qualname`` names: it is shown and compared, never run."""
    if not (isinstance(types, dict) and all(isinstance(c, str) and c.isascii() and c.isdigit() and isinstance(n, str)
                                            for c, n in types.items())):
        raise CorruptCheckpointError(f"manifest {where}: field types must map extension codes to 'module:qualname' "
                                     f"names, got {json.dumps(types)[:200]}")
