"""Helpers of the bench tests: a part's isolated runs made in the test's own process."""

from __future__ import annotations

from types import ModuleType

import pytest

from statekit.bench.common import PeakRSS


def run_in_process(monkeypatch: pytest.MonkeyPatch, part: ModuleType) -> list[tuple]:
    """``part.run_isolated`` replaced by a call in this process with an empty peak; the calls recorded."""
    calls: list[tuple] = []

    def run_here(fn, *args):
        calls.append((fn.__name__, *args))
        return fn(*args), PeakRSS()

    monkeypatch.setattr(part, "run_isolated", run_here)
    return calls
