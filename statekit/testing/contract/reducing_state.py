"""Reducing and aggregating state: ``add``/``get``/``clear``, the reduce function's argument order
and the aggregate function's accumulator and result.
"""

from __future__ import annotations

from statekit import AggregatingStateDescriptor, ReducingStateDescriptor

from .aggregates import Average
from .kinds import descriptor

__all__ = [
    "test_reducing_state_methods",
    "test_reducing_state_argument_order",
    "test_aggregating_state_methods",
]


def test_reducing_state_methods(backend):
    backend.set_current_key("u1")
    r = backend.get_state(ReducingStateDescriptor("sum", lambda a, b: a + b))
    assert r.get() is None
    r.add(3)
    assert r.get() == 3
    r.add(4)
    assert r.get() == 7
    r.clear()
    assert r.get() is None
    assert backend.num_entries() == 0


def test_reducing_state_argument_order(backend):
    backend.set_current_key("u1")
    r = backend.get_state(descriptor("reducing"))
    for t in "abc":
        r.add(t)
    assert r.get() == "abc"


def test_aggregating_state_methods(backend):
    backend.set_current_key("u1")
    avg = backend.get_state(AggregatingStateDescriptor("avg", Average()))
    assert avg.get() is None
    avg.add(1)
    avg.add(2)
    assert avg.get() == 1.5
    avg.clear()
    assert avg.get() is None
    avg.add(10)
    assert avg.get() == 10.0
    cat = backend.get_state(descriptor("aggregating"))
    for t in "xyz":
        cat.add(t)
    assert cat.get() == "xyz"
