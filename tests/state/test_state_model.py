"""Random operation sequences against a plain-Python reference model, and backends against each other.

Every step's observable result (reads, per-state entry counts) must equal the model's; a
``snapshot`` step moves the state into a fresh backend through a msgpack-encoded logical snapshot.
The differential test runs a prefix on backend A, restores A's snapshot into backend B, then runs
the rest on both in lockstep (for heap alone: heap against a heap restored from the snapshot).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from itertools import product
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from operators_support import SumCount
from statekit import (KEY_SERIALIZER, AggregatingStateDescriptor, ListStateDescriptor,
                      MapStateDescriptor, ReducingStateDescriptor, StateTtlConfig, UpdateType, ValueStateDescriptor,
                      available_backends, backend_class)

TTL_MS = 100
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
# each pair example opens several backends (a RocksDB open costs ~0.1 s here): fewer, still focused programs
PAIR_SETTINGS = settings(SETTINGS, max_examples=30)

KEYS = ["a", 1, ("t", 2)]
NAMESPACES = [None, ("w", 0, 10), 3]
MAP_KEYS = ["x", 1, ("t", 1)]


def add(a: int, b: int) -> int:
    return a + b


DESCRIPTORS: dict[str, Callable[[], Any]] = {
    "v": lambda: ValueStateDescriptor("v"),
    "l": lambda: ListStateDescriptor("l"),
    "m": lambda: MapStateDescriptor("m"),
    "r": lambda: ReducingStateDescriptor("r", add),
    "a": lambda: AggregatingStateDescriptor("a", SumCount()),
    "t": lambda: ValueStateDescriptor("t").enable_time_to_live(
        StateTtlConfig(TTL_MS, update_type=UpdateType.ON_READ_AND_WRITE)),
}

# -- operations ---------------------------------------------------------------------------------

scalars = st.one_of(st.integers(-3, 3), st.sampled_from(["", "x", "yz"]), st.binary(max_size=2), st.booleans(),
                    st.sampled_from([0.5, -1.25, 1.0, 2 ** 64 - 1, -(2 ** 63)]))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=2), st.tuples(inner, inner),
    st.dictionaries(st.sampled_from(["a", "b", 1]), st.one_of(st.none(), inner), max_size=2)), max_leaves=4)
nullable = st.one_of(st.none(), values)
keys = st.sampled_from(KEYS)
namespaces = st.sampled_from(NAMESPACES)
map_keys = st.sampled_from(MAP_KEYS)
ints = st.integers(-50, 50)


def op(name: str, *args: st.SearchStrategy) -> st.SearchStrategy:
    return st.tuples(st.just(name), *args)


TICK = op("tick", st.sampled_from([TTL_MS // 2, TTL_MS, 1, TTL_MS - 1]))
ADD = {"l": values, "r": ints, "a": ints}


def merge_step(state: str) -> st.SearchStrategy:
    """A few adds to ``state`` in random namespaces, then a merge of random namespaces."""
    fill = st.tuples(namespaces, ADD[state]).map(lambda t: [("ns", state, t[0]), (f"{state}.add", t[1])])
    merge = op("merge", st.just(state), namespaces, st.lists(namespaces, max_size=3))
    return st.tuples(st.lists(fill, min_size=2, max_size=4), merge).map(lambda t: sum(t[0], []) + [t[1]])


def scoped(state: str, ops: st.SearchStrategy) -> st.SearchStrategy:
    """One operation of ``state``, half of the time after moving the state to a random namespace."""
    return st.tuples(st.booleans(), namespaces, ops).map(lambda t: [("ns", state, t[1]), t[2]] if t[0] else [t[2]])


GROUPS = {
    "key": op("key", keys).map(lambda o: [o]),
    "value": scoped("v", st.one_of(op("v.update", nullable), op("v.value"), op("v.clear"))),
    "list": scoped("l", st.one_of(op("l.add", values), op("l.add_all", st.lists(values, max_size=3)),
                                  op("l.update", st.lists(values, max_size=3)), op("l.get"), op("l.clear"))),
    "map": st.one_of(map_keys.map(lambda k: [("m.put", k, 0), ("m.remove", k)]), scoped("m", st.one_of(op("m.put", map_keys, nullable),
                                 op("m.put_all", st.dictionaries(map_keys, nullable, max_size=3)),
                                 op("m.remove", map_keys), op("m.get", map_keys), op("m.contains", map_keys),
                                 op("m.keys"), op("m.values"), op("m.items"), op("m.is_empty"), op("m.clear")))),
    "reducing": scoped("r", st.one_of(op("r.add", ints), op("r.get"), op("r.clear"))),
    "aggregating": scoped("a", st.one_of(op("a.add", ints), op("a.get"), op("a.clear"))),
    "merge": st.sampled_from(["l", "r", "a"]).flatmap(merge_step),
    "ttl": st.one_of(scoped("t", st.one_of(op("t.update", nullable), op("t.value"), op("t.clear"), TICK)),
                     st.tuples(op("t.update", values), TICK, op("t.value"), TICK, op("t.value")).map(list)),
    "snapshot": op("snapshot").map(lambda o: [o]),
}


def program(first_key: Any, groups: frozenset) -> st.SearchStrategy:
    """Steps drawn from a few operation groups only (swarm testing: each program digs into a few
    state kinds, so merges meet filled namespaces); starts by setting ``first_key`` and ends by
    reading every state of every key and namespace."""
    step = st.sampled_from(sorted(groups)).flatmap(GROUPS.__getitem__)
    return st.lists(step, min_size=15, max_size=60).map(
        lambda steps: [("key", first_key)] + sum(steps, []) + [("dump",)])


PROGRAMS = st.tuples(keys, st.frozensets(st.sampled_from(sorted(GROUPS)), min_size=1, max_size=4)).flatmap(
    lambda t: program(*t))


def shown(value: Any) -> str:
    """A type-exact comparable form: repr tells 1, 1.0 and True apart, and tuples from lists."""
    return repr(value)


def shown_set(items) -> list[str]:
    """For unordered results (map keys, values, items)."""
    return sorted(map(repr, items))


# -- the reference model ------------------------------------------------------------------------

_MISSING = object()
COMBINE = {"l": lambda a, b: a + b, "r": add, "a": SumCount().merge}


class Driver(ABC):
    """Scoping and the observations shared by the model and the backend runner."""

    def __init__(self) -> None:
        self.key: Any = None
        self.ns = dict.fromkeys(DESCRIPTORS)

    def set_key(self, key: Any) -> None:
        self.key = key

    def set_ns(self, name: str, ns: Any) -> None:
        self.ns[name] = ns

    @abstractmethod
    def content(self, name: str) -> Any:
        """Everything state ``name`` shows under the current key and its namespace."""

    def contents(self, name: str, namespaces: list) -> list:
        """``content`` in each of ``namespaces``; the state's namespace is restored afterwards."""
        saved = self.ns[name]
        out = []
        for ns in namespaces:
            self.set_ns(name, ns)
            out.append(self.content(name))
        self.set_ns(name, saved)
        return out

    def dump(self) -> dict:
        """Every state of every key in every namespace; the current key is restored afterwards."""
        saved = self.key
        out = {}
        for key in KEYS:
            self.set_key(key)
            for name in DESCRIPTORS:
                out[f"{key!r}/{name}"] = self.contents(name, NAMESPACES)
        self.set_key(saved)
        return out


