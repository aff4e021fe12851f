"""The heap state class of each state kind (a descriptor's ``kind``)."""

from __future__ import annotations

from .cells import HeapAggregatingState, HeapReducingState, HeapValueState
from .lists import HeapListState
from .maps import HeapMapState
from .state import HeapState

KINDS: dict[str, type[HeapState]] = {
    "value": HeapValueState, "list": HeapListState, "map": HeapMapState,
    "reducing": HeapReducingState, "aggregating": HeapAggregatingState,
}
