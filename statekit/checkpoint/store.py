"""CheckpointStore: commit one partition's snapshot per epoch, restore it (or rescale it), keep K epochs.

Commit protocol (a crash anywhere leaves the old committed epoch or the new one, never half):
1. the backend writes its files: private ones under attempt-unique names, shared ones
   content-addressed after an upload to an attempt-unique temp name;
2. the manifest (listing every file with size and sha256) is committed last, by rename on
   filesystems where rename is atomic, by a single put on object stores;
3. if another attempt of the same (epoch, partition) committed first, its manifest stays
   (first wins; both describe the same state) and this attempt's private files are dropped;
4. retention: manifests beyond the last K epochs are deleted first, then files no retained
   manifest references (reference counts recomputed from the retained manifests). A file is
   deleted only when it is older than the second-newest committed manifest, so the files of an
   attempt still in flight are never taken away from it. After rescaling, a partition of the old
   partitioning is deleted once partitions keeping only newer epochs hold all its key groups.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ..keyed_backend import KeyedStateBackend
from ..config import StateConfig
from ..errors import StateError
from ..keyed_backend import create_backend
from ..registry import backend_class, wall_clock_ms
from ..payload import decode, encode
from ..serialization import check_recorded_types, registered_types
from ..snapshot_header import CORE, SnapshotHeader, backend_scope, check_header, current_header, state_scope
from ..snapshots import LOGICAL, NATIVE, IncrementalSnapshots
from .errors import CheckpointError, CorruptCheckpointError, NoCheckpointError
from .manifest import (MANIFEST_NAME, Manifest, check_operator, epoch_dir, manifest_path,
                       parse_epoch, parse_partition, partition_dir, partition_name)
from .policy import CheckpointPolicy
from .signing import check_key
from .storage import RetryPolicy, Storage
from .transfer import CheckpointSnapshotReader, CheckpointSnapshotWriter


@dataclass(frozen=True, slots=True)
class CheckpointBase:
    """Stored in ``backend.checkpoint_base``: the committed snapshot the backend's state equals."""

    location: str
    operator: str
    key_groups: range
    epoch: int
    attempt: str


@dataclass(frozen=True, slots=True)
class Committed:
    """The outcome of ``commit``: the committed manifest, and whether this attempt's one won."""

    manifest: Manifest
    won: bool
    seconds: float

    @property
    def bytes_written(self) -> int:
        return self.manifest.written_bytes() if self.won else 0


@dataclass
class Restored:
    """The outcome of ``restore``: a backend holding the state of ``epoch`` (None: nothing committed)."""

    backend: KeyedStateBackend
    epoch: int | None
    sources: list[Manifest] = field(default_factory=list)
    fast_path: bool = False
    native: bool = False
    caught_up: bool = False
    """The backend given was an earlier epoch's and was brought forward in place (``IncrementalSnapshots.catch_up``)."""

    @property
    def metadata(self) -> list[dict[str, Any]]:
        """Operator metadata of each source snapshot, in key-group order (several after rescaling)."""
        return [m.metadata for m in self.sources]


