"""State descriptors: name, kind, serializer, functions and TTL of one piece of keyed state."""

from __future__ import annotations

import types
from abc import ABC, abstractmethod
from typing import Any, Callable, ClassVar, Generic, Sequence, TypeVar

from .serialization import MsgpackSerializer, Serializer
from .ttl import StateTtlConfig

IN = TypeVar("IN")
Migration = Callable[[int, Any], Any]
"""A state migration: ``migrate(stored_version, stored_value) -> value in the current format``."""
ACC = TypeVar("ACC")
OUT = TypeVar("OUT")


class AggregateFunction(ABC, Generic[IN, ACC, OUT]):
    """Incremental aggregation with PyFlink's signatures (``ColumnarAggregate`` adds a vectorized form)."""

    @abstractmethod
    def create_accumulator(self) -> ACC: ...

    @abstractmethod
    def add(self, value: IN, accumulator: ACC) -> ACC: ...

    @abstractmethod
    def get_result(self, accumulator: ACC) -> OUT: ...

    @abstractmethod
    def merge(self, acc_a: ACC, acc_b: ACC) -> ACC: ...

    def state_layout(self) -> Any:
        """What its accumulators hold, as plain data for a checkpoint's job description: a change means
        stored accumulators no longer fit and a restore is refused. Default: the class's qualified name."""
        return qualified_name(self)

    def accumulator_version(self) -> int:
        """The format version of its accumulators (1 unless the function declares a later one): states
        holding them carry it, and a restore of another version takes ``accumulator_migration``."""
        return 1

    def accumulator_migration(self) -> Migration | None:
        """``migrate(old_version, old_accumulator) -> accumulator`` for accumulators stored by an older
        version, or None (the default): then restoring them is refused, naming both versions."""
        return None


class ColumnarAggregate(AggregateFunction[tuple, ACC, OUT]):
    """An AggregateFunction over row tuples that can also aggregate whole runs of rows held as columns
    (numpy/Arrow): what lets window operators fed an epoch as columns skip per-record Python calls.

    Implementing it promises that ``merge(a, fold(add, create_accumulator(), xs))`` equals
    ``fold(add, a, xs)`` for every accumulator ``a`` and rows ``xs`` in order: the operator may fold a
    run on its own and merge it after the accumulator it continues."""

    @abstractmethod
    def accumulate(self, columns: Sequence[Sequence[Any]], order: Any, starts: Any) -> list[ACC]:
        """One new accumulator per run j: ``add`` folded from ``create_accumulator()`` over the rows
        ``order[starts[j]:starts[j+1]]`` (the last run goes to the end of ``order``), in that order,
        where row r is ``tuple(col[r] for col in columns)``; ``order`` and ``starts`` are int arrays."""


class PackedAggregate(ColumnarAggregate[ACC, OUT]):
    """A ColumnarAggregate whose accumulators can also be held as fixed-width rows of int64 words:
    what lets the session engine keep a key's sessions as one packed cell and read, merge, write and
    fire them for a whole epoch with numpy instead of per key in Python.

    Implementing it promises everything ``ColumnarAggregate`` does, plus that ``merge`` is
    associative (the engine merges a run of accumulators in one pass, in their order) and that
    ``unpack(pack(accs)) == accs``. Each ``*_packed`` method may return None when its input does not
    fit (say, a value outside int64): the engine then takes the per-accumulator methods instead."""

    @abstractmethod
    def packed_width(self, version: int | None = None) -> int:
        """Words per accumulator (of accumulator ``version``; None: the current one)."""

    @abstractmethod
    def pack(self, accumulators: Sequence[ACC]) -> Any:
        """The accumulators as an int64 array of shape (n, packed_width()), or None if one cannot be packed."""

    @abstractmethod
    def unpack(self, words: Any, version: int | None = None) -> list[ACC]:
        """The accumulators of packed rows (written by accumulator ``version``; None: the current one)."""

    @abstractmethod
    def accumulate_packed(self, columns: Sequence[Sequence[Any]], order: Any, starts: Any) -> Any:
        """``pack(accumulate(columns, order, starts))``, computed on columns, or None."""

    @abstractmethod
    def merge_packed(self, words: Any, starts: Any) -> Any:
        """One row per group j: ``merge`` folded over rows ``words[starts[j]:starts[j+1]]`` in order, or None."""

    def result_columns_packed(self, words: Any) -> list[list] | None:
        """When ``get_result`` makes a tuple of fields: its results of packed rows as one list per field,
        computed in bulk (equal to ``get_result(unpack(words)[i])[f]``), or None. Default: None (the
        engine unpacks and calls ``get_result`` per window)."""
        return None


