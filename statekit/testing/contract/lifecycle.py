"""The backend's states and lifecycle: one state per name and kind, entry counts, a closed backend, declared
options, and the user and internal state interfaces.
"""

from __future__ import annotations

import pytest

from statekit import StateConfig, StateDescriptorError, StateError, ValueStateDescriptor, backend_class

from .kinds import KINDS, MERGING, descriptor, populate

__all__ = [
    "test_get_state_returns_same_state_for_same_name",
    "test_descriptor_conflict_same_name_other_kind",
    "test_entry_counts_per_state",
    "test_closed_backend_refuses_new_states",
    "test_every_backend_declares_parseable_options",
    "test_user_interfaces_are_narrow_internal_ones_add_namespaces",
]


def test_get_state_returns_same_state_for_same_name(backend):
    a = backend.get_state(ValueStateDescriptor("x"))
    b = backend.get_state(ValueStateDescriptor("x", default=3))
    assert a is b
    assert set(backend.registered_states()) == {"x"}


@pytest.mark.parametrize("kind", KINDS)
def test_descriptor_conflict_same_name_other_kind(backend, kind):
    backend.get_state(descriptor(kind, "shared"))
    for other in KINDS:
        if other != kind:
            with pytest.raises(StateDescriptorError, match="shared"):
                backend.get_state(descriptor(other, "shared"))


def test_entry_counts_per_state(backend):
    populate(backend, ["a", "b", "c"])
    assert backend.state_entry_counts() == {k: 6 for k in KINDS}
    assert backend.num_entries() == 30
    backend.set_current_key("a")
    for kind in KINDS:
        backend.get_state(descriptor(kind)).clear()
    assert backend.state_entry_counts() == {k: 5 for k in KINDS}


def test_closed_backend_refuses_new_states(make_backend):
    b = make_backend()
    b.get_state(ValueStateDescriptor("v"))
    b.close()
    with pytest.raises(StateError):
        b.get_state(ValueStateDescriptor("w"))


def test_every_backend_declares_parseable_options(backend_name):
    specs = backend_class(backend_name).OPTIONS
    assert all(s.name.startswith(f"{backend_name}.") for s in specs)
    cfg = StateConfig(backend=backend_name, options={s.name: s.default for s in specs})
    for s in specs:
        assert cfg.get(s.name) == s.default
    env = {f"STATEKIT_{s.name.replace('.', '_').upper()}": str(s.default) for s in specs if s.default is not None}
    env["STATEKIT_BACKEND"] = backend_name
    from_env = StateConfig.from_env(env)
    assert from_env.backend == backend_name
    for s in specs:
        assert from_env.get(s.name) == s.default


def test_user_interfaces_are_narrow_internal_ones_add_namespaces(backend):
    """As in Flink: users see a kind's operations; operators reach namespaces through the internal interfaces."""
    from statekit import InternalKvState, InternalMergingState, ListState, MapState, State, ValueState

    for user in (State, ValueState, ListState, MapState):
        assert not hasattr(user, "set_current_namespace") and not hasattr(user, "merge_namespaces")
    backend.set_current_key("k")
    for kind in KINDS:
        st = backend.get_state(descriptor(kind))
        assert isinstance(st, InternalKvState)
        assert isinstance(st, InternalMergingState) == (kind in MERGING)
