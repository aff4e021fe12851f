"""What a Spark Connect client can tell of the cluster's task slots from the conf alone."""

from __future__ import annotations

import pytest

from statekit.spark.session_kind import CONNECT_DEFAULT_PARALLELISM, default_parallelism, task_slots


class _Conf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)


class _ConnectSession:
    """Looks like a Spark Connect session to ``is_connect`` (its type's module)."""

    def __init__(self, values: dict[str, str]) -> None:
        self.conf = _Conf(values)


_ConnectSession.__module__ = "pyspark.sql.connect.session"


@pytest.mark.parametrize("conf, slots", [
    ({"spark.default.parallelism": "6", "spark.master": "spark://m:7077"}, 6),
    ({"spark.master": "local[3]"}, 3),
    ({"spark.master": "spark://m:7077"}, None),
    ({}, None),
])
def test_a_connect_client_tells_the_slots_only_from_what_its_conf_says(conf, slots):
    spark = _ConnectSession(conf)
    assert task_slots(spark) == slots
    assert default_parallelism(spark) == (slots or CONNECT_DEFAULT_PARALLELISM)
