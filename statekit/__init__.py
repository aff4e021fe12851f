"""statekit: Flink-grade keyed state for Python — state kinds, namespaces, TTL, key groups, timers.

Backends (heap, RocksDB) live in the ``backends`` package and are found through the registry.
"""

from .key_context import NO_KEY
from .keyed_backend import KeyedStateBackend, create_backend
from .state_registry import InternalKeyedState
from .config import OptionSpec, StateConfig, parse_size
from .descriptors import (AggregateFunction, ColumnarAggregate, PackedAggregate, AggregatingStateDescriptor, ListStateDescriptor, MapStateDescriptor,
                          ReducingStateDescriptor, StateDescriptor, ValueStateDescriptor)
from .detach import detached, is_immutable
from .durations import to_millis
from .errors import (ConfigError, InvalidKeyError, KeyGroupError, MemoryBudgetError, NoCurrentKeyError,
                     SerializationError, StateDescriptorError, StateError, StateMigrationError)
from .key_columns import binary_spans, deserialized_keys, serialized_keys, stable_hashes_of
from .key_identity import PLAIN_KEY_TYPES, SELF_IDENTICAL_TYPES, key_identity, key_of_identity, unhashable_reason
from .keygroups import (DEFAULT_MAX_PARALLELISM, key_group_for, key_group_for_bytes, key_group_representatives,
                        key_groups_for_partition, partition_for_key_group, stable_hash, stable_hashes)
from .registry import available_backends, backend_class, register_backend, wall_clock_ms
from .serialization import KEY_SERIALIZER, MsgpackSerializer, NamespaceBytes, Serializer, check_recorded_types, register_type, registered_types
from .state import (AggregatingState, InternalKvState, InternalMergingState, ListState, MapState, MergingState,
                    ReducingState, ResolvedKey, State, ValueState, VOID_NAMESPACE)
from .timers import (MAX_TIMESTAMP, MIN_TIMESTAMP, InternalTimerService, Timer, TimerQueue, TimerTarget,
                     decode_timer, timer_sort_key)
from .ttl import StateTtlConfig, StateVisibility, UpdateType

__all__ = [
    "AggregateFunction", "AggregatingState", "ColumnarAggregate", "PackedAggregate", "AggregatingStateDescriptor", "ConfigError", "DEFAULT_MAX_PARALLELISM",
    "InternalKeyedState", "InternalKvState", "InternalMergingState", "InternalTimerService", "InvalidKeyError", "KEY_SERIALIZER", "KeyGroupError", "NamespaceBytes",
    "KeyedStateBackend", "ListState", "ListStateDescriptor", "MAX_TIMESTAMP", "MIN_TIMESTAMP", "MapState",
    "MapStateDescriptor", "MemoryBudgetError", "MergingState", "MsgpackSerializer", "NO_KEY", "NoCurrentKeyError", "OptionSpec",
    "ReducingState", "ReducingStateDescriptor", "ResolvedKey", "SerializationError", "Serializer", "State", "StateConfig",
    "StateDescriptor", "StateDescriptorError", "StateError", "StateMigrationError", "StateTtlConfig", "StateVisibility", "Timer",
    "TimerQueue", "TimerTarget", "UpdateType", "VOID_NAMESPACE", "ValueState", "ValueStateDescriptor",
    "available_backends", "backend_class", "create_backend", "decode_timer", "detached", "is_immutable", "key_group_for", "key_group_for_bytes",
    "key_group_representatives",
    "key_groups_for_partition", "key_identity", "key_of_identity", "PLAIN_KEY_TYPES", "SELF_IDENTICAL_TYPES", "parse_size", "partition_for_key_group", "register_backend", "register_type", "registered_types", "check_recorded_types",
    "stable_hash", "stable_hashes", "stable_hashes_of", "serialized_keys", "deserialized_keys", "binary_spans", "timer_sort_key", "to_millis", "unhashable_reason", "wall_clock_ms",
]
