"""RocksDB-specific behaviour: byte layout, the write overlay and read cache, list appends and
merges without reads or decoding, TTL deletes reaching RocksDB, the timer cache, memory options,
local_dir lifecycle and clear errors. (The shared contract suite covers the state semantics.)
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rocksdict import Options, Rdict

from statekit import (ConfigError, ListStateDescriptor, MapStateDescriptor, MsgpackSerializer, ReducingStateDescriptor,
                      StateConfig, StateDescriptorError, StateError, StateTtlConfig, TimerTarget,
                      ValueStateDescriptor, create_backend, key_group_for)
from statekit.backends.rocksdb import RocksDBKeyedStateBackend

TTL = 100


class Counting:
    """Wraps a rocksdict column family and counts the calls made through it."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.calls: list[str] = []

    def __getattr__(self, name):
        self.calls.append(name)
        return getattr(self.inner, name)


class CountingSerializer(MsgpackSerializer):
    """msgpack that counts decodes (to prove some paths never decode elements)."""

    __slots__ = ("decoded",)

    def __init__(self) -> None:
        super().__init__()
        self.decoded = 0

    def loads(self, data: bytes):
        self.decoded += 1
        return super().loads(data)


class Noop(TimerTarget):
    def on_event_time(self, timer):
        pass

    def on_processing_time(self, timer):
        pass


@pytest.fixture
def make(tmp_path: Path, clock):
    made = []

    def new(local_dir=None, **options):
        cfg = StateConfig(backend="rocksdb", local_dir=str(local_dir or tmp_path / f"db-{len(made)}"),
                          options={f"rocksdb.{k}": v for k, v in options.items()})
        b = create_backend(cfg, time_provider=clock)
        made.append(b)
        return b

    yield new
    for b in made:
        b.close()


def raw_family(path: str, name: str) -> dict[bytes, bytes]:
    """Every key/value of column family ``name`` of the (closed) DB at ``path``, read with plain rocksdict."""
    opts = Options(raw_mode=True)
    names = Rdict.list_cf(path, opts)
    db = Rdict(path, options=opts, column_families={n: opts for n in names if n != "default"})
    try:
        cf = db.get_column_family(name)
        out = dict(cf.items())
        del cf
        return out
    finally:
        db.close()


def stored(backend, state_name: str) -> dict[bytes, bytes]:
    """What RocksDB (not the overlay) holds for a state right now."""
    cf = backend._store.family("state:" + state_name)[0]
    return dict(cf.items())


def cell_key(key, ns) -> bytes:
    return key_group_for(key, 128).to_bytes(2, "big") + msgpack.packb(key) + msgpack.packb(ns)


# -- byte layout -----------------------------------------------------------------------------------

def test_byte_layout_of_states_and_timers(make, tmp_path, clock):
    path = tmp_path / "existing"
    path.mkdir()
    b = make(path)
    v = b.get_state(ValueStateDescriptor("v"))
    lst = b.get_state(ListStateDescriptor("l"))
    m = b.get_state(MapStateDescriptor("m"))
    t = b.get_state(ValueStateDescriptor("t").enable_time_to_live(StateTtlConfig(TTL)))
    svc = b.timer_service("win", Noop())
    b.set_current_key("user-1")
    v.update({"n": 1})
    lst.set_current_namespace("w")
    lst.add("a")
    lst.add("b")
    b.flush()
    lst.add("c")
    m.put(7, "seven")
    t.update("x")
    svc.register_event_time_timer("w", 1234)
    b.close()

    assert raw_family(str(path), "state:v") == {cell_key("user-1", None): msgpack.packb({"n": 1})}
    lkeys = sorted(raw_family(str(path), "state:l").items())
    prefix = cell_key("user-1", "w")
    assert [k[:-8] for k, _ in lkeys] == [prefix] * 3
    seqs = [int.from_bytes(k[-8:], "big") for k, _ in lkeys]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    assert [val for _, val in lkeys] == [msgpack.packb(x) for x in "abc"]
    assert raw_family(str(path), "state:m") == {cell_key("user-1", None) + msgpack.packb(7): msgpack.packb("seven")}
    assert raw_family(str(path), "state:t") == {cell_key("user-1", None): struct.pack(">q", clock()) + msgpack.packb("x")}
    timer_key = (1234 + (1 << 63)).to_bytes(8, "big") + cell_key("user-1", "w")
    assert raw_family(str(path), "timers:win:event") == {timer_key: b""}


