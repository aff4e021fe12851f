"""Keys: a backend serves only its key groups and its max parallelism, refuses invalid keys, tells keys apart
by their serialized bytes, and resolves many keys at once exactly as one at a time.
"""

from __future__ import annotations

import pytest

from statekit import (KEY_SERIALIZER, InvalidKeyError, KeyGroupError, ListStateDescriptor, MapStateDescriptor,
                      NoCurrentKeyError, ReducingStateDescriptor, StateConfig, ValueStateDescriptor, create_backend,
                      key_group_for, key_groups_for_partition, stable_hash)

__all__ = [
    "test_backend_rejects_keys_outside_its_key_groups",
    "test_backend_key_groups_must_be_valid",
    "test_backend_uses_its_max_parallelism",
    "test_invalid_keys_are_rejected",
    "test_equal_tuple_keys_address_the_same_state",
    "test_lookalike_keys_are_separate_keys",
    "test_resolve_keys_refuses_like_set_current_key",
    "test_bulk_key_resolution_equals_one_key_at_a_time",
    "test_key_array_resolution_equals_resolve_key_columns",
]


def key_in_group_range(groups: range, max_parallelism: int = 128, prefix: str = "k") -> str:
    return next(f"{prefix}{i}" for i in range(100_000) if key_group_for(f"{prefix}{i}", max_parallelism) in groups)


def test_backend_rejects_keys_outside_its_key_groups(make_backend):
    mine = key_groups_for_partition(0, 2, 128)
    theirs = key_groups_for_partition(1, 2, 128)
    b = make_backend(key_groups=mine)
    inside = key_in_group_range(mine)
    outside = key_in_group_range(theirs)
    b.set_current_key(inside)
    assert b.current_key_group == key_group_for(inside, 128)
    v = b.get_state(ValueStateDescriptor("v"))
    v.update(1)
    with pytest.raises(KeyGroupError, match=str(key_group_for(outside, 128))):
        b.set_current_key(outside)
    with pytest.raises(KeyGroupError):
        b.set_current_key(outside)
    assert b.get_current_key() == inside
    assert v.value() == 1


def test_backend_key_groups_must_be_valid(make_backend):
    for bad in (range(0, 200), range(5, 5), [1, 2, 5]):
        with pytest.raises(KeyGroupError):
            make_backend(key_groups=bad)
    b = make_backend(key_groups=[3, 4, 5])
    assert b.key_groups == range(3, 6)


def test_backend_uses_its_max_parallelism(make_backend):
    b = make_backend(max_parallelism=16, key_groups=key_groups_for_partition(1, 4, 16))
    key = key_in_group_range(range(4, 8), 16)
    b.set_current_key(key)
    assert b.current_key_group == key_group_for(key, 16)


@pytest.mark.parametrize("bad", [None, float("nan"), [1, 2], {"a": 1}, {1, 2}, object(), ("ok", object())],
                         ids=["None", "nan", "list", "dict", "set", "object", "tuple-with-object"])
def test_invalid_keys_are_rejected(backend, bad):
    with pytest.raises(InvalidKeyError):
        backend.set_current_key(bad)
    with pytest.raises(NoCurrentKeyError):
        backend.get_current_key()


def test_equal_tuple_keys_address_the_same_state(backend):
    st = backend.get_state(ValueStateDescriptor("v"))
    backend.set_current_key(("a", 1))
    st.update("x")
    backend.set_current_key(tuple(["a", 1]))
    assert st.value() == "x"
    backend.set_current_key(("a", 2))
    assert st.value() is None


LOOKALIKES = [1, 1.0, True, 0.0, -0.0, (1, "a"), (True, "a"), (1.0, "a"), "1", b"1"]
"""Keys that Python's ``==`` mixes up (``1 == 1.0 == True``, ``0.0 == -0.0``) but that serialize apart."""


