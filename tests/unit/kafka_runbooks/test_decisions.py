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
    prose, facts = log_record.getMessage().split("\n")
    assert prose == (
        "DECISION availability [broker 2]: wait because partition t-0 would drop below min.insync.replicas"
    )
    assert facts == f"  facts: isr=[1,2], min_isr=2 (decision {rec.record_id})"
    assert log_record.decision_record == rec.as_dict()
    assert rec.as_dict()["observed"] == {"isr": [1, 2], "min_isr": 2}


def test_the_prose_line_carries_no_json_and_long_facts_stay_bounded_in_full_in_the_record(caplog):
    """Issue #24.7: a DECISION line is one line of prose; the facts go to a bounded second line
    naming the record, and in full to the structured record (and the journal)."""
    caplog.set_level(logging.INFO, logger="kafka_runbooks.decisions")
    observed = {"partitions": [f"topic-with-a-long-name-{i}" for i in range(200)], "leader": None}
    rec = decisions.record("plan", "move 200 partitions", "broker 4 is fenced", observed=observed)
    [log_record] = caplog.records
    prose, facts = log_record.getMessage().split("\n")
    assert prose == "DECISION plan: move 200 partitions because broker 4 is fenced"
    assert "{" not in prose and "observed" not in prose
    assert facts.startswith("  facts: leader=null, partitions=[") and facts.endswith(
        f" ... (decision {rec.record_id})"
    )
    assert len(facts) < decisions.FACTS_LINE_CHARS + 40
    assert log_record.decision_record["observed"] == observed
    assert log_record.decision_record["record_id"] == rec.record_id


def test_a_record_without_facts_is_its_prose_line_only(caplog):
    caplog.set_level(logging.INFO, logger="kafka_runbooks.decisions")
    decisions.record("gate", "stop: nothing will be elected", "the request was rejected")
    assert (
        caplog.records[0].getMessage()
        == "DECISION gate: stop: nothing will be elected because the request was rejected"
    )