def test_reopening_an_existing_directory_keeps_state_and_timers(make, tmp_path):
    path = tmp_path / "keep"
    path.mkdir()
    b = make(path)
    b.set_current_key("u")
    b.get_state(ListStateDescriptor("l")).add_all([1, 2])
    b.timer_service("s", Noop()).register_event_time_timer(None, 5)
    b.close()
    assert path.exists()
    again = make(path)
    again.set_current_key("u")
    lst = again.get_state(ListStateDescriptor("l"))
    lst.add(3)
    assert lst.get() == [1, 2, 3]
    assert [t.timestamp for t in again.timer_service("s", Noop()).event_time_timers()] == [5]


def test_reopened_state_of_another_kind_is_refused(make, tmp_path):
    path = tmp_path / "kinds"
    path.mkdir()
    b = make(path)
    b.get_state(ListStateDescriptor("s"))
    b.close()
    with pytest.raises(StateDescriptorError, match="'s'.*list"):
        make(path).get_state(ValueStateDescriptor("s"))


# -- overlay, WriteBatch and read cache ---------------------------------------------------------------

def test_writes_reach_rocksdb_at_flush_or_when_the_overlay_is_full(make):
    b = make(write_batch_size=5)
    v = b.get_state(ValueStateDescriptor("v"))
    for i in range(3):
        b.set_current_key(i)
        v.update(i)
    assert stored(b, "v") == {}
    b.set_current_key(1)
    assert v.value() == 1                       # read-your-writes from the overlay
    b.flush()
    assert len(stored(b, "v")) == 3
    for i in range(3, 9):                       # the 6th pending cell exceeds write_batch_size=5
        b.set_current_key(i)
        v.update(i)
    assert len(stored(b, "v")) == 9


OPS = st.lists(st.one_of(
    st.tuples(st.just("update"), st.integers(0, 5), st.integers(-3, 3)),
    st.tuples(st.just("clear"), st.integers(0, 5)),
    st.tuples(st.just("add"), st.integers(0, 5), st.integers(-3, 3)),
    st.tuples(st.just("merge"), st.integers(0, 5)),
    st.tuples(st.just("flush"),),
    st.tuples(st.just("tick"),),
), max_size=60)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_read_cache_and_overlay_are_never_stale(tmp_path_factory, ops):
    """Tiny read cache and write batch: every read equals a dict model after writes, deletes, merges,
    flushes and TTL expiry."""
    now = [0]
    cfg = StateConfig(backend="rocksdb", local_dir=str(tmp_path_factory.mktemp("stale") / "db"),
                      options={"rocksdb.read_cache_entries": 2, "rocksdb.write_batch_size": 3})
    b = create_backend(cfg, time_provider=lambda: now[0])
    try:
        v = b.get_state(ValueStateDescriptor("v"))
        r = b.get_state(ReducingStateDescriptor("r", lambda x, y: x + y))
        t = b.get_state(ValueStateDescriptor("t").enable_time_to_live(StateTtlConfig(TTL, cleanup_incremental=1)))
        b.set_current_key("k")
        model_v, model_r, model_t = {}, {}, {}
        for op in ops:
            if op[0] == "update":
                v.set_current_namespace(op[1])
                v.update(op[2])
                model_v[op[1]] = op[2]
                t.set_current_namespace(op[1])
                t.update(op[2])
                model_t[op[1]] = (op[2], now[0])
            elif op[0] == "clear":
                for s in (v, r, t):
                    s.set_current_namespace(op[1])
                    s.clear()
                for mdl in (model_v, model_r, model_t):
                    mdl.pop(op[1], None)
            elif op[0] == "add":
                r.set_current_namespace(op[1])
                r.add(op[2])
                model_r[op[1]] = model_r.get(op[1], 0) + op[2]
            elif op[0] == "merge":
                r.merge_namespaces(op[1], [n for n in range(6) if n != op[1]])
                merged = [model_r.pop(n) for n in range(6) if n != op[1] and n in model_r]
                if merged:
                    model_r[op[1]] = model_r.get(op[1], 0) + sum(merged)
            elif op[0] == "flush":
                b.flush()
            else:
                now[0] += 60
            for ns in range(6):
                v.set_current_namespace(ns)
                r.set_current_namespace(ns)
                t.set_current_namespace(ns)
                assert v.value() == model_v.get(ns)
                assert r.get() == model_r.get(ns)
                live = model_t.get(ns)
                assert t.value() == (live[0] if live and live[1] + TTL > now[0] else None)
                if live and live[1] + TTL <= now[0]:
                    del model_t[ns]
    finally:
        b.close()


