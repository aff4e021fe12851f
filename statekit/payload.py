"""Snapshot payload encoding: statekit's exact-type msgpack, compressed with zstd (level 1, cheap).

A payload starts with a 4-byte magic and the uncompressed length, so a truncated or foreign file
is reported as such instead of as a msgpack error deep inside a restore.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from .errors import SerializationError
from .serialization import KEY_SERIALIZER
from .snapshot_header import PAYLOAD_CODEC

MAGIC = PAYLOAD_CODEC.encode()
_CODEC = pa.Codec("zstd", compression_level=1)


def encode(obj: Any) -> bytes:
    """msgpack (tuples stay tuples) then zstd."""
    raw = KEY_SERIALIZER.dumps(obj)
    return MAGIC + len(raw).to_bytes(8, "big") + _CODEC.compress(raw, asbytes=True)


def decode(data: bytes) -> Any:
    """The object ``encode`` was given; SerializationError when ``data`` is not such a payload."""
    if len(data) < 12 or data[:4] != MAGIC:
        raise SerializationError(f"not a statekit snapshot payload of codec {PAYLOAD_CODEC} ({len(data)} bytes "
                                 f"starting {bytes(data[:4])!r})")
    size = int.from_bytes(data[4:12], "big")
    try:
        raw = _CODEC.decompress(data[12:], decompressed_size=size, asbytes=True)
    except Exception as e:  # pyarrow raises OSError/ArrowException on corrupt frames
        raise SerializationError(f"cannot decompress snapshot payload: {e}") from None
    return KEY_SERIALIZER.loads(raw)
