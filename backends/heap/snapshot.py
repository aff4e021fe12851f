"""Heap incremental snapshots (FLIP-151's idea): per epoch, a changelog of the cells changed since the
last snapshot (puts and deletes, from ``take_changes``) and of the timers added/removed; a full
snapshot when there is no committed base, every ``full_every`` epochs, or once the changes
accumulated since the last full one exceed ``max_changelog_fraction`` of the state's entries.
Restore = the last full snapshot + the following deltas, applied in order.

A full snapshot holds each state's cells and each timer queue's timers as columns (``COLUMNS``, the
``layout`` mark of the snapshot header), built in C from the dicts, without key groups: a native
snapshot restores only into the key groups that wrote it (rescaling reads it through a scratch
backend), so they are computed on restore. Checkpoints from before the header (version 0) also hold
full snapshots of the earlier layout (an entry list per state, key groups included; the full snapshots
of the columns layout said so in their own ``layout`` field): they still restore.

TTL ``cleanup_in_snapshot`` applies to full snapshots only (as in Flink, where it does not apply
to incremental checkpoints); expired cells still go through the incremental and on-access cleanup.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

from statekit import (key_identity, key_of_identity, KEY_SERIALIZER, KeyedStateBackend, SerializationError, StateConfig, Timer,
                      decode_timer)
from statekit.keygroups import key_groups_and_bytes
from statekit.payload import decode, encode
from statekit.logical_snapshot import (LogicalSnapshot, StateMeta, StateSection, TimerSection, read_logical,
                                       snapshot_head)
from statekit.snapshot_header import declare_backend_format
from statekit.snapshots import NATIVE, IncrementalSnapshots, SnapshotReader, SnapshotWriter

_CHAIN_ROLES = ("full", "delta")
COLUMNS = declare_backend_format("heap", "layout", "columns")
"""The layout of full snapshots."""

DELETED = object()
"""Marks a cell deleted since the last ``take_changes``."""


def _pack(states: dict[str, dict]) -> tuple[dict[str, bytes], dict[str, int]]:
    """Each state's section encoded on its own, so the manifest can report bytes per state."""
    packed = {name: KEY_SERIALIZER.dumps(s) for name, s in states.items()}
    return packed, {name: len(b) for name, b in packed.items()}


def _unpack(packed: dict[str, bytes]) -> dict[str, dict]:
    """Each state's section decoded; a section that cannot be decoded is an error naming its state."""
    states = {}
    for name, b in packed.items():
        try:
            states[name] = KEY_SERIALIZER.loads(b)
        except SerializationError as e:
            raise SerializationError(f"state '{name}': {e}") from None
    return states


def _cell_id(key: Any, namespace: Any) -> tuple:
    """A cell's place in a snapshot being rebuilt: its key and namespace by identity (1 and True are two)."""
    return (key_identity(key), key_identity(namespace))


def _timer_id(timer: Any) -> tuple:
    """A timer ``[timestamp, key, namespace]`` by key and namespace identity."""
    return (timer[0], key_identity(timer[1]), key_identity(timer[2]))


def _columns_section(meta: StateMeta, keys: list, namespaces: list, cells: list) -> dict[str, Any]:
    """One state's section of a full snapshot (``COLUMNS``)."""
    return {**meta.to_dict(), "keys": keys, "namespaces": namespaces, "cells": cells}


def _apply_delta(states: dict[str, tuple[StateMeta, dict]], timers: dict, delta: dict) -> None:
    """Apply a delta to the cells (by ``_cell_id``) and timers (by ``_timer_id``) of a snapshot being rebuilt."""
    for name, s in _unpack(delta["states"]).items():
        cells = states.setdefault(name, (StateMeta.read(s), {}))[1]
        for kg, key, ns in s["del"]:
            cells.pop(_cell_id(key, ns), None)
        for e in s["put"]:
            cells[_cell_id(e[1], e[2])] = e
    for name, t in delta["timers"].items():
        cur = timers.setdefault(name, {"event": {}, "processing": {}})
        cur["watermark"], cur["processing_time"] = t["watermark"], t["processing_time"]
        for domain in ("event", "processing"):
            for x in t[domain]["del"]:
                cur[domain].pop(_timer_id(x), None)
            cur[domain].update((_timer_id(x), x) for x in t[domain]["add"])


