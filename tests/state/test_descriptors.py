"""Descriptors check their TTL and version settings when declared, before any backend sees them."""

from __future__ import annotations

import pytest

from statekit import StateTtlConfig, ValueStateDescriptor


def test_ttl_config_validation():
    with pytest.raises(ValueError):
        StateTtlConfig(0)
    with pytest.raises(ValueError):
        StateTtlConfig(10, cleanup_incremental=-1)
    with pytest.raises(TypeError):
        ValueStateDescriptor("v").enable_time_to_live(10)


def test_versions_are_checked_when_declared():
    with pytest.raises(ValueError, match="version must be an int >= 1"):
        ValueStateDescriptor("v").with_version(0)
    with pytest.raises(TypeError, match="migration must be callable"):
        ValueStateDescriptor("v").with_version(2, "upper")
