"""Invalid records: what the operators refuse, and how they report it.

A record is invalid when its key cannot be keyed state (None, NaN, unhashable, unserializable)
or, for an event-time window assigner, its timestamp is missing, not a Python ``int`` (floats,
strings, bools, NumPy scalars are refused: times are integer milliseconds) or outside
``[MIN_EVENT_TIMESTAMP, MAX_EVENT_TIMESTAMP]`` (+-2**62 ms, about 146 million years, so every
window end and timer stays within int64). An operator raises ``InvalidRecordError`` naming the
field and the record, or, given an ``invalid_output_tag``, emits an ``InvalidRecord`` to that
side output and counts it in ``metrics["invalid"]``. Nothing invalid is dropped silently.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from statekit import StateError

MAX_EVENT_TIMESTAMP = 1 << 62
MIN_EVENT_TIMESTAMP = -(1 << 62)
_SHOWN = 120


class InvalidRecordError(StateError, ValueError):
    """A record an operator cannot process; the message names the field, the reason and the record."""


class InvalidRecord(NamedTuple):
    """A refused record as emitted to the invalid side output (its timestamp there is None)."""

    key: Any
    value: Any
    timestamp: Any
    field: str
    reason: str


def timestamp_problem(ts: Any) -> str | None:
    """Why ``ts`` is not a usable event timestamp, or None when it is."""
    if type(ts) is int:
        if MIN_EVENT_TIMESTAMP <= ts <= MAX_EVENT_TIMESTAMP:
            return None
        return f"timestamp {ts} is outside [-2**62, 2**62] ms"
    if ts is None:
        return "timestamp is missing (None) but the window assigner is event-time"
    if isinstance(ts, float):
        return f"timestamp {ts!r} is a float, not integer milliseconds"
    return f"timestamp {_short(ts)} of type {type(ts).__name__} is not an int (integer milliseconds)"


def describe(record: Any) -> str:
    """A bounded ``repr`` of a record for error messages."""
    return _short(record)


def error(record: Any, field: str, reason: str) -> InvalidRecordError:
    return InvalidRecordError(f"invalid record {describe(record)}: {field}: {reason}")


def _short(obj: Any) -> str:
    text = repr(obj)
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}... ({len(text)} chars)"
