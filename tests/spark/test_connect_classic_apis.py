"""statekit reaches Spark's classic-only APIs (the SparkContext, the JVM gateway, RDDs) only in the places
listed here, each behind the Connect check (``pyspark_internals.is_connect``) or on a session that is classic
by construction: a new use fails this test until it is looked at and listed. On a Connect session these APIs
raise, and the Connect runs (tests/spark/test_connect.py) fail the moment one is reached, caught or not."""

from __future__ import annotations

import ast
from pathlib import Path

import statekit
import statekit.backends
import statekit.operators

CLASSIC_ONLY = {"sparkContext", "_jvm", "_jsc", "_jconf", "_jsparkSession", "_jdf", "rdd"}
"""Attributes of a SparkSession or DataFrame that exist only on a classic session."""

ALLOWED: dict[tuple[str, str], str] = {
    ("spark/runtime/pyspark_internals.py", "spark_context"): "the accelerators' way to the SparkContext: None on Connect",
    ("spark/spark_logs.py", "SparkLogSilence.silence"): "the JVM of the context spark_context gave (None on Connect)",
    ("spark/session.py", "spark_session"): "the log level of a session is_connect said is classic",
    ("spark/session_kind.py", "master"): "a classic session's; the runtime conf's on Connect (is_connect)",
    ("spark/session_kind.py", "default_parallelism"): "a classic session's; the conf's on Connect (is_connect)",
    ("spark/session_kind.py", "job_canceller"): "cancelAllJobs on a classic session; interruptAll on Connect (is_connect)",
    ("spark/session_kind.py", "input_splits"): "the plan's partitions on a classic session; a job on Connect (is_connect)",
    ("spark/files.py", "_listed"): "Hadoop's listing on a classic session; Spark's file source on Connect (is_connect)",
    ("spark/stream_location.py", "hadoop_checkpoint"): "Hadoop's connector check on a classic session; off on Connect (is_connect)",
}
"""(file under statekit/, enclosing function) -> why it may use a classic-only API there."""


def _package_files() -> dict[str, Path]:
    """The installed package's modules by their path inside statekit/ (operators/ and backends/ install there)."""
    roots = {"": Path(statekit.__file__).parent, "operators/": Path(statekit.operators.__file__).parent,
             "backends/": Path(statekit.backends.__file__).parent}
    return {prefix + str(p.relative_to(root)): p for prefix, root in roots.items() for p in root.rglob("*.py")
            if not (prefix == "" and p.relative_to(root).parts[0] in ("operators", "backends", "bench"))}


def classic_uses(source: str) -> set[str]:
    """Names of the functions (``Class.method`` inside a class; ``<module>`` at the top) that use a
    classic-only API in ``source``: an attribute, or its name as a string (``getattr(spark, "sparkContext")``)."""
    found: set[str] = set()

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, child.name if scope == "<module>" else f"{scope}.{child.name}")
                continue
            if isinstance(child, ast.Attribute) and child.attr in CLASSIC_ONLY:
                found.add(scope)
            if isinstance(child, ast.Constant) and child.value in CLASSIC_ONLY:
                found.add(scope)
            visit(child, scope)

    visit(ast.parse(source), "<module>")
    return found


def test_the_scan_finds_every_way_of_reaching_them():
    source = '''
x = spark.rdd
def a(spark):
    return spark.sparkContext.defaultParallelism
class B:
    def c(self, df):
        return getattr(df, "_jdf")
    def d(self, spark):
        return spark.conf.get("spark.master")
'''
    assert classic_uses(source) == {"<module>", "a", "B.c"}


def test_classic_only_apis_are_reached_only_in_the_listed_places():
    uses = {(name, fn) for name, path in _package_files().items() for fn in classic_uses(path.read_text())}
    assert "spark/api.py" in _package_files() and "operators/windows.py" in _package_files()
    unlisted = sorted(uses - set(ALLOWED))
    stale = sorted(set(ALLOWED) - uses)
    assert not unlisted, f"classic-only Spark APIs reached outside the Connect check: {unlisted}"
    assert not stale, f"listed places that no longer use a classic-only API (take them off ALLOWED): {stale}"
