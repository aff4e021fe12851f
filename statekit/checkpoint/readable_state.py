"""How inspection reads an operator's stored state: packed windows of the built-in aggregates unpacked
into lists people can read (``read_state_df``, tests), everything else as stored."""

from __future__ import annotations

from typing import Any

from ..operators import RowAggregate
from ..operators.engines.window_engine import engine_storing


def readable_state(description: dict[str, Any] | None, state: str, value: Any) -> Any:
    """A value a WindowOperator described by ``description`` (its ``describe()``) stored in ``state``, as
    people read it: a packed cell of a RowAggregate in the list form ``[timer, *bounds, accumulator, ...]``
    (a session's bounds: start and end; an aligned window's: start); a session-table page as
    ``[[key, start, end, accumulator], ...]``; anything else as it is (a user's own PackedAggregate cannot
    be rebuilt offline)."""
    engine = engine_storing(state)
    if engine is None or type(value) is not bytes or not isinstance(description, dict):
        return value
    function = RowAggregate.from_layout(description.get("state", {}).get("function"))
    if function is None:
        return value
    try:
        return engine.readable(value, function, function.version)
    except ValueError as e:
        raise ValueError(f"state {state!r}: a stored value of {len(value)} bytes is not a {engine.LAYOUT} value of "
                         f"the recorded aggregates {description['state']['function'].get('aggregates')}: {e} "
                         f"(read it raw with statekit.checkpoint.read_state)") from None
