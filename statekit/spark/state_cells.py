"""A KeyedProcessOperator's state as rows (``read_states``/``write_checkpoint``): one row per stored cell and per
timer, ``<key column>`` (the job's key type), ``state`` (the state's or timer service's name), ``kind`` (the state's
kind: value, list, map, reducing, aggregating; or ``event_timer``, ``processing_timer``), ``namespace`` and
``value`` as exact JSON (``state_json``; a timer's value is its timestamp). A state with TTL keeps its stored cells
(each value with its expiry). Written back, the rows are checked on the executors before anything is written, then
each task loads its rows into its fresh operator's backend as a logical snapshot (``restore_logical``), timers and
the timer services' clocks with them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from ..key_identity import key_problem
from ..keygroups import key_group_for
from ..logical_snapshot import LogicalSnapshot, StateMeta, StateSection, TimerSection
from ..operators import KeyedProcessOperator
from ..timers import MAX_TIMESTAMP, MIN_TIMESTAMP
from .errors import InputError
from .state_json import StateJsonError, from_json, to_json
from .state_source import SourceJob

TIMER_KINDS = {"event": "event_timer", "processing": "processing_timer"}
"""A timer row's ``kind`` per timer domain of a logical snapshot."""
CELL_COLUMNS = ("state", "kind", "namespace", "value")
ROWS_BACKEND = "rows"
"""The ``backend`` a logical snapshot made of rows names (it was made by no backend)."""
SHAPES = {"list": list, "map": dict}
"""The JSON shape of a state kind's cell (the others hold any value)."""


def cells_schema(source: SourceJob) -> Any:
    """The Spark schema of the rows: the key column as the job's key, then ``CELL_COLUMNS`` as text."""
    from pyspark.sql.types import StringType, StructField, StructType

    key = source.input_schema()[source.key_column]
    return StructType([StructField(key.name, key.dataType, True)] + [StructField(c, StringType(), False)
                                                                     for c in CELL_COLUMNS])


@dataclass(frozen=True)
class CellRows:
    """A partition's logical snapshot as row columns (``SourceJob.per_partition``)."""

    key: str

    def __call__(self, snap: LogicalSnapshot) -> dict[str, list]:
        columns: dict[str, list] = {c: [] for c in (self.key, *CELL_COLUMNS)}

        def add(*values: Any) -> None:
            for column, value in zip(columns.values(), values):
                column.append(value)

        for name, s in sorted(snap.states.items()):
            for _, key, namespace, cell in s.entries:
                add(key, name, s.meta.kind, to_json(namespace), to_json(cell))
        for name, t in sorted(snap.timers.items()):
            for kind, timers in ((TIMER_KINDS["event"], t.event), (TIMER_KINDS["processing"], t.processing)):
                for timestamp, key, namespace in timers:
                    add(key, name, kind, to_json(namespace), to_json(timestamp))
        return columns


def state_facts(snap: LogicalSnapshot) -> dict[str, Any]:
    """What a partition's snapshot says of its states (kind, TTL, version) and timer services (clocks)."""
    return {"states": {n: [s.meta.kind, s.meta.ttl, s.meta.version] for n, s in snap.states.items()},
            "timers": {n: [t.watermark, t.processing_time] for n, t in snap.timers.items()}}


def merged_facts(facts: list[dict[str, Any]]) -> tuple[dict[str, list], dict[str, list]]:
    """The states and timer services of every partition: each state as one partition has it, each service's clocks
    the latest any partition reached."""
    states: dict[str, list] = {}
    timers: dict[str, list] = {}
    for f in facts:
        states.update(f["states"])
        for name, (watermark, processing) in f["timers"].items():
            w, p = timers.get(name, (MIN_TIMESTAMP, MIN_TIMESTAMP))
            timers[name] = [max(w, watermark), max(p, processing)]
    return states, timers


