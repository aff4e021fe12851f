"""``defer_pandas``: Arrow work in a statekit task or state host leaves pandas unloaded, and once anything
imports pandas, pyarrow converts pandas objects exactly as it does in a process that never deferred it.
Each case runs in a fresh interpreter (pandas and pyarrow's check for it are per process)."""

from __future__ import annotations

import json
import subprocess
import sys

ARROW_WORK = """
import numpy as np, pyarrow as pa, pyarrow.compute as pc
pa.array([1, 2]); pa.chunked_array([[1]]).to_numpy(); pc.greater(pa.array(np.arange(3)), 1)
pa.RecordBatch.from_pydict({"a": ["x"]})
"""
PANDAS_OBJECTS = """
import pandas as pd
out["nulls"] = pa.array(pd.Series([1.0, None])).null_count  # a pandas NaN is a null
out["tz"] = str(pa.array(pd.Series(pd.to_datetime(["2020-01-01"]).tz_localize("UTC"))).type)
out["frame"] = list(pa.table({"a": [1]}).to_pandas().shape)
"""


def _run(defer: bool, code: str) -> dict:
    script = ("import json, sys\nfrom statekit.spark.runtime.lazy_pandas import defer_pandas\nout = {}\n"
              + ("defer_pandas()\n" if defer else "") + code + "\nprint(json.dumps(out))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_arrow_work_after_defer_pandas_leaves_pandas_unloaded():
    check = ARROW_WORK + 'out["loaded"] = "pandas" in sys.modules\n'
    assert _run(True, check) == {"loaded": False}
    assert _run(False, check) == {"loaded": True}  # what pyarrow does on its own


def test_pandas_imported_later_converts_as_without_defer_pandas():
    deferred = _run(True, ARROW_WORK + PANDAS_OBJECTS)
    assert deferred == _run(False, ARROW_WORK + PANDAS_OBJECTS)
    assert deferred["nulls"] == 1


def test_pandas_still_imports_when_pyarrow_cannot_take_it():
    """A pandas pyarrow refuses (too old for it): importing pandas works; pyarrow leaves it alone."""
    code = ('sys.modules["pyarrow.pandas_compat"] = None  # what pyarrow needs to take pandas: missing\n'
            'import pandas\nout["imported"] = True\n')
    assert _run(True, code) == {"imported": True}