class CheckpointStore:
    """Snapshots of keyed-state backends at a checkpoint location (path or any pyarrow URI). With ``key``,
    every manifest it commits is signed and every manifest it reads must be (``signing``)."""

    def __init__(self, uri: str, policy: CheckpointPolicy | None = None, *, retry: RetryPolicy | None = None,
                 key: bytes | None = None, **policy_options: Any) -> None:
        self.storage = Storage(uri, retry)
        self._key = check_key(key)
        self.policy = policy if policy is not None else CheckpointPolicy(**policy_options)
        self.location = f"{self.storage.fs.type_name}:{self.storage.root}"

    # -- listing -------------------------------------------------------------------------------
    def operators(self) -> list[str]:
        return [d for d in self.storage.list_dirs("") if not d.startswith(("_", "."))]

    def partitions(self, operator_id: str) -> list[range]:
        """Key-group ranges that have (or had) snapshots of ``operator_id``, by start."""
        parts = [parse_partition(d) for d in self.storage.list_dirs(check_operator(operator_id))]
        return sorted((p for p in parts if p is not None), key=lambda r: (r.start, r.stop))

    def epochs(self, operator_id: str, key_groups: range) -> list[int]:
        """Committed epochs of one partition, ascending."""
        pdir = partition_dir(check_operator(operator_id), key_groups)
        found = (parse_epoch(d) for d in self.storage.list_dirs(pdir))
        return sorted(e for e in found if e is not None
                      and self.storage.info(manifest_path(operator_id, key_groups, e)) is not None)

    def manifest(self, operator_id: str, key_groups: range, epoch: int) -> Manifest:
        """The committed manifest of (operator, partition, epoch), verified."""
        path = manifest_path(check_operator(operator_id), key_groups, epoch)
        try:
            data = self.storage.read(path)
        except FileNotFoundError:
            raise NoCheckpointError(f"operator {operator_id!r} epoch {epoch} partition {partition_name(key_groups)}: "
                                    f"no committed manifest {path}") from None
        return Manifest.from_bytes(data, self.storage.full_path(path), self._key)

    def covering(self, operator_id: str, key_groups: range, epoch: int | None = None) -> list[Manifest]:
        """Manifests of one epoch that together hold every key group of ``key_groups`` ([] when no
        snapshot overlaps them). ``epoch`` None: the newest epoch that covers them."""
        overlapping = [p for p in self.partitions(operator_id)
                       if p.start < key_groups.stop and key_groups.start < p.stop]
        by_part = {p: set(self.epochs(operator_id, p)) for p in overlapping}
        committed = set().union(*by_part.values()) if by_part else set()
        if not committed:
            if epoch is not None:
                raise NoCheckpointError(f"operator {operator_id!r}: nothing committed for key groups "
                                        f"{partition_name(key_groups)}, so epoch {epoch} cannot be restored")
            return []
        for e in ([epoch] if epoch is not None else sorted(committed, reverse=True)):
            cover = _cover(key_groups, [p for p in overlapping if e in by_part[p]])
            if cover is not None:
                return [self.manifest(operator_id, p, e) for p in cover]
        retained = sorted(committed)
        if epoch is not None:
            raise NoCheckpointError(f"operator {operator_id!r}: epoch {epoch} is not committed (or not retained) for "
                                    f"every key group of {partition_name(key_groups)}; committed epochs: {retained}")
        raise NoCheckpointError(f"operator {operator_id!r}: no committed epoch covers every key group of "
                                f"{partition_name(key_groups)}; committed epochs: {retained}")

    # -- commit --------------------------------------------------------------------------------
    def commit(self, operator_id: str, epoch: int, backend: KeyedStateBackend, metadata: dict | None = None, *,
               full: bool = False, logical: bool = False) -> Committed:
        """Snapshot ``backend`` (its key groups are the partition) as ``epoch`` of ``operator_id``.

        Incremental when the backend supports it and its last snapshot/restore is still committed
        here; ``full`` forces a self-contained native snapshot, ``logical`` the backend-neutral one."""
        check_operator(operator_id)
        if not isinstance(epoch, int) or epoch < 0:
            raise CheckpointError(f"operator {operator_id!r}: epoch must be an int >= 0, got {epoch!r}")
        metadata = dict(metadata or {})
        try:
            json.dumps(metadata)
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"operator {operator_id!r} epoch {epoch}: metadata must be JSON-serializable: {e}") from None
        t0 = time.perf_counter()
        kgs = backend.key_groups
        base_ref, backend.checkpoint_base = backend.checkpoint_base, None
        existing = self._committed(operator_id, kgs, epoch)
        if existing is not None:
            return Committed(existing, False, time.perf_counter() - t0)
        attempt = uuid.uuid4().hex
        native = not logical and isinstance(backend, IncrementalSnapshots)
        header = _header(backend, native)
        writer = CheckpointSnapshotWriter(self.storage, operator_id, kgs, epoch, attempt,
                                self._base(base_ref, operator_id, kgs, epoch, header), self.policy, full)
        try:
            if native:
                section, kind = backend.snapshot_incremental(writer), NATIVE
            else:
                writer.write("logical.skz", encode(backend.snapshot_logical()), "logical")
                section, kind = {"incremental": False}, LOGICAL
        except StateError:
            raise
        except Exception as e:  # a backend's own I/O error (e.g. RocksDB's local files gone)
            raise CheckpointError(f"operator {operator_id!r} epoch {epoch} partition {partition_name(kgs)}: "
                                  f"snapshot of the {backend.name} backend failed: {e}") from e
        manifest = Manifest(operator_id, epoch, kgs, backend.max_parallelism, backend.name, kind, attempt,
                            wall_clock_ms(), list(writer.files), section, metadata, _stats(backend, section),
                            {str(code): name for code, name in registered_types().items()}, header)
        manifest.stats["seconds"] = round(time.perf_counter() - t0, 6)
        won = self._commit_manifest(manifest)
        if not won:
            for f in writer.files:
                if f.path.startswith(f"{epoch_dir(operator_id, kgs, epoch)}/{attempt}-"):
                    self.storage.delete(f.path)
            return Committed(self.manifest(operator_id, kgs, epoch), False, time.perf_counter() - t0)
        backend.checkpoint_base = CheckpointBase(self.location, operator_id, kgs, epoch, attempt)
        self.gc(operator_id, kgs)
        return Committed(manifest, True, time.perf_counter() - t0)

    def _commit_manifest(self, manifest: Manifest) -> bool:
        """Write the manifest last and atomically; False when another attempt committed first."""
        if self.storage.info(manifest.path) is not None:
            return False
        tmp = f"{partition_dir(manifest.operator, manifest.key_groups)}/_tmp/{manifest.attempt}-{MANIFEST_NAME}"
        self.storage.commit(manifest.path, manifest.to_bytes(self._key), tmp)
        return True

    def _committed(self, operator_id: str, kgs: range, epoch: int) -> Manifest | None:
        if self.storage.info(manifest_path(operator_id, kgs, epoch)) is None:
            return None
        return self.manifest(operator_id, kgs, epoch)

    def _base(self, ref: Any, operator_id: str, kgs: range, epoch: int, header: SnapshotHeader) -> Manifest | None:
        """The manifest an incremental snapshot may build on: the backend's last snapshot or restore,
        if it is of this location/operator/partition, older than ``epoch``, still committed as is and
        written in the formats of ``header`` (a snapshot from before a format change is not built on)."""
        if (not isinstance(ref, CheckpointBase) or ref.location != self.location or ref.operator != operator_id
                or ref.key_groups != kgs or ref.epoch >= epoch):
            return None
        m = self._committed(operator_id, kgs, ref.epoch)
        return m if m is not None and m.attempt == ref.attempt and header.continues(m.header) else None

    # -- restore -------------------------------------------------------------------------------
    def restore(self, operator_id: str, config: StateConfig, key_groups: Iterable[int] | None = None, *,
                epoch: int | None = None, backend: KeyedStateBackend | None = None,
                time_provider: Callable[[], int] | None = None) -> Restored:
        """A backend for ``key_groups`` holding the committed state of ``epoch`` (default: the newest
        epoch covering them), gathered from several old partitions when the partitioning changed.

        ``backend``: the instance kept from the previous epoch; returned as is (fast path) when it
        still equals the requested snapshot, otherwise closed and replaced."""
        check_operator(operator_id)
        if key_groups is None:
            key_groups = backend.key_groups if backend is not None else range(config.max_parallelism)
        kgs = _as_range(key_groups)
        sources = self.covering(operator_id, kgs, epoch)
        for m in sources:
            _check_header(m, read_states=True)
            _check_types(m)
        if backend is not None and sources and self._is_current(backend, config, kgs, sources):
            return Restored(backend, sources[0].epoch, sources, fast_path=True, native=True)
        if backend is not None and sources and self._caught_up(backend, config, kgs, sources):
            return Restored(backend, sources[0].epoch, sources, native=True, caught_up=True)
        if backend is not None:
            if not sources and _is_fresh(backend, config, kgs):
                return Restored(backend, None)
            _discard(backend)
        if not sources:
            return Restored(create_backend(config, kgs, time_provider), None)
        if config.max_parallelism != sources[0].max_parallelism:
            raise CheckpointError(f"{sources[0].where}: snapshotted with max_parallelism "
                                  f"{sources[0].max_parallelism}, restoring with {config.max_parallelism}")
        m = sources[0]
        cls = backend_class(config.backend)
        if (len(sources) == 1 and m.kind == NATIVE and m.backend == config.backend and m.key_groups == kgs
                and issubclass(cls, IncrementalSnapshots)):
            restored = cls.restore_incremental(CheckpointSnapshotReader(self.storage, m), config, kgs, time_provider or wall_clock_ms)
            restored.checkpoint_base = CheckpointBase(self.location, operator_id, kgs, m.epoch, m.attempt)
            return Restored(restored, m.epoch, sources, native=True)
        if (issubclass(cls, IncrementalSnapshots) and all(s.kind == NATIVE and s.backend == config.backend
                                                          and s.max_parallelism == config.max_parallelism for s in sources)):
            restored = cls.restore_rescaled([CheckpointSnapshotReader(self.storage, s) for s in sources], config, kgs,
                                            time_provider or wall_clock_ms)
            if restored is not None:
                return Restored(restored, m.epoch, sources, native=True)
        target = create_backend(config, kgs, time_provider)
        try:
            target.restore_logical([self.logical_snapshot(s) for s in sources])
        except BaseException:
            target.close()
            raise
        return Restored(target, m.epoch, sources)

    def _caught_up(self, backend: KeyedStateBackend, config: StateConfig, kgs: range, sources: list[Manifest]) -> bool:
        """Whether ``backend``, a committed snapshot of this partition older than ``sources[0]``, caught up to it."""
        ref, m = backend.checkpoint_base, sources[0]
        if not (len(sources) == 1 and _usable(backend) and backend.name == config.backend == m.backend
                and backend.key_groups == kgs == m.key_groups and m.kind == NATIVE
                and isinstance(backend, IncrementalSnapshots) and isinstance(ref, CheckpointBase)
                and ref.location == self.location and ref.operator == m.operator and ref.key_groups == kgs
                and ref.epoch < m.epoch and backend.unchanged_since_snapshot()):
            return False
        base = self._committed(m.operator, kgs, ref.epoch)
        if base is None or base.attempt != ref.attempt or not backend.catch_up(CheckpointSnapshotReader(self.storage, m), base):
            return False
        backend.checkpoint_base = CheckpointBase(self.location, m.operator, kgs, m.epoch, m.attempt)
        return True

    def _is_current(self, backend: KeyedStateBackend, config: StateConfig, kgs: range, sources: list[Manifest]) -> bool:
        ref = backend.checkpoint_base
        m = sources[0]
        return (len(sources) == 1 and _usable(backend) and backend.name == config.backend
                and backend.key_groups == kgs and isinstance(backend, IncrementalSnapshots)
                and ref == CheckpointBase(self.location, m.operator, kgs, m.epoch, m.attempt)
                and backend.unchanged_since_snapshot())

    def logical_snapshot(self, manifest: Manifest) -> dict:
        """The backend-neutral snapshot of one committed manifest, whatever backend wrote it (values of a
        state whose format no code here declares are carried as they are, unread)."""
        _check_header(manifest, read_states=False)
        _check_types(manifest)
        reader = CheckpointSnapshotReader(self.storage, manifest)
        if manifest.kind == LOGICAL:
            return decode(reader.read(manifest.files_with_role("logical")[0]))
        cls = backend_class(manifest.backend)
        with tempfile.TemporaryDirectory(prefix="statekit-restore-") as local:
            config = StateConfig(backend=manifest.backend, max_parallelism=manifest.max_parallelism,
                                 local_dir=os.path.join(local, "db"))
            if not issubclass(cls, IncrementalSnapshots):
                raise CorruptCheckpointError(f"{manifest.where}: a native snapshot of backend {manifest.backend!r}, "
                                             f"which does not snapshot natively")
            return cls.export_logical(reader, config, manifest.key_groups)

    def rollback(self, operator_id: str, epoch: int) -> list[str]:
        """Forget every committed epoch after ``epoch`` of every partition of ``operator_id``
        (after restoring an earlier epoch because a later one is corrupt), so the re-run epochs
        commit afresh; files only they referenced are deleted too (a damaged content-addressed
        file would otherwise be reused). Call it with no attempt of the operator in flight."""
        deleted = []
        for part in self.partitions(operator_id):
            epochs = self.epochs(operator_id, part)
            for e in (e for e in epochs if e > epoch):
                path = manifest_path(operator_id, part, e)
                self.storage.delete(path)
                deleted.append(path)
            kept = [self.manifest(operator_id, part, e) for e in epochs if e <= epoch]
            referenced = {f.path for m in kept for f in m.files} | {m.path for m in kept}
            for f in self.storage.list_files(partition_dir(operator_id, part)):
                if f.path not in referenced:
                    self.storage.delete(f.path)
                    deleted.append(f.path)
        return deleted

    # -- retention -----------------------------------------------------------------------------
    def gc(self, operator_id: str, key_groups: range) -> list[str]:
        """Apply retention to one partition; returns the paths deleted."""
        epochs = self.epochs(operator_id, key_groups)
        keep = epochs[-self.policy.retain:]
        retained = [self.manifest(operator_id, key_groups, e) for e in keep]
        deleted = []
        cutoff = None
        if len(epochs) >= 2:
            cutoff = self.storage.info(manifest_path(operator_id, key_groups, epochs[-2])).mtime
        for e in epochs[:-self.policy.retain]:
            path = manifest_path(operator_id, key_groups, e)
            self.storage.delete(path)
            deleted.append(path)
        if cutoff is None:
            return deleted
        referenced = {f.path for m in retained for f in m.files} | {m.path for m in retained}
        pdir = partition_dir(operator_id, key_groups)
        for f in self.storage.list_files(pdir):
            if f.path in referenced or f.path.endswith(f"/{MANIFEST_NAME}") or f.mtime is None or f.mtime >= cutoff:
                continue
            self.storage.delete(f.path)
            deleted.append(f.path)
        remaining = {f.path.rsplit("/", 1)[0] for f in self.storage.list_files(pdir)}
        for d in self.storage.list_dirs(pdir):
            e = parse_epoch(d)
            if e is not None and e < keep[0] and f"{pdir}/{d}" not in remaining:
                self.storage.delete_dir(f"{pdir}/{d}")
        return deleted + self._retire_superseded(operator_id, key_groups)

    def _retire_superseded(self, operator_id: str, key_groups: range) -> list[str]:
        """Delete partitions of an earlier partitioning that overlap ``key_groups`` once each of their
        key groups is held by other partitions that keep only newer epochs: no retained epoch needs them."""
        parts = self.partitions(operator_id)
        epochs = {p: self.epochs(operator_id, p) for p in parts}
        deleted = []
        for old in parts:
            if old == key_groups or old.stop <= key_groups.start or key_groups.stop <= old.start or not epochs[old]:
                continue
            newer = [p for p in parts if p != old and epochs[p] and epochs[p][0] > epochs[old][-1]]
            if _cover(old, newer) is None:
                continue
            for e in epochs[old]:  # manifests first: a crash midway leaves no manifest without its files
                path = manifest_path(operator_id, old, e)
                self.storage.delete(path)
                deleted.append(path)
            self.storage.delete_dir(partition_dir(operator_id, old))
        return deleted


