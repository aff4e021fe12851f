"""The key context of a keyed backend: the current key, and the resolution of keys to key groups and bytes.

As Flink's ``InternalKeyContext``: ``set_current_key`` resolves a key once (its key group and serialized
bytes, cached by ``key_identity``) and pushes it to every registered state, so per-record reads and writes
only touch the state's own storage. Batched work resolves many keys at once (``resolve_keys``,
``resolve_key_columns``, ``resolve_key_array``), in bulk for plain keys. ``KeyedStateBackend`` inherits it:
``set_current_key`` is the per-record path, called without a hop through another object.
"""

from __future__ import annotations

from itertools import islice
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa

from .errors import InvalidKeyError, KeyGroupError, NoCurrentKeyError, SerializationError
from .key_columns import serialized_keys, stable_hashes_of
from .key_identity import PLAIN_KEY_TYPES as _PLAIN_KEYS, key_identity, key_problem, unhashable_reason
from .keygroups import key_group_for_bytes, key_groups_and_bytes, key_groups_for_bytes
from .serialization import KEY_SERIALIZER
from .state import ResolvedKey
from .state_registry import InternalKeyedState

_KEY_CACHE_LIMIT = 1 << 17

KeyEntry = tuple[int, bytes, tuple, type]
"""A cached key: its key group, serialized bytes, void-namespace cell key ``(identity, None)`` and type."""


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


class KeyContext:
    """The current key and the key cache of one backend serving ``key_groups`` of ``max_parallelism``; states
    registered with ``_scope_state`` follow the current key."""

    max_parallelism: int
    key_groups: range

    def __init__(self, max_parallelism: int, key_groups: range) -> None:
        self.max_parallelism = max_parallelism
        self.key_groups = key_groups
        self._key: Any = NO_KEY
        self._entry: KeyEntry | None = None
        """The current key's cache entry (see ``_key_entry``) once asked for; None until then."""
        self._key_cache: dict[Any, KeyEntry] = {}
        self._void_cks: dict[Any, tuple] = {}
        """The void-namespace cell key of each cached plain key (the cache's keys that are their own identity):
        what ``set_current_key`` reads, one lookup giving one object; evicted with the key cache."""
        self._key_setters: list[Callable[[Any, int, bytes], None]] = []
        self._tuple_scoped: list[Any] = []
        """The ``TUPLE_SCOPED`` states: ``set_current_key`` sets their ``_ck`` itself."""

    def _scope_state(self, st: InternalKeyedState) -> None:
        """Make a newly registered state follow the current key, starting now."""
        if st.TUPLE_SCOPED:
            self._tuple_scoped.append(st)
        else:
            self._key_setters.append(st._set_key)
        if self._key is not NO_KEY:
            entry = self._current_entry()
            st._set_key(self._key, entry[0], entry[1])

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
            raise InvalidKeyError(unhashable_reason(key, shown=True)) from None
        self._key = key
        self._entry = entry
        for st in self._tuple_scoped:
            ns = st._ns
            st._ck = void_ck if ns is None else (void_ck[0], ns)
        if setters:  # a test, cheaper than looping over none
            for set_key in setters:
                set_key(key, entry[0], entry[1])

    def _current_entry(self) -> KeyEntry:
        """The current key's cache entry (its key group and bytes), looked up at most once per key; raises
        NoCurrentKeyError without a current key."""
        entry = self._entry
        if entry is None:
            entry = self._entry = self._key_entry(self.get_current_key())
        return entry

    def _key_entry(self, key: Any) -> KeyEntry:
        """``(key group, serialized key, (identity, None), type)`` of ``key``, cached under its
        ``key_identity``: so ``1``, ``1.0`` and ``True`` are three keys, as their serialized forms are. A
        ``str``, ``int`` or ``bytes`` key is its own identity, so ``set_current_key`` finds it directly."""
        try:
            ident = key_identity(key)
        except TypeError:
            raise InvalidKeyError(unhashable_reason(key, shown=True)) from None
        entry = self._key_cache.get(ident)
        return entry if entry is not None else self._resolve_key(key, ident)

    def _resolve_key(self, key: Any, ident: Any) -> KeyEntry:
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

    def _resolve_plain(self, keys: list) -> list[KeyEntry]:
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

