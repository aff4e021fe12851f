"""A SparkSession with statekit's defaults: Java checked first, workers on this Python, quiet UI; classic or
Spark Connect (``remote``)."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping

from .java import find_java
from .jvm import classic_jvm
from .runtime import is_connect

DAEMON_MODULE = "statekit.spark.runtime.daemon"
"""``spark.python.daemon.module``: workers forked with statekit loaded (named, not imported: the daemon
runs it as ``__main__``, which must not find it imported already)."""
SPARK_REMOTE = "SPARK_REMOTE"
"""pyspark's environment variable naming a Spark Connect server (``sc://host:port``)."""
DEFAULT_MASTER = "local[*,4]"  # local mode retries a failed task up to 4 times, like a cluster
QUIET_LOG_CONFIG = Path(__file__).with_name("log4j2-quiet.properties")
"""Spark's log4j2 configuration for a quiet session, from the driver JVM's start: errors only, so that no
WARN banner comes before statekit's own output."""
_STATIC = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
           "spark.python.daemon.module": DAEMON_MODULE}  # the last: workers fork with statekit loaded
"""Static settings of a session started here (its JVM's, not a session's: a Spark Connect session refuses them,
with a ``CANNOT_MODIFY_CONFIG`` warning each). A Spark Connect server reached at ``sc://`` keeps its own."""
_SUBMIT_OPTS = "SPARK_SUBMIT_OPTS"
"""Java options spark-submit adds to the JVM it starts (the driver, for a session started here): added to, not
replacing, ``spark.driver.extraJavaOptions`` of the user or the cluster's spark-defaults."""


def remote_url(master: str | None, remote: str | None) -> str | None:
    """The Spark Connect URL a session is to use: ``remote``, else pyspark's ``SPARK_REMOTE``; None: a classic
    session. A ``master`` beside either is refused (a Spark Connect server has its own)."""
    url = remote or os.environ.get(SPARK_REMOTE) or None
    if master and url:
        given = f"--remote {remote}" if remote else f"{SPARK_REMOTE}={url} in the environment"
        raise ValueError(f"--master {master} and {given}: a Spark Connect server has its own master; pass one "
                         f"of them{'' if remote else f' (unset {SPARK_REMOTE} for a classic session)'}")
    return url


def starts_jvm(url: str | None) -> bool:
    """Whether a session of Spark Connect URL ``url`` (None: classic) starts Spark's JVM here: all but ``sc://``."""
    return url is None or not url.startswith("sc://")


def spark_session(master: str | None = None, conf: Mapping[str, Any] | None = None, app_name: str = "statekit",
                  quiet: bool = True, remote: str | None = None) -> Any:
    """Get or create the SparkSession; ``master`` default ``local[*,4]``; ``remote``: a Spark Connect session
    instead (``sc://host:port``, or ``local[N]`` for a server started here; default pyspark's ``SPARK_REMOTE``;
    ``remote_url``); ``conf`` adds Spark settings (``spark.statekit.*`` included; a Connect server
    keeps its own static ones); ``quiet``: Spark logs errors only (else warnings too). Raises
    ``JavaNotFoundError`` before Spark starts without Java (not needed for an ``sc://`` server)."""
    url = remote_url(master, remote)
    if starts_jvm(url):
        find_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need this interpreter (statekit installed)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if url is not None:
        builder = builder.remote(url)
    elif master or "PYSPARK_GATEWAY_PORT" not in os.environ:  # under spark-submit its --master applies
        builder = builder.master(master or DEFAULT_MASTER)
    builder = builder.config("spark.sql.shuffle.partitions", "4")
    if url is None:
        for k, v in _STATIC.items():
            builder = builder.config(k, v)
    for k, v in (conf or {}).items():
        builder = builder.config(k, str(v))
    options = os.environ.get(_SUBMIT_OPTS)
    java_options = []
    if quiet and "log4j2.configurationFile" not in (options or ""):
        java_options.append(f"-Dlog4j2.configurationFile={QUIET_LOG_CONFIG.as_uri()}")
    if url is not None and starts_jvm(url):  # a Connect server started here: its JVM takes them, its sessions refuse them
        java_options += [f"-D{k}={v}" for k, v in _STATIC.items()]
    if java_options:
        os.environ[_SUBMIT_OPTS] = " ".join([options or "", *java_options]).strip()
    try:
        spark = builder.getOrCreate()
    finally:  # the option is for the JVM started here, not for processes this one starts later
        if options is None:
            os.environ.pop(_SUBMIT_OPTS, None)
        else:
            os.environ[_SUBMIT_OPTS] = options
    if not is_connect(spark):  # a Connect session's log is its server's
        classic_jvm(spark).set_log_level("ERROR" if quiet else "WARN")
    return spark


@contextmanager
def command_session(master: str | None = None, conf: Mapping[str, Any] | None = None, app_name: str = "statekit",
                    quiet: bool = True, remote: str | None = None) -> Iterator[Any]:
    """``spark_session`` for one command (``statekit sessionize``, ``statekit demo``), stopped when it ends if this
    call started it: a JVM left to its shutdown hooks as the process exits kills its executors while a standalone
    or local-cluster master's workers still relaunch them (ERROR lines and stack traces after the summary). A
    session running already (a notebook's, a test's) is left running."""
    from pyspark.sql import SparkSession

    running = SparkSession.getActiveSession()
    spark = spark_session(master, conf, app_name=app_name, quiet=quiet, remote=remote)
    try:
        yield spark
    finally:
        if running is None:
            spark.stop()
