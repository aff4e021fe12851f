"""A failed task's statekit error reaches the driver as itself, rebuilt from Spark's text only among the
statekit errors already loaded: nothing is imported on the text's word."""

from __future__ import annotations

import sys

from statekit.checkpoint import CorruptCheckpointError, LeaseLostError
from statekit.spark.errors import task_failure


def _spark_text(last: str) -> RuntimeError:
    return RuntimeError("An exception was thrown from the Python worker:\nTraceback (most recent call last):\n"
                        '  File "tasks.py", line 9, in run_partition\n' + last + "\n")


def test_the_innermost_statekit_error_of_a_task_is_raised_as_itself():
    error = task_failure(_spark_text("statekit.checkpoint.errors.CorruptCheckpointError: manifest m fails its checksum"))
    assert type(error) is CorruptCheckpointError and str(error) == "manifest m fails its checksum"
    nested = _spark_text("statekit.checkpoint.errors.CorruptCheckpointError: outer\n"
                         "statekit.checkpoint.lease.LeaseLostError: checkpoint c: lease lost")
    assert type(task_failure(nested)) is LeaseLostError


def test_an_unknown_or_foreign_class_name_leaves_sparks_error_and_imports_nothing():
    for text in ("statekit.evil_module.Thing: boom", "os.system: boom", "ValueError: boom"):
        original = _spark_text(text)
        assert task_failure(original) is original
    assert "statekit.evil_module" not in sys.modules
