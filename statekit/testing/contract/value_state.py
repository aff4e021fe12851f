"""Value state: ``value``/``update``/``clear``, defaults, and the operators' internal access
(``get_internal``/``update_internal`` and their batched forms) equal to one call per key.
"""

from __future__ import annotations

import pytest

from statekit import StateTtlConfig, ValueStateDescriptor

from .kinds import NEVER, ON_READ, ON_WRITE, RETURN, TTL

__all__ = [
    "test_value_state_methods",
    "test_value_state_without_default_is_none",
    "test_value_reads_are_not_aliased_to_storage",
    "test_internal_access_hands_the_stored_value_itself",
    "test_batched_value_access_equals_one_call_per_key",
]


def test_value_state_methods(backend):
    backend.set_current_key("u1")
    count = backend.get_state(ValueStateDescriptor("count", default=0))
    assert count.value() == 0
    count.update(count.value() + 1)
    count.update(count.value() + 1)
    assert count.value() == 2
    count.clear()
    assert count.value() == 0
    count.update(5)
    count.update(None)
    assert count.value() == 0
    assert backend.num_entries() == 0


def test_value_state_without_default_is_none(backend):
    backend.set_current_key("u1")
    v = backend.get_state(ValueStateDescriptor("v"))
    assert v.value() is None
    v.update(0)
    assert v.value() == 0
    v.update(False)
    assert v.value() is False


def test_value_reads_are_not_aliased_to_storage(backend):
    backend.set_current_key("u")
    v = backend.get_state(ValueStateDescriptor("v"))
    v.update([1, 2])
    got = v.value()
    got.append(3)
    v.update(got)
    assert v.value() == [1, 2, 3]


def test_internal_access_hands_the_stored_value_itself(backend):
    """Operators' bookkeeping (Flink's getInternal/updateInternal) skips the copies users get."""
    backend.set_current_key("k")
    st = backend.get_state(ValueStateDescriptor("internal"))
    acc = [1, 2]
    st.update_internal(acc)
    assert st.get_internal() is acc and st.value() == acc and st.value() is not acc
    st.update_internal(None)
    assert st.get_internal() is None


def _batched_ops():
    from hypothesis import strategies as st

    keys = st.lists(st.sampled_from(["a", "b", 1, 2, (3, "x"), "c"]), min_size=0, max_size=5, unique=True)
    value = st.one_of(st.none(), st.integers(-5, 5), st.lists(st.integers(0, 3), max_size=3))
    return st.lists(st.one_of(
        st.tuples(st.just("read"), keys, st.sampled_from([None, "ns"])),
        st.tuples(st.just("write"), keys.flatmap(lambda ks: st.tuples(st.just(ks), st.lists(value, min_size=len(ks), max_size=len(ks)))),
                  st.sampled_from([None, "ns"])),
        st.tuples(st.just("tick"), st.integers(0, 60), st.just(None))), max_size=25)


@pytest.mark.parametrize("ttl", [None, "on-write", "on-read", "return-expired"])
def test_batched_value_access_equals_one_call_per_key(make_backend, clock, ttl):
    """``get_internal_many``/``update_internal_many`` read and write what one call per key would, TTL
    expiry and refresh included; both backends end with the same logical state."""
    from hypothesis import HealthCheck, given, settings

    def descriptor():
        d = ValueStateDescriptor("v", default="dflt")
        if ttl is not None:
            d.enable_time_to_live(StateTtlConfig(TTL, update_type=ON_READ if ttl == "on-read" else ON_WRITE,
                                                 visibility=RETURN if ttl == "return-expired" else NEVER,
                                                 cleanup_incremental=2))
        return d

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(ops=_batched_ops())
    def check(ops):
        one, many = make_backend(), make_backend()
        s1, sm = one.get_state(descriptor()), many.get_state(descriptor())
        for op, arg, ns in ops:
            if op == "tick":
                clock.advance(arg)
                continue
            keys, values = arg if op == "write" else (arg, None)
            s1.set_current_namespace(ns)
            sm.set_current_namespace(ns)
            resolved, refused = many.resolve_keys(keys)
            assert not refused
            if op == "read":
                expected = []
                for k in keys:
                    one.set_current_key(k)
                    expected.append(s1.get_internal())
                assert repr(sm.get_internal_many(resolved)) == repr(expected)
            else:
                for k, v in zip(keys, values):
                    one.set_current_key(k)
                    s1.update_internal(v)
                sm.update_internal_many(resolved, values)
        one.flush()
        many.flush()
        assert repr(_sorted_snapshot(many)) == repr(_sorted_snapshot(one))

    check()


def _sorted_snapshot(backend) -> dict:
    snap = backend.snapshot_logical()
    for s in snap["states"].values():
        s["entries"] = sorted(s["entries"], key=repr)
    return snap["states"]