def test_lookalike_keys_are_separate_keys(make_backend):
    """``1``, ``1.0``, ``True`` (and ``0.0``/``-0.0``, and tuples of them) are distinct keys for every
    state kind, for timers and through a snapshot restored into two key-group ranges."""
    b = make_backend()
    states = {"value": b.get_state(ValueStateDescriptor("v")), "list": b.get_state(ListStateDescriptor("l")),
              "map": b.get_state(MapStateDescriptor("m")),
              "reducing": b.get_state(ReducingStateDescriptor("r", lambda x, y: x + y))}
    svc = b.timer_service("t", None)
    for i, key in enumerate(LOOKALIKES):
        b.set_current_key(key)
        states["value"].update(i)
        states["list"].add(i)
        states["map"].put("k", i)
        states["reducing"].add(i)
        svc.register_event_time_timer("ns", 100 + i)

    def check(backend, keys):
        got = {}
        for key in keys:
            backend.set_current_key(key)
            got[repr(key)] = (backend.get_state(ValueStateDescriptor("v")).value(),
                              backend.get_state(ListStateDescriptor("l")).get(),
                              backend.get_state(MapStateDescriptor("m")).get("k"),
                              backend.get_state(ReducingStateDescriptor("r", lambda x, y: x + y)).get())
        index = {repr(k): i for i, k in enumerate(LOOKALIKES)}  # by repr: list.index would match 1 for True
        assert got == {repr(k): (index[repr(k)], [index[repr(k)]], index[repr(k)], index[repr(k)]) for k in keys}

    check(b, LOOKALIKES)
    assert sorted(repr(t.key) for t in svc.event_time_timers()) == sorted(map(repr, LOOKALIKES))
    resolved, _ = b.resolve_keys(LOOKALIKES)
    assert len({kb for _, _, kb in resolved}) == len(LOOKALIKES)
    assert [repr(v) for v in states["value"].get_internal_many(resolved)] == [repr(i) for i in range(len(LOOKALIKES))]
    snap = b.snapshot_logical()
    assert len(snap["states"]["v"]["entries"]) == len(LOOKALIKES)
    for part in range(2):
        kgs = key_groups_for_partition(part, 2, b.max_parallelism)
        mine = [k for k in LOOKALIKES if key_group_for(k, b.max_parallelism) in kgs]
        restored = make_backend(key_groups=kgs)
        restored.restore_logical(snap)
        check(restored, mine)
        assert restored.num_entries() == len(mine) * 5  # four states and one timer per key


def test_resolve_keys_refuses_like_set_current_key(backend):
    resolved, refused = backend.resolve_keys(["a", None, float("nan"), ["x"], 7])
    assert [r is None for r in resolved] == [False, True, True, True, False]
    assert sorted(refused) == [1, 2, 3] and all(isinstance(e, InvalidKeyError) for e in refused.values())
    assert "not hashable" in str(refused[3])
    backend.set_current_key("a")
    assert resolved[0] == backend.current_key_scope()
    outside = create_backend(StateConfig(backend=backend.name), key_groups=[key_group_for("a")])
    other = next(k for k in range(100) if key_group_for(k) != key_group_for("a"))
    with pytest.raises(KeyGroupError):
        outside.resolve_keys(["a", other])
    outside.close()