def _header(backend: KeyedStateBackend, native: bool) -> SnapshotHeader:
    """The header of a snapshot of ``backend``: the core marks, the backend's own when ``native``, and
    those of its states stored in an operator's own encoding."""
    scopes = [backend_scope(backend.name)] if native else []
    return current_header(scopes + [state_scope(name) for name in backend.state_versions()])


def _check_header(manifest: Manifest, read_states: bool) -> None:
    """Refuse a snapshot whose header records a format this code cannot read, before any of its files is
    read. ``read_states``: the restored state will be used, so a state format no code here declares is
    refused too (an export only carries such values)."""
    required = [CORE]
    if manifest.kind == NATIVE:
        backend_class(manifest.backend)  # loading it declares its formats
        required.append(backend_scope(manifest.backend))
    check_header(manifest.header, f"{manifest.where} (manifest {manifest.path})", required=required,
                 unread_states=not read_states)


def _check_types(manifest: Manifest) -> None:
    """Refuse a snapshot that recorded another class under a code than this process has, before decoding it;
    its recorded names explain a code met later that this process does not know. Nothing is imported."""
    check_recorded_types(manifest.types, f"{manifest.where} (manifest {manifest.path})")


def _as_range(key_groups: Iterable[int]) -> range:
    if isinstance(key_groups, range) and key_groups.step == 1:
        return key_groups
    kgs = sorted(set(key_groups))
    if not kgs or kgs != list(range(kgs[0], kgs[-1] + 1)):
        raise CheckpointError(f"key groups must be a non-empty contiguous range, got {kgs[:5]}...")
    return range(kgs[0], kgs[-1] + 1)


