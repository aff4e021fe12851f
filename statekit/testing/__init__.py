"""Test kit for backends: the keyed-state contract suite (``contract``) and its fixtures (``fixtures``).

Needs pytest and hypothesis (the ``dev`` extra); importing ``statekit`` never imports this package.
"""

from .fixtures import BACKENDS, START_MS, BackendFactory, ManualClock

__all__ = ["BACKENDS", "BackendFactory", "ManualClock", "START_MS"]
