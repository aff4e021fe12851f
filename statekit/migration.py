"""State schema evolution: how a stored cell of an older format version becomes a current one.

A state's descriptor carries its format version and an optional migration
(``StateDescriptor.with_version``); backends record the version with the state (logical snapshots,
RocksDB's state metadata) and, when a restore meets another one, pass every stored cell through
``cell_migration`` once, as the state is registered. This module is the one place that knows what a
migration applies to in each kind of cell: the value of a value, reducing or aggregating state,
each element of a list, each value of a map, with TTL timestamps kept as they are.
"""

from __future__ import annotations

from typing import Any, Callable

from .descriptors import StateDescriptor
from .errors import StateMigrationError


def cell_migration(descriptor: StateDescriptor, stored_version: int) -> Callable[[Any, Any], Any]:
    """``migrate(key, cell)``: a logical snapshot cell of ``descriptor``'s state stored by
    ``stored_version``, in the descriptor's version. Raises StateMigrationError naming the state and
    both versions when the descriptor declares no migration, or the stored version is the newer one."""
    name, version, migration = descriptor.name, descriptor.version, descriptor.migration
    if stored_version > version:
        raise StateMigrationError(f"state '{name}' is stored at version {stored_version}, newer than version "
                                  f"{version} of this job's descriptor: run the job that wrote it, or a newer one")
    if migration is None:
        raise StateMigrationError(f"state '{name}' is stored at version {stored_version}, and this job declares "
                                  f"version {version} without a migration: declare one (with_version(version, "
                                  f"migration)) or restore into the job that wrote it")

    dumps = descriptor.serializer.dumps

    def value(key: Any, old: Any) -> Any:
        try:
            new = migration(stored_version, old)
            dumps(new)  # a value the state cannot store fails here, naming state and key, not at a later snapshot
            return new
        except Exception as e:
            raise StateMigrationError(f"state '{name}', key {key!r}: migrating a value from version {stored_version} "
                                      f"to {version} failed: {type(e).__name__}: {e}") from e

    ttl = descriptor.ttl_config is not None
    one = (lambda key, e: [value(key, e[0]), e[1]]) if ttl else value
    if descriptor.kind == "list":
        return lambda key, cell: [one(key, e) for e in cell]
    if descriptor.kind == "map":
        return lambda key, cell: {k: one(key, v) for k, v in dict(cell).items()}
    return one
