"""KeySlots: the keys a columnar engine holds, each at a slot (an index into per-key columns), found and
added for a whole epoch at once with no per-key Python work.

A key is known by its serialized bytes (``statekit.key_identity``: keys are one exactly when they
serialize alike). The bytes of every slot live in one arena; a numpy open-addressing table indexed by
the bytes' ``stable_hash`` finds a slot, and a hit is verified against the stored bytes, so a hash
collision costs a probe, never a wrong key. Slots are only appended: a key that leaves is marked dead,
and when more than two thirds of the slots are dead ``compact`` renumbers the live ones in bulk. No
Python object is kept per key: a key is made from its bytes when it is asked for (``keys_at``), as a
restored key is, so 10^6 held keys cost their bytes, not 10^6 objects.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from statekit import binary_spans, deserialized_keys, stable_hashes

_COMPACT_AT = 1 << 12
"""Dead slots tolerated however few are live (small tables are not renumbered over and over)."""
_EMPTY = -1


def _grown(array: np.ndarray, need: int) -> np.ndarray:
    """``array`` with room for ``need`` items (capacity doubled, contents kept)."""
    if need <= len(array):
        return array
    out = np.empty(max(need, 2 * len(array), 64), array.dtype)
    out[:len(array)] = array
    return out


class KeyBytes(NamedTuple):
    """Serialized keys as one column: an Arrow large_binary array and each key's ``stable_hash``."""

    array: pa.Array
    hashes: np.ndarray

    @classmethod
    def of(cls, kbs: Sequence[bytes]) -> KeyBytes:
        return cls(pa.array(kbs, pa.large_binary()), stable_hashes(kbs))

    def take(self, index: np.ndarray) -> KeyBytes:
        return KeyBytes(self.array.take(index), self.hashes[index])