class Model(Driver):
    """Plain dicts: state name -> {(key, namespace): content}; TTL cells are (value, last access)."""

    def __init__(self, clock: Callable[[], int]) -> None:
        super().__init__()
        self.clock = clock
        self.cells: dict[str, dict] = {name: {} for name in DESCRIPTORS}

    def ck(self, name: str) -> tuple:
        return (self.key, self.ns[name])

    def get(self, name: str, default: Any = None) -> Any:
        return self.cells[name].get(self.ck(name), default)

    def put(self, name: str, content: Any) -> None:
        self.cells[name][self.ck(name)] = content

    def drop(self, name: str) -> None:
        self.cells[name].pop(self.ck(name), None)

    def ttl_value(self) -> Any:
        cell = self.get("t")
        if cell is None:
            return None
        now = self.clock()
        if cell[1] + TTL_MS <= now:
            self.drop("t")
            return None
        self.put("t", (cell[0], now))
        return cell[0]

    def merge(self, name: str, target: Any, sources: list) -> None:
        table, combine = self.cells[name], COMBINE[name]
        merged = _MISSING
        for src in sources:
            if src == target:
                continue
            cell = table.pop((self.key, src), _MISSING)
            if cell is not _MISSING:
                merged = cell if merged is _MISSING else combine(merged, cell)
        if merged is not _MISSING:
            tk = (self.key, target)
            table[tk] = merged if tk not in table else combine(table[tk], merged)

    def content(self, name: str) -> Any:
        if name == "t":
            return shown(self.ttl_value())
        if name == "m":
            return shown_set(self.get("m", {}).items())
        return shown(self.get(name, [] if name == "l" else None))

    def snapshot(self) -> None:
        """Snapshots leave expired TTL cells out (``cleanup_in_snapshot`` is on by default)."""
        now = self.clock()
        self.cells["t"] = {ck: c for ck, c in self.cells["t"].items() if c[1] + TTL_MS > now}

    def apply(self, operation: tuple) -> Any:
        name, *args = operation
        m = self.get("m", {})
        match name:
            case "key":
                self.set_key(args[0])
            case "ns":
                self.set_ns(*args)
            case "dump":
                return self.dump()
            case "snapshot":
                self.snapshot()
            case "v.update" | "t.update":
                s = name[0]
                if args[0] is None:
                    self.drop(s)
                else:
                    self.put(s, args[0] if s == "v" else (args[0], self.clock()))
            case "v.value":
                return shown(self.get("v"))
            case "t.value":
                return shown(self.ttl_value())
            case "v.clear" | "l.clear" | "m.clear" | "r.clear" | "a.clear" | "t.clear":
                self.drop(name[0])
            case "l.add":
                self.put("l", self.get("l", []) + [args[0]])
            case "l.add_all":
                if args[0]:
                    self.put("l", self.get("l", []) + list(args[0]))
            case "l.update":
                self.put("l", list(args[0])) if args[0] else self.drop("l")
            case "l.get":
                return shown(self.get("l", []))
            case "m.put":
                self.put("m", {**m, args[0]: args[1]})
            case "m.put_all":
                if args[0]:
                    self.put("m", {**m, **args[0]})
            case "m.remove":
                rest = {k: v for k, v in m.items() if k != args[0]}
                self.put("m", rest) if rest else self.drop("m")
            case "m.get":
                return shown(m.get(args[0]))
            case "m.contains":
                return args[0] in m
            case "m.keys":
                return shown_set(m)
            case "m.values":
                return shown_set(m.values())
            case "m.items":
                return shown_set(m.items())
            case "m.is_empty":
                return not m
            case "r.add" | "a.add":
                s = name[0]
                start = _MISSING if s == "r" else (0, 0)
                old = self.get(s, start)
                self.put(s, args[0] if old is _MISSING else (add(old, args[0]) if s == "r" else
                                                             SumCount().add(args[0], old)))
            case "r.get" | "a.get":
                return shown(self.get(name[0]))
            case "merge":
                self.merge(*args)
                return self.contents(args[0], [args[1], *args[2]])
        return None

    def entry_counts(self) -> dict[str, int]:
        return {name: len(cells) for name, cells in self.cells.items()}


