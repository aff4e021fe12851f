"""Transform a checkpoint offline, as Flink's State Processor API rewrites a savepoint: ``read_states`` gives a
checkpoint's state as a DataFrame, the user changes it with Spark (fixes an aggregate, drops keys, reshapes a
value), and ``write_checkpoint`` writes it as a NEW checkpoint's first epoch through the initial-state path
(``initial_state``: rows routed by key group, one task per key-group range putting them into a fresh operator; never
collected on the driver), on any partition count and backend. The new checkpoint's job record is the job that wrote
it, so the job resumes from it as from its own, or is refused by the job-change check where it does not fit.

Two forms of rows, by the operator the checkpoint recorded: a session WindowOperator of built-in aggregates
(``statekit sessionize``) gives its open sessions (``state_sessions``: the ``--initial-state`` table); any other
operator its cells and timers (``state_cells``: exact JSON values, written into a KeyedProcessOperator).
"""

from __future__ import annotations

import os
from typing import Any, Callable

from .api import run_keyed
from .errors import InputError
from .event_time import MILLIS
from .initial_state import InitialState, refuse_started
from .micro_batches import no_rows
from .records import TIME_BOUND
from .state_cells import (CellRows, CellsRestore, cells_schema, check_cells_operator, merged_facts, refuse_bad_cells,
                          state_facts)
from .state_sessions import holds_sessions, read_sessions, session_state
from .state_source import SourceJob


def read_states(spark: Any, checkpoint: str, operator: str | None = None) -> Any:
    """The state of ``checkpoint``'s last committed epoch as a DataFrame (read by the executors, a task per
    partition): a session operator's open sessions (the key, ``window_start``, ``window_end`` and each aggregate's
    state columns), any other's cells and timers (the key, ``state``, ``kind``, ``namespace``, ``value``: exact
    JSON, ``state_json``). ``operator``: the operator id the checkpoint must record (None: its own)."""
    source = SourceJob.of(spark, checkpoint, operator)
    if holds_sessions(source.description):
        return read_sessions(spark, source)
    return source.per_partition(spark, CellRows(source.key_column), cells_schema(source))


def write_checkpoint(spark: Any, df: Any, target_checkpoint: str, *, output: str, source_checkpoint: str,
                     operator_factory: Callable[[], Any], partitions: int | None = None,
                     backend: str | None = None) -> dict[str, Any]:
    """Write ``df`` (rows of ``read_states``' form for ``source_checkpoint``'s job, changed or not) as the first
    epoch of the new checkpoint ``target_checkpoint``, for the job of ``source_checkpoint`` run by
    ``operator_factory``'s operator (the job's own, or a changed one: the new job record is the writer's);
    returns the epoch's metrics (``restored``: the rows put in).

    The epoch keeps the source's event-time progress (its max event time, so the resumed job's first watermark is
    the one the source would have had), a KeyedProcessOperator's timers and clocks; sessions' end timers are
    derived again. ``partitions`` (default the source's) and ``backend`` (default the source's) may change.
    ``output``: the output the resumed job writes to, which gets the epoch's metrics line as after any epoch (a
    run checks that its output holds its checkpoint's last epoch: ``recovery``). Only that epoch runs
    (``InitialState.only``). The new checkpoint starts no Spark stream: the resumed job reads its input from the
    start of what it is given. Rows that are not the job's state (a null key,
    two rows for one key of a value state, a column of another type, a session that ends before it starts or
    overlaps another of its key) are refused with ``InputError`` naming the first, by a Spark job before anything
    is written."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DataType

    source = SourceJob.of(spark, source_checkpoint)
    target = target_checkpoint if "://" in target_checkpoint else os.path.abspath(target_checkpoint)
    if target.rstrip("/") == source.checkpoint.rstrip("/"):
        raise InputError(f"write_checkpoint writes a new checkpoint: {target} is the source")
    refuse_started(target)
    d = source.description
    probe = operator_factory()
    if holds_sessions(d):
        state, restore = session_state(source, df, probe)
        state = state.drop(MILLIS)
    else:
        check_cells_operator(probe)
        states, timers = merged_facts(source.collect_json(spark, state_facts))
        state = refuse_bad_cells(df, source, states, timers)
        restore = CellsRestore(source.key_column, states, timers, d["max_parallelism"])
    seen = source.last.max_ts if source.last.max_ts is not None else -TIME_BOUND
    initial = InitialState(state.withColumn(MILLIS, F.lit(seen).cast("bigint")), restore, only=True)
    spec = source.time_spec()
    summary = run_keyed(no_rows(spark, source.input_schema()), key=source.key_column, time=d["time"]["column"],
                        columns=[c for c, _ in d["columns"]], operator_factory=operator_factory,
                        result_schema=DataType.fromDDL(d["result_schema"]),
                        output=output, checkpoint=target,
                        watermark_delay=d["watermark_delay_ms"],
                        config={"backend": backend or d["backend"], "max_parallelism": d["max_parallelism"]},
                        partitions=partitions or d["partitions"], mode="batch", operator_id=source.operator_id,
                        max_ahead=None if d["max_ahead"] in ("None", "none") else d["max_ahead"],
                        time_unit=spec.unit, time_format=spec.format, time_zone=spec.zone, initial_state=initial)
    return summary.epochs[0]
