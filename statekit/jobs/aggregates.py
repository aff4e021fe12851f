"""Session aggregates from ``--agg`` specs (``count``, ``sum:value``, ``avg:x``, ...: one per built-in
aggregate of ``operators.aggregates.builtin_aggregates``): parsing them into the operators' ``RowAggregate``
(re-exported here), and the ``--agg`` help, both read from that one registry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..operators.aggregates.row_aggregate import KINDS, RowAggregate
from ..operators.aggregates.builtin_aggregates import AGGREGATES


@dataclass(frozen=True)
class Agg:
    """One output aggregate: ``kind`` of input ``column`` (None for ``count``), named ``name``."""

    kind: str
    column: str | None

    @property
    def name(self) -> str:
        return AGGREGATES[self.kind].output_name(self.column)


def agg_help() -> str:
    """The ``--agg`` flag's help: every built-in aggregate's spec and what it computes."""
    specs = ", ".join(f"{a.spec()} ({a.HELP})" for a in AGGREGATES.values())
    return f"{specs}; repeatable, default count"


def parse_aggs(specs: Iterable[str]) -> list[Agg]:
    """``["sum:value", "count"]`` -> Aggs; a bad spec is an error naming it and the valid ones."""
    aggs = []
    for spec in specs:
        kind, _, column = spec.partition(":")
        kind, column = kind.strip().lower(), column.strip()
        found = AGGREGATES.get(kind)
        if found is None or found.COLUMN != bool(column):
            bare = " or ".join(a.NAME for a in AGGREGATES.values() if not a.COLUMN)
            kinds = ", ".join(a.NAME for a in AGGREGATES.values() if a.COLUMN)
            raise ValueError(f"--agg {spec!r}: expected {bare} or KIND:COLUMN with KIND one of {kinds}")
        aggs.append(Agg(kind, column or None))
    names = [a.name for a in aggs]
    if len(set(names)) != len(names):
        raise ValueError(f"--agg: the same aggregate is asked twice: {', '.join(names)}")
    return aggs


__all__ = ["KINDS", "Agg", "RowAggregate", "agg_help", "parse_aggs"]
