import json
import re

import pytest

from spmd_guide import timing


def test_a_ratio_check_passes_at_its_margin_and_fails_below_it():
    assert timing.ratio_above("wait over compute", 10.0, 2.0, 5) == 5.0
    refused = re.escape("wait over compute: 9.0 is 4.50 times 2.0, below 5")
    with pytest.raises(AssertionError, match=refused):
        timing.ratio_above("wait over compute", 9.0, 2.0, 5)


def test_a_zero_denominator_is_an_infinite_ratio():
    assert timing.ratio_above("no wait at all", 1.0, 0.0, 5) == float("inf")


@pytest.mark.parametrize("larger, smaller, margin", [(-1.0, 1.0, 2), (1.0, -1.0, 2), (1.0, 1.0, 0)])
def test_negative_times_and_a_margin_that_is_not_positive_are_refused(larger, smaller, margin):
    with pytest.raises(ValueError, match="times must be non-negative and the margin positive"):
        timing.ratio_above("bad", larger, smaller, margin)


def test_a_timer_check_fails_only_when_the_time_is_shorter_than_the_timer():
    timing.after_timer("slept", 1.0, 1.0)
    refused = re.escape("slept: 0.9 s is shorter than the 1.0 s timer")
    with pytest.raises(AssertionError, match=refused):
        timing.after_timer("slept", 0.9, 1.0)


def test_each_check_is_recorded_passed_or_failed_when_the_log_is_set(tmp_path, monkeypatch):
    log = tmp_path / "timing.jsonl"
    monkeypatch.setenv(timing.LOG_VARIABLE, str(log))
    timing.ratio_above("passes", 10.0, 1.0, 2)
    with pytest.raises(AssertionError):
        timing.after_timer("fails", 0.5, 1.0)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert records == [
        {"check": "passes", "kind": "ratio", "observed": 10.0, "bound": 2},
        {"check": "fails", "kind": "timer", "observed": 0.5, "bound": 1.0},
    ]


def test_nothing_is_written_without_the_log(tmp_path, monkeypatch):
    monkeypatch.delenv(timing.LOG_VARIABLE, raising=False)
    monkeypatch.chdir(tmp_path)
    timing.ratio_above("quiet", 2.0, 1.0, 1)
    assert list(tmp_path.iterdir()) == []
