"""KeyedStateBackend: the contract every backend implements, and the logic they share.

A backend serves one contiguous key-group range. It is composed by concern, as Flink's keyed backend:
the key context it inherits (``statekit.key_context``: the current key, set once per record or per key
and pushed to every registered state, and the resolution of keys to key groups and bytes), its state
registry (``statekit.state_registry``), its timer services (``statekit.timer_services``) and the logical
snapshot (``statekit.logical_snapshot``): backend-neutral, so a snapshot of one backend restores into
another, or into other key groups.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, ClassVar, Iterable

from .config import OptionSpec, StateConfig
from .descriptors import StateDescriptor
from .errors import KeyGroupError, StateError
from .key_context import KeyContext
from .logical_snapshot import LogicalSnapshot, StateSection, merged_states, read_logical
from .registry import backend_class, wall_clock_ms
from .state_registry import InternalKeyedState, StateRegistry, import_section, migrate_stored
from .timer_services import TimerServices
from .timers import InternalTimerService, TimerQueue, TimerTarget


class KeyedStateBackend(KeyContext, ABC):
    """Keyed state and timers for one key-group range of one operator."""

    name: ClassVar[str] = ""
    OPTIONS: ClassVar[tuple[OptionSpec, ...]] = ()

    def __init__(self, config: StateConfig, key_groups: Iterable[int], time_provider: Callable[[], int]) -> None:
        KeyContext.__init__(self, config.max_parallelism, _as_range(key_groups, config.max_parallelism))
        self.config = config
        self.time_provider = time_provider
        self._registry = StateRegistry()
        self._timers = TimerServices(self, self._create_timer_queue, self._check_open, self.max_parallelism,
                                     self.key_groups)
        self._closed = False
        self._flush_hooks: list[Callable[[], None]] = []
        self.checkpoint_base: Any = None
        """Set by statekit.checkpoint: the committed snapshot this state equals (incremental snapshots build on it)."""

    # -- states --------------------------------------------------------------------------------
    def get_state(self, descriptor: StateDescriptor):
        """The state for ``descriptor``, created on first use; the same object for the same name."""
        st = self._registry.registered(descriptor)
        if st is not None:
            return st
        self._check_open()
        st = self._create_state(descriptor)
        pending = self._registry.add(descriptor, st)
        self._scope_state(st)
        if pending is not None:
            self._import_pending(descriptor.name, descriptor, st, pending)
        stored = self._update_stored_version(descriptor.name, descriptor.version)
        if stored != descriptor.version:
            migrate_stored(descriptor, st, stored)
        return st

    def _update_stored_version(self, name: str, version: int) -> int:
        """Record ``version`` as the format version of state ``name`` in this backend's own storage;
        returns the one recorded before (``version`` when none was). Default: a backend whose storage
        is restored only through logical snapshots (migrated on import) records nothing."""
        return version

    def registered_states(self) -> dict[str, StateDescriptor]:
        return dict(self._registry.descriptors)

    @abstractmethod
    def _create_state(self, descriptor: StateDescriptor) -> InternalKeyedState:
        """Build the backend's state object for ``descriptor``."""

    # -- timers --------------------------------------------------------------------------------
    def timer_service(self, name: str, target: TimerTarget | None) -> InternalTimerService:
        """The named timer service (created on first use); ``target`` receives its timers."""
        return self._timers.service(name, target)

    def timer_services(self) -> dict[str, InternalTimerService]:
        return dict(self._timers.services)

    @abstractmethod
    def _create_timer_queue(self, service: str, domain: str) -> TimerQueue:
        """An empty queue for ``domain`` ('event' or 'processing') timers of ``service``."""

    # -- lifecycle -----------------------------------------------------------------------------
    def add_flush_hook(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` at the start of every ``flush`` (so before every snapshot): how a write-back cache
        over this backend's states (an operator's in-memory table) writes what it changed."""
        self._flush_hooks.append(hook)

    def remove_flush_hook(self, hook: Callable[[], None]) -> None:
        """Stop running ``hook`` (its cache was closed; the backend may outlive it)."""
        self._flush_hooks.remove(hook)

    def flush(self) -> None:
        """End of an epoch: flush hooks write their caches, then the incremental TTL sweep runs; backends
        also write buffered changes."""
        self._write_back()
        self._sweep_ttl()

    def _write_back(self) -> None:
        """Run the flush hooks."""
        for hook in self._flush_hooks:
            hook()

    def _sweep_ttl(self) -> None:
        """The incremental TTL sweep of every state whose TTL config asks for one."""
        self._registry.sweep_ttl()

    @abstractmethod
    def close(self) -> None:
        """Release every resource; the backend cannot be used afterwards."""

    @property
    def closed(self) -> bool:
        """True once ``close()`` ran."""
        return self._closed

    @property
    def local_dir(self) -> str | None:
        """The local directory holding this backend's files, or None for a backend without files."""
        return None

    def pending_entry_counts(self) -> dict[str, int]:
        """Cells restored for states not registered yet (kept until ``get_state`` asks for them), per state."""
        return self._registry.pending_entry_counts()

    def _check_open(self) -> None:
        if self._closed:
            raise StateError(f"{type(self).__name__} is closed")

    def now(self) -> int:
        """Processing time for TTL, from the injected clock."""
        return self.time_provider()

    def num_entries(self) -> int:
        """Stored cells of every state plus registered timers (0 means nothing leaked)."""
        return (sum(self._registry.entry_counts().values()) + sum(self.pending_entry_counts().values())
                + self._timers.timer_count())

    def state_versions(self) -> dict[str, int]:
        """The format version of each state's stored values (registered, or restored and not yet registered)."""
        return self._registry.versions()

    def state_entry_counts(self) -> dict[str, int]:
        """Stored cells per state name."""
        return self._registry.entry_counts()

    # -- logical snapshots ---------------------------------------------------------------------
    def snapshot_logical(self) -> dict:
        """A backend-neutral, msgpack-able copy of all state and timers (``LogicalSnapshot.to_dict``; TTL-expired
        cells left out when the state's TTL config says ``cleanup_in_snapshot``)."""
        self.flush()
        return LogicalSnapshot(self.name, self.max_parallelism, self.key_groups, self._registry.sections(),
                               self._timers.sections()).to_dict()

    def restore_logical(self, snapshots: dict | LogicalSnapshot | Iterable[dict | LogicalSnapshot]) -> None:
        """Load one or several logical snapshots (several when rescaling), serialized or not, keeping only
        this backend's key groups; states are filled when their descriptor is registered."""
        if isinstance(snapshots, (dict, LogicalSnapshot)):
            snapshots = [snapshots]
        if not self._registry.is_empty():
            raise StateError("restore_logical needs an empty backend")
        snaps = [read_logical(s) for s in snapshots]
        for snap in snaps:
            if snap.max_parallelism != self.max_parallelism:
                raise StateError(f"snapshot has max_parallelism {snap.max_parallelism}, this backend "
                                 f"{self.max_parallelism}: key groups cannot be mapped")
        self._registry.add_restored(merged_states(snaps, self.key_groups))
        for snap in snaps:
            for name, t in snap.timers.items():
                self._timers.restore(name, t)
        for name, descriptor, st, section in self._registry.take_pending_of_registered():
            self._import_pending(name, descriptor, st, section)

    def _import_pending(self, name: str, descriptor: StateDescriptor, st: InternalKeyedState,
                        pending: StateSection) -> bool:
        """Fill a state registered after a restore; True when its cells were migrated from another version."""
        return import_section(name, descriptor, st, pending)


def create_backend(config: StateConfig, key_groups: Iterable[int] | None = None,
                   time_provider: Callable[[], int] | None = None) -> KeyedStateBackend:
    """A backend of ``config.backend`` serving ``key_groups`` (default: all of ``config.max_parallelism``)."""
    kg = range(config.max_parallelism) if key_groups is None else key_groups
    return backend_class(config.backend)(config, kg, time_provider or wall_clock_ms)


def _as_range(key_groups: Iterable[int], max_parallelism: int) -> range:
    if isinstance(key_groups, range) and key_groups.step == 1:
        r = key_groups
    else:
        kgs = sorted(set(key_groups))
        if not kgs or kgs != list(range(kgs[0], kgs[-1] + 1)):
            raise KeyGroupError(f"key groups must be a non-empty contiguous range, got {kgs[:5]}...")
        r = range(kgs[0], kgs[-1] + 1)
    if len(r) == 0 or r.start < 0 or r.stop > max_parallelism:
        raise KeyGroupError(f"key groups [{r.start}, {r.stop}) not within [0, max_parallelism={max_parallelism})")
    return r