def _cover(key_groups: range, parts: list[range]) -> list[range] | None:
    """Partitions that hold every key group of ``key_groups`` once (the exact range when present)."""
    if key_groups in parts:
        return [key_groups]
    chosen, pos = [], key_groups.start
    while pos < key_groups.stop:
        options = [p for p in parts if p.start <= pos < p.stop]
        if not options:
            return None
        best = max(options, key=lambda p: p.stop)
        chosen.append(best)
        pos = best.stop
    return chosen


def _usable(backend: KeyedStateBackend) -> bool:
    """Open, and its local directory (if it has one) still there: not deleted under the worker."""
    local = backend.local_dir
    return not backend.closed and (local is None or os.path.isdir(local))


def _discard(backend: KeyedStateBackend) -> None:
    """Close a kept backend that a restore replaces. When its local directory is gone, closing may
    fail; that is ignored: its committed state is in the checkpoint and the rest is dropped anyway."""
    try:
        backend.close()
    except Exception:
        if _usable(backend):
            raise


def _is_fresh(backend: KeyedStateBackend, config: StateConfig, kgs: range) -> bool:
    return (_usable(backend) and backend.name == config.backend and backend.key_groups == kgs
            and backend.checkpoint_base is None and backend.num_entries() == 0)


def _stats(backend: KeyedStateBackend, section: dict[str, Any]) -> dict[str, Any]:
    """Per-state entry counts (the backend's estimates when it gives them: counting may mean a
    scan) and per-service timer counts, for inspection."""
    estimated = bool(section.pop("state_entries_estimated", False))
    states = section.pop("state_entries", None)
    if states is None:
        states = dict(backend.state_entry_counts())
        states.update(backend.pending_entry_counts())
    timers = {name: {"event": svc.num_event_time_timers(), "processing": svc.num_processing_time_timers(),
                     "watermark": svc.current_watermark()}
              for name, svc in backend.timer_services().items()}
    return {"states": states, "states_estimated": estimated, "timers": timers, "versions": backend.state_versions()}
