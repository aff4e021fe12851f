"""Test kit for backends: the keyed-state contract suite (``contract``) and its fixtures (``fixtures``).

Needs pytest and hypothesis (the ``dev`` extra); importing ``statekit`` never imports this package.
"""

import pytest

from .fixtures import BACKENDS, START_MS, BackendFactory, ManualClock

pytest.register_assert_rewrite("statekit.testing.contract")  # a failing contract assertion shows its values

__all__ = ["BACKENDS", "BackendFactory", "ManualClock", "START_MS"]