def test_early_writes_of_a_full_overlay_lose_nothing(make):
    """With a 3-cell overlay, puts, adds and merges keep writing it out mid-operation."""
    b = make(write_batch_size=3)
    m = b.get_state(MapStateDescriptor("m"))
    lst = b.get_state(ListStateDescriptor("l"))
    for i in range(50):
        b.set_current_key(i)
        m.put("a", i)
        m.put("b", -i)
        lst.set_current_namespace(i % 4)
        lst.add(i)
    for i in range(50):
        b.set_current_key(i)
        assert dict(m.items()) == {"a": i, "b": -i}
        m.remove("a")
        lst.merge_namespaces("all", [0, 1, 2, 3])
    for i in range(50):
        b.set_current_key(i)
        lst.set_current_namespace("all")
        assert dict(m.items()) == {"b": -i} and lst.get() == [i]


def test_list_add_does_not_read_rocksdb(make):
    b = make()
    lst = b.get_state(ListStateDescriptor("l"))
    b.set_current_key("u")
    lst.add_all(range(100))
    b.flush()
    before = stored(b, "l")
    spy = Counting(lst._db)
    lst._db = spy
    for i in range(100, 200):
        lst.add(i)
    lst.add_all([200, 201])
    assert spy.calls == []
    lst._db = spy.inner
    b.flush()
    after = stored(b, "l")
    assert {k: after[k] for k in before} == before          # old elements untouched, new ones appended
    assert len(after) == 202
    assert lst.get() == list(range(202))


def test_list_merge_moves_bytes_without_decoding(make):
    b = make()
    ser = CountingSerializer()
    lst = b.get_state(ListStateDescriptor("l", serializer=ser))
    b.set_current_key("u")
    for ns, vals in (("t", [1]), ("a", [2, 3]), ("b", [4])):
        lst.set_current_namespace(ns)
        lst.add_all(vals)
    b.flush()
    lst.set_current_namespace("b")
    lst.add(5)                                  # one source element still in the overlay
    ser.decoded = 0
    lst.merge_namespaces("t", ["a", "missing", "b", "t"])
    assert ser.decoded == 0
    b.flush()
    lst.set_current_namespace("t")
    assert lst.get() == [1, 2, 3, 4, 5]
    assert b.num_entries() == 1


def test_map_point_reads_merge_overlay_and_rocksdb(make):
    b = make()
    m = b.get_state(MapStateDescriptor("m"))
    b.set_current_key("u")
    m.put_all({"a": 1, "b": 2, "c": 3})
    b.flush()
    m.remove("a")
    m.put("d", 4)
    assert (m.get("a"), m.get("b"), m.get("d")) == (None, 2, 4)
    assert dict(m.items()) == {"b": 2, "c": 3, "d": 4}
    m.clear()
    m.put("e", 5)
    assert dict(m.items()) == {"e": 5} and m.get("b") is None
    b.flush()
    assert dict(m.items()) == {"e": 5}
    assert len(stored(b, "m")) == 1


# -- TTL reaches RocksDB -------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["value", "list", "map"])
def test_ttl_sweep_deletes_from_rocksdb(make, clock, kind):
    b = make()
    d = {"value": ValueStateDescriptor, "list": ListStateDescriptor, "map": MapStateDescriptor}[kind]("s")
    s = b.get_state(d.enable_time_to_live(StateTtlConfig(TTL, cleanup_incremental=4, cleanup_in_snapshot=False)))
    for i in range(10):
        b.set_current_key(i)
        {"value": lambda: s.update(i), "list": lambda: s.add_all([i, i]), "map": lambda: s.put(i, i)}[kind]()
    b.flush()
    assert len(stored(b, "s")) == (20 if kind == "list" else 10)
    clock.advance(TTL)
    for _ in range(3):
        b.flush()
    assert stored(b, "s") == {}