class KeySlots:
    """Keys at slots: ``groups[s]`` (the key group of the key at ``s``), ``kb_len[s]`` (its serialized
    length); ``alive[s]`` is False once the key at ``s`` left. The serialized keys are one Arrow column by
    slot (an arena and its offsets), so gathering them is one ``take``."""

    def __init__(self) -> None:
        self._n = 0
        self._dead = 0
        self._groups = np.empty(0, np.int32)  # per-slot columns as narrow as their values: 10^6 slots each
        self._alive = np.empty(0, bool)
        self._hash = np.empty(0, np.uint32)  # stable_hash is 32 bits
        self._len = np.empty(0, np.int32)
        self._offsets = np.zeros(1, np.int64)  # slot s's bytes: arena[offsets[s]:offsets[s + 1]]
        self._arena = np.empty(0, np.uint8)
        self._table = np.full(1024, _EMPTY, np.int32)  # hash directory: a slot, or _EMPTY
        self._entries = 0

    # -- columns by slot -------------------------------------------------------------------------
    def __len__(self) -> int:
        """Slots, dead ones included (the length of per-slot columns)."""
        return self._n

    def live(self) -> int:
        """Keys held."""
        return self._n - self._dead

    @property
    def groups(self) -> np.ndarray:
        return self._groups[:self._n]

    @property
    def kb_len(self) -> np.ndarray:
        return self._len[:self._n]

    @property
    def alive(self) -> np.ndarray:
        return self._alive[:self._n]

    def keys_at(self, slots: np.ndarray) -> list:
        """The keys at ``slots``, made from their bytes (``KEY_SERIALIZER.loads``; strings in bulk)."""
        return deserialized_keys(self.key_bytes(slots))

    def key_bytes(self, slots: np.ndarray) -> pa.Array:
        """The serialized keys at ``slots`` as an Arrow large_binary column (what sorts and joins them in C)."""
        used = self._offsets[self._n]
        arena = pa.Array.from_buffers(pa.large_binary(), self._n, [None, pa.py_buffer(self._offsets[:self._n + 1]),
                                                                   pa.py_buffer(self._arena[:used])])
        return arena.take(slots)

    def key_blob(self, slots: np.ndarray) -> bytes:
        """The serialized keys at ``slots`` back to back (their lengths: ``kb_len[slots]``)."""
        if not len(slots):
            return b""
        offsets, data = binary_spans(self.key_bytes(slots))
        return data[offsets[0]:offsets[-1]].tobytes()

    # -- finding and adding ----------------------------------------------------------------------
    def find(self, kb: KeyBytes) -> np.ndarray:
        """The slot of each serialized key, -1 for a key not held."""
        out = np.full(len(kb.hashes), -1, np.int64)
        mask = len(self._table) - 1
        pos = kb.hashes & mask
        lengths = pc.binary_length(kb.array).to_numpy(zero_copy_only=False)
        todo = np.arange(len(out))
        while len(todo):
            slot = self._table[pos[todo]]
            todo, slot = todo[slot != _EMPTY], slot[slot != _EMPTY]  # an empty entry ends the search
            same = ((self._hash[slot] == kb.hashes[todo]) & self._alive[slot]
                    & (self._len[slot] == lengths[todo]))
            cand, cslot = todo[same], slot[same]
            equal = pc.equal(kb.array.take(cand), self.key_bytes(cslot)).to_numpy(zero_copy_only=False)
            out[cand[equal]] = cslot[equal]
            todo = todo[out[todo] < 0]
            pos[todo] = (pos[todo] + 1) & mask
        return out

    def add(self, groups: Sequence[int], kb: KeyBytes) -> np.ndarray:
        """Slots for the serialized keys ``kb`` (not held, distinct from each other) of key groups
        ``groups``, at the end."""
        start, m = self._n, len(kb.hashes)
        end = start + m
        for name in ("_groups", "_alive", "_hash", "_len"):
            setattr(self, name, _grown(getattr(self, name), end))
        self._offsets = _grown(self._offsets, end + 1)
        self._groups[start:end] = np.asarray(groups, np.int64).reshape(m)
        self._alive[start:end] = True
        self._hash[start:end] = kb.hashes
        offsets, data = binary_spans(kb.array)
        used = self._offsets[start]
        self._offsets[start + 1:end + 1] = offsets[1:] - offsets[0] + used
        self._len[start:end] = np.diff(offsets)
        size = offsets[-1] - offsets[0]
        self._arena = _grown(self._arena, used + size)
        self._arena[used:used + size] = data[offsets[0]:offsets[-1]]
        self._n = end
        slots = np.arange(start, end)
        if 2 * (self._entries + m) > len(self._table):
            self._rebuild()  # enters every live slot, these included
        else:
            self._insert(slots)
        return slots

    def _insert(self, slots: np.ndarray) -> None:
        """Enter ``slots`` in the hash directory (linear probing; of keys meeting at one free entry, one
        takes it and the others probe on)."""
        mask = len(self._table) - 1
        pos = self._hash[slots] & mask
        todo = np.arange(len(slots))
        while len(todo):
            p = pos[todo]
            free = self._table[p] == _EMPTY
            self._table[p[free]] = slots[todo[free]]  # of keys meeting at one free entry, one lands
            todo = todo[~(free & (self._table[p] == slots[todo]))]
            pos[todo] = (pos[todo] + 1) & mask
        self._entries += len(slots)

    def _rebuild(self) -> None:
        """A directory of the live slots, a quarter full (dead slots' entries dropped)."""
        live = np.flatnonzero(self.alive)
        size = 1024
        while size < 4 * len(live):
            size *= 2
        self._table = np.full(size, _EMPTY, np.int32)
        self._entries = 0
        self._insert(live)

    # -- leaving ---------------------------------------------------------------------------------
    def release(self, slots: np.ndarray) -> None:
        """The keys at ``slots`` left (their directory entries stay until the next rebuild; ``find`` skips them)."""
        self._alive[slots] = False
        self._dead += len(slots)

    def compact(self) -> np.ndarray | None:
        """Renumber the live slots when more than two thirds are dead: the new slot of each old one (-1:
        dead), for the caller's per-slot references; None when nothing moved."""
        if self._dead <= max(_COMPACT_AT, 2 * self.live()):
            return None
        live = self.alive.copy()
        moved = np.cumsum(live) - 1
        moved[~live] = -1
        offsets, data = binary_spans(self.key_bytes(np.flatnonzero(live)))
        for name in ("_groups", "_hash", "_len"):
            setattr(self, name, getattr(self, name)[:self._n][live])
        self._offsets, self._arena = offsets - offsets[0], data[offsets[0]:offsets[-1]].copy()
        self._n, self._dead = int(live.sum()), 0
        self._alive = np.ones(self._n, bool)
        self._rebuild()
        return moved
