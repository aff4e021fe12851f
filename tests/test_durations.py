"""Durations (issue 47): text needs a unit, as Spark's intervals do ("30" is refused, not read as 30 ms), on every
path statekit takes one as text: the CLI's flags, the ``spark.statekit.*`` settings and ``to_millis`` itself; Python
numbers stay milliseconds and a timedelta converts exactly. No Spark here."""

from __future__ import annotations

from datetime import timedelta

import pytest

from statekit import to_millis
from statekit.jobs.preflight import check_flags
from statekit.spark.settings import check_duration_settings

FORMS = "(forms: 30s, 500ms, 5m, 1h30m; units ms, s, m or min, h, d)"


@pytest.mark.parametrize("value, ms", [("30s", 30_000), ("500ms", 500), ("5m", 300_000), ("1h30m", 5_400_000),
                                       ("1h 30m", 5_400_000), ("2.5s", 2500), ("0", 0), (" 0 ", 0),
                                       (1500, 1500), (10_000.0, 10_000),
                                       (timedelta(seconds=2), 2000), (timedelta(milliseconds=-3), -3),
                                       # float seconds * 1000 would give ...600000 here
                                       (timedelta(days=999_999_999, milliseconds=1), 86_399_999_913_600_001)])
def test_to_millis(value, ms):
    assert to_millis(value) == ms


@pytest.mark.parametrize("text", ["30", "250", "-5", "1.5", "1e3"])
def test_text_without_a_unit_is_refused_naming_the_setting_and_the_forms(text):
    with pytest.raises(ValueError) as e:
        to_millis(text, "--gap")
    assert str(e.value).startswith(f"--gap {text!r}: a duration needs a unit")
    assert str(e.value).endswith(FORMS)


def test_the_refusal_suggests_the_number_with_a_unit():
    with pytest.raises(ValueError, match=r"^--gap '30': a duration needs a unit, e\.g\. 30s or 30ms \(forms: "):
        to_millis("30", "--gap")


@pytest.mark.parametrize("bad", ["30x", "", "s", "5m3", True, float("nan"), float("inf"), None])
def test_to_millis_rejects_with_the_setting_name(bad):
    with pytest.raises(ValueError, match="gap"):
        to_millis(bad, "gap")


@pytest.mark.parametrize("finer", ["1.5ms", "0.0001s", 1.5, timedelta(microseconds=1500)])
def test_a_part_finer_than_a_millisecond_is_refused_not_dropped(finer):
    with pytest.raises(ValueError, match=r"^gap: .* is not a whole number of milliseconds$"):
        to_millis(finer, "gap")


FLAGS = {"gap": "30s", "watermark_delay": "0", "max_ahead": "default", "partitions": None, "aggs": ["count"]}


@pytest.mark.parametrize("flag, value, name", [("gap", "30", "--gap"), ("watermark_delay", "10000", "--watermark-delay"),
                                               ("max_ahead", "3600", "--max-ahead")])
def test_every_duration_flag_is_refused_without_a_unit(flag, value, name):
    with pytest.raises(ValueError, match=rf"^{name} '{value}': a duration needs a unit"):
        check_flags(**{**FLAGS, flag: value})


@pytest.mark.parametrize("setting", ["max_ahead", "host_idle_timeout", "lease_timeout"])
def test_every_duration_setting_is_refused_without_a_unit(setting):
    conf = {f"spark.statekit.{setting}": "600", "spark.ui.enabled": "false"}
    with pytest.raises(ValueError, match=rf"^spark.statekit.{setting} '600': a duration needs a unit"):
        check_flags(**FLAGS, conf=conf)
    check_duration_settings({**conf, f"spark.statekit.{setting}": "600s"})  # with a unit: taken


def test_settings_are_refused_as_a_run_refuses_them():
    check_duration_settings({"spark.statekit.max_ahead": "none"})
    for setting, value, message in [("lease_timeout", "0s", "expected a duration > 0"),
                                    ("host_idle_timeout", "0", "expected a duration > 0"),
                                    ("max_ahead", "soon", "cannot parse duration 'soon'")]:
        with pytest.raises(ValueError, match=rf"spark.statekit.{setting}.*{message}"):
            check_duration_settings({f"spark.statekit.{setting}": value})