def test_bulk_key_resolution_equals_one_key_at_a_time(make_backend):
    """``resolve_keys`` (cold and with a warm cache), ``resolve_key_columns`` and ``key_groups_of`` of many
    keys at once equal ``set_current_key``'s scope and ``key_group_of`` of each key; a key it cannot
    serialize is refused under its index, as ``set_current_key`` refuses it."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    keys_ = st.one_of(st.integers(-(1 << 70), 1 << 70), st.text(max_size=4), st.binary(max_size=3), st.booleans(),
                      st.floats(allow_nan=False, width=32), st.tuples(st.integers(-3, 3), st.text(max_size=2)))

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(keys=st.lists(keys_, max_size=40))
    def check(keys):
        bulk, single, by_column = make_backend(), make_backend(), make_backend()
        for _ in range(2):  # cold, then warm
            resolved, refused = bulk.resolve_keys(keys)
            for i, key in enumerate(keys):
                try:
                    single.set_current_key(key)
                except InvalidKeyError as e:
                    assert resolved[i] is None and str(refused[i]) == str(e)
                    continue
                assert i not in refused and repr(resolved[i]) == repr(single.current_key_scope())
            groups, kbs, refused_columns = by_column.resolve_key_columns(keys)
            assert {i: str(e) for i, e in refused_columns.items()} == {i: str(e) for i, e in refused.items()}
            assert [(g, b) for g, b in zip(groups.tolist(), kbs)] == [
                (-1, b"") if r is None else (r[1], r[2]) for r in resolved]
        serializable = [k for i, k in enumerate(keys) if i not in refused]
        cold = make_backend()
        expected = [key_group_for(k, bulk.max_parallelism) for k in serializable]
        assert cold.key_groups_of(serializable) == bulk.key_groups_of(serializable) == expected
        for b in (bulk, single, cold, by_column):
            b.close()

    check()


def test_key_array_resolution_equals_resolve_key_columns(make_backend):
    """``resolve_key_array`` of an Arrow column of plain keys (strings of every header size, binaries,
    ints of every width) equals ``resolve_key_columns`` of its values, with each key's ``stable_hash``;
    columns it does not take (nulls, uint64, keys too long to hash column-wise) give None, and a key
    outside the backend's key groups raises the KeyGroupError ``set_current_key`` raises."""
    import pyarrow as pa
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    long_text = st.text(max_size=3).map(lambda t: t * 40)  # empty, or past fixstr / the hashed length
    columns = st.one_of(
        st.lists(st.text(max_size=40) | long_text, max_size=30).map(lambda v: pa.array(v, pa.string())),
        st.lists(st.text(max_size=5), max_size=30).map(lambda v: pa.array(v, pa.large_string())),
        st.lists(st.binary(max_size=40), max_size=30).map(lambda v: pa.array(v, pa.binary())),
        st.lists(st.integers(-(1 << 63), (1 << 63) - 1) | st.integers(-300, 300) | st.sampled_from(
            [127, 128, 255, 256, 65535, 65536, (1 << 32) - 1, 1 << 32, -32, -33, -128, -129, -32768, -32769,
             -(1 << 31), -(1 << 31) - 1]), max_size=30).map(lambda v: pa.array(v, pa.int64())),
        st.lists(st.integers(-128, 127), max_size=30).map(lambda v: pa.array(v, pa.int8())),
        st.lists(st.integers(0, (1 << 32) - 1), max_size=30).map(lambda v: pa.array(v, pa.uint32())),
        st.lists(st.integers(0, 5), min_size=1, max_size=5).map(lambda v: pa.array(v, pa.uint64())),
        st.lists(st.text(max_size=3) | st.none(), min_size=1, max_size=5).map(lambda v: pa.array(v, pa.string())),
    )
    backend = make_backend()

    def same(column):
        values = column.to_pylist()
        got = backend.resolve_key_array(column)
        long = any(len(KEY_SERIALIZER.dumps(v)) > 64 for v in values if v is not None)
        if column.null_count or pa.types.is_uint64(column.type) or long:
            assert got is None
            return
        groups, kbs, hashes = got
        want_groups, want_kbs, refused = backend.resolve_key_columns(values)
        assert not refused and groups.tolist() == want_groups.tolist() and kbs.to_pylist() == want_kbs
        assert hashes.tolist() == [stable_hash(b) for b in want_kbs]

    @settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(column=columns, offset=st.integers(0, 3))
    def check(column, offset):
        same(column.slice(min(offset, len(column))))

    check()
    edges = [0, 1, 127, 128, 255, 256, 65535, 65536, (1 << 32) - 1, 1 << 32, (1 << 63) - 1]
    same(pa.array(edges + [-1, -32, -33, -128, -129, -32768, -32769, -(1 << 31), -(1 << 31) - 1, -(1 << 63)]))
    same(pa.array(["x" * n for n in (0, 1, 30, 31, 32, 33, 62)]))
    same(pa.array([b"y" * n for n in (0, 1, 31, 32, 61)]))
    backend.close()
    outside = make_backend(key_groups=[key_group_for("a")])
    other = next(k for k in ["b", "c", "d", "e"] if key_group_for(k) != key_group_for("a"))
    with pytest.raises(KeyGroupError, match=repr(other)):
        outside.resolve_key_array(pa.array(["a", other]))
    outside.close()
