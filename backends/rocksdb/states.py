"""The RocksDB state class of each state kind (a descriptor's ``kind``)."""

from __future__ import annotations

from .cells import RocksDBAggregatingState, RocksDBReducingState, RocksDBValueState
from .lists import RocksDBListState
from .maps import RocksDBMapState
from .state import RocksDBState

KINDS: dict[str, type[RocksDBState]] = {
    "value": RocksDBValueState, "list": RocksDBListState, "map": RocksDBMapState,
    "reducing": RocksDBReducingState, "aggregating": RocksDBAggregatingState,
}
