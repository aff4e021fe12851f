"""Keys as Arrow columns: an Arrow column of plain keys (strings, binaries, integers; no nulls) serialized
exactly as ``KEY_SERIALIZER`` serializes each key, and hashed exactly as ``stable_hash`` hashes it, with
numpy over the whole column and no Python object per key (what a columnar engine meets 10^6 keys with);
and back: the keys of a column of serialized keys, string keys unwrapped in bulk.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pyarrow as pa

from .keygroups import fmix32_many
from .serialization import KEY_SERIALIZER, SerializationError

_MAX_HASHED = 64
"""Longest serialized key hashed column-wise (one numpy pass per byte position); longer ones go one by one."""


def binary_spans(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Offsets (``len + 1``, int64) and data buffer of a (large) string or binary column (numpy; the data
    a view): value i is ``data[offsets[i]:offsets[i + 1]]``."""
    width = np.int64 if pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type) else np.int32
    offsets = np.frombuffer(array.buffers()[1], width, len(array) + 1, width().itemsize * array.offset)
    data = array.buffers()[2]
    return offsets.astype(np.int64), (np.frombuffer(data, np.uint8) if data is not None else np.empty(0, np.uint8))


def _column(lengths: np.ndarray, heads: np.ndarray, head_len: np.ndarray, payload: np.ndarray) -> pa.Array:
    """A large_binary column whose value i is ``heads[i, :head_len[i]]`` then the next ``lengths[i] -
    head_len[i]`` bytes of ``payload`` (payloads back to back in row order)."""
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    out = np.empty(int(offsets[-1]), np.uint8)
    in_head = np.zeros(len(out), bool)
    for k in range(heads.shape[1]):
        rows = np.flatnonzero(head_len > k)
        out[offsets[rows] + k] = heads[rows, k]
        in_head[offsets[rows] + k] = True
    out[~in_head] = payload
    return pa.Array.from_buffers(pa.large_binary(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(out)])


def _be(values: np.ndarray, width: int) -> np.ndarray:
    """Big-endian bytes of each value, ``width`` columns (the low bytes)."""
    return values.astype(">u8").view(np.uint8).reshape(-1, 8)[:, 8 - width:]


