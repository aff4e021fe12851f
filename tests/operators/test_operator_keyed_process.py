"""KeyedProcessOperator: keyed state, event/processing timers, deletes, timestamps of outputs."""

from __future__ import annotations

from statekit import ListStateDescriptor, ValueStateDescriptor
from statekit.operators import KeyedProcessFunction, KeyedProcessOperator
from tests.operators_support import make_harness


class Buffering(KeyedProcessFunction):
    """Buffers values per key; flushes them at event time ts + 10 or, for "!" values, in processing time."""

    buf = ListStateDescriptor("buf")
    pending = ValueStateDescriptor("pending")

    def process_element(self, value, ctx):
        ctx.get_state(self.buf).add(value)
        timers = ctx.timer_service()
        pending = ctx.get_state(self.pending)
        if value == "cancel":
            timers.delete_event_time_timer(pending.value())
            pending.clear()
            return [("cancelled", ctx.get_current_key())]
        if value == "!":
            timers.register_processing_time_timer(timers.current_processing_time() + 5)
            return None
        if pending.value() is None:
            pending.update(ctx.timestamp() + 10)
            timers.register_event_time_timer(ctx.timestamp() + 10)
        return []

    def on_timer(self, timestamp, ctx):
        values = ctx.get_state(self.buf).get()
        ctx.get_state(self.buf).clear()
        ctx.get_state(self.pending).clear()
        yield (ctx.get_current_key(), ctx.time_domain(), values, ctx.timer_service().current_watermark())


def test_event_time_timers_state_and_output_timestamps(backend_name, tmp_path):
    h = make_harness(KeyedProcessOperator(Buffering()), backend_name, tmp_path)
    h.process_element("a", 1, 100)
    h.process_element("b", 2, 103)
    h.process_element("a", 3, 105)
    assert h.output() == []
    h.process_watermark(109)
    assert h.output() == []
    h.process_watermark(110)
    assert h.output() == [(("a", "event_time", [1, 3], 110), 110)]
    h.process_element("b", "cancel", 104)
    assert h.output() == [(("cancelled", "b"), 104)]
    h.process_watermark(200)
    assert h.output() == []
    assert h.backend.state_entry_counts() == {"buf": 1, "pending": 0}   # b's buffer: the function never flushed it


def test_processing_time_timers_have_no_output_timestamp(backend_name, tmp_path):
    h = make_harness(KeyedProcessOperator(Buffering()), backend_name, tmp_path)
    h.set_processing_time(50)
    h.process_element("a", "!")
    h.set_processing_time(54)
    assert h.output() == []
    h.set_processing_time(55)
    assert h.output() == [(("a", "processing_time", ["!"], h.operator._svc.current_watermark()), None)]
    assert h.metrics["timers_fired"] == 1 and h.metrics["records_in"] == 1
    assert h.num_entries() == 0


def test_timer_callbacks_register_timers_firing_in_same_advance(backend_name, tmp_path):
    class Ticker(KeyedProcessFunction):
        def process_element(self, value, ctx):
            ctx.timer_service().register_event_time_timer(ctx.timestamp() + 1)

        def on_timer(self, timestamp, ctx):
            if timestamp < 5:
                ctx.timer_service().register_event_time_timer(timestamp + 1)
            return [timestamp]

    h = make_harness(KeyedProcessOperator(Ticker()), backend_name, tmp_path)
    h.process_element("k", None, 0)
    h.process_watermark(100)
    assert h.output() == [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5)]
    assert h.num_entries() == 0
