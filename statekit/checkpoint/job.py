"""What job a checkpoint belongs to, and whether a changed job may continue from it.

The first run of a job records its description next to its state (``_job/job.json``): operator
(what shapes its state, and its parameters), key, time and row columns with their types, result
schema, max parallelism, backend, partitions, watermark delay and state formats. Every later run
compares its own description before anything runs, as Flink checks a savepoint's compatibility:
what state can carry (another backend or partition count, a new gap or delay) is carried and
reported; what it cannot (another key, columns, aggregates, result schema, max parallelism or state
format) is refused with one ``JobChangeError`` naming every old and new value and the ways out.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from ..snapshot_header import SnapshotFormatError, check_job_formats
from .errors import CheckpointError
from .storage import Storage

JOB_PATH = "_job/job.json"

REFUSED = {
    "key": "key column and type",
    "time": "time column, type and reading (--time-unit, --time-format, --time-zone)",
    "columns": "the row's columns and types",
    "result_schema": "result schema",
    "max_parallelism": "max parallelism",
    "operator.state": "operator state layout (operator, assigner kind, functions, aggregates)",
}
"""Fields whose change the stored state cannot carry, with how errors name them."""

CARRIED = {
    "backend": "backend",
    "partitions": "partitions",
    "watermark_delay_ms": "watermark delay (ms)",
    "max_ahead": "max ahead",
    "operator.parameters": "operator parameters (gap, size, lateness, trigger)",
    "statekit": "statekit version",
    "state_formats": "state formats (each one this statekit reads: check_job_formats)",
}
"""Fields a restore carries: they apply from the next epoch on."""


class JobChangeError(CheckpointError):
    """The job changed in a way its checkpoint's state cannot carry."""


def _field(description: dict[str, Any], name: str) -> Any:
    value: Any = description
    for part in name.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


MIGRATED = ("operator.state", "columns", "result_schema")
"""Refused fields a declared state migration carries: the function's state, its input and its results."""


def state_migration(old: dict[str, Any], new: dict[str, Any]) -> tuple[int, int] | None:
    """(old, new) state version when ``new`` declares a migration of the state ``old`` stored (its
    operator has a migration and a later version), else None."""
    before, after = _field(old, "operator.state.version") or 1, _field(new, "operator.state.version") or 1
    return (before, after) if _field(new, "operator.migration") and after > before else None


def compare(old: dict[str, Any], new: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(carried changes, refused changes) between two descriptions, each as ``what: old -> new``; a
    declared state migration (``state_migration``) carries the operator's state, columns and results."""
    def changes(fields: dict[str, str]) -> list[str]:
        return [f"{what}: {_text(_field(old, name))} -> {_text(_field(new, name))}"
                for name, what in fields.items() if _field(old, name) != _field(new, name)]

    migration = state_migration(old, new)
    refused = {name: what for name, what in REFUSED.items() if migration is None or name not in MIGRATED}
    carried = changes(CARRIED)
    if migration is not None:
        moved = changes({name: REFUSED[name] for name in MIGRATED})
        if moved:
            carried += [f"state migrated from version {migration[0]} to {migration[1]}"] + moved
    try:
        check_job_formats(_field(old, "state_formats"), "the recorded job's state formats")
    except SnapshotFormatError as e:
        return carried, changes(refused) + [str(e)]
    return carried, changes(refused)


class JobRecord:
    """The recorded description of the job at a checkpoint location."""

    def __init__(self, checkpoint: str) -> None:
        self.checkpoint = checkpoint
        self.storage = Storage(checkpoint)

    def read(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.storage.read(JOB_PATH))
        except FileNotFoundError:
            return None

    def write(self, description: dict[str, Any]) -> None:
        self.storage.commit(JOB_PATH, json.dumps(description, sort_keys=True, indent=1).encode(),
                            f"_job/_tmp/{uuid.uuid4().hex}.json")

    def check(self, description: dict[str, Any], has_state: bool) -> list[str]:
        """Compare ``description`` with the recorded one and record it; returns the carried changes.
        Raises JobChangeError, recording nothing, when state exists and a change cannot be carried."""
        old = self.read()
        if old is None or not has_state:
            self.write(description)
            return []
        carried, refused = compare(old, description)
        if refused:
            raise JobChangeError(
                f"checkpoint {self.checkpoint} holds the state of another job; what its state cannot carry: "
                + "; ".join(refused) + ". Ways out: run with a new checkpoint location; or finish the old job "
                "first (rerun it unchanged with --final / final=True, which fires and cleans every window) and "
                "start the new one on a new checkpoint; or declare a state migration (a new accumulator_version() "
                "with an accumulator_migration(); statekit sessionize: --migrate-state, for added or removed aggregates)")
        if carried:
            self.write(description)
        return carried
