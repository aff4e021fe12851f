"""The backend's RocksDB instance: memory-bounded options, column families, clear open errors, disposal.

Memory is bounded by one LRU block cache (data, index and filter blocks) to which the
memtables of every column family are charged through a WriteBufferManager, both shared by every
RocksDB backend of the process (``shared_memory``), so RocksDB's own memory in a process stays
near the cache's capacity. The write-ahead log is off: this DB is a
working copy, durability comes from snapshots; ``close()`` flushes memtables before closing.
A directory the store created (the default temp dir, or a ``local_dir`` that did not exist)
is deleted on close, or at interpreter exit when the backend was never closed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from typing import Any

import msgpack
from rocksdict import BlockBasedIndexType, BlockBasedOptions, Options, Rdict, WriteBatch, WriteOptions

from statekit import StateDescriptorError, StateError

from .shared_memory import SharedMemory

_META_STATE = b"state:"
_SEQ_KEY = b"list-seq"


def meta_of(raw: bytes) -> tuple[str, bool, int]:
    """(kind, TTL on, format version) of a state's metadata record (version 1 when it predates versions)."""
    kind, ttl, *version = msgpack.unpackb(raw)
    return kind, ttl, version[0] if version else 1


class Closed:
    """Stands in for every store a closed backend held: any use raises a clear StateError."""

    __slots__ = ("_what",)

    def __init__(self, what: str) -> None:
        self._what = what

    def _fail(self, *args: Any, **kwargs: Any) -> Any:
        raise StateError(f"{self._what} is closed")

    __getitem__ = __setitem__ = __delitem__ = __contains__ = __len__ = __iter__ = _fail

    def __getattr__(self, name: str) -> Any:
        return self._fail


def make_options(settings: dict[str, Any], memory: SharedMemory) -> Options:
    """Raw-mode RocksDB options tuned by ``settings`` (the backend's rocksdb.* options without prefix), their
    memory bounded by the process's shared cache and write-buffer manager ``memory``."""
    table = BlockBasedOptions()
    table.set_block_cache(memory.cache)
    table.set_format_version(5)
    table.set_bloom_filter(10, False)
    # Index and filter blocks live in the block cache (bounded), partitioned so that a lookup
    # loads small partitions; only the top-level partition indexes stay pinned.
    table.set_index_type(BlockBasedIndexType.two_level_index_search())
    table.set_partition_filters(True)
    table.set_cache_index_and_filter_blocks(True)
    table.set_pin_top_level_index_and_filter(True)
    table.set_pin_l0_filter_and_index_blocks_in_cache(True)
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.create_missing_column_families(True)
    opts.set_block_based_table_factory(table)
    opts.set_write_buffer_size(settings["write_buffer_size"])
    opts.set_max_write_buffer_number(settings["max_write_buffer_number"])
    opts.set_write_buffer_manager(memory.write_buffers)
    opts.set_max_background_jobs(settings["max_background_jobs"])
    opts.set_keep_log_file_num(2)
    return opts


def _open_error(path: str, error: Exception) -> StateError:
    msg = str(error)
    low = msg.lower()
    if "lock" in low:
        return StateError(f"RocksDB local_dir {path!r} is in use: its database is locked by another "
                          f"backend or process ({msg})")
    if "corrupt" in low:
        return StateError(f"RocksDB database in local_dir {path!r} is corrupt ({msg}); "
                          f"delete the directory to start empty")
    if "permission" in low or "read-only" in low:
        return StateError(f"RocksDB local_dir {path!r} is not writable ({msg})")
    return StateError(f"cannot open RocksDB in local_dir {path!r}: {msg}")


def _dispose(handles: dict[str, Any], path: str, created: bool) -> None:
    """Close the DB (after dropping every column-family handle) and delete a directory we created."""
    db = handles.pop("db", None)
    handles.clear()
    if db is not None:
        try:
            db.close()
        except Exception:  # closing is best effort; the directory is still removed below
            pass
        del db
    if created:
        shutil.rmtree(path, ignore_errors=True)


