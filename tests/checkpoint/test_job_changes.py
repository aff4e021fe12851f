"""Comparing a job with the one its checkpoint recorded: what is carried, what a declared state
migration carries, and what is refused, each named old -> new."""

from __future__ import annotations

import copy

from statekit.checkpoint.job import compare


def job(**changes) -> dict:
    d = {"key": {"column": "user_id", "type": "string"}, "columns": [["value", "bigint"]], "backend": "rocksdb",
         "partitions": 2, "result_schema": "struct<user_id:string,sum_value:bigint>", "max_parallelism": 128,
         "operator": {"state": {"function": {"aggregates": [["sum", 0]]}, "version": 1},
                      "parameters": {"gap": 30000}, "migration": False}}
    for path, value in changes.items():
        *parents, last = path.split("__")
        node = d
        for p in parents:
            node = node[p]
        node[last] = value
    return d


def test_carried_changes_are_named_and_nothing_is_refused():
    carried, refused = compare(job(), job(backend="heap", partitions=3, operator__parameters={"gap": 60000}))
    assert refused == []
    assert carried == ['backend: "rocksdb" -> "heap"', "partitions: 2 -> 3",
                       'operator parameters (gap, size, lateness, trigger): {"gap": 30000} -> {"gap": 60000}']


def test_a_declared_migration_carries_state_columns_and_results_but_not_the_key():
    added = dict(operator__state={"function": {"aggregates": [["sum", 0], ["max", 0]]}, "version": 2},
                 result_schema="struct<user_id:string,sum_value:bigint,max_value:bigint>")
    carried, refused = compare(job(), job(**added, operator__migration=True))
    assert refused == [] and carried[0] == "state migrated from version 1 to 2"
    assert [c.split(":")[0] for c in carried[1:]] == ["operator state layout (operator, assigner kind, functions, aggregates)",
                                                      "result schema"]
    _, refused = compare(job(), job(**added))  # a later version without its migration
    assert [r.split(":")[0] for r in refused] == ["result schema", "operator state layout (operator, assigner kind, "
                                                  "functions, aggregates)"]
    same_version = copy.deepcopy(added)
    same_version["operator__state"]["version"] = 1
    _, refused = compare(job(), job(**same_version, operator__migration=True))  # no later version: nothing to migrate
    assert len(refused) == 2
    _, refused = compare(job(), job(**added, operator__migration=True, key={"column": "session", "type": "string"}))
    assert refused == ['key column and type: {"column": "user_id", "type": "string"} -> {"column": "session", "type": "string"}']


def test_jobs_recorded_before_versions_existed_still_compare_equal_and_migrate():
    """A version-1 operator describes its state as statekit did before versions (no "version" field), so
    such a checkpoint is not refused after an upgrade; a later version with a migration is recognised."""
    from statekit.jobs.sessionize import SessionOperatorFactory

    v1 = {"operator": SessionOperatorFactory(30_000, (("sum", 0), ("count", None)))().describe()}
    assert "version" not in v1["operator"]["state"] and v1["operator"]["migration"] is False
    assert compare(v1, copy.deepcopy(v1)) == ([], [])
    v2 = {"operator": SessionOperatorFactory(30_000, (("sum", 0), ("count", None), ("max", 0)),
                                             ("sum_v", "count", "max_v"), 2, ((1, ("sum_v", "count")),))().describe()}
    assert v2["operator"]["state"]["version"] == 2 and v2["operator"]["migration"] is True
    carried, refused = compare(v1, v2)
    assert refused == [] and carried[0] == "state migrated from version 1 to 2"
