"""Heap incremental snapshots (FLIP-151's idea): per epoch, a changelog of the cells changed since the
last snapshot (puts and deletes, from ``take_changes``) and of the timers added/removed; a full
snapshot when there is no committed base, every ``full_every`` epochs, or once the changes
accumulated since the last full one exceed ``max_changelog_fraction`` of the state's entries.
Restore = the last full snapshot + the following deltas, applied in order.

TTL ``cleanup_in_snapshot`` applies to full snapshots only (as in Flink, where it does not apply
to incremental checkpoints); expired cells still go through the incremental and on-access cleanup.
"""

from __future__ import annotations

from typing import Any, Callable

from statekit import KEY_SERIALIZER, KeyedStateBackend, StateConfig, decode_timer
from statekit.backend import SNAPSHOT_FORMAT
from statekit.checkpoint import NATIVE, SnapshotReader, SnapshotWriter, decode, encode

from .backend import DELETED, HeapKeyedStateBackend

_CHAIN_ROLES = ("full", "delta")


def _timer_keys(backend: HeapKeyedStateBackend) -> dict[str, tuple]:
    """Per timer service: (event sort keys, processing sort keys, watermark, processing time)."""
    return {name: (set(svc._event._index), set(svc._processing._index), svc.current_watermark(),
                   svc.current_processing_time())
            for name, svc in backend._timer_services.items()}


def _timer_delta(before: dict[str, tuple], now: dict[str, tuple]) -> tuple[dict, int]:
    """Timers added and removed per service and domain since ``before``; also the change count."""
    out, changes = {}, 0
    for name, (event, processing, wm, pt) in now.items():
        old = before.get(name, (set(), set(), wm, pt))
        svc = {"watermark": wm, "processing_time": pt}
        for domain, cur, prev in (("event", event, old[0]), ("processing", processing, old[1])):
            added = [list(decode_timer(k)[0]) for k in cur - prev]
            removed = [list(decode_timer(k)[0]) for k in prev - cur]
            changes += len(added) + len(removed)
            svc[domain] = {"add": added, "del": removed}
        out[name] = svc
    return out, changes


def _state_delta(backend: HeapKeyedStateBackend, changes: list) -> dict:
    states: dict[str, dict] = {}
    for name, kg, key, ns, cell in changes:
        s = states.get(name)
        if s is None:
            d = backend._descriptors[name]
            s = states[name] = {"kind": d.kind, "ttl": d.ttl_config is not None, "put": [], "del": []}
        if cell is DELETED:
            s["del"].append([kg, key, ns])
        else:
            s["put"].append([kg, key, ns, cell])
    return states


def _pack(states: dict[str, dict]) -> tuple[dict[str, bytes], dict[str, int]]:
    """Each state's section encoded on its own, so the manifest can report bytes per state."""
    packed = {name: KEY_SERIALIZER.dumps(s) for name, s in states.items()}
    return packed, {name: len(b) for name, b in packed.items()}


def _unpack(packed: dict[str, bytes]) -> dict[str, dict]:
    return {name: KEY_SERIALIZER.loads(b) for name, b in packed.items()}


def snapshot_incremental(self: HeapKeyedStateBackend, writer: SnapshotWriter) -> dict[str, Any]:
    """Write a delta on top of ``writer.base`` when allowed, else a full snapshot."""
    self.flush()
    base = writer.base
    chain = ([f for f in base.files if f.role in _CHAIN_ROLES]
             if base is not None and base.backend == self.name and base.kind == NATIVE else [])
    before = getattr(self, "_ckpt_timers", None)
    full = writer.force_full or not chain or before is None or len(chain) >= writer.policy.full_every
    if not full:
        now = _timer_keys(self)
        timers, timer_changes = _timer_delta(before, now)
        changed = sum(len(st._dirty) for st in self._states.values())
        accumulated = base.snapshot.get("chain_changes", 0) + changed + timer_changes
        full = accumulated > writer.policy.max_changelog_fraction * max(1, self.num_entries())
    if full:
        data = self.snapshot_logical()
        for st in self._states.values():  # the full snapshot holds every change so far
            st._take_dirty()
        self._ckpt_timers = _timer_keys(self)
        data["states"], state_bytes = _pack(data["states"])
        writer.write("full.skz", encode(data), "full")
        return {"incremental": False, "chain_changes": 0, "chain_length": 1, "state_bytes": state_bytes}
    for f in chain:
        writer.reuse(f)
    packed, state_bytes = _pack(_state_delta(self, list(self.take_changes())))
    writer.write("delta.skz", encode({"states": packed, "timers": timers}), "delta")
    self._ckpt_timers = now
    return {"incremental": True, "chain_changes": accumulated, "chain_length": len(chain) + 1,
            "state_bytes": state_bytes}