def test_ttl_read_deletes_from_rocksdb(make, clock):
    b = make()
    s = b.get_state(ListStateDescriptor("s").enable_time_to_live(StateTtlConfig(TTL)))
    b.set_current_key("u")
    s.add("old")
    clock.advance(60)
    s.add("new")
    b.flush()
    clock.advance(60)
    assert s.get() == ["new"]
    b.flush()
    assert [v[8:] for v in stored(b, "s").values()] == [msgpack.packb("new")]


# -- timer cache ---------------------------------------------------------------------------------------

def test_timer_head_is_served_from_the_cache(make):
    b = make(timer_cache_size=8)
    svc = b.timer_service("t", Noop())
    b.set_current_key("u")
    for ts in range(100):
        svc.register_event_time_timer(None, ts)
    queue = svc.queues()[0][1]
    assert queue.cached() <= 8 and not queue.cache_holds_all()
    queue.peek()                                # fills the cache
    spy = Counting(queue._db)
    queue._db = spy
    for _ in range(5):
        assert queue.peek().timestamp == 0
    assert spy.calls == []
    svc.advance_watermark(5)                    # 6 polls: deletes only, no reads
    assert set(spy.calls) == {"delete"}
    spy.calls.clear()
    svc.advance_watermark(20)                   # past the cached head: refills from RocksDB (its key iterator)
    assert "keys" in spy.calls
    assert queue.cached() <= 8 and len(queue) == 79


def test_timer_cache_knows_when_it_holds_everything(make):
    b = make(timer_cache_size=4)
    svc = b.timer_service("t", Noop())
    b.set_current_key("u")
    for ts in (5, 3, 9):
        svc.register_event_time_timer(None, ts)
    queue = svc.queues()[0][1]
    assert queue.cache_holds_all() and queue.cached() == 3
    spy = Counting(queue._db)
    queue._db = spy
    svc.delete_event_time_timer(None, 42)       # absent and below nothing cached: no RocksDB lookup
    assert "get" not in spy.calls
    for ts in (1, 2):
        svc.register_event_time_timer(None, ts)
    assert not queue.cache_holds_all() and queue.cached() == 4
    assert [t.timestamp for t in svc.event_time_timers()] == [1, 2, 3, 5, 9]


# -- memory options ------------------------------------------------------------------------------------

def test_memory_options_reach_rocksdb(make):
    b = make(block_cache_size="48m", timer_cache_size=3, read_cache_entries=5, write_batch_size=7)
    db = b._store.db
    assert db.property_int_value("rocksdb.block-cache-capacity") == 48 << 20
    v = b.get_state(ValueStateDescriptor("v"))
    assert v._cache.maxsize == 5 and b._wb.limit == 7
    svc = b.timer_service("t", Noop())
    b.set_current_key("u")
    for ts in range(20):
        svc.register_event_time_timer(None, ts)
    assert svc.queues()[0][1].cached() == 3


def test_read_cache_is_bounded_by_serialized_bytes(make):
    b = make(read_cache_size="64k", read_cache_entries=1000)
    v = b.get_state(ValueStateDescriptor("v"))
    big = "x" * 8000  # above 1/16 of the budget: never cached
    for i in range(40):
        b.set_current_key(i)
        v.update("s" * 1000 if i % 2 else big)
    b.flush()
    cache = v._cache
    assert 0 < cache.bytes <= 64 << 10
    assert all(c != big for c in cache.cells()) and len(cache) < 40
    for i in range(40):  # every value reads back, from the cache or from RocksDB
        b.set_current_key(i)
        assert v.value() == ("s" * 1000 if i % 2 else big)
    b.set_current_key(1)
    v.update(big)  # a cached cell that grows too large leaves the cache
    b.flush()
    assert cache.bytes <= 64 << 10 and big not in cache.cells()
    assert v.value() == big


