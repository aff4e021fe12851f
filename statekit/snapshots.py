"""The snapshot contract between backends and a checkpoint store.

A store hands a backend a ``SnapshotWriter`` to put the files of one snapshot, and a
``SnapshotReader`` to get them back; a backend that can snapshot natively (its own files,
incrementally) implements ``IncrementalSnapshots``. Every backend can also give and take a
backend-neutral logical snapshot (``KeyedStateBackend.snapshot_logical``/``restore_logical``), which
is what a store uses across backends and for rescaling.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Callable

from .registry import wall_clock_ms

if TYPE_CHECKING:
    from .config import StateConfig

NATIVE = "native"
"""A snapshot in the backend's own format (restored by ``IncrementalSnapshots.restore_incremental``)."""
LOGICAL = "logical"
"""A backend-neutral snapshot (restored by ``KeyedStateBackend.restore_logical`` into any backend)."""


class SnapshotWriter(ABC):
    """Puts the files of one snapshot attempt; the store lists them in the snapshot's manifest.

    ``base`` is the committed manifest this backend's state was last snapshotted to or restored from
    (same location, operator and partition), or None: then the snapshot must be self-contained.
    ``force_full`` asks for a self-contained snapshot; ``policy`` carries the store's full/delta policy."""

    base: Any
    force_full: bool
    policy: Any

    @abstractmethod
    def write(self, name: str, data: bytes, role: str) -> Any:
        """A private file of this snapshot holding ``data``; returns its file entry."""

    @abstractmethod
    def upload(self, local_path: str, name: str, role: str) -> Any:
        """A private file of this snapshot copied from ``local_path``."""

    @abstractmethod
    def upload_shared(self, local_path: str, name: str, role: str) -> Any:
        """A content-addressed file shared between snapshots, uploaded only if not stored yet."""

    @abstractmethod
    def reuse(self, entry: Any, name: str | None = None) -> Any:
        """Reference a file of an earlier committed snapshot (of ``base``'s chain) without copying it."""


class SnapshotReader(ABC):
    """Reads back the files of one committed snapshot (``manifest``), verifying each."""

    manifest: Any

    @abstractmethod
    def read(self, entry: Any) -> bytes:
        """The bytes of one file of the snapshot."""

    @abstractmethod
    def download(self, entry: Any, local_path: str) -> None:
        """Copy one file of the snapshot to ``local_path``."""


class IncrementalSnapshots(ABC):
    """A backend that snapshots in its own format, building each snapshot on its ``base``."""

    @abstractmethod
    def snapshot_incremental(self, writer: SnapshotWriter) -> dict[str, Any]:
        """Write this backend's state through ``writer``; returns the manifest's backend section,
        with ``"incremental": bool`` (and optionally ``state_entries``/``state_entries_estimated``)."""

    @classmethod
    @abstractmethod
    def restore_incremental(cls, reader: SnapshotReader, config: "StateConfig", key_groups: range,
                            time_provider: Callable[[], int]) -> Any:
        """A new backend holding the snapshot ``reader`` reads (same backend kind and key groups)."""

    @classmethod
    def restore_rescaled(cls, readers: list[SnapshotReader], config: "StateConfig", key_groups: range,
                         time_provider: Callable[[], int]) -> Any | None:
        """A new backend of ``key_groups`` gathered from several native snapshots of this backend kind (``readers``,
        in key-group order, together covering ``key_groups``) from their own files, or None when it cannot be built
        that way: the store then goes through logical snapshots. Default: None."""
        return None

    def catch_up(self, reader: SnapshotReader, base: Any) -> bool:
        """Bring this backend, equal to the committed snapshot ``base`` and unchanged since, forward in
        place to the later snapshot of the same partition that ``reader`` reads, when its changes since
        ``base`` are at hand (a worker that ran this partition some epochs ago takes it back without a
        restore); False, changing nothing, when it cannot. Default: never."""
        return False

    @abstractmethod
    def unchanged_since_snapshot(self) -> bool:
        """True when nothing changed since the last snapshot or restore: the store may reuse this
        backend as it is for the next epoch (its fast path)."""

    @classmethod
    def export_logical(cls, reader: SnapshotReader, config: "StateConfig", key_groups: range) -> dict:
        """The logical snapshot of a native one; by default restores it into a scratch backend."""
        source = cls.restore_incremental(reader, config, key_groups, wall_clock_ms)
        try:
            return source.snapshot_logical()
        finally:
            source.close()
