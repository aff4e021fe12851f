"""RocksDB incremental snapshots (Flink's incremental checkpoint idea): flush the memtables, take a
RocksDB checkpoint (hard links) into a temp dir, upload only the SST files the base snapshot does
not already reference (SST files are immutable and their names unique within one DB lineage, so
name + size identify them; new ones are stored content-addressed under ``shared/``) and the small
MANIFEST/OPTIONS/CURRENT files as private files of the epoch.

Restore downloads every file (verified) into a fresh local directory and opens it; the timer
services' watermark and processing time, which live in memory, travel in the manifest section.
``export_logical`` opens such a snapshot with descriptors rebuilt from the stored state metadata
(default msgpack serializer) to feed rescaling, cross-backend restores and inspection.
"""

from __future__ import annotations

import operator
import os
import shutil
import tempfile
from typing import Any, Callable

from rocksdict import Checkpoint

from statekit import (KeyedStateBackend, AggregateFunction, AggregatingStateDescriptor, ListStateDescriptor, MapStateDescriptor,
                      ReducingStateDescriptor, StateConfig, StateError, StateTtlConfig, ValueStateDescriptor,
                      wall_clock_ms)
from statekit.snapshot_header import declare_backend_format
from statekit.snapshots import NATIVE, IncrementalSnapshots, SnapshotReader, SnapshotWriter

from .db import _META_STATE, meta_of
from .keys import scan
from .rescale import rescale


_ROLES = ("sst", "db")
LAYOUT = declare_backend_format("rocksdb", "layout", 1)
EXACT_COUNT_LIMIT = 10_000
"""A snapshot counts each state's cells by a scan of its keys up to this many (the session table's are a few per key
group); a larger state reports RocksDB's estimate, which still counts keys overwritten or deleted since the last
compaction (after a final epoch cleaned every window, it can name hundreds)."""
"""The layout of the database a snapshot holds (a column family per state, keys as ``keys`` builds them,
state metadata records as ``db`` writes them): a change that older databases do not open with bumps it."""


def _sequence(self: KeyedStateBackend) -> tuple:
    """What identifies the backend's content: RocksDB's last sequence number and the timer clocks."""
    return self._store.db.latest_sequence_number(), self._timers.clocks()


def _download(reader: SnapshotReader, target: str) -> None:
    """Download the database files of a snapshot into ``target`` (verified)."""
    for entry in reader.manifest.files:
        if entry.role in _ROLES:
            reader.download(entry, os.path.join(target, entry.name))


def _local_copy(reader: SnapshotReader, config: StateConfig, kgs: range) -> tuple[str, bool]:
    """A fresh local directory (``config.local_dir`` or a temp dir) holding the snapshot's database files,
    and whether the restored backend owns it (deletes it on close)."""
    if config.local_dir is None:
        target, owned = tempfile.mkdtemp(prefix=f"statekit-rocksdb-kg{kgs.start}-{kgs.stop - 1}-"), True
    else:
        target = os.path.abspath(config.local_dir)
        owned = not os.path.exists(target)
        if not owned:
            if os.listdir(target) and not os.path.exists(os.path.join(target, "CURRENT")):
                raise StateError(f"cannot restore {reader.manifest.where} into local_dir {target!r}: "
                                 f"it holds files that are not a RocksDB database")
            shutil.rmtree(target)  # a stale local copy is discarded, the checkpoint is the truth
        os.makedirs(target)
    try:
        _download(reader, target)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return target, owned


class _Opaque(AggregateFunction):
    """Stands in for an aggregate function when accumulators are only exported, never combined."""

    def create_accumulator(self):
        raise StateError("exported state is read-only")

    add = merge = get_result = create_accumulator


_EXPORT_TTL = StateTtlConfig(1 << 62, cleanup_in_snapshot=False)


def _descriptor(name: str, kind: str, ttl: bool):
    desc = {"value": lambda: ValueStateDescriptor(name), "list": lambda: ListStateDescriptor(name),
            "map": lambda: MapStateDescriptor(name),
            "reducing": lambda: ReducingStateDescriptor(name, operator.add),
            "aggregating": lambda: AggregatingStateDescriptor(name, _Opaque())}[kind]()
    return desc.enable_time_to_live(_EXPORT_TTL) if ttl else desc


