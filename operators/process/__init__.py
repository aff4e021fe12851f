"""The keyed process operator: ``KeyedProcessFunction`` with keyed state and timers."""
