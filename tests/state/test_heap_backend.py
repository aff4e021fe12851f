"""The heap backend's own option: without write validation, an unserializable value fails at snapshot."""

from __future__ import annotations

import pytest

from statekit import SerializationError, StateConfig, ValueStateDescriptor, create_backend
from statekit.testing.contract.kinds import msgpack_round_trip
from statekit.testing.contract.serialization import Opaque


def test_heap_without_write_validation_defers_errors_to_snapshot():
    b = create_backend(StateConfig(backend="heap", options={"heap.validate_writes": False}))
    b.set_current_key("u")
    b.get_state(ValueStateDescriptor("v")).update(Opaque())
    with pytest.raises(SerializationError):
        msgpack_round_trip(b.snapshot_logical())
    b.close()
