"""Errors raised by the keyed-state layer; each names what was wrong."""


class StateError(Exception):
    """Base class of every statekit error."""


class ConfigError(StateError, ValueError):
    """An unknown backend, an unknown option or an option value of the wrong type."""


class KeyGroupError(StateError, ValueError):
    """A key that does not belong to the key-group range a backend serves."""


class InvalidKeyError(StateError, ValueError):
    """A key that cannot be used for keyed state (None, NaN, unhashable, unserializable)."""


class SerializationError(StateError, TypeError):
    """A key, namespace or value that the state's serializer cannot encode or decode."""


class StateDescriptorError(StateError, ValueError):
    """A descriptor that conflicts with an already registered state of the same name."""


class StateMigrationError(StateDescriptorError):
    """Stored state of another format version than its descriptor's, that cannot be (or failed to be) migrated."""


class NoCurrentKeyError(StateError, RuntimeError):
    """Keyed state was accessed before `set_current_key`."""


class MemoryBudgetError(StateError, RuntimeError):
    """State that outgrew its process's memory budget on a backend that keeps it all in memory (``memory_budget``)."""
