"""The failed-broker sweep's typed settings: parsed once, what a started run's conf carries."""

from __future__ import annotations

import pytest

from kafka_runbooks.failed_broker.sweep import SWEEP_DEFAULTS, SweepSettings
from kafka_runbooks.units import SizeError


def test_the_settings_are_parsed_once_into_seconds_and_bytes():
    given = {**SWEEP_DEFAULTS, "failure_threshold_minutes": "2h", "alert_after_minutes": "off"}
    settings = SweepSettings.from_given(given)
    assert settings.thresholds.failure_threshold_s == 7200.0 and settings.thresholds.alert_after_s == -1.0
    assert settings.thresholds.retrigger_after_s is None  # null: the failure threshold's
    assert settings.given == given  # the sweep's result shows them as they were set
    assert settings.passed_on() == {
        "max_partitions_per_chunk": 50,
        "max_bytes_per_chunk": 1 << 30,
        "throttle_bytes_per_sec": 50 << 20,
        "require_approval": True,
        "elect_preferred_leaders": True,
    }
    assert settings.start_log_dir_failure is False


def test_a_bad_size_is_named_when_the_settings_are_read():
    with pytest.raises(SizeError, match="max_bytes_per_chunk"):
        SweepSettings.from_given({**SWEEP_DEFAULTS, "max_bytes_per_chunk": "1 gigabyte"})