def _sized_heads(lengths: np.ndarray, fix: int | None, codes: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    """msgpack's header of a str (``fix``: fixstr's base) or bin of each length: (bytes, header length)."""
    heads = np.zeros((len(lengths), 5), np.uint8)
    head_len = np.where(lengths < 256, 2, np.where(lengths < 65536, 3, 5))
    heads[:, 0] = np.where(lengths < 256, codes[0], np.where(lengths < 65536, codes[1], codes[2]))
    heads[:, 1:5] = _be(lengths, 4)
    for size, width in ((2, 1), (3, 2)):  # 8- and 16-bit lengths: their low bytes follow the code
        rows = head_len == size
        heads[rows, 1:1 + width] = heads[rows, 5 - width:5]
    if fix is not None:
        short = lengths < 32
        heads[short, 0] = fix | lengths[short]
        head_len[short] = 1
    return heads, head_len


def _ints(values: np.ndarray) -> pa.Array:
    """msgpack of int64 values as msgpack-python packs them (the smallest form; non-negative as unsigned)."""
    v = values.astype(np.int64)
    fix = ((v >= 0) & (v < 128)) | ((v < 0) & (v >= -32))
    width = np.select([fix, (v >= 0) & (v < 1 << 8), (v >= 0) & (v < 1 << 16), (v >= 0) & (v < 1 << 32), v >= 0,
                       v >= -(1 << 7), v >= -(1 << 15), v >= -(1 << 31)], [0, 1, 2, 4, 8, 1, 2, 4], 8)
    code = np.select([fix, (v >= 0) & (width == 1), (v >= 0) & (width == 2), (v >= 0) & (width == 4), v >= 0,
                      width == 1, width == 2, width == 4], [v & 0xFF, 0xCC, 0xCD, 0xCE, 0xCF, 0xD0, 0xD1, 0xD2], 0xD3)
    be = _be(v.view(np.uint64), 8)
    heads = np.zeros((len(v), 9), np.uint8)
    heads[:, 0] = code
    for w in (1, 2, 4, 8):
        rows = width == w
        heads[rows, 1:1 + w] = be[rows, 8 - w:]
    return _column(1 + width, heads, 1 + width, np.empty(0, np.uint8))


def serialized_keys(array: pa.Array) -> pa.Array | None:
    """Each key of ``array`` serialized as ``KEY_SERIALIZER.dumps`` does, as a large_binary column; None
    for a column this does not take (nulls; other types; uint64): serialize those keys one by one."""
    t = array.type
    if array.null_count:
        return None
    if pa.types.is_integer(t) and not pa.types.is_uint64(t):
        return _ints(array.to_numpy(zero_copy_only=False))
    is_str = pa.types.is_string(t) or pa.types.is_large_string(t)
    if not (is_str or pa.types.is_binary(t) or pa.types.is_large_binary(t)):
        return None
    offsets, data = binary_spans(array)
    lengths = np.diff(offsets)
    heads, head_len = _sized_heads(lengths, 0xA0 if is_str else None,
                                   (0xD9, 0xDA, 0xDB) if is_str else (0xC4, 0xC5, 0xC6))
    return _column(head_len + lengths, heads, head_len, data[offsets[0]:offsets[-1]])


def _str_head_lengths(first: np.ndarray) -> np.ndarray | None:
    """msgpack's header length of each value whose first byte is ``first`` when every one is a str's
    (fixstr, str8, str16, str32); None otherwise."""
    head_len = np.select([(first >= 0xA0) & (first <= 0xBF), first == 0xD9, first == 0xDA, first == 0xDB],
                         [1, 2, 3, 5], 0)
    return None if (head_len == 0).any() else head_len


def _check_str_lengths(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, head_len: np.ndarray) -> None:
    """SerializationError naming the first key whose str header is cut short or gives another length
    than the bytes after it (what ``KEY_SERIALIZER.loads`` refuses one by one)."""
    whole = lengths >= head_len
    declared = np.where(head_len == 1, data[starts] & 0x1F, 0).astype(np.int64)
    for k in range(1, 5):  # str8/16/32: the length's big-endian bytes follow the code
        at = np.flatnonzero(whole & (head_len > k))
        declared[at] = (declared[at] << 8) | data[starts[at] + k]
    bad = np.flatnonzero(~whole | (declared != lengths - head_len))
    if len(bad):
        i = int(bad[0])
        raise SerializationError(f"cannot decode string keys: key {i} has a str header of {int(head_len[i])} bytes "
                                 f"for {int(declared[i]) if whole[i] else '?'} bytes, and {int(lengths[i])} bytes in all")


def deserialized_keys(keys: pa.Array) -> list:
    """The keys of a large_binary column of serialized keys (``KEY_SERIALIZER.loads`` of each): a
    column of string keys has its headers cut in bulk and becomes Python strings in C; any other
    column is read key by key. SerializationError for a key that does not decode."""
    offsets, data = binary_spans(keys)
    lengths = np.diff(offsets)
    head_len = _str_head_lengths(data[offsets[:-1]]) if len(keys) and lengths.min() > 0 else None
    if head_len is None:
        return [KEY_SERIALIZER.loads(kb) for kb in keys.to_pylist()]
    _check_str_lengths(data, offsets[:-1], lengths, head_len)
    body = data[offsets[0]:offsets[-1]]
    starts = offsets[:-1] - offsets[0]  # +1 at each header's first byte, -1 after its last: inside one, 1
    edges = np.bincount(starts, minlength=len(body) + 1) - np.bincount(starts + head_len, minlength=len(body) + 1)
    payload = body[np.cumsum(edges[:-1]) == 0]
    out_offsets = np.zeros(len(keys) + 1, np.int64)
    np.cumsum(lengths - head_len, out=out_offsets[1:])
    strings = pa.Array.from_buffers(pa.large_string(), len(keys), [None, pa.py_buffer(out_offsets), pa.py_buffer(payload)])
    try:
        strings.validate(full=True)
    except pa.ArrowInvalid as e:
        raise SerializationError(f"cannot decode string keys: {e}") from None
    return strings.to_pylist()


@lru_cache(maxsize=1)
def _crc_table() -> np.ndarray:
    c = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        c = np.where(c & 1, np.uint32(0xEDB88320) ^ (c >> np.uint32(1)), c >> np.uint32(1))
    return c.astype(np.int64)


def stable_hashes_of(keys: pa.Array) -> np.ndarray | None:
    """``stable_hash`` of each serialized key of a large_binary column, as int64 (CRC32 one byte
    position at a time over all keys, then murmur3's finalizer); None when a key is longer than
    ``_MAX_HASHED`` bytes (hash those one by one)."""
    offsets, data = binary_spans(keys)
    lengths = np.diff(offsets)
    if len(lengths) and lengths.max() > _MAX_HASHED:
        return None
    by_len = np.argsort(-lengths, kind="stable")
    starts, longest_first = offsets[:-1][by_len], lengths[by_len]
    reach = np.searchsorted(-longest_first, -np.arange(1, _MAX_HASHED + 1), "right")  # keys longer than j
    table = _crc_table()
    crc = np.full(len(lengths), 0xFFFFFFFF, np.int64)
    for j in range(int(lengths.max()) if len(lengths) else 0):
        k = reach[j]
        head = crc[:k]
        crc[:k] = table[(head ^ data[starts[:k] + j]) & 0xFF] ^ (head >> 8)
    h = np.empty(len(lengths), np.uint64)
    h[by_len] = (crc ^ 0xFFFFFFFF).astype(np.uint64)
    return fmix32_many(h)