def _logical_full(full: dict, header_version: int) -> LogicalSnapshot:
    """A full snapshot as a logical one (states unpacked, entries with key groups, timer lists). Written
    under a snapshot header, it is of the header's layout (checked to be ``COLUMNS``); before the header
    (version 0), of the entry layout unless its own ``layout`` field says ``COLUMNS``."""
    states = _unpack(full["states"])
    if header_version == 0 and full.pop("layout", None) != COLUMNS:
        full["states"] = states
        return read_logical(full)
    mp = full["max_parallelism"]
    for s in states.values():
        keys = s.pop("keys")
        groups = key_groups_and_bytes(keys, mp)[0].tolist() if keys else []
        s["entries"] = list(map(list, zip(groups, keys, s.pop("namespaces"), s.pop("cells"))))
    for t in full["timers"].values():
        for domain in ("event", "processing"):
            t[domain] = list(map(list, zip(*t[domain])))
    full["states"] = states
    return read_logical(full)


class HeapSnapshots(IncrementalSnapshots):
    """The checkpoint hooks of the heap backend (mixed into HeapKeyedStateBackend)."""

    _ckpt_clocks: dict[str, tuple[int, int]] | None = None
    """Timer clocks at the last snapshot or restore; None before the first (forces a full snapshot)."""

    def take_changes(self) -> Iterator[tuple[str, int, Any, Any, Any]]:
        """Cells changed since the last call as (state, key group, key, namespace, cell or DELETED)."""
        for name, st in self._registry.states.items():
            table = st._table
            changed = list(st._take_dirty())
            keys = [key_of_identity(ident) for ident, _ in changed]
            for kg, key, ck in zip(self.key_groups_of(keys), keys, changed):
                cell = table.get(ck, DELETED)
                yield name, kg, key, key_of_identity(ck[1]), (cell if cell is DELETED else st._cell_out(cell))

    def _timer_changes(self) -> tuple[dict, int]:
        """Timers added and removed per service and domain since the last snapshot, and their count."""
        out, count = {}, 0
        for name, svc in self._timers.services.items():
            section = {"watermark": svc.current_watermark(), "processing_time": svc.current_processing_time()}
            for domain, queue in svc.queues():
                changes = queue.take_changes()
                section[domain] = {"add": [list(t) for t in changes.values() if t is not None],
                                   "del": [list(decode_timer(k)[0]) for k, t in changes.items() if t is None]}
                count += len(changes)
            out[name] = section
        return out, count

    def _reset_changes(self) -> None:
        for st in self._registry.states.values():
            st._take_dirty()
        for svc in self._timers.services.values():
            for _, queue in svc.queues():
                queue.take_changes()
        self._ckpt_clocks = self._timers.clocks()

    def snapshot_incremental(self, writer: SnapshotWriter) -> dict[str, Any]:
        """Write a delta on top of ``writer.base`` when allowed, else a full snapshot."""
        self.flush()
        base = writer.base
        chain = ([f for f in base.files if f.role in _CHAIN_ROLES]
                 if base is not None and base.backend == self.name and base.kind == NATIVE else [])
        full = writer.force_full or not chain or self._ckpt_clocks is None or len(chain) >= writer.policy.full_every
        if not full:
            changed = sum(len(st._dirty) for st in self._registry.states.values())
            changed += sum(queue.change_count() for svc in self._timers.services.values() for _, queue in svc.queues())
            accumulated = base.snapshot.get("chain_changes", 0) + changed
            full = accumulated > writer.policy.max_changelog_fraction * max(1, self.num_entries())
        if full:
            data = self._full_columns()
            self._reset_changes()
            data["states"], state_bytes = _pack(data["states"])
            writer.write("full.skz", encode(data), "full")
            return {"incremental": False, "chain_changes": 0, "chain_length": 1, "state_bytes": state_bytes}
        for f in chain:
            writer.reuse(f)
        timers, _ = self._timer_changes()
        packed, state_bytes = _pack(self._state_delta())
        writer.write("delta.skz", encode({"states": packed, "timers": timers}), "delta")
        self._ckpt_clocks = self._timers.clocks()
        return {"incremental": True, "chain_changes": accumulated, "chain_length": len(chain) + 1,
                "state_bytes": state_bytes}

    def _full_columns(self) -> dict:
        """Every state's cells and every queue's timers as columns (``COLUMNS``)."""
        states = {}
        for name, d, st in self._registry.to_snapshot():
            states[name] = _columns_section(StateMeta.of(d), *st._columns())
        for name, p in self._registry.pending.items():
            _, keys, namespaces, cells = map(list, zip(*p.entries)) if p.entries else ([], [], [], [])
            states[name] = _columns_section(p.meta, keys, namespaces, cells)
        timers = {name: {"watermark": svc.current_watermark(), "processing_time": svc.current_processing_time(),
                         **{domain: list(queue.columns()) for domain, queue in svc.queues()}}
                  for name, svc in self._timers.services.items()}
        return {**snapshot_head(self.name, self.max_parallelism, self.key_groups), "states": states, "timers": timers}

    def _state_delta(self) -> dict:
        states: dict[str, dict] = {}
        for name, kg, key, ns, cell in self.take_changes():
            s = states.get(name)
            if s is None:
                s = states[name] = {**StateMeta.of(self._registry.descriptors[name]).to_dict(), "put": [], "del": []}
            if cell is DELETED:
                s["del"].append([kg, key, ns])
            else:
                s["put"].append([kg, key, ns, cell])
        return states

    @classmethod
    def restore_incremental(cls, reader: SnapshotReader, config: StateConfig, key_groups: range,
                            time_provider: Callable[[], int]) -> KeyedStateBackend:
        """A heap backend holding the manifest's state: its full snapshot plus the deltas after it."""
        chain = [f for f in reader.manifest.files if f.role in _CHAIN_ROLES]
        full = _logical_full(decode(reader.read(chain[0])), reader.manifest.header.version)
        backend = cls(config, key_groups, time_provider)
        if len(chain) == 1:  # a full snapshot alone is a logical snapshot
            backend.restore_logical(full)
            backend._reset_changes()
            return backend
        states = {name: (s.meta, {_cell_id(e[1], e[2]): e for e in s.entries}) for name, s in full.states.items()}
        timers = {name: {"watermark": t.watermark, "processing_time": t.processing_time,
                         "event": {_timer_id(x): x for x in t.event},
                         "processing": {_timer_id(x): x for x in t.processing}}
                  for name, t in full.timers.items()}
        for f in chain[1:]:
            _apply_delta(states, timers, decode(reader.read(f)))
        backend.restore_logical(LogicalSnapshot(
            cls.name, full.max_parallelism, full.key_groups,
            {n: StateSection(meta, list(cells.values())) for n, (meta, cells) in states.items()},
            {n: TimerSection(t["watermark"], t["processing_time"], list(t["event"].values()),
                             list(t["processing"].values())) for n, t in timers.items()}))
        backend._reset_changes()
        return backend

    def catch_up(self, reader: SnapshotReader, base: Any) -> bool:
        """Apply the deltas ``reader``'s snapshot chain holds after ``base``'s (this backend's state):
        possible when that chain continues ``base``'s and every state in them is registered here at the
        same kind, TTL and version; then the cells and timers they change are set in place."""
        have = [f.path for f in base.files if f.role in _CHAIN_ROLES]
        chain = [f for f in reader.manifest.files if f.role in _CHAIN_ROLES]
        if (base.backend != self.name or base.kind != NATIVE or not have or len(chain) <= len(have)
                or [f.path for f in chain[:len(have)]] != have or any(f.role != "delta" for f in chain[len(have):])):
            return False
        deltas = [decode(reader.read(f)) for f in chain[len(have):]]
        states = [_unpack(d["states"]) for d in deltas]
        for section in states:
            for name, st in section.items():
                d = self._registry.descriptors.get(name)
                if d is None or name not in self._registry.states or StateMeta.of(d) != StateMeta.read(st):
                    return False
        if any(name not in self._timers.services for d in deltas for name in d["timers"]):
            return False
        for delta, section in zip(deltas, states):
            for name, s in section.items():
                st = self._registry.states[name]
                for _, key, ns in s["del"]:
                    st._table.pop(_cell_id(key, ns), None)
                for kg, key, ns, cell in s["put"]:
                    st._import(kg, key, ns, cell)
            for name, t in delta["timers"].items():
                svc = self._timers.services[name]
                svc.restore_time(t["watermark"], t["processing_time"])
                for domain, queue in svc.queues():
                    queue.remove_many(self._timers.sort_keys(t[domain]["del"])[0])
                    added = t[domain]["add"]
                    queue.add_many(self._timers.sort_keys(added)[0], list(map(Timer._make, added)))
        self._reset_changes()
        return True

    def unchanged_since_snapshot(self) -> bool:
        """True when no cell, timer or clock changed since the last snapshot or restore (fast path)."""
        return (not any(st._dirty for st in self._registry.states.values())
                and not any(queue.change_count() for svc in self._timers.services.values() for _, queue in svc.queues())
                and self._ckpt_clocks == self._timers.clocks())

    def _import_pending(self, name: str, descriptor: Any, st: Any, pending: StateSection) -> bool:
        """Fill a state registered after a restore; when the backend equals a committed snapshot, the
        imported cells are that snapshot's content, not changes (so the next snapshot stays a delta).
        Migrated cells are new content in another version: the next snapshot is a full one."""
        migrated = super()._import_pending(name, descriptor, st, pending)
        if migrated:
            self._ckpt_clocks = None
        elif self.checkpoint_base is not None:
            st._take_dirty()
        return migrated
