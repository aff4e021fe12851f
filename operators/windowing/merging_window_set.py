"""MergingWindowSet (Flink's): which in-flight window keeps its contents in which state window.

When windows merge, their contents are not moved: the merged window keeps using the state
window (namespace) of one of its parts and the others are merged into it. The mapping of one
key is one value in the void namespace, written by ``persist`` when it changed: a dict window ->
state window, or for session assigners (TimeWindows) the flat int list
``[start, end, state_start, state_end, ...]`` in window order, which is much cheaper to encode.
"""

from __future__ import annotations

from typing import Any, Callable

from statekit import ValueState

from ..windows import TimeWindow

MergeFunction = Callable[[Any, list, Any, list], None]
"""``merge(merge_result, merged_windows, state_window_result, merged_state_windows)``."""


class MergingWindowSet:
    """The window -> state window mapping of the current key, loaded from ``state``.

    ``initial`` is the mapping as loaded (or last persisted): the windows that may already have
    timers.
    """

    __slots__ = ("_assigner", "_state", "mapping", "initial", "_direct")

    def __init__(self, assigner: Any, state: ValueState) -> None:
        self._assigner = assigner
        self._state = state
        self._direct = assigner.merges_intersecting_time_windows
        stored = state.get_internal()
        if not stored:
            self.mapping: dict = {}
        elif self._direct:
            it = iter(stored)
            self.mapping = {TimeWindow(s, e): TimeWindow(ss, se) for s, e, ss, se in zip(it, it, it, it)}
        else:
            self.mapping = dict(stored)
        self.initial: dict = dict(self.mapping)

    def get_state_window(self, window: Any) -> Any:
        """The state window of an in-flight window, or None."""
        return self.mapping.get(window)

    def retire_window(self, window: Any) -> None:
        """Forget ``window`` (its state must already be cleaned)."""
        if self.mapping.pop(window, None) is None:
            raise KeyError(f"window {window!r} is not in the in-flight window set")

    def persist(self) -> None:
        """Write the mapping if it changed since it was loaded (or last persisted); none left: cleared."""
        mapping = self.mapping
        if mapping != self.initial:
            if not mapping:
                self._state.clear()
            elif self._direct:
                self._state.update_internal([t for w, sw in sorted(mapping.items()) for t in (w[0], w[1], sw[0], sw[1])])
            else:
                self._state.update_internal(dict(mapping))
            self.initial = dict(mapping)

    def add_window(self, new_window: Any, merge_function: MergeFunction) -> Any:
        """Add ``new_window``, merging it with in-flight windows as the assigner says; returns the
        window it ended up in. ``merge_function`` runs for each merge that involves existing state.

        Merged windows come in the assigner's order ((start, end) for sessions); the first one's
        state window becomes the merge result's state window, the others' are merged into it.
        """
        if self._direct:
            return self._add_time_window(new_window, merge_function)
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

    def _add_time_window(self, new: Any, merge_function: MergeFunction) -> Any:
        """``add_window`` for intersection-merged TimeWindows, without the generic grouping.

        In-flight windows never intersect each other (every add merges what intersects), so the
        new window's merge group is the new window plus the in-flight windows it intersects.
        """
        mapping = self.mapping
        if new in mapping:
            return new
        start, end = new
        hits = [w for w in mapping if w[0] <= end and w[1] >= start]
        if not hits:
            mapping[new] = new
            return new
        if len(hits) > 1:
            hits.sort()
        for w in hits:
            if w[0] < start:
                start = w[0]
            if w[1] > end:
                end = w[1]
        result = new if (start, end) == new else TimeWindow(start, end)
        if len(hits) == 1 and hits[0] == result:
            return result
        state_windows = [mapping.pop(w) for w in hits]
        mapping[result] = state_windows[0]
        merge_function(result, hits, state_windows[0], state_windows[1:])
        return result
