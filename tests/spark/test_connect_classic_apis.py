"""statekit reaches Spark's classic-only APIs (the SparkContext, the JVM gateway, RDDs) only in the places
listed here (the adapter ``spark/jvm.py`` and the executor runtime's ``pyspark_internals``), each behind the
Connect check (``pyspark_internals.is_connect``) or on a session that is classic by construction: a new use fails this test until it is looked at and listed. On a Connect session these APIs
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
    ("spark/jvm.py", "classic_jvm"): "the adapter of a session its callers said is classic (is_connect)",
    ("spark/jvm.py", "rdd_partitions"): "the plan's partitions of a DataFrame its caller said is classic (is_connect)",
    ("spark/jvm.py", "ClassicJvm.log_level"): "the JVM of a classic session's adapter (accelerator_jvm: None on Connect)",
    ("spark/jvm.py", "ClassicJvm.hadoop_path"): "the JVM of a classic session's adapter",
    ("spark/jvm.py", "ClassicJvm.has_filesystem"): "the JVM of a classic session's adapter",
    ("spark/jvm.py", "ClassicJvm._hadoop_conf"): "the JVM of a classic session's adapter",
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