# -- the system under test ----------------------------------------------------------------------

class Runner(Driver):
    """One backend driven by operations; reads come back in the model's comparable form."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        super().__init__()
        self.factory = factory
        self.backend = factory()
        self.states = {name: self.backend.get_state(d()) for name, d in DESCRIPTORS.items()}

    def snapshot(self) -> dict:
        """A logical snapshot as it comes back from bytes."""
        return KEY_SERIALIZER.loads(KEY_SERIALIZER.dumps(self.backend.snapshot_logical()))

    def adopt(self, snapshot: dict, key: Any, namespaces: dict[str, Any]) -> None:
        """Continue from ``snapshot`` in a fresh backend with the given scoping."""
        old = self.backend
        self.backend = self.factory()
        self.backend.restore_logical(snapshot)
        self.states = {name: self.backend.get_state(d()) for name, d in DESCRIPTORS.items()}
        old.close()
        if key is not None:
            self.set_key(key)
        for name, ns in namespaces.items():
            self.set_ns(name, ns)

    def set_key(self, key: Any) -> None:
        super().set_key(key)
        self.backend.set_current_key(key)

    def set_ns(self, name: str, ns: Any) -> None:
        super().set_ns(name, ns)
        self.states[name].set_current_namespace(ns)

    def content(self, name: str) -> Any:
        st = self.states[name]
        if name in ("v", "t"):
            return shown(st.value())
        if name == "m":
            return shown_set(st.items())
        return shown(st.get())

    def apply(self, operation: tuple) -> Any:
        name, *args = operation
        s = self.states
        match name:
            case "key":
                self.set_key(args[0])
            case "ns":
                self.set_ns(*args)
            case "dump":
                return self.dump()
            case "snapshot":
                self.adopt(self.snapshot(), self.key, self.ns)
            case "v.update" | "t.update":
                s[name[0]].update(args[0])
            case "v.value" | "t.value":
                return shown(s[name[0]].value())
            case "v.clear" | "l.clear" | "m.clear" | "r.clear" | "a.clear" | "t.clear":
                s[name[0]].clear()
            case "l.add" | "r.add" | "a.add":
                s[name[0]].add(args[0])
            case "l.add_all":
                s["l"].add_all(args[0])
            case "l.update":
                s["l"].update(args[0])
            case "l.get" | "r.get" | "a.get":
                return shown(s[name[0]].get())
            case "m.put":
                s["m"].put(*args)
            case "m.put_all":
                s["m"].put_all(args[0])
            case "m.remove":
                s["m"].remove(args[0])
            case "m.get":
                return shown(s["m"].get(args[0]))
            case "m.contains":
                return s["m"].contains(args[0])
            case "m.keys":
                return shown_set(s["m"].keys())
            case "m.values":
                return shown_set(s["m"].values())
            case "m.items":
                return shown_set(s["m"].items())
            case "m.is_empty":
                return s["m"].is_empty()
            case "merge":
                s[args[0]].merge_namespaces(args[1], args[2])
                return self.contents(args[0], [args[1], *args[2]])
        return None

    def entry_counts(self) -> dict[str, int]:
        return self.backend.state_entry_counts()


def normalized(snapshot: dict) -> dict:
    """Snapshot content independent of the backend: entries sorted, map cells as sorted items."""
    out = {}
    for name, s in snapshot["states"].items():
        cells = [(repr(e[:3]), shown_set(e[3].items()) if s["kind"] == "map" else repr(e[3])) for e in s["entries"]]
        out[name] = (s["kind"], s["ttl"], sorted(cells))
    return out


# -- tests --------------------------------------------------------------------------------------

@SETTINGS
@given(program=PROGRAMS)
def test_backend_matches_reference_model(backend_name, new_factory, program):
    with new_factory(backend_name) as factory:
        runner, model = Runner(factory), Model(factory.clock)
        for step, operation in enumerate(program):
            if operation[0] == "tick":
                factory.clock.advance(operation[1])
                continue
            expected = model.apply(operation)
            got = runner.apply(operation)
            assert got == expected, f"step {step}: {operation}"
            assert runner.entry_counts() == model.entry_counts(), f"step {step}: {operation}"


PAIRS = list(product(available_backends(), repeat=2))


@pytest.mark.parametrize("first,second", PAIRS, ids=[f"{a}-then-{b}" for a, b in PAIRS])
@PAIR_SETTINGS
@given(program=PROGRAMS, split=st.integers(0, 100))
def test_backends_agree_after_restore(first, second, new_factory, program, split):
    backend_class(first)
    backend_class(second)
    with new_factory(first) as fa, new_factory(second, fa.clock) as fb:
        a = Runner(fa)
        split = min(split, len(program))
        for operation in program[:split]:
            if operation[0] == "tick":
                fa.clock.advance(operation[1])
            else:
                a.apply(operation)
        b = Runner(fb)
        b.adopt(a.snapshot(), a.key, a.ns)
        assert b.entry_counts() == a.entry_counts()
        for step, operation in enumerate(program[split:], split):
            if operation[0] == "tick":
                fa.clock.advance(operation[1])
                continue
            assert a.apply(operation) == b.apply(operation), f"step {step}: {operation}"
            assert a.entry_counts() == b.entry_counts(), f"step {step}: {operation}"
        assert normalized(a.snapshot()) == normalized(b.snapshot())