def test_options_are_validated():
    with pytest.raises(ConfigError, match="rocksdb.block_cache_size"):
        StateConfig(backend="rocksdb", options={"rocksdb.block_cache": "1g"})
    with pytest.raises(ConfigError, match="size"):
        StateConfig(backend="rocksdb", options={"rocksdb.block_cache_size": "lots"})
    with pytest.raises(ConfigError, match="timer_cache_size"):
        create_backend(StateConfig(backend="rocksdb", options={"rocksdb.timer_cache_size": 0}))
    specs = {s.name for s in RocksDBKeyedStateBackend.OPTIONS}
    assert {"rocksdb.block_cache_size", "rocksdb.write_buffer_manager_size", "rocksdb.read_cache_entries",
            "rocksdb.timer_cache_size", "rocksdb.write_batch_size"} <= specs


def test_options_from_environment_and_spark_conf():
    env = StateConfig.from_env({"STATEKIT_BACKEND": "rocksdb", "STATEKIT_ROCKSDB_BLOCK_CACHE_SIZE": "16m"})
    spark = StateConfig.from_spark_conf({"spark.statekit.backend": "rocksdb",
                                         "spark.statekit.rocksdb.timer_cache_size": "64"})
    assert env.get("rocksdb.block_cache_size") == 16 << 20
    assert spark.get("rocksdb.timer_cache_size") == 64


# -- lifecycle -----------------------------------------------------------------------------------------

def test_default_directory_is_unique_and_removed_on_close():
    cfg = StateConfig(backend="rocksdb")
    a, b = create_backend(cfg, key_groups=range(0, 64)), create_backend(cfg, key_groups=range(0, 64))
    try:
        assert a.local_dir != b.local_dir and os.path.isdir(a.local_dir)
        assert "kg0-63" in os.path.basename(a.local_dir)
    finally:
        a.close()
        b.close()
    assert not os.path.exists(a.local_dir) and not os.path.exists(b.local_dir)


def test_created_local_dir_is_removed_and_existing_one_kept(make, tmp_path):
    created = tmp_path / "new" / "db"
    b = make(created)
    b.set_current_key("u")
    b.get_state(ValueStateDescriptor("v")).update(1)
    b.close()
    assert not created.exists()
    kept = tmp_path / "kept"
    kept.mkdir()
    make(kept).close()
    assert kept.exists() and (kept / "CURRENT").exists()


def test_closed_backend_raises_state_error(make):
    b = make()
    v = b.get_state(ValueStateDescriptor("v"))
    lst = b.get_state(ListStateDescriptor("l"))
    svc = b.timer_service("t", Noop())
    b.set_current_key("u")
    v.update(1)
    b.close()
    b.close()                                   # idempotent
    for use in (v.value, lambda: v.update(2), lst.get, lambda: lst.add(1), b.flush, b.snapshot_logical,
                lambda: svc.register_event_time_timer(None, 1), lambda: svc.advance_watermark(10),
                lambda: b.get_state(ValueStateDescriptor("w"))):
        with pytest.raises(StateError, match="closed"):
            use()


def test_unwritable_local_dir_is_a_clear_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    target = blocker / "db"
    with pytest.raises(StateError, match=str(target)):
        create_backend(StateConfig(backend="rocksdb", local_dir=str(target)))


def test_locked_database_is_a_clear_error(make, tmp_path):
    path = tmp_path / "shared"
    make(path)
    with pytest.raises(StateError, match="locked") as err:
        make(path)
    assert str(path) in str(err.value)


def test_corrupt_database_is_a_clear_error(make, tmp_path):
    path = tmp_path / "corrupt"
    path.mkdir()
    b = make(path)
    b.set_current_key("u")
    b.get_state(ValueStateDescriptor("v")).update(1)
    b.close()
    (path / "CURRENT").write_text("garbage\n")
    with pytest.raises(StateError, match="corrupt") as err:
        make(path)
    assert str(path) in str(err.value)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.lists(st.tuples(st.sampled_from(["a", "b", "c", 7]), st.integers(-20, 20)), max_size=10),
                    max_size=8),
       watermark=st.integers(-25, 25))
