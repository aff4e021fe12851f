"""The logical snapshot: a backend-neutral copy of one backend's states and timers, typed.

``LogicalSnapshot`` is what ``KeyedStateBackend.snapshot_logical`` takes and ``restore_logical`` loads;
``to_dict`` is its one writer and ``read_logical`` its one reader of the serialized form (a msgpack-able
dict, format ``SNAPSHOT_FORMAT``, the ``snapshot`` mark of ``statekit.snapshot_header``)::

    {"format": 1, "backend": str, "max_parallelism": int, "key_groups": [start, stop],
     "states": {name: {"kind": str, "ttl": bool, "version": int, "entries": [[key group, key, namespace, cell]]}},
     "timers": {name: {"watermark": int, "processing_time": int,
                       "event": [[timestamp, key, namespace]], "processing": [[timestamp, key, namespace]]}}}

Cells and timers stay lists (one per entry, no object per cell: a snapshot may hold millions); cells of a
TTL state hold their timestamps (``[value, ts]``). A state section's ``version`` may be absent (1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from .descriptors import StateDescriptor
from .errors import StateError
from .snapshot_header import SNAPSHOT_FORMAT


@dataclass(frozen=True, slots=True)
class StateMeta:
    """What a snapshot records of a state besides its cells: its kind, whether it has a TTL, the format
    version of its values. Heap changelogs carry it too."""

    kind: str
    ttl: bool
    version: int = 1

    @classmethod
    def of(cls, descriptor: StateDescriptor) -> StateMeta:
        """The meta of a registered state."""
        return cls(descriptor.kind, descriptor.ttl_config is not None, descriptor.version)

    @classmethod
    def read(cls, raw: dict[str, Any]) -> StateMeta:
        """The meta of a serialized state section (``version`` absent: 1)."""
        return cls(raw["kind"], raw["ttl"], raw.get("version", 1))

    def to_dict(self) -> dict[str, Any]:
        """The serialized fields, first in a state section."""
        return {"kind": self.kind, "ttl": self.ttl, "version": self.version}


@dataclass(frozen=True, slots=True)
class StateSection:
    """One state's cells: ``entries`` are ``[key group, key, namespace, cell]``."""

    meta: StateMeta
    entries: list[list[Any]]

    def to_dict(self) -> dict[str, Any]:
        return {**self.meta.to_dict(), "entries": self.entries}


@dataclass(frozen=True, slots=True)
class TimerSection:
    """One timer service's clocks and timers (``[timestamp, key, namespace]`` per domain)."""

    watermark: int
    processing_time: int
    event: list[list[Any]]
    processing: list[list[Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"watermark": self.watermark, "processing_time": self.processing_time,
                "event": self.event, "processing": self.processing}


@dataclass(frozen=True, slots=True)
class LogicalSnapshot:
    """A backend's states and timers, backend-neutral: restored into any backend, or into other key groups."""

    backend: str
    max_parallelism: int
    key_groups: range
    states: dict[str, StateSection]
    timers: dict[str, TimerSection]

    def to_dict(self) -> dict[str, Any]:
        """The serialized form (the writer)."""
        return {**snapshot_head(self.backend, self.max_parallelism, self.key_groups),
                "states": {name: s.to_dict() for name, s in self.states.items()},
                "timers": {name: t.to_dict() for name, t in self.timers.items()}}


def snapshot_head(backend: str, max_parallelism: int, key_groups: range) -> dict[str, Any]:
    """The fields a logical snapshot starts with (a heap full snapshot starts with them too)."""
    return {"format": SNAPSHOT_FORMAT, "backend": backend, "max_parallelism": max_parallelism,
            "key_groups": [key_groups.start, key_groups.stop]}


def read_logical(raw: dict[str, Any] | LogicalSnapshot) -> LogicalSnapshot:
    """The snapshot ``raw`` serializes (the reader); StateError for another format than this code reads, or for
    a field missing or of another type (named), before anything is taken from it."""
    if isinstance(raw, LogicalSnapshot):
        return raw
    if not isinstance(raw, dict) or raw.get("format") != SNAPSHOT_FORMAT:
        found = raw.get("format") if isinstance(raw, dict) else raw
        raise StateError(f"a logical snapshot of format {found!r}; this statekit reads format "
                         f"{SNAPSHOT_FORMAT} (the 'snapshot' mark of statekit.snapshot_header)")
    _check(raw, "a logical snapshot", backend=str, max_parallelism=int, key_groups=list, states=dict, timers=dict)
    if len(raw["key_groups"]) != 2 or not all(_is(x, int) for x in raw["key_groups"]):
        raise StateError(f"a logical snapshot's key_groups is {raw['key_groups']!r}, expected [start, stop]")
    for name, section in raw["states"].items():
        _check(section, f"state {name!r} of a logical snapshot", kind=str, ttl=bool, entries=list)
        if not _is(section.get("version", 1), int):
            raise StateError(f"state {name!r} of a logical snapshot: field 'version' is {section['version']!r}, "
                             f"expected int")
    for name, section in raw["timers"].items():
        _check(section, f"timer service {name!r} of a logical snapshot", watermark=int, processing_time=int,
               event=list, processing=list)
    start, stop = raw["key_groups"]
    return LogicalSnapshot(raw["backend"], raw["max_parallelism"], range(start, stop),
                           {name: StateSection(StateMeta.read(s), s["entries"]) for name, s in raw["states"].items()},
                           {name: TimerSection(t["watermark"], t["processing_time"], t["event"], t["processing"])
                            for name, t in raw["timers"].items()})


def _is(value: Any, kind: type) -> bool:
    """``isinstance``, but a bool is no int here (msgpack keeps them apart)."""
    return isinstance(value, kind) and (kind is bool or not isinstance(value, bool))


def _check(section: Any, where: str, **fields: type) -> None:
    """StateError naming ``where`` and the field when ``section`` is no dict or lacks one of ``fields`` of its type."""
    if not isinstance(section, dict):
        raise StateError(f"{where} is {type(section).__name__}, expected a map")
    for field, kind in fields.items():
        if field not in section:
            raise StateError(f"{where} has no field {field!r}")
        if not _is(section[field], kind):
            raise StateError(f"{where}: field {field!r} is {type(section[field]).__name__}, expected {kind.__name__}")


def merged_states(snapshots: Iterable[LogicalSnapshot], key_groups: range) -> dict[str, StateSection]:
    """The state sections of several snapshots (of one job, rescaled) as one, keeping only the entries of
    ``key_groups``; StateError for a state whose kind or version differs between them."""
    merged: dict[str, StateSection] = {}
    for snap in snapshots:
        for name, s in snap.states.items():
            entries = [e for e in s.entries if e[0] in key_groups]
            known = merged.setdefault(name, StateSection(s.meta, []))
            if known.meta.kind != s.meta.kind:
                raise StateError(f"state '{name}' is {known.meta.kind} in one snapshot and {s.meta.kind} in another")
            if known.meta.version != s.meta.version:
                raise StateError(f"state '{name}' is at version {known.meta.version} in one snapshot and "
                                 f"{s.meta.version} in another: restore snapshots of one job version together")
            known.entries.extend(entries)
    return merged
