"""The rules of one-value-per-cell state (value, reducing, aggregating) that hold on every backend.

A cell is the value, or ``(value, last_access_ms)`` with TTL. What a TTL read sees, how two cells
merge and what an aggregating state's ``get``/``add`` do are written here once; a backend's cell
states inherit these rules and say only how a cell is read (``_cell``) and written (``_stored``).
The rules use the backend state's ``_ck`` (current cell key), ``_ttl`` (a ``StateTtlConfig`` or
None), ``_ttl_ms``, ``_clock`` and ``_cleanup_n`` (``cleanup_incremental``), and the descriptor's
function in ``_reduce`` or ``_agg``.
Per-record paths a backend inlines for speed (a heap read is one dict lookup) stay in the backend.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, Iterable

from .detach import detached

ABSENT = object()
"""No cell: what ``_cell`` returns for a cell that does not exist, and the ``_stored`` cell that deletes one."""


class CellAccess(ABC):
    """How a backend's state reads and writes one whole cell (a value, a list, a map)."""

    __slots__ = ()

    @abstractmethod
    def _cell(self, ck: Any) -> Any:
        """The stored cell under cell key ``ck``, or ABSENT."""

    @abstractmethod
    def _stored(self, ck: Any, cell: Any) -> None:
        """Make ``cell`` the cell under ``ck`` (ABSENT deletes it)."""


class NamespaceMerging(CellAccess):
    """Flink's ``mergeNamespaces`` for states whose cells merge whole: the sources' cells merged among
    themselves in the order given, then into the target's (a source equal to the target is skipped)."""

    __slots__ = ()

    @abstractmethod
    def _merge_cells(self, a: Any, b: Any) -> Any:
        """Two cells as one (``b`` after ``a``)."""

    @abstractmethod
    def _cell_keys(self) -> Callable[[Any], Any]:
        """The cell key of a namespace under the current key; raises NoCurrentKeyError without one."""

    def merge_namespaces(self, target: Any, sources: Iterable[Any]) -> None:
        cell_key = self._cell_keys()
        tck = cell_key(target)
        merged = ABSENT
        for src in sources:
            sck = cell_key(src)
            if sck == tck:  # the target's own cell (by identity: a source 1 is not a target True)
                continue
            cell = self._cell(sck)
            if cell is ABSENT:
                continue
            self._stored(sck, ABSENT)
            merged = cell if merged is ABSENT else self._merge_cells(merged, cell)
        if merged is ABSENT:
            return
        current = self._cell(tck)
        self._stored(tck, merged if current is ABSENT else self._merge_cells(current, merged))


class CellRules(CellAccess):
    """TTL visibility of a cell, on top of the backend's cell read and write."""

    __slots__ = ()

    @abstractmethod
    def _cleanup_expired(self, budget: int) -> int:
        """Delete up to ``budget`` expired cells; returns how many went."""

    @abstractmethod
    def _validated(self, value: Any) -> Any:
        """``value`` itself once it is known to serialize; raises SerializationError otherwise."""

    def _visible(self, ck: Any, default: Any) -> Any:
        """The value of TTL cell ``ck`` as a read sees it, or ``default``: an expired cell is deleted (and
        seen only with ``return_expired``), a live one is re-stamped with ``refresh_on_read``."""
        if self._cleanup_n:  # each TTL access first sweeps; inline, as a call would cost every TTL read
            self._cleanup_expired(self._cleanup_n)
        cell = self._cell(ck)
        if cell is ABSENT:
            return default
        value, ts = cell
        now = self._clock()
        if ts + self._ttl_ms <= now:
            self._stored(ck, ABSENT)
            return value if self._ttl.return_expired else default
        if self._ttl.refresh_on_read:
            self._stored(ck, (value, now))
        return value


class MergingCellRules(CellRules, NamespaceMerging):
    """How two cells of a mergeable state combine (``merge_namespaces``)."""

    __slots__ = ()

    @abstractmethod
    def _combine(self, a: Any, b: Any) -> Any:
        """Two stored values (not cells) as one, ``b`` after ``a``."""

    def _merge_cells(self, a: Any, b: Any) -> Any:
        """Two cells as one validated cell (``b`` after ``a``); with TTL it is stamped now."""
        if self._ttl is None:
            return self._validated(self._combine(a, b))
        return (self._validated(self._combine(a[0], b[0])), self._clock())


class ReducingCellRules(MergingCellRules):
    """Reducing state: cells merge with the reduce function (``_reduce``)."""

    __slots__ = ()

    def _combine(self, a: Any, b: Any) -> Any:
        return self._reduce(a, b)


class AggregatingCellRules(MergingCellRules):
    """Aggregating state (``_agg``): the cell holds the accumulator; ``get`` and ``add`` through it."""

    __slots__ = ()

    def _combine(self, a: Any, b: Any) -> Any:
        return self._agg.merge(a, b)

    def get(self) -> Any:
        """``get_result`` of the current accumulator (detached), or None when there is none."""
        ck = self._ck
        acc = self._cell(ck) if self._ttl is None else self._visible(ck, ABSENT)
        return None if acc is ABSENT else detached(self._agg.get_result(acc))

    def add(self, value: Any) -> None:
        """Store ``add(value, accumulator)``, starting from ``create_accumulator()``; with TTL stamped now."""
        ck = self._ck
        agg = self._agg
        acc = self._cell(ck) if self._ttl is None else self._visible(ck, ABSENT)
        acc = self._validated(agg.add(value, agg.create_accumulator() if acc is ABSENT else acc))
        self._stored(ck, acc if self._ttl is None else (acc, self._clock()))
