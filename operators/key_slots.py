"""KeySlots: the keys a columnar engine holds, each at a slot (an index into per-key columns), found and
added for a whole epoch at once.

Slots are only appended: a key that leaves is marked dead (one numpy write, no dict work), and when
more than two thirds of the slots are dead ``compact`` renumbers the live ones in bulk, so the per-key
Python work of an epoch is one dict lookup per distinct key and one dict insert per new key.
"""

from __future__ import annotations

from itertools import compress, repeat
from typing import Any, Sequence

import numpy as np

_COMPACT_AT = 1 << 12
"""Dead slots tolerated however few are live (small tables are not renumbered over and over)."""


class KeySlots:
    """Keys at slots: ``keys[s]`` and their serialized bytes ``kbs[s]`` (object arrays, gathered in bulk;
    lengths ``kb_len``), identities ``ids[s]``, key groups ``groups[s]``; ``alive[s]`` is False once the
    key at ``s`` left."""

    def __init__(self) -> None:
        self._slot_of: dict[Any, int] = {}
        self.keys = np.empty(0, object)
        self.ids: list = []
        self.kbs = np.empty(0, object)
        self.kb_len = np.empty(0, np.int32)
        self.groups = np.empty(0, np.int64)
        self.alive = np.empty(0, bool)
        self._dead = 0

    def __len__(self) -> int:
        """Slots, dead ones included (the length of per-slot columns)."""
        return len(self.keys)

    def live(self) -> int:
        """Keys held."""
        return len(self.keys) - self._dead

    def find(self, ids: Sequence[Any]) -> np.ndarray:
        """The slot of each identity, -1 for a key not held."""
        slots = np.fromiter(map(self._slot_of.get, ids, repeat(-1)), np.int64, len(ids))
        found = np.flatnonzero(slots >= 0)
        slots[found[~self.alive[slots[found]]]] = -1
        return slots

    def add(self, keys: list, ids: list, groups: Sequence[int], kbs: Sequence[bytes]) -> np.ndarray:
        """Slots for keys not held (at the end)."""
        start, n = len(self.keys), len(keys)
        self.keys = np.concatenate((self.keys, np.fromiter(keys, object, n)))  # tuples stay elements
        self.ids += ids
        self.kbs = np.concatenate((self.kbs, np.array(kbs, object).reshape(n)))
        self.kb_len = np.concatenate((self.kb_len, np.fromiter(map(len, kbs), np.int32, n)))
        self.groups = np.concatenate((self.groups, np.asarray(groups, np.int64).reshape(n)))
        self.alive = np.concatenate((self.alive, np.ones(n, bool)))
        self._slot_of.update(zip(ids, range(start, start + n)))
        return np.arange(start, start + n)

    def release(self, slots: np.ndarray) -> None:
        """The keys at ``slots`` left."""
        self.alive[slots] = False
        self._dead += len(slots)

    def keys_at(self, slots: np.ndarray) -> list:
        """The keys at ``slots``."""
        return self.keys[slots].tolist()

    def compact(self) -> np.ndarray | None:
        """Renumber the live slots when more than two thirds are dead: the new slot of each old one (-1:
        dead), for the caller's per-slot references; None when nothing moved."""
        if self._dead <= max(_COMPACT_AT, 2 * (len(self.keys) - self._dead)):
            return None
        live = self.alive
        moved = np.cumsum(live) - 1
        moved[~live] = -1
        self.ids = list(compress(self.ids, live.tolist()))
        self.keys, self.kbs, self.kb_len, self.groups = self.keys[live], self.kbs[live], self.kb_len[live], self.groups[live]
        self.alive = np.ones(len(self.keys), bool)
        self._slot_of = dict(zip(self.ids, range(len(self.ids))))
        self._dead = 0
        return moved
