"""The keyed-state contract every backend must meet, one module per contract, run once per registered backend.

A third-party backend registered under the ``statekit.backends`` entry point runs it in its own CI
with a test module holding two lines::

    pytest_plugins = ["statekit.testing.fixtures"]
    from statekit.testing.contract import *  # noqa: F401,F403

``import *`` brings exactly the contract's tests (each module's ``__all__``); one contract alone is
``from statekit.testing.contract.ttl import *``. The tests take the ``backend``/``make_backend``/``clock``
fixtures of ``statekit.testing.fixtures``, parametrized over every registered backend
(``STATEKIT_TEST_BACKENDS=name,name`` narrows them); a conftest may override them.
"""

from . import (keys, lifecycle, list_state, map_state, merge, migration, namespaces, reducing_state, serialization,
               snapshots, timers, ttl, ttl_cleanup, value_state)
from .aggregates import AppendInPlace, Concat, SumCount  # noqa: F401  (by name, for the operator and checkpoint suites)
from .keys import *  # noqa: F401,F403
from .lifecycle import *  # noqa: F401,F403
from .list_state import *  # noqa: F401,F403
from .map_state import *  # noqa: F401,F403
from .merge import *  # noqa: F401,F403
from .migration import *  # noqa: F401,F403
from .namespaces import SERIALIZED_APART  # noqa: F401  (by name, for the checkpoint suite)
from .namespaces import *  # noqa: F401,F403
from .reducing_state import *  # noqa: F401,F403
from .serialization import *  # noqa: F401,F403
from .snapshots import *  # noqa: F401,F403
from .timers import *  # noqa: F401,F403
from .ttl import *  # noqa: F401,F403
from .ttl_cleanup import *  # noqa: F401,F403
from .value_state import *  # noqa: F401,F403

CONTRACTS = (value_state, list_state, map_state, reducing_state, namespaces, merge, ttl, ttl_cleanup, timers,
             snapshots, migration, serialization, keys, lifecycle)
"""The contract modules, one per contract."""

__all__ = [name for contract in CONTRACTS for name in contract.__all__]