class RocksDBStore:
    """One RocksDB directory: column families by name, batched writes without WAL, disposal."""

    def __init__(self, local_dir: str | None, dir_prefix: str, settings: dict[str, Any], memory: SharedMemory) -> None:
        if local_dir is None:
            path, created = tempfile.mkdtemp(prefix=dir_prefix), True
        else:
            path, created = os.path.abspath(local_dir), not os.path.exists(local_dir)
            try:
                os.makedirs(path, exist_ok=True)
            except OSError as e:
                raise StateError(f"RocksDB local_dir {path!r} is not writable: {e}") from None
        self.path = path
        self.created = created
        try:
            if not os.access(path, os.W_OK | os.X_OK):
                raise StateError(f"RocksDB local_dir {path!r} is not writable (permission denied)")
            self._options = make_options(settings, memory)
            self.db = self._open()
        except BaseException:
            if created:
                shutil.rmtree(path, ignore_errors=True)
            raise
        self._write_options = WriteOptions()
        self._write_options.disable_wal = True
        self.db.set_write_options(self._write_options)
        self._families: dict[str, tuple[Rdict, Any]] = {}
        self._handles: dict[str, Any] = {"db": self.db}
        self._finalizer = weakref.finalize(self, _dispose, self._handles, path, created)

    def _open(self) -> Rdict:
        path = self.path
        try:
            names = Rdict.list_cf(path, self._options) if os.path.exists(os.path.join(path, "CURRENT")) else []
            families = {n: self._options for n in names if n != "default"}
            return Rdict(path, options=self._options, column_families=families)
        except Exception as e:  # rocksdict raises plain Exception with RocksDB's status text
            raise _open_error(path, e) from None

    def family(self, name: str) -> tuple[Rdict, Any]:
        """The column family ``name`` (created if missing) and its handle for write batches."""
        fam = self._families.get(name)
        if fam is None:
            try:
                cf = self.db.get_column_family(name)
            except Exception:
                cf = self.db.create_column_family(name, self._options)
            cf.set_write_options(self._write_options)
            fam = (cf, self.db.get_column_family_handle(name))
            self._families[name] = fam
            self._handles[name] = fam
        return fam

    def state_family(self, name: str, kind: str, ttl: bool, version: int) -> tuple[Rdict, Any]:
        """The column family of state ``name``; a reopened DB must hold the same kind and TTL setting
        (a new state records ``version`` as the format version of its values)."""
        known = self.state_meta(name)
        if known is None:
            self.db.put(_META_STATE + name.encode(), msgpack.packb([kind, ttl, version]))
        elif known[:2] != (kind, ttl):
            k, t, _ = known
            raise StateDescriptorError(f"state '{name}' is stored in {self.path!r} as {k} state with TTL "
                                       f"{'on' if t else 'off'}, not {kind} with TTL {'on' if ttl else 'off'}")
        return self.family("state:" + name)

    def state_meta(self, name: str) -> tuple[str, bool, int] | None:
        """(kind, TTL on, format version) recorded for state ``name``, or None."""
        raw = self.db.get(_META_STATE + name.encode())
        return None if raw is None else meta_of(raw)

    def set_state_version(self, name: str, version: int) -> int:
        """Record ``version`` as the format version of state ``name`` (registered); returns the one before."""
        kind, ttl, before = self.state_meta(name)
        if before != version:
            self.db.put(_META_STATE + name.encode(), msgpack.packb([kind, ttl, version]))
        return before

    def timer_family(self, service: str, domain: str) -> tuple[Rdict, Any]:
        """The column family of one timer queue and its handle for write batches."""
        return self.family(f"timers:{service}:{domain}")

    def load_sequence(self) -> int:
        """The next list-element sequence number recorded in the DB (0 for a new DB)."""
        raw = self.db.get(_SEQ_KEY)
        return 0 if raw is None else int.from_bytes(raw, "big")

    def new_batch(self) -> WriteBatch:
        return WriteBatch(raw_mode=True)

    def write(self, batch: WriteBatch, sequence: int) -> None:
        """Apply ``batch`` atomically together with the next list sequence number."""
        batch.put(_SEQ_KEY, sequence.to_bytes(8, "big"))
        self.db.write(batch)

    def take_ownership(self) -> None:
        """Delete the directory on close, as for one the store created (a restore's fresh copy)."""
        self._finalizer.detach()
        self.created = True
        self._finalizer = weakref.finalize(self, _dispose, self._handles, self.path, True)

    def close(self) -> None:
        """Close the DB and delete the directory if the store created it (idempotent)."""
        self._families.clear()
        self.db = Closed("RocksDB store")
        self._finalizer()
