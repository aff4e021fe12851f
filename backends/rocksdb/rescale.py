"""Native RocksDB rescaling (Flink's incremental restore with key-group ranges): a partition's key groups
gathered from several native snapshots without decoding a value.

The source overlapping the target most is downloaded as the base database; what of it lies outside the
key groups the target takes from it is deleted (state column families by range: their keys start with the
2-byte key group; timer column families entry by entry: their keys start with the time); the other
sources' entries of the target's key groups are copied in as raw bytes, in bounded WriteBatches. Each
target key group is taken from exactly one source (the first, in key-group order, that holds it), and only
from within that source's recorded range, so a checkpoint cannot put entries outside it. The timer counts
are recounted while copying; the list sequence number is the largest of the sources'. When a source holds
a column family this layout does not know, or states that disagree in kind, TTL or version, the restore
returns None and the store takes the logical path (which reports such a disagreement).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Callable

from rocksdict import AccessType, Options, Rdict, WriteBatch

from statekit import StateError
from statekit.snapshots import NATIVE, SnapshotReader

from .db import _META_STATE, _SEQ_KEY, meta_of
from .keys import scan, scan_from
from .timers import _SIZE_KEY

_BATCH_ENTRIES = 10_000
_BATCH_BYTES = 8 << 20
_STATE = "state:"
_TIMERS = "timers:"
_TIMER_KG = slice(8, 10)
"""Where a timer sort key holds its key group (after the 8-byte timestamp)."""


class _Batches:
    """WriteBatches of bounded size into one database."""

    def __init__(self, db: Rdict) -> None:
        self._db = db
        self._batch = WriteBatch(raw_mode=True)
        self._n = self._bytes = 0

    def put(self, key: bytes, value: bytes, handle: Any) -> None:
        self._batch.put(key, value, handle)
        self._count(len(key) + len(value))

    def delete(self, key: bytes, handle: Any) -> None:
        self._batch.delete(key, handle)
        self._count(len(key))

    def _count(self, size: int) -> None:
        self._n += 1
        self._bytes += size
        if self._n >= _BATCH_ENTRIES or self._bytes >= _BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        if self._n:
            self._db.write(self._batch)
            self._batch = WriteBatch(raw_mode=True)
            self._n = self._bytes = 0


def owned_ranges(sources: list[range], key_groups: range) -> list[range]:
    """The key groups of ``key_groups`` the target takes from each source: each from the first source holding it."""
    out, pos = [], key_groups.start
    for r in sources:
        start, stop = max(r.start, pos, key_groups.start), min(r.stop, key_groups.stop)
        out.append(range(start, max(start, stop)))
        pos = max(pos, stop)
    if pos < key_groups.stop or sum(map(len, out)) != len(key_groups):
        raise StateError(f"the snapshots of key groups {[(r.start, r.stop - 1) for r in sources]} do not cover "
                         f"key groups {key_groups.start}-{key_groups.stop - 1}")
    return out


def _kg(kg: int) -> bytes:
    return kg.to_bytes(2, "big")


def _layout(db: Rdict, path: str, where: str) -> tuple[dict[str, tuple], list[str], int] | None:
    """(state metadata by name, timer column families, list sequence number) of a source database, or None
    when it holds a column family this layout does not know (or a state family without metadata)."""
    metas = {k[len(_META_STATE):].decode(): meta_of(v) for k, v in scan(db, _META_STATE)}
    timers = []
    for name in Rdict.list_cf(path, Options(raw_mode=True)):
        if name == "default":
            continue
        if name.startswith(_TIMERS):
            timers.append(name)
        elif not (name.startswith(_STATE) and name[len(_STATE):] in metas):
            return None
    raw = db.get(_SEQ_KEY)
    if raw is not None and len(raw) != 8:
        raise StateError(f"{where}: list sequence number {raw.hex()!r} is not 8 bytes: the checkpoint is corrupt")
    return metas, timers, 0 if raw is None else int.from_bytes(raw, "big")


def _timer_entries(db: Rdict, where: str, name: str) -> Any:
    """(sort key, key group bytes) of every timer of a timer column family (its recorded count skipped)."""
    for k, _ in scan_from(db, None):
        if k == _SIZE_KEY:
            continue
        if len(k) < 10:
            raise StateError(f"{where}: timer column family {name!r} holds key {k.hex()!r}, shorter than a timer's: "
                             f"the checkpoint is corrupt")
        yield k, k[_TIMER_KG]


def _trim(store: Any, layout: tuple, keep: range, where: str) -> dict[str, int]:
    """Delete from the base database every entry outside ``keep``; returns the timers kept per timer family."""
    metas, timers, _ = layout
    lo, hi = _kg(keep.start), _kg(keep.stop)
    batches = _Batches(store.db)
    for name in metas:
        cf, handle = store.family(_STATE + name)
        cf.delete_range(b"", lo)
        cf.delete_range(hi, b"\xff" * 8)
        for k, _ in scan_from(cf, hi):  # keys past the range tombstone (none RocksDB wrote itself)
            batches.delete(k, handle)
    counts = {}
    for name in timers:
        cf, handle = store.family(name)
        kept = 0
        for k, kg in _timer_entries(cf, where, name):
            if lo <= kg < hi:
                kept += 1
            else:
                batches.delete(k, handle)
        cf.delete(_SIZE_KEY)
        counts[name] = kept
    batches.flush()
    return counts


def _copy(src: Rdict, store: Any, layout: tuple, take: range, where: str, counts: dict[str, int]) -> None:
    """Copy the entries of key groups ``take`` of a source database into the target's store, as raw bytes."""
    metas, timers, _ = layout
    lo, hi = _kg(take.start), _kg(take.stop)
    batches = _Batches(store.db)
    for name in metas:
        _, handle = store.family(_STATE + name)
        for k, v in scan_from(src.get_column_family(_STATE + name), lo):
            if k >= hi:
                break
            if len(k) < 2:
                raise StateError(f"{where}: state {name!r} holds key {k.hex()!r} without a key group: "
                                 f"the checkpoint is corrupt")
            batches.put(k, v, handle)
    for name in timers:
        _, handle = store.family(name)
        copied = 0
        for k, kg in _timer_entries(src.get_column_family(name), where, name):
            if lo <= kg < hi:
                batches.put(k, b"", handle)
                copied += 1
        counts[name] = counts.get(name, 0) + copied
    batches.flush()


