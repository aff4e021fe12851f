"""Keys serialized and hashed as Arrow columns (``statekit.key_columns``) equal ``KEY_SERIALIZER`` and
``stable_hash`` key by key, at every msgpack header size, for sliced and chunk-offset columns."""

from __future__ import annotations

import pyarrow as pa
import pytest

from statekit import KEY_SERIALIZER, stable_hash
from statekit.key_columns import serialized_keys, stable_hashes_of

SIZES = [0, 1, 31, 32, 33, 255, 256, 65535, 65536, 70_000]


@pytest.mark.parametrize("column", [
    pa.array(["s" * n for n in SIZES]),
    pa.array(["é" * n for n in (15, 16, 127, 128)], pa.large_string()),
    pa.array([b"b" * n for n in SIZES], pa.binary()),
    pa.array([b"b" * n for n in SIZES], pa.large_binary()).slice(2),
    pa.array([0, 127, 128, 255, 256, 65535, 65536, (1 << 32) - 1, 1 << 32, (1 << 63) - 1, -1, -32, -33, -128, -129,
              -32768, -32769, -(1 << 31), -(1 << 31) - 1, -(1 << 63)]),
    pa.array([-128, 0, 127], pa.int8()).slice(1),
    pa.array([0, (1 << 32) - 1], pa.uint32()),
], ids=["str", "large_str", "bin", "large_bin_sliced", "int64", "int8_sliced", "uint32"])
def test_serialized_keys_equal_the_key_serializer_and_hash_alike(column):
    want = KEY_SERIALIZER.dumps_many(column.to_pylist())
    got = serialized_keys(column)
    assert got.to_pylist() == want
    short = pa.array([b for b in want if len(b) <= 64], pa.large_binary())
    assert stable_hashes_of(short).tolist() == [stable_hash(b) for b in short.to_pylist()]


def test_columns_not_taken_are_left_to_one_by_one_serializing():
    assert serialized_keys(pa.array(["a", None])) is None
    assert serialized_keys(pa.array([1], pa.uint64())) is None
    assert serialized_keys(pa.array([1.5])) is None and serialized_keys(pa.array([True])) is None
    assert stable_hashes_of(pa.array([b"x" * 65], pa.large_binary())) is None
