"""Durations and sizes as people type them in the forms, read once by kafka_runbooks.units.

A plain number keeps the unit its param's name says (``*_s`` seconds, ``*_minutes`` minutes,
``*_ms`` milliseconds), so confs sent before units were accepted mean what they meant.
"""

from __future__ import annotations

import pytest

from kafka_runbooks.units import OFF, DurationError, SizeError, exact_size, parse_duration, parse_size


@pytest.mark.parametrize(
    ("value", "plain", "seconds"),
    [
        ("10m", "seconds", 600),
        ("90s", "seconds", 90),
        ("1h", "seconds", 3600),
        (" 1.5 h ", "seconds", 5400),
        ("2 min", "seconds", 120),
        ("1d", "seconds", 86400),
        ("250ms", "seconds", 0.25),
        (300, "seconds", 300),
        ("300", "seconds", 300),
        (30, "minutes", 1800),
        ("30", "minutes", 1800),
        ("30m", "minutes", 1800),
        (30000, "milliseconds", 30),
        ("30s", "milliseconds", 30),
    ],
)
def test_a_duration_is_read_in_seconds_and_a_plain_number_in_its_params_unit(value, plain, seconds):
    assert parse_duration(value, "t", plain) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("value", "bounds", "message"),
    [
        ("-5m", {}, "t must be a duration such as 90s, 10m or 1h, units ms s m h d, or a number of seconds"),
        ("10 parsecs", {}, "not '10 parsecs'"),
        ("", {}, "must be a duration"),
        (None, {}, "must be a duration"),
        (True, {}, "must be a duration"),
        ([5], {}, "must be a duration"),
        (-5, {}, "t must be at least 0 s, not -5"),
        ("3s", {"minimum_s": 5}, "t must be at least 5 s, not '3s'"),
        ("2h", {"maximum_s": 3600}, "t must be at most 1 h, not '2h'"),
        ("off", {}, "must be a duration"),
    ],
)
def test_a_bad_duration_is_refused_naming_the_param_and_the_rule(value, bounds, message):
    with pytest.raises(DurationError, match=message.replace("(", r"\(")):
        parse_duration(value, "t", **bounds)


@pytest.mark.parametrize("value", ["off", " OFF ", "-1", -1, -5])
def test_a_sweep_threshold_can_be_turned_off(value):
    assert parse_duration(value, "alert_after_minutes", "minutes", allow_off=True) == OFF


@pytest.mark.parametrize(
    ("value", "size"),
    [
        ("50 MiB", 50 << 20),
        ("50MiB", 50 << 20),
        (52428800, 50 << 20),
        ("1 GiB", 1 << 30),
        ("2 MB", 2_000_000),
    ],
)
def test_a_size_is_read_in_bytes(value, size):
    assert parse_size(value, "s") == size


@pytest.mark.parametrize("value", ["-5 MiB", "0", 0, "5 parsecs", "1.5 B"])
def test_a_bad_size_is_refused(value):
    with pytest.raises(SizeError, match="s must be"):
        parse_size(value, "s")


@pytest.mark.parametrize(
    ("size", "text"),
    [(1 << 30, "1 GiB"), (50 << 20, "50 MiB"), (1536 << 20, "1536 MiB"), (3 << 40, "3 TiB"), (1000, "1000")],
)
def test_exact_size_shows_bytes_whole_in_the_largest_binary_unit_and_reads_back(size, text):
    """A default kept in bytes is shown in a form as a person writes it, and parses to the same bytes."""
    assert exact_size(size) == text
    assert parse_size(text) == size


def test_an_id_list_is_text_or_a_list_of_ints():
    from kafka_runbooks.errors import BadInput
    from kafka_runbooks.units import parse_id_list

    assert (
        parse_id_list("0, 2", "x") == [0, 2]
        and parse_id_list(None, "x") == []
        and parse_id_list([1], "x") == [1]
    )
    for bad in ("0;2", "-1", [1.5], [False], {"a": 1}):
        with pytest.raises(BadInput, match="x must be ids separated by commas"):
            parse_id_list(bad, "x")
