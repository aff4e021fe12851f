"""MergingWindowSet (Flink's): which in-flight window keeps its contents in which state window.

When windows merge, their contents are not moved: the merged window keeps using the state
window (namespace) of one of its parts and the others are merged into it. The mapping of one
key lives in a map state in the void namespace; ``persist`` writes what changed.
"""

from __future__ import annotations

from typing import Any, Callable

from statekit import MapState

MergeFunction = Callable[[Any, list, Any, list], None]
"""``merge(merge_result, merged_windows, state_window_result, merged_state_windows)``."""


class MergingWindowSet:
    """The window -> state window mapping of the current key, loaded from ``state``."""

    __slots__ = ("_assigner", "_state", "mapping", "_persisted")

    def __init__(self, assigner: Any, state: MapState) -> None:
        self._assigner = assigner
        self._state = state
        self.mapping: dict = dict(state.items())
        self._persisted: dict = dict(self.mapping)

    def get_state_window(self, window: Any) -> Any:
        """The state window of an in-flight window, or None."""
        return self.mapping.get(window)

    def retire_window(self, window: Any) -> None:
        """Forget ``window`` (its state must already be cleaned)."""
        if self.mapping.pop(window, None) is None:
            raise KeyError(f"window {window!r} is not in the in-flight window set")

    def persist(self) -> None:
        """Write the mapping's changes since it was loaded (or last persisted) to the state."""
        mapping, before = self.mapping, self._persisted
        if mapping == before:
            return
        st = self._state
        for w in before:
            if w not in mapping:
                st.remove(w)
        for w, sw in mapping.items():
            if before.get(w) != sw:
                st.put(w, sw)
        self._persisted = dict(mapping)

    def add_window(self, new_window: Any, merge_function: MergeFunction) -> Any:
        """Add ``new_window``, merging it with in-flight windows as the assigner says; returns the
        window it ended up in. ``merge_function`` runs for each merge that involves existing state.

        Merged windows come in the assigner's order (start, end for sessions); the first one's state
        window becomes the merge result's state window, the others' are merged into it.
        """
        mapping = self.mapping
        results: list[tuple[Any, list]] = []
        self._assigner.merge_windows([*mapping, new_window], lambda merged, result: results.append((result, merged)))
        result_window = new_window
        merged_new = False
        for merge_result, merged in results:
            merged = list(merged)
            if new_window in merged:
                merged.remove(new_window)
                merged_new = True
                result_window = merge_result
            state_window = mapping[merged[0]]
            merged_state_windows = [mapping.pop(w) for w in merged if w in mapping]
            mapping[merge_result] = state_window
            merged_state_windows.remove(state_window)
            if not (len(merged) == 1 and merged[0] == merge_result):
                merge_function(merge_result, merged, state_window, merged_state_windows)
        if not merged_new and result_window not in mapping:
            mapping[result_window] = result_window
        return result_window