def test_fresh_and_present_timers_past_the_cache_skip_their_reads(make, ops, watermark):
    """Bulk timers promised fresh (none registered) or present (all registered), with a cache of two
    timers: past the cache they cost no point read, and the queue equals one registered call per key."""
    many, one = make(timer_cache_size=2), make(timer_cache_size=2)
    tm, t1 = many.timer_service("t", Noop()), one.timer_service("t", Noop())
    queue = tm.queues()[0][1]
    for pairs in ops:
        pairs = list(dict.fromkeys(pairs))
        existing = {(t.key, t.timestamp) for t in t1.event_time_timers()}
        fresh, present = [p for p in pairs if p not in existing], [p for p in pairs if p in existing]
        spy = Counting(queue._db)
        queue._db = spy
        resolved, _ = many.resolve_keys([k for k, _ in present])
        tm.delete_event_time_timers(resolved, None, [t for _, t in present], present=True)
        resolved, _ = many.resolve_keys([k for k, _ in fresh])
        tm.register_event_time_timers(resolved, None, [t for _, t in fresh], fresh=True)
        queue._db = spy.inner
        assert "get" not in spy.calls
        for k, t in present:
            one.set_current_key(k)
            t1.delete_event_time_timer(None, t)
        for k, t in fresh:
            one.set_current_key(k)
            t1.register_event_time_timer(None, t)
        assert list(tm.event_time_timers()) == list(t1.event_time_timers())
        assert len(queue) == len(t1.queues()[0][1])
    assert tm.take_due_event_time(watermark) == t1.take_due_event_time(watermark)
    assert list(tm.event_time_timers()) == list(t1.event_time_timers())
    many.close()
    one.close()


@settings(max_examples=80, deadline=None)
@given(maxsize=st.integers(1, 8), max_bytes=st.integers(16, 400),
       ops=st.lists(st.lists(st.tuples(st.integers(0, 12), st.integers(0, 60)), max_size=10), max_size=25))
def test_read_cache_keeps_its_bounds_and_never_serves_an_older_cell(maxsize, max_bytes, ops):
    """Batches of distinct keys put with sizes: every hit is the newest cell put for its key, and the
    entry and byte bounds always hold (cells above a sixteenth of the bytes are never cached)."""
    from statekit.backends.rocksdb.read_cache import ReadCache
    cache, newest, miss = ReadCache(maxsize, max_bytes), {}, object()
    for version, batch in enumerate(ops):
        batch = list(dict(batch).items())  # distinct keys
        keys = [k.to_bytes(1, "big") for k, _ in batch]
        cache.put_many(keys, [(version, k) for k in keys], [size for _, size in batch])
        newest.update((k, (version, k)) for k in keys)
        assert len(cache) <= maxsize and cache.bytes <= max_bytes
        for (k, size), cell in zip(batch, cache.hits(keys, miss)):
            kb = k.to_bytes(1, "big")
            assert cell is miss or cell == newest[kb]
            assert cell is miss or size <= max_bytes // 16
        for k in range(13):
            kb = k.to_bytes(1, "big")
            assert cache.hit(kb, miss) in (miss, newest.get(kb, miss))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stored=st.lists(st.binary(min_size=1, max_size=3), max_size=40),
       deleted=st.lists(st.binary(min_size=1, max_size=3), max_size=10),
       wanted=st.lists(st.binary(min_size=1, max_size=3), max_size=40), walk=st.integers(1, 3), probe=st.integers(1, 4))
def test_reads_in_key_order_equal_point_reads(make, monkeypatch, stored, deleted, wanted, walk, probe):
    """``read_in_order`` (an iterator walked over close keys, point reads over sparse stretches, the keys in
    ``key_order``, which may misplace keys differing in trailing NULs) reads what one point read per key
    reads, deleted keys and repeated ones included, whatever the walk and probe lengths."""
    from statekit.backends.rocksdb import key_order as cells

    monkeypatch.setattr(cells, "_WALK", walk)
    monkeypatch.setattr(cells, "_PROBE", probe)
    b = make()
    db, _ = b._store.family("scratch")
    for i, k in enumerate(stored):
        db.put(k, i.to_bytes(2, "big"))
    for k in deleted:
        db.delete(k)
    keys = [k + b"\x00" for k in stored[:3]] + wanted + stored[::3]  # a NUL-ended key first: key_order misplaces it
    ordered = [keys[i] for i in cells.key_order(keys).tolist()]
    assert cells.read_in_order(db, ordered) == [db.get(k) for k in ordered]
