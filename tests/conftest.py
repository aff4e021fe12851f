"""Shared fixtures: the backend fixtures of ``statekit.testing`` (every registered backend, a manual
TTL clock, a backend factory) and the session-scoped SparkSession."""

from __future__ import annotations

from typing import Any, Iterator

import pytest
from hypothesis import Phase, settings

pytest_plugins = ["statekit.testing.fixtures"]

# `pytest --hypothesis-profile=no-shrink`: report a failing example without shrinking it (for checking
# that a differential test catches a deliberately broken build, which otherwise shrinks for minutes)
settings.register_profile("no-shrink", phases=[Phase.explicit, Phase.reuse, Phase.generate])


# -- Spark (issue 6) ---------------------------------------------------------------------------
# One SparkContext per process: the shared local session lives for the whole test session; tests
# on Spark's local-cluster master run the CLI in a subprocess (see tests/spark/test_spark_cluster.py).

SPARK_MASTER = "local[2,4]"  # two cores; a failed task is retried up to 4 times, as on a cluster


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The shared local SparkSession (UI off, few shuffle partitions)."""
    from statekit.spark import spark_session

    # state hosts of finished tests end soon: each test's partitions have hosts of their own
    session = spark_session(SPARK_MASTER, {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
                                           "spark.statekit.host_idle_timeout": "20s"},
                            app_name="statekit-tests")
    yield session
    session.stop()


# -- Spark Connect ------------------------------------------------------------------------------
# One Connect server per test module that asks for it, in its own process (beside the classic session above),
# stopped with the module: an idle server keeps using CPU that the rest of the suite needs. Its clients run
# as new interpreters (tests/connect_support.py).


@pytest.fixture(scope="module")
def connect_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The module's local Spark Connect server (``tests.connect_support.ConnectServer``: its ``url``, ``run``)."""
    from tests.connect_support import start_connect_server

    server = start_connect_server(tmp_path_factory.mktemp("connect"))
    yield server
    server.stop()
