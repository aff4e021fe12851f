"""Session aggregates from ``--agg`` specs (``sum:value``, ``count``, ``min:x``, ``max:x``, ``avg:x``,
``first:x``, ``last:x``): parsing them into the operators' ``RowAggregate`` (re-exported here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..operators.aggregates import KINDS, RowAggregate


@dataclass(frozen=True)
class Agg:
    """One output aggregate: ``kind`` of input ``column`` (None for ``count``), named ``name``."""

    kind: str
    column: str | None

    @property
    def name(self) -> str:
        return "count" if self.kind == "count" else f"{self.kind}_{self.column}"


def parse_aggs(specs: Iterable[str]) -> list[Agg]:
    """``["sum:value", "count"]`` -> Aggs; a bad spec is an error naming it and the valid kinds."""
    aggs = []
    for spec in specs:
        kind, _, column = spec.partition(":")
        kind, column = kind.strip().lower(), column.strip()
        if kind not in KINDS or (kind == "count") != (not column):
            raise ValueError(f"--agg {spec!r}: expected count or KIND:COLUMN with KIND one of sum, min, max, avg, first, last")
        aggs.append(Agg(kind, column or None))
    names = [a.name for a in aggs]
    if len(set(names)) != len(names):
        raise ValueError(f"--agg: the same aggregate is asked twice: {', '.join(names)}")
    return aggs


__all__ = ["KINDS", "Agg", "RowAggregate", "parse_aggs"]