def _agree(target: dict[str, tuple], source: dict[str, tuple]) -> bool:
    """Whether the states both hold have one kind, TTL setting and version."""
    return all(target[n] == meta for n, meta in source.items() if n in target)


def rescale(cls: type, readers: list[SnapshotReader], config: Any, key_groups: range,
            time_provider: Callable[[], int], download: Callable[[SnapshotReader, str], None],
            local_copy: Callable[[SnapshotReader, Any, range], tuple[str, bool]]) -> Any | None:
    """A ``cls`` backend of ``key_groups`` built from the native snapshots ``readers`` read (in key-group order),
    or None when one cannot be built natively (then nothing is left behind)."""
    manifests = [r.manifest for r in readers]
    if any(m.kind != NATIVE or m.backend != cls.name or m.max_parallelism != config.max_parallelism
           for m in manifests):
        return None
    owned = owned_ranges([m.key_groups for m in manifests], key_groups)
    first = max(range(len(readers)), key=lambda i: len(owned[i]))
    target, owned_dir = local_copy(readers[first], config, key_groups)
    backend = None
    try:
        backend = cls(config.with_options(local_dir=target), key_groups, time_provider)
        store = backend._store
        layout = _layout(store.db, target, manifests[first].where)
        if layout is None:
            return _give_up(backend, target)
        metas, _, sequence = layout
        counts = _trim(store, layout, owned[first], manifests[first].where)
        for i, reader in enumerate(readers):
            if i == first or not owned[i]:
                continue
            scratch = tempfile.mkdtemp(prefix="statekit-rescale-", dir=os.path.dirname(target))
            try:
                download(reader, scratch)
                families = {n: Options(raw_mode=True) for n in Rdict.list_cf(scratch, Options(raw_mode=True))
                            if n != "default"}
                src = Rdict(scratch, options=Options(raw_mode=True), column_families=families,
                            access_type=AccessType.read_only())
                try:
                    src_layout = _layout(src, scratch, manifests[i].where)
                    if src_layout is None or not _agree(metas, src_layout[0]):
                        return _give_up(backend, target)
                    for name, meta in src_layout[0].items():
                        if name not in metas:
                            store.state_family(name, *meta)
                            metas[name] = meta
                    sequence = max(sequence, src_layout[2])
                    _copy(src, store, src_layout, owned[i], manifests[i].where, counts)
                finally:
                    src.close()
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
        store.db.put(_SEQ_KEY, sequence.to_bytes(8, "big"))
        for name, n in counts.items():  # the queue takes its count on open, as from a snapshot
            cf, _ = store.family(name)
            if n:
                cf.put(_SIZE_KEY, n.to_bytes(8, "big"))
    except BaseException:
        if backend is not None:
            backend.close()
        shutil.rmtree(target, ignore_errors=True)
        raise
    if owned_dir:
        store.take_ownership()
    clocks: dict[str, list[int]] = {}
    for m in manifests:
        for name, t in m.snapshot.get("timers", {}).items():
            c = clocks.setdefault(name, [t["watermark"], t["processing_time"]])
            c[0], c[1] = max(c[0], t["watermark"]), max(c[1], t["processing_time"])
    for name, (watermark, processing_time) in clocks.items():
        backend.timer_service(name, None).restore_time(watermark, processing_time)
    return backend


def _give_up(backend: Any, target: str) -> None:
    backend.close()
    shutil.rmtree(target, ignore_errors=True)
    return None