def _apply_delta(states: dict, timers: dict, delta: dict) -> None:
    for name, s in _unpack(delta["states"]).items():
        cur = states.setdefault(name, {"kind": s["kind"], "ttl": s["ttl"], "cells": {}})
        cells = cur["cells"]
        for kg, key, ns in s["del"]:
            cells.pop((key, ns), None)
        for e in s["put"]:
            cells[(e[1], e[2])] = e
    for name, t in delta["timers"].items():
        cur = timers.setdefault(name, {"event": set(), "processing": set()})
        cur["watermark"], cur["processing_time"] = t["watermark"], t["processing_time"]
        for domain in ("event", "processing"):
            cur[domain].difference_update(tuple(x) for x in t[domain]["del"])
            cur[domain].update(tuple(x) for x in t[domain]["add"])


def restore_incremental(cls: type[HeapKeyedStateBackend], reader: SnapshotReader, config: StateConfig,
                        key_groups: range, time_provider: Callable[[], int]) -> HeapKeyedStateBackend:
    """A heap backend holding the manifest's state: its full snapshot plus the deltas after it."""
    chain = [f for f in reader.manifest.files if f.role in _CHAIN_ROLES]
    full = decode(reader.read(chain[0]))
    states = {name: {"kind": s["kind"], "ttl": s["ttl"], "cells": {(e[1], e[2]): e for e in s["entries"]}}
              for name, s in _unpack(full["states"]).items()}
    timers = {name: {"watermark": t["watermark"], "processing_time": t["processing_time"],
                     "event": {tuple(x) for x in t["event"]}, "processing": {tuple(x) for x in t["processing"]}}
              for name, t in full["timers"].items()}
    for f in chain[1:]:
        _apply_delta(states, timers, decode(reader.read(f)))
    snap = {"format": SNAPSHOT_FORMAT, "backend": cls.name, "max_parallelism": full["max_parallelism"],
            "key_groups": full["key_groups"],
            "states": {n: {"kind": s["kind"], "ttl": s["ttl"], "entries": list(s["cells"].values())}
                       for n, s in states.items()},
            "timers": {n: {"watermark": t["watermark"], "processing_time": t["processing_time"],
                           "event": list(t["event"]), "processing": list(t["processing"])}
                       for n, t in timers.items()}}
    backend = cls(config, key_groups, time_provider)
    backend.restore_logical(snap)
    backend._ckpt_timers = _timer_keys(backend)
    return backend


def unchanged_since_snapshot(self: HeapKeyedStateBackend) -> bool:
    """True when no cell and no timer changed since the last snapshot or restore (fast path)."""
    return (not any(st._dirty for st in self._states.values())
            and getattr(self, "_ckpt_timers", None) == _timer_keys(self))


def _import_pending(self: HeapKeyedStateBackend, name: str, descriptor: Any, st: Any, pending: dict) -> None:
    """Fill a state registered after a restore; when the backend equals a committed snapshot, the
    imported cells are that snapshot's content, not changes (so the next snapshot stays a delta)."""
    KeyedStateBackend._import_pending(self, name, descriptor, st, pending)
    if self.checkpoint_base is not None:
        st._take_dirty()


HeapKeyedStateBackend._import_pending = _import_pending
HeapKeyedStateBackend.snapshot_incremental = snapshot_incremental
HeapKeyedStateBackend.restore_incremental = classmethod(restore_incremental)
HeapKeyedStateBackend.unchanged_since_snapshot = unchanged_since_snapshot