class RocksDBSnapshots(IncrementalSnapshots):
    """The checkpoint hooks of the RocksDB backend (mixed into RocksDBKeyedStateBackend)."""

    _ckpt_sequence: tuple | None = None
    """``_sequence`` at the last snapshot or restore."""

    def snapshot_incremental(self, writer: SnapshotWriter) -> dict[str, Any]:
        """Checkpoint the DB and upload what the base snapshot does not have."""
        self.flush()
        store = self._store
        queues = [queue for svc in self._timers.services.values() for _, queue in svc.queues()]
        for queue in queues:  # the checkpoint carries each queue's count: a restore does not count its timers
            queue.record_size()
        for cf, _ in store._families.values():
            cf.flush()
        store.db.flush()
        base = writer.base
        known = ({f.name: f for f in base.files_with_role("sst")}
                 if base is not None and base.backend == self.name and base.kind == NATIVE and not writer.force_full
                 else {})
        scratch = tempfile.mkdtemp(prefix="statekit-checkpoint-", dir=os.path.dirname(store.path))
        try:
            local = os.path.join(scratch, "db")
            Checkpoint(store.db).create_checkpoint(local)
            reused = 0
            for name in sorted(os.listdir(local)):
                path = os.path.join(local, name)
                if not name.endswith(".sst"):
                    writer.upload(path, name, "db")
                    continue
                entry = known.get(name)
                if entry is not None and entry.size == os.path.getsize(path):
                    writer.reuse(entry)
                    reused += 1
                else:
                    writer.upload_shared(path, name, "sst")
        finally:
            for queue in queues:
                queue.forget_size()
            shutil.rmtree(scratch, ignore_errors=True)
        self._ckpt_sequence = _sequence(self)
        counted = {name: st._count_up_to(EXACT_COUNT_LIMIT) for name, st in self._registry.states.items()}
        entries = {name: st._db.property_int_value("rocksdb.estimate-num-keys") or 0 if counted[name] is None
                   else counted[name] for name, st in self._registry.states.items()}
        return {"incremental": reused > 0, "reused_sst": reused,
                "timers": {name: {"watermark": svc.current_watermark(), "processing_time": svc.current_processing_time()}
                           for name, svc in self._timers.services.items()},
                "state_entries": entries, "state_entries_estimated": None in counted.values()}

    @classmethod
    def restore_incremental(cls, reader: SnapshotReader, config: StateConfig,
                             key_groups: range, time_provider: Callable[[], int]) -> KeyedStateBackend:
        """Download the snapshot's files into a fresh local directory and open the backend on it."""
        target, owned = _local_copy(reader, config, key_groups)
        try:
            backend = cls(config.with_options(local_dir=target), key_groups, time_provider)
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)
            raise
        if owned:
            backend._store.take_ownership()
        for name, t in reader.manifest.snapshot.get("timers", {}).items():
            backend.timer_service(name, None).restore_time(t["watermark"], t["processing_time"])
        backend._ckpt_sequence = _sequence(backend)
        return backend

    @classmethod
    def restore_rescaled(cls, readers: list[SnapshotReader], config: StateConfig, key_groups: range,
                         time_provider: Callable[[], int]) -> KeyedStateBackend | None:
        """Key groups gathered from several native snapshots as raw bytes (``rescale``), or None."""
        backend = rescale(cls, readers, config, key_groups, time_provider, _download, _local_copy)
        if backend is not None:
            backend._ckpt_sequence = _sequence(backend)
        return backend

    @classmethod
    def export_logical(cls, reader: SnapshotReader, config: StateConfig, key_groups: range) -> dict:
        """The logical snapshot of a RocksDB snapshot: every stored state, whether registered or not."""
        backend = cls.restore_incremental(reader, config, key_groups, wall_clock_ms)
        try:
            for k, v in list(scan(backend._store.db, _META_STATE)):
                kind, ttl, version = meta_of(v)
                backend.get_state(_descriptor(k[len(_META_STATE):].decode(), kind, ttl).with_version(version))
            return backend.snapshot_logical()
        finally:
            backend.close()

    def unchanged_since_snapshot(self) -> bool:
        """True when nothing was written (pending or in RocksDB) and no timer clock moved since the
        last snapshot or restore (fast path)."""
        return not any(st._ov for st in self._registry.states.values()) and self._ckpt_sequence == _sequence(self)
