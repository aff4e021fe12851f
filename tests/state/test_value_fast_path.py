"""Value state's per-record path (``value``/``update`` reaching storage in one frame, immutable scalars not
copied) against the general one (``detached`` around ``get_internal``/``update_internal``), and the key
scopes ``set_current_key`` caches; on every backend."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statekit import NoCurrentKeyError, SerializationError, StateTtlConfig, ValueStateDescriptor, detached
from statekit import key_context

KEYS = ["a", "b", b"a", 0, 1, 2, True, 1.0, 0.0, -0.0, (1, "a")]
"""Plain keys and their look-alikes (equal under Python, apart as keys), so the cached cell keys are tested."""
OP_KEYS = ["a", 1, 1.0, (1, "a")]
"""The keys of the random op sequences: few, so that reads meet earlier writes."""
NAMESPACES = [None, "ns"]
TTL_MS = 50


def _descriptor(ttl: bool, default: object) -> ValueStateDescriptor:
    d = ValueStateDescriptor("v", default=default)
    if ttl:
        d.enable_time_to_live(StateTtlConfig(TTL_MS, cleanup_incremental=1))
    return d


def _values():
    scalar = st.one_of(st.none(), st.integers(-5, 5), st.integers((1 << 64) - 2, (1 << 64) + 1),
                       st.integers(-(1 << 63) - 1, -(1 << 63)), st.booleans(), st.floats(allow_nan=False),
                       st.text(max_size=2), st.binary(max_size=2))
    return st.one_of(scalar, st.tuples(st.integers(0, 3), st.text(max_size=1)),
                     st.lists(st.integers(0, 3), max_size=3), st.tuples(st.integers(0, 3), st.lists(st.integers(0, 3))),
                     st.dictionaries(st.text(max_size=1), st.lists(st.integers(0, 3), max_size=2), max_size=2))


def _ops():
    return st.lists(st.one_of(
        st.tuples(st.just("key"), st.sampled_from(OP_KEYS)),
        st.tuples(st.just("ns"), st.sampled_from(NAMESPACES)),
        st.tuples(st.just("update"), _values()),
        st.tuples(st.just("read"), st.none()),
        st.tuples(st.just("mutate read"), st.none()),
        st.tuples(st.just("mutate written"), st.none()),
        st.tuples(st.just("clear"), st.none()),
        st.tuples(st.just("tick"), st.integers(0, 2 * TTL_MS))), min_size=3, max_size=30)


def _mutate(value: object) -> None:
    """Change a mutable value in place, as a user holding it might (nested lists included)."""
    if isinstance(value, list):
        value.append("mutated")
    elif isinstance(value, dict):
        value["mutated"] = [1]
        for v in value.values():
            _mutate(v)
    elif isinstance(value, tuple):
        for v in value:
            _mutate(v)


class _General:
    """A value state driven through the general path: what ``value``/``update`` did before their fast path."""

    def __init__(self, state) -> None:
        self.state = state

    def value(self) -> object:
        return detached(self.state.get_internal())

    def update(self, value: object) -> None:
        self.state.update_internal(detached(value))

    def set_current_namespace(self, namespace: object) -> None:
        self.state.set_current_namespace(namespace)

    def clear(self) -> None:
        self.state.clear()


def _run(op: str, arg: object, backend, state, held: dict) -> object:
    """One op; returns what it observed (a read's repr, after a mutation too, or the error type)."""
    try:
        if op == "key":
            backend.set_current_key(arg)
        elif op == "ns":
            state.set_current_namespace(arg)
        elif op == "update":
            held["written"] = arg
            state.update(arg)
        elif op == "read":
            return repr(state.value())
        elif op == "mutate read":
            _mutate(state.value())
            return repr(state.value())
        elif op == "mutate written":
            _mutate(held.get("written"))
            return repr(state.value())
        elif op == "clear":
            state.clear()
    except (SerializationError, NoCurrentKeyError) as e:
        return type(e).__name__
    return None


def _states(backend) -> dict:
    snap = backend.snapshot_logical()
    for s in snap["states"].values():
        s["entries"] = sorted(s["entries"], key=repr)
    return snap["states"]


@pytest.mark.parametrize("ttl", [False, True])
@pytest.mark.parametrize("default", [0, ["mutable", "default"]])
def test_value_fast_path_equals_general_path(make_backend, clock, ttl, default):
    """Random sequences of key, namespace, read, write, clear and clock steps, with mutable and immutable
    values (ints beyond 64 bits refused) mutated after they were written or read: ``value``/``update`` see
    and store what the general path does, and both end with the same state (each backend apart)."""

    @settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(ops=_ops())
    def check(ops):
        fast_backend, general_backend = make_backend(), make_backend()
        fast = fast_backend.get_state(_descriptor(ttl, copy.deepcopy(default)))
        general = _General(general_backend.get_state(_descriptor(ttl, copy.deepcopy(default))))
        held_fast: dict = {}
        held_general: dict = {}
        for op, arg in [("key", OP_KEYS[0]), *ops]:  # a key first: most ops then touch a cell
            if op == "tick":
                clock.advance(arg)
                continue
            seen_fast = _run(op, copy.deepcopy(arg), fast_backend, fast, held_fast)
            seen_general = _run(op, copy.deepcopy(arg), general_backend, general, held_general)
            assert seen_fast == seen_general, (op, arg)
        assert repr(_states(fast_backend)) == repr(_states(general_backend))

    check()


@pytest.mark.parametrize("ttl", [False, True])
@pytest.mark.parametrize("written", [[1, 2], {"a": [1]}, (1, [2]), [(1, "x")]])
def test_mutating_a_written_or_read_value_leaves_state(backend, ttl, written):
    """A mutable value changed after ``update`` or after ``value`` returned it: the stored value stays."""
    backend.set_current_key("k")
    v = backend.get_state(_descriptor(ttl, None))
    original = copy.deepcopy(written)
    v.update(written)
    _mutate(written)
    assert v.value() == original
    read = v.value()
    _mutate(read)
    assert v.value() == original
    again = v.value()
    assert again is not v.value()


@pytest.mark.parametrize("ttl", [False, True])
def test_a_mutable_default_is_handed_out_as_a_copy(backend, ttl):
    backend.set_current_key("a")
    v = backend.get_state(_descriptor(ttl, []))
    v.value().append("mutated")
    backend.set_current_key("b")
    assert v.value() == []


@pytest.mark.parametrize("value", [7, -(1 << 63), (1 << 64) - 1, 2.5, "s", b"b", True, False])
def test_scalars_are_stored_and_read_as_they_are(backend, value):
    """Immutable scalars pass uncopied (the per-record path), of their exact type."""
    backend.set_current_key("k")
    v = backend.get_state(_descriptor(False, None))
    v.update(value)
    got = v.value()
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("value", [1 << 64, -(1 << 63) - 1])
def test_ints_beyond_64_bits_are_refused_on_update(backend, value):
    backend.set_current_key("k")
    v = backend.get_state(_descriptor(False, None))
    v.update(1)
    with pytest.raises(SerializationError):
        v.update(value)
    assert v.value() == 1


def test_lookalike_keys_keep_their_own_values(backend):
    """1, 1.0, True, "1" and b"1" meet one another's cached cell key (equal hashes): each keeps its value."""
    keys = [1, 1.0, True, "1", b"1", 0, 0.0, -0.0, False]
    v = backend.get_state(_descriptor(False, None))
    for rounds in range(2):  # the second round finds every key cached
        for i, key in enumerate(keys):
            backend.set_current_key(key)
            assert v.value() == (None if rounds == 0 else i), key
            v.update(i)
            assert backend.get_current_key() is key


def test_evicted_key_scopes_are_resolved_again(make_backend, monkeypatch):
    """Past the key cache's limit its oldest entries go (and stay gone); keys set again afterwards find their
    state, key group and bytes (timers registered under them keep their keys)."""
    monkeypatch.setattr(key_context, "_KEY_CACHE_LIMIT", 8)
    b = make_backend()
    v = b.get_state(_descriptor(False, None))
    timers = b.timer_service("t", None)
    keys = [f"k{i}" for i in range(40)] + list(range(40))
    for rounds in range(2):
        for i, key in enumerate(keys):
            b.set_current_key(key)
            assert v.value() == (None if rounds == 0 else i)
            v.update(i)
            assert b.current_key_scope() == (key, *b.resolve_keys([key])[0][0][1:])
            if rounds == 0:
                timers.register_event_time_timer(None, 100 + i)
    assert sorted(repr(t.key) for t in timers.event_time_timers()) == sorted(map(repr, keys))
    assert len(b._key_cache) <= 8 and len(b._void_cks) <= 8  # the cell keys set_current_key reads go with them


def test_a_mutable_value_stored_in_bulk_is_read_as_a_copy(backend):
    """Scalars read first (handed out as stored), then mutable values written by ``update_internal_many``:
    each read of those is a copy, and so is one of a mutable value written after a scalar under one key."""
    v = backend.get_state(_descriptor(False, None))
    backend.set_current_key("s")
    v.update(3)
    assert v.value() == 3
    resolved, _ = backend.resolve_keys(["a", "b"])
    v.update_internal_many(resolved, [[1], {"x": [2]}])
    for key, want in (("a", [1]), ("b", {"x": [2]})):
        backend.set_current_key(key)
        _mutate(v.value())
        assert v.value() == want, key
    backend.set_current_key("s")
    v.update_internal([4])
    _mutate(v.value())
    assert v.value() == [4]


def test_a_restored_mutable_value_is_read_as_a_copy(make_backend):
    """A value state restored (logical snapshot) with a list under one key and a scalar under another: reading
    the list and mutating it leaves the state, whichever key is read first."""
    source = make_backend()
    v = source.get_state(_descriptor(False, None))
    for key, value in (("n", 5), ("l", [1, 2])):
        source.set_current_key(key)
        v.update(value)
    snap = source.snapshot_logical()
    for order in (("n", "l"), ("l", "n")):
        restored = make_backend()
        restored.restore_logical(snap)
        r = restored.get_state(_descriptor(False, None))
        for key in order:
            restored.set_current_key(key)
            _mutate(r.value())
        restored.set_current_key("l")
        assert r.value() == [1, 2], order
