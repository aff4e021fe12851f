"""The sample clickstream and the sort-and-scan reference that the demo and benchmarks trust."""

from statekit.clickstream import Click, epochs, generate_clickstream, sessionize_reference


def test_reference_sessions_by_hand():
    clicks = [Click("a", 0, 1), Click("a", 10, 2), Click("b", 5, 7), Click("a", 40, 4),  # 40 touches 10+30
              Click("a", 70, 8), Click("a", 101, 16),                                        # 101 > 70+30: new
              Click("b", 36, 1)]                                                             # b: 5 | 36 (gap 31)
    assert sessionize_reference(clicks, 30) == [
        ("a", 0, 100, 15, 4), ("a", 101, 131, 16, 1), ("b", 5, 35, 7, 1), ("b", 36, 66, 1, 1)]


def test_reference_ignores_arrival_order():
    clicks = [Click("a", 20, 1), Click("a", 0, 1), Click("a", 10, 1)]
    assert sessionize_reference(clicks, 10) == [("a", 0, 30, 3, 3)]


def test_clickstream_is_deterministic_and_disordered_within_bound():
    a = generate_clickstream(2000, 20, seed=3, max_disorder_ms=5000)
    assert a == generate_clickstream(2000, 20, seed=3, max_disorder_ms=5000)
    assert a != generate_clickstream(2000, 20, seed=4, max_disorder_ms=5000)
    assert len(a) == 2000 and len({c.user_id for c in a}) <= 20
    running_max = a[0].ts_ms
    disordered = 0
    for c in a:
        assert c.ts_ms >= running_max - 5000       # disorder never exceeds the bound
        disordered += c.ts_ms < running_max
        running_max = max(running_max, c.ts_ms)
    assert disordered > 0


def test_epochs_split_in_order():
    clicks = generate_clickstream(105, 5)
    parts = list(epochs(clicks, 50))
    assert [len(p) for p in parts] == [50, 50, 5]
    assert [c for p in parts for c in p] == clicks
