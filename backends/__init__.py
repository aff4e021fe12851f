"""Concrete keyed-state backends, registered with statekit through the ``statekit.backends`` entry points."""
