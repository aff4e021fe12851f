"""pandas loaded in statekit's executor processes only when something uses it.

pyarrow imports pandas the first time it converts anything, only to ask whether its input is a pandas
object; no object can be one before pandas is imported, and every worker and host would hold pandas for
nothing (docs/bench/runtime.md). So a statekit task or state host lets pyarrow make that first check with pandas out of
sight, and puts pyarrow's pandas support back the moment anything imports pandas (a user's function,
a pandas UDF in a reused worker): pyarrow then treats pandas objects as it always does.
"""

from __future__ import annotations

import importlib.abc
import sys
import threading
from types import ModuleType
from typing import Any, Sequence

from .pyspark_internals import pandas_shim

_PANDAS = "pandas"
_lock = threading.Lock()


class _Hidden(importlib.abc.MetaPathFinder):
    """Finds no pandas: installed in front while pyarrow makes its first check."""

    def find_spec(self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None) -> None:
        if name == _PANDAS:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


class _PandasLoader(importlib.abc.Loader):
    """pandas' own loader; once pandas is loaded, pyarrow is made to look for it again."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: Any) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        import pyarrow as pa

        try:
            pa.table({}).to_pandas()  # a conversion that needs pandas: pyarrow checks again and finds it
        except ImportError:  # a pandas this pyarrow does not support: it leaves pandas alone, as it would anyway
            pass

    def __getattr__(self, name: str) -> Any:  # resources, is_package, ...: pandas' loader answers
        return getattr(self._loader, name)


class _Rearm(importlib.abc.MetaPathFinder):
    """Finds pandas as the other finders do, with ``_PandasLoader`` around its loader (once)."""

    def find_spec(self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None) -> Any:
        if name != _PANDAS:
            return None
        for finder in sys.meta_path:
            spec = None if finder is self else finder.find_spec(name, path, target)
            if spec is not None:
                sys.meta_path.remove(self)
                spec.loader = _PandasLoader(spec.loader)
                return spec
        return None


def defer_pandas() -> None:
    """Keep pyarrow from importing pandas in this process until something else imports it; a no-op
    when pandas is loaded already or this ran before. Call it before the process's first Arrow
    conversion and before any user code (a task's or host's first step): for the instant of
    pyarrow's check, pandas cannot be imported. Off (said once) when pyarrow's check is not the shape
    ``pyspark_internals.pandas_shim`` expects."""
    with _lock:
        if _PANDAS in sys.modules or any(isinstance(f, (_Rearm, _Hidden)) for f in sys.meta_path):
            return
        if pandas_shim() is None:
            return
        import pyarrow as pa

        hidden = _Hidden()
        sys.meta_path.insert(0, hidden)
        try:
            pa.array([0])  # pyarrow's first checks for pandas (its shim's, its list conversion's): not found, kept
        finally:
            sys.meta_path.remove(hidden)
        if _PANDAS not in sys.modules:
            sys.meta_path.insert(0, _Rearm())
