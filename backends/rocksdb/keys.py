"""Byte layout of the RocksDB backend: cell keys, element suffixes, TTL stamps.

A cell is one (key, namespace) of one state; each state has its own column family, so keys
carry no state id. Cell key: ``[key group: 2 bytes BE][msgpack key][msgpack namespace]``.
Value, reducing and aggregating state store one entry under the cell key; list state one
entry per element under ``cell + [8-byte BE sequence number]`` (insertion order, appends need
no read); map state one entry per user key under ``cell + msgpack(user key)``. msgpack is
prefix-free, so no cell key is a prefix of another cell's keys: a prefix scan of a cell key
yields exactly its elements, and a scan of 2 key-group bytes exactly one key group.
With TTL each stored value is prefixed by its last-access time (8 bytes, signed BE).
"""

from __future__ import annotations

from struct import Struct
from typing import Any, Iterator

from statekit.serialization import KEY_SERIALIZER, loads_prefix

_STAMP = Struct(">q")
STAMP_SIZE = _STAMP.size
SEQ_SIZE = 8

stamp = _STAMP.pack
"""TTL timestamp -> the 8 bytes prefixed to a stored value."""


def stamp_of(value: bytes) -> int:
    """The TTL timestamp of stamped value bytes."""
    return _STAMP.unpack_from(value)[0]


def key_group_prefixes(max_parallelism: int) -> list[bytes]:
    """The 2-byte prefix of every key group, indexed by key group."""
    return [kg.to_bytes(2, "big") for kg in range(max_parallelism)]


def decode_cell(key: bytes) -> tuple[int, Any, Any, int]:
    """(key group, key, namespace, length of the cell key) of a stored key."""
    (k, ns), used = loads_prefix(key[2:], 2)
    return int.from_bytes(key[:2], "big"), k, ns, 2 + used


def decode_user_key(key: bytes, cell_len: int) -> Any:
    """The map user key stored after the cell key."""
    return KEY_SERIALIZER.loads(key[cell_len:])


def scan(db: Any, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
    """(key, value) of every entry of ``db`` whose key starts with ``prefix``, in key order."""
    it = db.iter()
    it.seek(prefix)
    while it.valid():
        k = it.key()
        if not k.startswith(prefix):
            return
        yield k, it.value()
        it.next()


def scan_from(db: Any, start: bytes | None) -> Iterator[tuple[bytes, bytes]]:
    """(key, value) of every entry of ``db`` from ``start`` (None: the first) to the end."""
    it = db.iter()
    if start is None:
        it.seek_to_first()
    else:
        it.seek(start)
    while it.valid():
        yield it.key(), it.value()
        it.next()