@dataclass(frozen=True)
class CellCheck:
    """mapInArrow function over the rows to write: each row that is no cell or timer of the job's state, as
    (``key``, ``state``, ``namespace``, ``why``) text."""

    key: str
    states: dict[str, list]
    """Each state of the job: its kind, whether it has a TTL (its cells are ``[value, expiry]``), its version."""
    services: tuple[str, ...]

    def __call__(self, batches: Any) -> Iterator[Any]:
        import pyarrow as pa

        for batch in batches:
            bad: list[tuple] = []
            for row in zip(*(batch.column(c).to_pylist() for c in (self.key, *CELL_COLUMNS))):
                why = self.problem(*row)
                if why is not None:
                    bad.append(("null" if row[0] is None else str(row[0]), str(row[1]), str(row[3]), why))
            if bad:
                yield pa.RecordBatch.from_arrays([pa.array(list(c), pa.string()) for c in zip(*bad)],
                                                 names=["key", "state", "namespace", "why"])

    def problem(self, key: Any, state: str | None, kind: str | None, namespace: str | None,
                value: str | None) -> str | None:
        """Why the row is no cell or timer of the job's state (None: it is one)."""
        if key is None:
            return "null key"
        for name, given in zip(CELL_COLUMNS, (state, kind, namespace, value)):
            if given is None:
                return f"{name} is null"
        reason = key_problem(key)
        if reason is not None:
            return reason
        try:
            from_json(namespace)
            cell = from_json(value)
        except StateJsonError as e:
            return f"namespace or value is not a value's exact JSON: {e}"
        if kind in TIMER_KINDS.values():
            if state not in self.services:
                return f"no timer service {state!r} in the job's state (it has: {', '.join(self.services) or 'none'})"
            if type(cell) is not int or not MIN_TIMESTAMP <= cell <= MAX_TIMESTAMP:
                return f"a timer's value is its timestamp, an integer of milliseconds; got {value[:40]}"
            return None
        known = self.states.get(state)
        if known is None:
            return f"no state {state!r} in the job's state (it has: {', '.join(sorted(self.states)) or 'none'})"
        expected, ttl = known[0], known[1]
        if kind != expected:
            return f"state {state!r} is {expected} state, not {kind}"
        if ttl:
            if type(cell) is not list or len(cell) != 2 or type(cell[1]) is not int:
                return f"state {state!r} has a TTL: its value is [value, expiry in ms]"
            cell = cell[0]
        shape = SHAPES.get(kind)
        if shape is not None and type(cell) is not shape:
            return f"a {kind} state's value is a JSON {'array' if shape is list else 'object or $map'}"
        return None


def refuse_bad_cells(df: Any, source: SourceJob, states: dict[str, list], timers: dict[str, list]) -> Any:
    """``df`` as the rows to write (its columns in order), or ``InputError`` naming its first row that is not a
    cell or timer of the job (``CellCheck``) or repeats one (two rows for one key, namespace and state), and how
    many there are; its columns are checked first."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    expected = cells_schema(source)
    names = [f.name for f in expected]
    if sorted(df.columns) != sorted(names):
        raise InputError(f"the state DataFrame has the columns {df.columns}; the job's cells have {names}")
    for f in expected:
        actual = df.schema[f.name].dataType
        if actual != f.dataType:
            raise InputError(f"the state DataFrame's column {f.name!r} has type {actual.simpleString()}; it holds "
                             f"{'the job key' if f.name == source.key_column else 'text'}, of type "
                             f"{f.dataType.simpleString()}")
    rows = df.select(*names)
    check = CellCheck(source.key_column, states, tuple(sorted(timers)))
    bad = rows.mapInArrow(check, "key string, state string, namespace string, why string")
    timer = F.col("kind").isin(*TIMER_KINDS.values())
    twice = (rows.groupBy(source.key_column, "state", "namespace", F.when(timer, F.col("value")).alias("at"))
             .count().filter(F.col("count") > 1)
             .select(F.col(source.key_column).cast(StringType()).alias("key"), "state", "namespace",
                     F.lit("two rows for one key, namespace and state (or timer)").alias("why")))
    bad = bad.unionByName(twice)
    first = bad.first()
    if first is None:
        return rows
    count = bad.count()
    said = f"{count:,} rows are" if count > 1 else "1 row is"
    raise InputError(f"the state DataFrame: {said} not the job's state, nothing was written; the first: "
                     f"{source.key_column}={first['key']}, state={first['state']}, namespace={first['namespace']}: "
                     f"{first['why']}")


@dataclass(frozen=True)
class CellsRestore:
    """``InitialState.restore`` of checked rows: a task's rows as a logical snapshot of the job's ``states``
    (name -> kind, TTL, version) and timer services (``timers``: name -> watermark, processing time), loaded into
    its fresh KeyedProcessOperator's backend; returns how many keys got state."""

    key: str
    states: dict[str, list]
    timers: dict[str, list]
    max_parallelism: int

    def __call__(self, operator: Any, table: Any) -> int:
        mp = self.max_parallelism
        states = {n: StateSection(StateMeta(k, ttl, v), []) for n, (k, ttl, v) in self.states.items()}
        timers = {n: TimerSection(w, p, [], []) for n, (w, p) in self.timers.items()}
        keys = table.column(self.key).to_pylist()
        for key, name, kind, namespace, value in zip(keys, *(table.column(c).to_pylist() for c in CELL_COLUMNS)):
            if kind == TIMER_KINDS["event"]:
                timers[name].event.append([from_json(value), key, from_json(namespace)])
            elif kind == TIMER_KINDS["processing"]:
                timers[name].processing.append([from_json(value), key, from_json(namespace)])
            else:
                states[name].entries.append([key_group_for(key, mp), key, from_json(namespace), from_json(value)])
        operator.restore_logical(LogicalSnapshot(ROWS_BACKEND, mp, range(0, mp), states, timers))
        return len(set(keys))


def check_cells_operator(operator: Any) -> None:
    """``InputError`` unless ``operator`` takes cells (a KeyedProcessOperator)."""
    if not isinstance(operator, KeyedProcessOperator):
        raise InputError(f"state cells are written into a KeyedProcessOperator; operator_factory made a "
                         f"{type(operator).__name__}")