class StateDescriptor:
    """Base of all descriptors; ``kind`` tells a backend which state class to build."""

    kind: ClassVar[str] = ""
    __slots__ = ("name", "serializer", "ttl_config", "version", "migration")

    def __init__(self, name: str, serializer: Serializer | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"state name must be a non-empty string, got {name!r}")
        self.name = name
        self.serializer: Serializer = serializer if serializer is not None else MsgpackSerializer()
        self.ttl_config: StateTtlConfig | None = None
        self.version = 1
        self.migration: Migration | None = None

    def with_version(self, version: int, migration: Migration | None = None) -> "StateDescriptor":
        """Declare the format version of this state's values (1 by default) and how values stored by an
        older version become current ones: ``migration(old_version, old_value)``, per value of a value,
        reducing or aggregating state, per element of a list and per value of a map. A backend restoring
        another version migrates every stored value once, when the state is registered (Flink's state
        schema evolution); without a migration that restore is refused. Returns self for chaining."""
        if type(version) is not int or version < 1:
            raise ValueError(f"state '{self.name}': version must be an int >= 1, got {version!r}")
        if migration is not None and not callable(migration):
            raise TypeError(f"state '{self.name}': migration must be callable (old_version, old_value) -> value")
        self.version = version
        self.migration = migration
        return self

    def enable_time_to_live(self, ttl_config: StateTtlConfig) -> "StateDescriptor":
        """Expire entries of this state per ``ttl_config``; returns self for chaining."""
        if not isinstance(ttl_config, StateTtlConfig):
            raise TypeError(f"state '{self.name}': enable_time_to_live takes a StateTtlConfig, got {type(ttl_config).__name__}")
        self.ttl_config = ttl_config
        return self

    def compatible_with(self, other: "StateDescriptor") -> bool:
        """Two descriptors may share a name only when they describe the same kind of state."""
        return type(self) is type(other)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class ValueStateDescriptor(StateDescriptor):
    kind = "value"
    __slots__ = ("default",)

    def __init__(self, name: str, default: Any = None, serializer: Serializer | None = None) -> None:
        super().__init__(name, serializer)
        self.default = default


class ListStateDescriptor(StateDescriptor):
    kind = "list"
    __slots__ = ()


class MapStateDescriptor(StateDescriptor):
    """Map state; user keys always use the msgpack key serializer, values the descriptor's."""

    kind = "map"
    __slots__ = ()


class ReducingStateDescriptor(StateDescriptor):
    kind = "reducing"
    __slots__ = ("reduce_function",)

    def __init__(self, name: str, reduce_function: Callable[[Any, Any], Any], serializer: Serializer | None = None) -> None:
        super().__init__(name, serializer)
        if not callable(reduce_function):
            raise TypeError(f"state '{name}': reduce_function must be callable (a, b) -> c")
        self.reduce_function = reduce_function


class AggregatingStateDescriptor(StateDescriptor):
    """Aggregating state; the serializer encodes accumulators."""

    kind = "aggregating"
    __slots__ = ("agg_function",)

    def __init__(self, name: str, agg_function: AggregateFunction, serializer: Serializer | None = None) -> None:
        super().__init__(name, serializer)
        for m in ("create_accumulator", "add", "merge", "get_result"):
            if not callable(getattr(agg_function, m, None)):
                raise TypeError(f"state '{name}': agg_function lacks {m}()")
        self.agg_function = agg_function


def qualified_name(obj: Any) -> str:
    """``module:qualname`` of ``obj``'s class (of ``obj`` itself when it is a function or class)."""
    target = obj if isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType)) else type(obj)
    return f"{target.__module__}:{target.__qualname__}"
