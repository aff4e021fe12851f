"""A session WindowOperator's state (``statekit sessionize``, either layout) as rows (``read_states``/
``write_checkpoint``): its open sessions as ``--initial-state`` takes them, the key, ``window_start`` and
``window_end`` (as the job's results have them) and each aggregate's state columns (``STATE_FIELDS``: its result,
or avg's sum and count). Written back they are checked as an initial state is (``initial_sessions``) and put in by
``SessionRestore``; the sessions' end timers are derived again as the operator puts them in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..checkpoint.readable_state import readable_state
from ..logical_snapshot import LogicalSnapshot
from ..operators import RowAggregate
from ..operators.aggregates.builtin_aggregates import AGGREGATES
from ..operators.engines.session_pages import TABLE_STATE
from ..operators.engines.window_engine import engine_storing
from .errors import InputError
from .event_time import TimeSpec, from_millis
from .initial_sessions import SessionRestore, StateColumn, checked_sessions, session_state_columns
from .state_source import SourceJob


def holds_sessions(description: dict[str, Any]) -> bool:
    """Whether the job ``description`` records is a WindowOperator of event-time sessions of built-in aggregates."""
    state = (description.get("operator") or {}).get("state", {})
    return (state.get("operator") == "WindowOperator" and state.get("assigner") == "EventTimeSessionWindows"
            and RowAggregate.from_layout(state.get("function")) is not None)


def _aggregates(source: SourceJob) -> list[tuple[str, int | None]]:
    """(kind, position in the row) of each recorded aggregate."""
    return [(kind, pos) for kind, pos in source.description["operator"]["state"]["function"]["aggregates"]]


def recorded_bounds(description: dict[str, Any]) -> tuple[Any, str]:
    """The Spark type and unit (``TimeSpec.bounds_unit``) of the window bounds of the session job ``description``
    records, as its results have them (a text time column's type alone does not say which)."""
    from pyspark.sql.types import DataType

    bounds = DataType.fromDDL(description["result_schema"])["window_start"].dataType
    return bounds, TimeSpec.recorded(description["time"]).bounds_unit(bounds)


def session_columns(source: SourceJob) -> list[StateColumn]:
    """The columns of the job's open sessions (``initial_sessions.session_state_columns``)."""
    row = [c for c, _ in source.description["columns"]]
    return session_state_columns(source.input_schema(), source.key_column,
                                 [(kind, None if pos is None else row[pos]) for kind, pos in _aggregates(source)],
                                 recorded_bounds(source.description)[0])


def sessions_schema(source: SourceJob) -> Any:
    """The Spark schema of ``session_columns``."""
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(c.name, c.dtype, c.nullable) for c in session_columns(source)])


@dataclass(frozen=True)
class SessionRowsOf:
    """A partition's logical snapshot as open sessions (``SourceJob.per_partition``): ``names`` the columns,
    ``widths`` each aggregate's number of state columns, ``unit`` the window bounds' (``TimeSpec.bounds_unit``)."""

    operator: dict[str, Any]
    names: tuple[str, ...]
    widths: tuple[int, ...]
    unit: str

    def __call__(self, snap: LogicalSnapshot) -> dict[str, list]:
        keys, starts, ends, accumulators = [], [], [], []
        for name, s in snap.states.items():
            if engine_storing(name) is None:
                if s.entries:
                    raise ValueError(f"state {name!r} holds no sessions: a session operator's state is its sessions")
                continue
            table = name == TABLE_STATE  # pages of sessions; else a cell per key (a table that moved has both)
            for _, key, _, cell in s.entries:
                found = readable_state(self.operator, name, cell)
                for k, start, end, acc in (found if table else
                                           ([key, *found[i:i + 3]] for i in range(1, len(found), 3))):
                    keys.append(k)
                    starts.append(start)
                    ends.append(end)
                    accumulators.append(acc)
        columns = [keys, *(from_millis(np.array(b, np.int64), self.unit).tolist() for b in (starts, ends))]
        for i, width in enumerate(self.widths):
            slots = [acc[i] for acc in accumulators]
            columns += [slots] if width == 1 else [[s[j] for s in slots] for j in range(width)]
        return dict(zip(self.names, columns))


def read_sessions(spark: Any, source: SourceJob) -> Any:
    """The open sessions of ``source``'s last epoch as a DataFrame of ``session_columns``."""
    unit = recorded_bounds(source.description)[1]
    widths = tuple(len(AGGREGATES[kind].STATE_FIELDS) for kind, _ in _aggregates(source))
    rows = SessionRowsOf(source.description["operator"], tuple(c.name for c in session_columns(source)), widths, unit)
    return source.per_partition(spark, rows, sessions_schema(source))


def session_state(source: SourceJob, df: Any, operator: Any) -> tuple[Any, SessionRestore]:
    """``df`` checked as the job's open sessions (``InputError`` naming the first row that is not one, before
    anything is written), with its bounds in milliseconds, and what puts a task's rows into ``operator``'s kind."""
    if not holds_sessions({"operator": operator.describe()}):
        raise InputError(f"sessions are written into a WindowOperator of event-time sessions of built-in aggregates "
                         f"(statekit sessionize's); operator_factory made {operator.describe()['state']}")
    columns = session_columns(source)
    checked = checked_sessions(df, "the state DataFrame", columns, operator.assigner.gap, source.time_spec())
    return checked, SessionRestore(tuple(_aggregates(source)), tuple(c.name for c in columns[3:]))
