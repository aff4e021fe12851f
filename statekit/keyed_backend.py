"""KeyedStateBackend: the contract every backend implements, and the logic they share.

A backend serves one contiguous key-group range. The current key is set once per record (or,
in epoch batches, once per key) and pushed to every registered state, so per-record reads and
writes only touch the state's own storage. Logical snapshots (``snapshot_logical``) are
backend-neutral: a snapshot of one backend restores into another, or into other key groups.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from itertools import islice
from typing import Any, Callable, ClassVar, Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from .config import OptionSpec, StateConfig
from .descriptors import StateDescriptor
from .errors import InvalidKeyError, KeyGroupError, NoCurrentKeyError, SerializationError, StateDescriptorError, StateError
from .key_identity import PLAIN_KEY_TYPES as _PLAIN_KEYS, key_identity, key_problem
from .key_columns import serialized_keys, stable_hashes_of
from .keygroups import key_group_for_bytes, key_groups_and_bytes, key_groups_for_bytes
from .migration import cell_migration
from .registry import backend_class, wall_clock_ms
from .serialization import KEY_SERIALIZER, NamespaceBytes
from .snapshot_header import SNAPSHOT_FORMAT
from .state import ResolvedKey
from .timers import InternalTimerService, Timer, TimerQueue, TimerTarget, timer_sort_key, timer_sort_keys

_KEY_CACHE_LIMIT = 1 << 17


class NoKey:
    """Stands for 'no current key': hashing it (as any state lookup does) raises NoCurrentKeyError."""

    __slots__ = ()

    def __hash__(self) -> int:
        raise NoCurrentKeyError("keyed state accessed before set_current_key()")

    def __eq__(self, other: object) -> bool:
        return self is other

    def __repr__(self) -> str:
        return "<no current key>"


NO_KEY = NoKey()


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


class KeyedStateBackend(ABC):
    """Keyed state and timers for one key-group range of one operator."""

    name: ClassVar[str] = ""
    OPTIONS: ClassVar[tuple[OptionSpec, ...]] = ()

    def __init__(self, config: StateConfig, key_groups: Iterable[int], time_provider: Callable[[], int]) -> None:
        self.config = config
        self.max_parallelism = config.max_parallelism
        self.key_groups = _as_range(key_groups, config.max_parallelism)
        self.time_provider = time_provider
        self._key: Any = NO_KEY
        self._entry: tuple[int, bytes, tuple, type] | None = None
        """The current key's cache entry (see ``_key_entry``) once asked for; None until then."""
        self._key_cache: dict[Any, tuple[int, bytes, tuple, type]] = {}
        self._void_cks: dict[Any, tuple] = {}
        """The void-namespace cell key of each cached plain key (the cache's keys that are their own identity):
        what ``set_current_key`` reads, one lookup giving one object; evicted with the key cache."""
        self._states: dict[str, InternalKeyedState] = {}
        self._descriptors: dict[str, StateDescriptor] = {}
        self._key_setters: list[Callable[[Any, int, bytes], None]] = []
        self._tuple_scoped: list[Any] = []
        self._timer_services: dict[str, InternalTimerService] = {}
        self._pending: dict[str, dict] = {}
        self._closed = False
        self._flush_hooks: list[Callable[[], None]] = []
        self.checkpoint_base: Any = None
        """Set by statekit.checkpoint: the committed snapshot this state equals (incremental snapshots build on it)."""

    # -- current key ---------------------------------------------------------------------------
    def set_current_key(self, key: Any) -> None:
        """Scope all states and timer registrations to ``key``. One lookup per key: of its whole cache entry
        when a state takes the key group and bytes (``_set_key``), else of its void-namespace cell key alone."""
        setters = self._key_setters
        try:
            if setters:
                entry = self._key_cache[key]
                if entry[3] is not type(key):  # 1.0 or True met 1's entry: look up by identity
                    entry = self._key_entry(key)
                void_ck = entry[2]
            else:
                entry = None  # looked up when asked for (``_current_entry``)
                void_ck = self._void_cks[key]
                if type(void_ck[0]) is not type(key):  # as above
                    entry = self._key_entry(key)
                    void_ck = entry[2]
        except KeyError:  # not cached, or not a plain key
            entry = self._key_entry(key)
            void_ck = entry[2]
        except TypeError:
            raise _unhashable(key) from None
        self._key = key
        self._entry = entry
        for st in self._tuple_scoped:
            ns = st._ns
            st._ck = void_ck if ns is None else (void_ck[0], ns)
        if setters:  # a test, cheaper than looping over none
            for set_key in setters:
                set_key(key, entry[0], entry[1])

    def _current_entry(self) -> tuple[int, bytes, tuple, type]:
        """The current key's cache entry (its key group and bytes), looked up at most once per key; raises
        NoCurrentKeyError without a current key."""
        entry = self._entry
        if entry is None:
            entry = self._entry = self._key_entry(self.get_current_key())
        return entry

    def _key_entry(self, key: Any) -> tuple[int, bytes, tuple, type]:
        """``(key group, serialized key, (identity, None), type)`` of ``key``, cached under its
        ``key_identity``: so ``1``, ``1.0`` and ``True`` are three keys, as their serialized forms are. A
        ``str``, ``int`` or ``bytes`` key is its own identity, so ``set_current_key`` finds it directly."""
        try:
            ident = key_identity(key)
        except TypeError:
            raise _unhashable(key) from None
        entry = self._key_cache.get(ident)
        return entry if entry is not None else self._resolve_key(key, ident)

    def _resolve_key(self, key: Any, ident: Any) -> tuple[int, bytes, tuple, type]:
        """The cache entry of a new key (see ``_key_entry``), checked."""
        problem = key_problem(key)
        if problem is not None:
            raise InvalidKeyError(f"key {key!r} cannot be used for keyed state: {problem}")
        try:
            kb = KEY_SERIALIZER.dumps(key)
        except SerializationError as e:
            raise InvalidKeyError(f"key {key!r} cannot be serialized: {e}") from None
        kg = key_group_for_bytes(kb, self.max_parallelism)
        if kg not in self.key_groups:
            raise KeyGroupError(f"key {key!r} is in key group {kg}, outside this backend's key groups "
                                f"[{self.key_groups.start}, {self.key_groups.stop}) of max_parallelism {self.max_parallelism}")
        entry = (kg, kb, (ident, None), type(key))
        self._remember({ident: entry})
        return entry

    def _remember(self, entries: dict) -> None:
        """Cache key entries; past the limit the oldest go first (FIFO: dicts keep insertion order), a
        quarter of the limit at a time, instead of starting cold."""
        cache, void_cks = self._key_cache, self._void_cks
        cache.update(entries)
        void_cks.update((ident, entry[2]) for ident, entry in entries.items() if type(ident) in _PLAIN_KEYS)
        if len(cache) > _KEY_CACHE_LIMIT:
            for old in list(islice(cache, len(cache) - _KEY_CACHE_LIMIT + _KEY_CACHE_LIMIT // 4)):
                del cache[old]
                void_cks.pop(old, None)

    def _plain_scopes(self, keys: Sequence[Any]) -> tuple[np.ndarray, list[bytes]] | None:
        """Key groups and bytes of str, int or bytes keys (their own identities): serialized one by one in
        C, hashed together in numpy; None when one cannot be serialized (an int beyond 64 bits). A key
        outside this backend's key groups raises KeyGroupError, as ``set_current_key`` does."""
        try:
            kgs, kbs = key_groups_and_bytes(keys, self.max_parallelism)
        except SerializationError:
            return None
        self._check_key_groups(kgs, keys.__getitem__)
        return kgs, kbs

    def _check_key_groups(self, kgs: np.ndarray, key_at: Callable[[int], Any]) -> None:
        """KeyGroupError naming the first key (``key_at(i)``) outside this backend's key groups, as
        ``set_current_key`` raises it."""
        outside = np.flatnonzero((kgs < self.key_groups.start) | (kgs >= self.key_groups.stop))
        if len(outside):
            key = key_at(int(outside[0]))
            self._resolve_key(key, key)

    def _resolve_plain(self, keys: list) -> list[tuple[int, bytes, tuple, type]]:
        """``_resolve_key`` of many new plain keys at once, remembered in the key cache (InvalidKeyError:
        an int beyond 64 bits)."""
        scopes = self._plain_scopes(keys)
        if scopes is None:
            return [self._key_entry(key) for key in keys]  # raises for the first key that cannot be serialized
        entries = [(kg, kb, (key, None), type(key)) for key, kg, kb in zip(keys, scopes[0].tolist(), scopes[1])]
        self._remember(dict(zip(keys, entries)))
        return entries

    def resolve_keys(self, keys: Sequence[Any]) -> tuple[list[ResolvedKey | None], dict[int, InvalidKeyError]]:
        """Each key with its key group and bytes, for batched state and timer calls (the current key is
        left as it is); a key ``set_current_key`` would refuse is None here, its error under its index.
        A key outside this backend's key groups raises KeyGroupError, as ``set_current_key`` does."""
        if set(map(type, keys)) <= _PLAIN_KEYS:  # all their own identities: computed in bulk, not looked up
            scopes = self._plain_scopes(keys)
            if scopes is not None:
                return list(zip(keys, scopes[0].tolist(), scopes[1])), {}
        cache = self._key_cache
        resolved: list[ResolvedKey | None] = [None] * len(keys)
        refused: dict[int, InvalidKeyError] = {}
        fresh: list[int] = []
        for i, key in enumerate(keys):
            t = type(key)
            if t in _PLAIN_KEYS:
                entry = cache.get(key)
                if entry is None or entry[3] is not t:
                    fresh.append(i)
                    continue
            else:
                try:
                    entry = self._key_entry(key)
                except InvalidKeyError as e:
                    refused[i] = e
                    continue
            resolved[i] = (key, entry[0], entry[1])
        try:
            entries = self._resolve_plain([keys[i] for i in fresh]) if fresh else []
        except InvalidKeyError:
            entries = []
            for i in fresh:  # one by one, refusing the keys that cannot be serialized
                try:
                    entries.append(self._key_entry(keys[i]))
                except InvalidKeyError as e:
                    entries.append(None)
                    refused[i] = e
        for i, entry in zip(fresh, entries):
            if entry is not None:
                resolved[i] = (keys[i], entry[0], entry[1])
        return resolved, refused

    def resolve_key_columns(self, keys: Sequence[Any]) -> tuple[np.ndarray, list[bytes], dict[int, InvalidKeyError]]:
        """``resolve_keys`` as columns, for work that keeps keys by column: each key's group (-1 for a
        refused key) and bytes (b"" for one), and the refused keys' errors by index."""
        if set(map(type, keys)) <= _PLAIN_KEYS:
            scopes = self._plain_scopes(keys)
            if scopes is not None:
                return scopes[0], scopes[1], {}
        resolved, refused = self.resolve_keys(keys)
        return (np.fromiter((-1 if r is None else r[1] for r in resolved), np.int64, len(resolved)),
                [b"" if r is None else r[2] for r in resolved], refused)

    def resolve_key_array(self, keys: pa.Array) -> tuple[np.ndarray, pa.Array, np.ndarray] | None:
        """``resolve_key_columns`` of an Arrow column of plain keys with no Python object per key: each
        key's group, serialized bytes (a large_binary column) and ``stable_hash``; None for a column not
        taken so (nulls, another type, a very long key): resolve those keys as Python values. A key outside
        this backend's key groups raises KeyGroupError, as ``set_current_key`` does."""
        kbs = serialized_keys(keys)
        hashes = stable_hashes_of(kbs) if kbs is not None else None
        if hashes is None:
            return None
        kgs = hashes % self.max_parallelism
        self._check_key_groups(kgs, lambda i: keys[i].as_py())
        return kgs, kbs, hashes

    def get_current_key(self) -> Any:
        key = self._key
        if key is NO_KEY:
            raise NoCurrentKeyError("no current key: call set_current_key() first")
        return key

    @property
    def current_key_group(self) -> int:
        """The current key's key group; -1 without a current key."""
        return -1 if self._key is NO_KEY else self._current_entry()[0]

    def current_key_scope(self) -> tuple[Any, int, bytes]:
        """The current key, its key group and its serialized bytes (raises NoCurrentKeyError without a key)."""
        entry = self._current_entry()
        return self._key, entry[0], entry[1]

    def key_group_of(self, key: Any) -> int:
        """Key group of ``key`` (cached like ``set_current_key``; does not check the range)."""
        entry = self._key_cache.get(key_identity(key))
        if entry is not None:
            return entry[0]
        return key_group_for_bytes(KEY_SERIALIZER.dumps(key), self.max_parallelism)

    def key_groups_of(self, keys: Sequence[Any]) -> list[int]:
        """``key_group_of`` of many keys: cached keys looked up, the others serialized and hashed together
        (without filling the cache: a snapshot walks every key once)."""
        cache = self._key_cache
        groups: list[int | None] = []
        missing: list[int] = []
        for i, key in enumerate(keys):
            entry = cache.get(key if type(key) in _PLAIN_KEYS else key_identity(key))
            if entry is None or entry[3] is not type(key):
                missing.append(i)
                groups.append(None)
            else:
                groups.append(entry[0])
        if missing:
            found = key_groups_for_bytes([KEY_SERIALIZER.dumps(keys[i]) for i in missing], self.max_parallelism)
            for i, kg in zip(missing, found.tolist()):
                groups[i] = kg
        return groups

    # -- states --------------------------------------------------------------------------------
    def get_state(self, descriptor: StateDescriptor):
        """The state for ``descriptor``, created on first use; the same object for the same name."""
        name = descriptor.name
        st = self._states.get(name)
        if st is not None:
            known = self._descriptors[name]
            if not known.compatible_with(descriptor):
                raise StateDescriptorError(f"state '{name}' is already registered as {type(known).__name__}, "
                                           f"not {type(descriptor).__name__}")
            return st
        self._check_open()
        st = self._create_state(descriptor)
        self._states[name] = st
        self._descriptors[name] = descriptor
        if st.TUPLE_SCOPED:
            self._tuple_scoped.append(st)
        else:
            self._key_setters.append(st._set_key)
        if self._key is not NO_KEY:
            entry = self._current_entry()
            st._set_key(self._key, entry[0], entry[1])
        pending = self._pending.pop(name, None)
        if pending is not None:
            self._import_pending(name, descriptor, st, pending)
        stored = self._update_stored_version(name, descriptor.version)
        if stored != descriptor.version:
            self._migrate_stored(descriptor, st, stored)
        return st

    def _update_stored_version(self, name: str, version: int) -> int:
        """Record ``version`` as the format version of state ``name`` in this backend's own storage;
        returns the one recorded before (``version`` when none was). Default: a backend whose storage
        is restored only through logical snapshots (migrated on import) records nothing."""
        return version

    def _migrate_stored(self, descriptor: StateDescriptor, st: InternalKeyedState, stored: int) -> None:
        """Migrate, in bulk, every cell ``st`` holds at version ``stored`` to the descriptor's version."""
        migrate = cell_migration(descriptor, stored)
        for kg, key, ns, cell in list(st._export()):
            st._import(kg, key, ns, migrate(key, cell))

    def registered_states(self) -> dict[str, StateDescriptor]:
        return dict(self._descriptors)

    @abstractmethod
    def _create_state(self, descriptor: StateDescriptor) -> InternalKeyedState:
        """Build the backend's state object for ``descriptor``."""

    # -- timers --------------------------------------------------------------------------------
    def timer_service(self, name: str, target: TimerTarget | None) -> InternalTimerService:
        """The named timer service (created on first use); ``target`` receives its timers."""
        svc = self._timer_services.get(name)
        if svc is None:
            self._check_open()
            svc = InternalTimerService(name, self, target, self._create_timer_queue(name, "event"),
                                       self._create_timer_queue(name, "processing"))
            self._timer_services[name] = svc
        elif target is not None:
            svc.set_target(target)
        return svc

    def timer_services(self) -> dict[str, InternalTimerService]:
        return dict(self._timer_services)

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
        for name, st in self._states.items():
            ttl = self._descriptors[name].ttl_config
            if ttl is not None and ttl.cleanup_incremental:
                st._cleanup_expired(ttl.cleanup_incremental)

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
        return {name: len(p["entries"]) for name, p in self._pending.items()}

    def _check_open(self) -> None:
        if self._closed:
            raise StateError(f"{type(self).__name__} is closed")

    def now(self) -> int:
        """Processing time for TTL, from the injected clock."""
        return self.time_provider()

    def num_entries(self) -> int:
        """Stored cells of every state plus registered timers (0 means nothing leaked)."""
        n = sum(st._entry_count() for st in self._states.values())
        n += sum(self.pending_entry_counts().values())
        for svc in self._timer_services.values():
            n += svc.num_event_time_timers() + svc.num_processing_time_timers()
        return n

    def state_versions(self) -> dict[str, int]:
        """The format version of each state's stored values (registered, or restored and not yet registered)."""
        versions = {name: p.get("version", 1) for name, p in self._pending.items()}
        versions.update((name, d.version) for name, d in self._descriptors.items())
        return versions

    def state_entry_counts(self) -> dict[str, int]:
        """Stored cells per state name."""
        return {name: st._entry_count() for name, st in self._states.items()}

    # -- logical snapshots ---------------------------------------------------------------------
    def snapshot_logical(self) -> dict:
        """A backend-neutral, msgpack-able copy of all state and timers (TTL-expired cells left out
        when the state's TTL config says ``cleanup_in_snapshot``)."""
        self.flush()
        states = {}
        for name, d, st in self._states_to_snapshot():
            states[name] = {"kind": d.kind, "ttl": d.ttl_config is not None, "version": d.version,
                            "entries": [list(e) for e in st._export()]}
        for name, p in self._pending.items():
            states[name] = p
        timers = {}
        for name, svc in self._timer_services.items():
            timers[name] = {
                "watermark": svc.current_watermark(),
                "processing_time": svc.current_processing_time(),
                "event": [list(t) for t in svc.event_time_timers()],
                "processing": [list(t) for t in svc.processing_time_timers()],
            }
        return {"format": SNAPSHOT_FORMAT, "backend": self.name, "max_parallelism": self.max_parallelism,
                "key_groups": [self.key_groups.start, self.key_groups.stop], "states": states, "timers": timers}

    def _states_to_snapshot(self) -> Iterator[tuple[str, StateDescriptor, InternalKeyedState]]:
        """Each registered state with its descriptor, TTL-expired cells dropped first where the state's
        TTL config says ``cleanup_in_snapshot``."""
        for name, st in self._states.items():
            d = self._descriptors[name]
            ttl = d.ttl_config
            if ttl is not None and ttl.cleanup_in_snapshot:
                st._cleanup_expired(1 << 62)
            yield name, d, st

    def restore_logical(self, snapshots: dict | Iterable[dict]) -> None:
        """Load one or several logical snapshots (several when rescaling), keeping only this
        backend's key groups; states are filled when their descriptor is registered."""
        if isinstance(snapshots, dict):
            snapshots = [snapshots]
        if any(st._entry_count() for st in self._states.values()) or self._pending:
            raise StateError("restore_logical needs an empty backend")
        for snap in snapshots:
            if snap.get("format") != SNAPSHOT_FORMAT:
                raise StateError(f"a logical snapshot of format {snap.get('format')!r}; this statekit reads format "
                                 f"{SNAPSHOT_FORMAT} (the 'snapshot' mark of statekit.snapshot_header)")
            if snap["max_parallelism"] != self.max_parallelism:
                raise StateError(f"snapshot has max_parallelism {snap['max_parallelism']}, this backend "
                                 f"{self.max_parallelism}: key groups cannot be mapped")
            kgs = self.key_groups
            for name, s in snap["states"].items():
                entries = [e for e in s["entries"] if e[0] in kgs]
                version = s.get("version", 1)
                pending = self._pending.setdefault(name, {"kind": s["kind"], "ttl": s["ttl"], "version": version,
                                                          "entries": []})
                if pending["kind"] != s["kind"]:
                    raise StateError(f"state '{name}' is {pending['kind']} in one snapshot and {s['kind']} in another")
                if pending["version"] != version:
                    raise StateError(f"state '{name}' is at version {pending['version']} in one snapshot and "
                                     f"{version} in another: restore snapshots of one job version together")
                pending["entries"].extend(entries)
            for name, t in snap["timers"].items():
                self._restore_timers(name, t)
        for name in [n for n in self._pending if n in self._states]:
            self._import_pending(name, self._descriptors[name], self._states[name], self._pending.pop(name))

    def _restore_timers(self, name: str, t: dict) -> None:
        svc = self.timer_service(name, None)
        svc.restore_time(max(svc.current_watermark(), t["watermark"]),
                         max(svc.current_processing_time(), t["processing_time"]))
        for domain, queue in svc.queues():
            timers = t[domain]
            sort_keys, groups = self._timer_sort_keys(timers)
            mine = np.flatnonzero((groups >= self.key_groups.start) & (groups < self.key_groups.stop)).tolist()
            if len(mine) < len(timers):
                sort_keys, timers = [sort_keys[i] for i in mine], [timers[i] for i in mine]
            queue.add_many(sort_keys, list(map(Timer._make, timers)))

    def _timer_sort_keys(self, timers: Sequence[Sequence[Any]]) -> tuple[list[bytes], np.ndarray]:
        """Sort keys and key groups of snapshotted timers ``[timestamp, key, namespace]``, in bulk (the
        keys serialized one by one, their groups hashed and the sort keys' prefixes built together)."""
        dumps = KEY_SERIALIZER.dumps
        kbs = [dumps(x[1]) for x in timers]
        groups = key_groups_for_bytes(kbs, self.max_parallelism)
        namespaces = NamespaceBytes("restored timers", limit=len(timers) + 1)
        try:
            nsbs = [namespaces(x[2]) for x in timers]
        except TypeError:  # an unhashable namespace: each serialized on its own
            nsbs, namespaces = [dumps(x[2]) for x in timers], None
        if namespaces is not None and len(namespaces) == 1:
            return timer_sort_keys([x[0] for x in timers], groups.tolist(), kbs, nsbs[0]), groups
        return [timer_sort_key(x[0], kg, kb, nsb) for x, kg, kb, nsb in zip(timers, groups.tolist(), kbs, nsbs)], groups

    def _import_pending(self, name: str, descriptor: StateDescriptor, st: InternalKeyedState, pending: dict) -> bool:
        """Fill a state registered after a restore; True when its cells were migrated from another version."""
        if pending["kind"] != descriptor.kind:
            raise StateDescriptorError(f"state '{name}' was snapshotted as {pending['kind']} state, "
                                       f"registered now as {descriptor.kind}")
        if pending["ttl"] != (descriptor.ttl_config is not None):
            raise StateDescriptorError(f"state '{name}': TTL was {'on' if pending['ttl'] else 'off'} in the snapshot "
                                       f"and is {'on' if descriptor.ttl_config else 'off'} now; they must match")
        stored = pending.get("version", 1)
        migrate = cell_migration(descriptor, stored) if stored != descriptor.version else None
        for kg, key, ns, cell in pending["entries"]:
            st._import(kg, key, ns, cell if migrate is None else migrate(key, cell))
        return migrate is not None


def _unhashable(key: Any) -> InvalidKeyError:
    return InvalidKeyError(f"key {key!r} of type {type(key).__name__} is not hashable (use a tuple, not a list)")


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
