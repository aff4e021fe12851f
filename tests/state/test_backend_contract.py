"""The keyed-state contract (``statekit.testing.contract``) on every registered backend."""

from statekit.testing.contract import *  # noqa: F401,F403
