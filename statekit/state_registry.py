"""The state registry of one keyed backend: its states by name with their descriptors, and the restored
cells of states not registered yet (Flink's registered-state map with its meta info).

A descriptor registered again must be compatible with the first; restored cells wait in ``pending``
until their state registers, then are checked against its descriptor (kind, TTL) and migrated from the
version they were stored at."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Iterator

from .descriptors import StateDescriptor
from .errors import StateDescriptorError
from .logical_snapshot import StateMeta, StateSection
from .migration import cell_migration


class InternalKeyedState(ABC):
    """What a backend's state classes offer the backend (not the user).

    A state that keeps its scope as a ``(key_identity(key), key_identity(namespace))`` tuple in ``_ck``
    (the namespace's identity in ``_ns``) may set ``TUPLE_SCOPED = True``: ``set_current_key`` then sets
    ``_ck`` itself, without a call per state, reusing one cached ``(identity, None)`` tuple per key for the
    void namespace (so dict lookups meet the identical tuple). ``_set_key`` is still used when the state
    is registered under a key.
    """

    __slots__ = ()
    TUPLE_SCOPED: ClassVar[bool] = False

    @abstractmethod
    def _set_key(self, key: Any, key_group: int, key_bytes: bytes) -> None:
        """The backend's current key changed."""

    @abstractmethod
    def _export(self) -> Iterator[tuple[int, Any, Any, Any]]:
        """Every stored (key group, key, namespace, cell); cells hold TTL timestamps as ``[value, ts]``."""

    @abstractmethod
    def _import(self, key_group: int, key: Any, namespace: Any, cell: Any) -> None:
        """Store one exported cell."""

    @abstractmethod
    def _entry_count(self) -> int:
        """How many (key, namespace) cells are stored."""

    @abstractmethod
    def _cleanup_expired(self, budget: int) -> int:
        """Delete up to ``budget`` expired cells/elements (TTL states); returns how many were deleted."""


class StateRegistry:
    """States by name (``states``), their descriptors (``descriptors``) and restored sections of states not
    registered yet (``pending``); read them, change them through the methods."""

    def __init__(self) -> None:
        self.states: dict[str, InternalKeyedState] = {}
        self.descriptors: dict[str, StateDescriptor] = {}
        self.pending: dict[str, StateSection] = {}

    def registered(self, descriptor: StateDescriptor) -> InternalKeyedState | None:
        """The state registered under the descriptor's name (None: none is), refusing an incompatible descriptor."""
        name = descriptor.name
        st = self.states.get(name)
        if st is not None:
            known = self.descriptors[name]
            if not known.compatible_with(descriptor):
                raise StateDescriptorError(f"state '{name}' is already registered as {type(known).__name__}, "
                                           f"not {type(descriptor).__name__}")
        return st

    def add(self, descriptor: StateDescriptor, st: InternalKeyedState) -> StateSection | None:
        """Register ``st`` for ``descriptor``; returns the restored section waiting for it, if any."""
        self.states[descriptor.name] = st
        self.descriptors[descriptor.name] = descriptor
        return self.pending.pop(descriptor.name, None)

    def add_restored(self, sections: dict[str, StateSection]) -> None:
        """Keep restored sections until their states register (``add``, ``take_pending_of_registered``)."""
        self.pending.update(sections)

    def take_pending_of_registered(self) -> list[tuple[str, StateDescriptor, InternalKeyedState, StateSection]]:
        """The restored sections of states already registered (taken out of ``pending``), with their state."""
        return [(name, self.descriptors[name], self.states[name], self.pending.pop(name))
                for name in [n for n in self.pending if n in self.states]]

    def is_empty(self) -> bool:
        """No stored cell and no restored section waiting."""
        return not self.pending and not any(st._entry_count() for st in self.states.values())

    def to_snapshot(self) -> Iterator[tuple[str, StateDescriptor, InternalKeyedState]]:
        """Each registered state with its descriptor, TTL-expired cells dropped first where the state's
        TTL config says ``cleanup_in_snapshot``."""
        for name, st in self.states.items():
            d = self.descriptors[name]
            ttl = d.ttl_config
            if ttl is not None and ttl.cleanup_in_snapshot:
                st._cleanup_expired(1 << 62)
            yield name, d, st

    def sections(self) -> dict[str, StateSection]:
        """Every state's cells for a logical snapshot: registered ones exported (see ``to_snapshot``), then the
        restored sections waiting."""
        sections = {name: StateSection(StateMeta.of(d), [list(e) for e in st._export()])
                    for name, d, st in self.to_snapshot()}
        sections.update(self.pending)
        return sections

    def sweep_ttl(self) -> None:
        """The incremental TTL sweep of every state whose TTL config asks for one."""
        for name, st in self.states.items():
            ttl = self.descriptors[name].ttl_config
            if ttl is not None and ttl.cleanup_incremental:
                st._cleanup_expired(ttl.cleanup_incremental)

    def entry_counts(self) -> dict[str, int]:
        """Stored cells per registered state."""
        return {name: st._entry_count() for name, st in self.states.items()}

    def pending_entry_counts(self) -> dict[str, int]:
        """Restored cells per state not registered yet."""
        return {name: len(p.entries) for name, p in self.pending.items()}

    def versions(self) -> dict[str, int]:
        """The format version of each state's stored values (registered, or restored and not yet registered)."""
        versions = {name: p.meta.version for name, p in self.pending.items()}
        versions.update((name, d.version) for name, d in self.descriptors.items())
        return versions


def import_section(name: str, descriptor: StateDescriptor, st: InternalKeyedState, section: StateSection) -> bool:
    """Fill a state registered after a restore with its restored ``section``, refusing a kind or TTL other
    than the descriptor's; True when its cells were migrated from another version."""
    meta = section.meta
    if meta.kind != descriptor.kind:
        raise StateDescriptorError(f"state '{name}' was snapshotted as {meta.kind} state, "
                                   f"registered now as {descriptor.kind}")
    if meta.ttl != (descriptor.ttl_config is not None):
        raise StateDescriptorError(f"state '{name}': TTL was {'on' if meta.ttl else 'off'} in the snapshot "
                                   f"and is {'on' if descriptor.ttl_config else 'off'} now; they must match")
    migrate = cell_migration(descriptor, meta.version) if meta.version != descriptor.version else None
    for kg, key, ns, cell in section.entries:
        st._import(kg, key, ns, cell if migrate is None else migrate(key, cell))
    return migrate is not None


def migrate_stored(descriptor: StateDescriptor, st: InternalKeyedState, stored: int) -> None:
    """Migrate, in bulk, every cell ``st`` holds at version ``stored`` to the descriptor's version."""
    migrate = cell_migration(descriptor, stored)
    for kg, key, ns, cell in list(st._export()):
        st._import(kg, key, ns, migrate(key, cell))
