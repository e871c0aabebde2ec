"""A decision record: one readable log line that carries its structured fields."""

import logging

from kafka_runbooks import decisions


def test_a_decision_record_is_one_readable_line_with_structured_fields(caplog):
    caplog.set_level(logging.INFO, logger="kafka_runbooks.decisions")
    rec = decisions.record(
        "availability",
        "wait",
        "partition t-0 would drop below min.insync.replicas",
        observed={"isr": [1, 2], "min_isr": 2},
        subject="broker 2",
    )
    [log_record] = caplog.records
    assert log_record.getMessage().startswith(
        "DECISION availability [broker 2]: wait because partition t-0 would drop below min.insync.replicas"
    )
    assert '"min_isr": 2' in log_record.getMessage()
    assert log_record.decision_record == rec.as_dict()
    assert rec.as_dict()["observed"] == {"isr": [1, 2], "min_isr": 2}
