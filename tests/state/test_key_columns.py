"""Keys serialized and hashed as Arrow columns (``statekit.key_columns``) equal ``KEY_SERIALIZER`` and
``stable_hash`` key by key, at every msgpack header size, for sliced and chunk-offset columns; and
``deserialized_keys`` gives back exactly the keys, string columns in bulk, others one by one."""

from __future__ import annotations

import pyarrow as pa
import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from statekit import KEY_SERIALIZER, SerializationError, stable_hash
from statekit.key_columns import deserialized_keys, serialized_keys, stable_hashes_of

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


def _serialized(keys: list) -> pa.Array:
    return pa.array(KEY_SERIALIZER.dumps_many(keys), pa.large_binary())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=40), st.text(min_size=250, max_size=300)), max_size=40), st.integers(0, 5),
       st.booleans())
def test_deserialized_keys_give_back_string_keys(keys, skip, mixed):
    """Every str header size (fixstr, str8, str16 and str32 below), empty and non-ASCII strings, sliced
    columns; with a non-string key in the column, each key one by one, types kept."""
    keys = keys + ["s" * n for n in SIZES]
    if mixed:
        keys = keys + [7, ("t", 1), b"b", True, 1.5]
    got = deserialized_keys(_serialized(keys).slice(skip))
    assert got == keys[skip:] and [type(k) for k in got] == [type(k) for k in keys[skip:]]


def test_keys_that_do_not_decode_are_a_serialization_error():
    with pytest.raises(SerializationError):
        deserialized_keys(pa.array([KEY_SERIALIZER.dumps("a"), b"\xc1"], pa.large_binary()))  # never a msgpack byte
    with pytest.raises(SerializationError, match="cannot decode string keys"):
        deserialized_keys(pa.array([KEY_SERIALIZER.dumps("a"), b"\xa2\xff\xfe"], pa.large_binary()))  # not UTF-8
    assert deserialized_keys(pa.array([], pa.large_binary())) == []


@pytest.mark.parametrize("damaged", [b"\xa3abcd", b"\xa5ab", b"\xd9\x05abc", b"\xd9", b"\xda\x00\x01"])
def test_a_string_key_whose_header_disagrees_with_its_length_is_a_serialization_error(damaged):
    """A str header that claims more or fewer bytes than the key has (or is cut short) refuses, as
    ``KEY_SERIALIZER.loads`` does, naming the key's position."""
    with pytest.raises(SerializationError):
        KEY_SERIALIZER.loads(damaged)
    with pytest.raises(SerializationError, match="key 1"):
        deserialized_keys(pa.array([KEY_SERIALIZER.dumps("a"), damaged], pa.large_binary()))
