"""Ages on one clock only: two clocks give "unknown", never a number (#37, point 3)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from kafka_runbooks.evidence import AIRFLOW_API_SERVER, WORKER, Stamp, after, age_ms, newer_than

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)


def test_an_age_between_two_clocks_is_unknown():
    approved = Stamp.of(T0, AIRFLOW_API_SERVER)
    worker_now = Stamp.of(T0 + timedelta(minutes=50), WORKER)
    assert age_ms(approved, worker_now) is None
    assert newer_than(worker_now, approved) is None
    assert after(worker_now, approved) is None


def test_an_age_on_one_clock():
    approved = Stamp.of(T0, AIRFLOW_API_SERVER)
    now = Stamp.of(T0 + timedelta(minutes=100), AIRFLOW_API_SERVER)
    assert age_ms(approved, now) == 100 * 60_000
    assert newer_than(now, approved) is True
    assert after(now, approved.plus_ms(3_600_000)) is True


def test_unknown_times_stay_unknown():
    assert Stamp.of(None, WORKER).known is False
    assert Stamp.of("not a time", WORKER).ms is None
    assert Stamp.of(datetime(2026, 12, 1, 12, 0), WORKER).ms is None  # naive: no zone, no time
    assert age_ms(Stamp(None, WORKER), Stamp(5, WORKER)) is None
    assert Stamp.of(T0.isoformat(), WORKER).isoformat() == T0.isoformat()
