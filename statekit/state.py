"""State interfaces, scoped to (current key, current namespace).

The narrow waist, as in Flink: the user-facing interfaces (``ValueState``, ``ListState``, ...)
hold a kind's operations only; operators use the internal ones, which add just
``set_current_namespace`` (``InternalKvState``) and, for list/reducing/aggregating state,
``merge_namespaces`` (``InternalMergingState``). Backends implement both directly (no wrapper
layers on the per-record path).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Iterable, Sequence

VOID_NAMESPACE = None
"""The namespace used until ``set_current_namespace`` is called."""

ResolvedKey = tuple[Any, int, bytes]
"""A key with its key group and serialized bytes, as ``KeyedStateBackend.resolve_keys`` gives it:
what batched state and timer calls take instead of a current key."""


class State(ABC):
    """One named piece of keyed state."""

    __slots__ = ()

    @abstractmethod
    def clear(self) -> None:
        """Remove the value under the current key and namespace."""


class ValueState(State):
    __slots__ = ()

    @abstractmethod
    def value(self) -> Any:
        """The stored value, or the descriptor's default when there is none."""

    @abstractmethod
    def update(self, value: Any) -> None:
        """Store ``value``; ``None`` clears, as in Flink."""


class MergingState(State):
    """State whose values of several namespaces can be combined into one (list, reducing, aggregating)."""

    __slots__ = ()


class ListState(MergingState):
    __slots__ = ()

    @abstractmethod
    def get(self) -> list:
        """A copy of the elements in insertion order; ``[]`` when empty."""

    @abstractmethod
    def add(self, value: Any) -> None: ...

    @abstractmethod
    def add_all(self, values: Iterable[Any]) -> None: ...

    @abstractmethod
    def update(self, values: Iterable[Any]) -> None:
        """Replace the elements; an empty iterable clears."""


class MapState(State):
    __slots__ = ()

    @abstractmethod
    def get(self, key: Any) -> Any:
        """The value under ``key`` or ``None``."""

    @abstractmethod
    def put(self, key: Any, value: Any) -> None: ...

    @abstractmethod
    def put_all(self, mapping: dict) -> None: ...

    @abstractmethod
    def remove(self, key: Any) -> None: ...

    @abstractmethod
    def contains(self, key: Any) -> bool: ...

    @abstractmethod
    def keys(self) -> list: ...

    @abstractmethod
    def values(self) -> list: ...

    @abstractmethod
    def items(self) -> list: ...

    @abstractmethod
    def is_empty(self) -> bool: ...


class ReducingState(MergingState):
    __slots__ = ()

    @abstractmethod
    def get(self) -> Any:
        """The reduced value, or ``None`` when nothing was added."""

    @abstractmethod
    def add(self, value: Any) -> None:
        """Store ``reduce(current, value)`` (or ``value`` when empty)."""


class AggregatingState(MergingState):
    __slots__ = ()

    @abstractmethod
    def get(self) -> Any:
        """``get_result(accumulator)``, or ``None`` when nothing was added."""

    @abstractmethod
    def add(self, value: Any) -> None:
        """Store ``add(value, accumulator)`` (starting from ``create_accumulator()``)."""


class InternalKvState(ABC):
    """What operators (not users) do with a state: choose the namespace later calls work in, and
    read or write the stored value itself (Flink's ``getInternal``/``updateInternal``)."""

    __slots__ = ()

    @abstractmethod
    def set_current_namespace(self, namespace: Any) -> None:
        """Scope later calls to ``namespace`` (any msgpack-able, hashable value)."""

    def get_internal(self) -> Any:
        """The stored value as it is, not detached: for an operator's own bookkeeping, which never hands it
        to users (a value state's value, a reducing state's value, an aggregating state's accumulator)."""
        raise TypeError(f"{type(self).__name__} has no single internal value")

    def update_internal(self, value: Any) -> None:
        """Store ``value`` as it is (the caller gives up the object); None clears."""
        raise TypeError(f"{type(self).__name__} has no single internal value")

    def get_internal_many(self, keys: Sequence[ResolvedKey]) -> list:
        """``get_internal`` of each key under the current namespace, in one call (an epoch's touched
        keys at once); the same values, TTL expiry and refresh as one call per key."""
        raise TypeError(f"{type(self).__name__} has no batched internal access")

    def update_internal_many(self, keys: Sequence[ResolvedKey], values: Sequence[Any]) -> None:
        """``update_internal(values[i])`` under each ``keys[i]`` and the current namespace, in one call."""
        raise TypeError(f"{type(self).__name__} has no batched internal access")


class InternalMergingState(InternalKvState):
    """A mergeable state as operators see it: namespaces can be merged (merging windows)."""

    __slots__ = ()

    @abstractmethod
    def merge_namespaces(self, target: Any, sources: Iterable[Any]) -> None:
        """Merge the sources' values (in order) and then into ``target``; sources are cleared.

        Empty or missing sources are skipped; an empty target takes the merged value; a source
        equal to the target is ignored. Works under the current key, like Flink's
        ``InternalMergingState.mergeNamespaces``.
        """
