"""The verify steps' waits come from one place, with the documented defaults and overrides."""

from __future__ import annotations

from kafka_runbooks_airflow.verify_settings import election_settle_s, verify_timeouts


def test_defaults_are_the_documented_ones(monkeypatch):
    for name in (
        "KAFKA_RUNBOOKS_VERIFY_TIMEOUT_S",
        "KAFKA_RUNBOOKS_VERIFY_SETTLE_S",
        "KAFKA_RUNBOOKS_ELECTION_SETTLE_S",
    ):
        monkeypatch.delenv(name, raising=False)
    assert verify_timeouts() == {"timeout_s": 600.0, "settle_s": 15.0}
    assert election_settle_s() == 10.0


def test_the_environment_overrides_each(monkeypatch):
    monkeypatch.setenv("KAFKA_RUNBOOKS_VERIFY_TIMEOUT_S", "90")
    monkeypatch.setenv("KAFKA_RUNBOOKS_VERIFY_SETTLE_S", "5")
    monkeypatch.setenv("KAFKA_RUNBOOKS_ELECTION_SETTLE_S", "2.5")
    assert verify_timeouts() == {"timeout_s": 90.0, "settle_s": 5.0}
    assert election_settle_s() == 2.5
