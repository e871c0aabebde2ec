"""Notifications delivered through Airflow's SMTP and Slack-webhook notifiers to real receivers
running here (``kafka_runbooks_dev.receivers``: aiosmtpd, and an HTTP server that answers as
Slack's incoming webhooks do), configured as a deployment would: a Variable naming connections."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest

from kafka_runbooks import decision_journal, decisions, storage
from kafka_runbooks_airflow import notify
from kafka_runbooks_dev.receivers import MailReceiver, SlackWebhookReceiver

BASE = "http://airflow.example:8080"
TI = SimpleNamespace(dag_id="kafka_broker_restart", run_id="manual__7", task_id="approval_gate", map_index=-1)


@pytest.fixture
def receivers(monkeypatch):
    """Both receivers up, the connections and the Variable set through Airflow's environment."""
    decisions.forget()
    with MailReceiver() as mail, SlackWebhookReceiver() as slack:
        monkeypatch.setenv("AIRFLOW_CONN_ONCALL_SMTP", json.dumps(mail.connection()))
        monkeypatch.setenv("AIRFLOW_CONN_ONCALL_SLACK", json.dumps(slack.connection()))
        targets = [
            {"kind": "smtp", "conn_id": "oncall_smtp", "to": ["oncall@example.com"]},
            {"kind": "slack_webhook", "conn_id": "oncall_slack"},
        ]
        config = {
            "targets": targets,
            "escalate": [targets[1]],
            "escalate_before_minutes": 10,
            "base_url": BASE,
        }
        monkeypatch.setenv("AIRFLOW_VAR_KAFKA_RUNBOOKS_NOTIFY", json.dumps(config))
        yield SimpleNamespace(mail=mail, slack=slack)
    decisions.forget()


def gate():
    """A real HITL operator, as the runbooks' gates are (its link built by Airflow's own code)."""
    from airflow.providers.standard.operators.hitl import HITLOperator

    return HITLOperator(
        task_id="approval_gate",
        subject="Restart brokers 1, 2, 3 one at a time",
        body="| broker | state |\n| 1 | up |\n\nplan digest abc123",
        options=["Approve", "Reject"],
        assigned_users=[{"id": "ada", "name": "Ada"}],
    )


def test_a_waiting_gate_reaches_the_mailbox_and_the_webhook_with_the_link_that_answers_it(receivers):
    record = notify.notify_gate_waiting({"ti": TI}, gate(), {"deadline": "2026-12-02T20:00:00Z"})
    link = (
        f"{BASE}/dags/kafka_broker_restart/runs/manual__7/tasks/approval_gate/required_actions?map_index=-1"
    )
    assert (record.decision, record.observed["targets"]) == (
        "notified",
        {"smtp:oncall_smtp": "sent", "slack_webhook:oncall_slack": "sent"},
    )
    assert record.observed["link"] == link
    [mail] = receivers.mail.messages
    assert mail["Subject"] == "[gate waiting] Restart brokers 1, 2, 3 one at a time"
    assert mail["X-Envelope-To"] == "oncall@example.com" and mail["From"] == "kafka-runbooks@localhost"
    html = mail.get_body(("html",)).get_content()
    assert f'<a href="{link}">Answer the gate</a>' in html and "approvers: Ada" in html
    assert "answer before 2026-12-02T20:00:00Z" in html
    [post] = receivers.slack.posts
    assert post["blocks"][-1]["elements"][0]["url"] == link and receivers.slack.refused == []
    assert receivers.slack.token not in json.dumps(
        record.as_dict()
    )  # the webhook's secret stays in its connection


def test_a_target_that_refuses_is_named_with_its_error_class_and_the_others_still_get_it(
    receivers, monkeypatch
):
    wrong = {**receivers.slack.connection(), "password": "T0/B0/revoked"}
    monkeypatch.setenv("AIRFLOW_CONN_ONCALL_SLACK", json.dumps(wrong))
    record = notify.notify_gate_waiting({"ti": TI}, gate(), {"deadline": None})
    assert record.decision == "partly notified" and record.level == "WARNING"
    assert record.observed["targets"]["smtp:oncall_smtp"] == "sent"
    assert record.observed["targets"]["slack_webhook:oncall_slack"].startswith("not sent: ")
    assert "revoked" not in json.dumps(record.as_dict())
    assert receivers.slack.refused == [(404, "no_service")] and len(receivers.mail.messages) == 1


def test_the_deadline_escalation_goes_to_the_escalation_targets_only(receivers):
    record = notify.notify_gate_waiting(
        {"ti": TI}, gate(), {"deadline": "2026-12-02T20:00:00Z"}, near_deadline=True
    )
    assert record.observed["targets"] == {"slack_webhook:oncall_slack": "sent"}
    assert receivers.mail.messages == []
    assert receivers.slack.posts[0]["blocks"][0]["text"]["text"].startswith("[gate deadline near] ")


def test_no_variable_no_message_and_the_record_says_nobody_is_told(monkeypatch):
    monkeypatch.delenv("AIRFLOW_VAR_KAFKA_RUNBOOKS_NOTIFY", raising=False)
    record = notify.notify_gate_waiting({"ti": TI}, gate(), {})
    assert (record.decision, record.reason) == (
        "not notified",
        "the Variable kafka_runbooks_notify is not set: nobody is told",
    )


def test_a_variable_that_cannot_work_is_recorded_and_the_gate_still_waits(monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_RUNBOOKS_NOTIFY", json.dumps({"targets": [{"kind": "pager"}]}))
    record = notify.notify_gate_waiting({"ti": TI}, gate(), {})
    assert record.decision == "not notified" and "targets[0].kind" in record.reason


def test_a_failed_run_is_told_with_its_recorded_reason_and_a_link_to_that_record(
    receivers, monkeypatch, tmp_path
):
    monkeypatch.setenv(storage.DATA_URL_ENV, str(tmp_path))
    failure = {
        "record_id": "0123456789ab",
        "dag_id": "kafka_controller_replace",
        "run_id": "manual__9",
        "level": "ERROR",
        "step": "replace",
        "decision": "task failed",
        "reason": "KeyError: 'Variable kafka_runbooks_kafka_libs does not exist'",
    }
    decision_journal.journal_path().parent.mkdir(parents=True)
    decision_journal.journal_path().write_text(json.dumps(failure) + "\n")
    from airflow.sdk import DAG

    context = {"dag": DAG("kafka_controller_replace", schedule=None), "run_id": "manual__9", "ti": TI}
    notify.notify_run_failed(context)
    [mail] = receivers.mail.messages
    assert mail["Subject"] == (
        "[run failed] kafka_controller_replace: replace: task failed because KeyError: "
        "'Variable kafka_runbooks_kafka_libs does not exist'"
    )
    assert f"{BASE}/kafka-console/decisions/0123456789ab" in mail.get_body(("html",)).get_content()
    assert receivers.slack.posts[0]["text"].startswith("[run failed] kafka_controller_replace: ")


def test_the_failed_broker_sweeps_alert_is_told_once_with_its_recorded_reason(
    receivers, monkeypatch, tmp_path
):
    import airflow.sdk
    from airflow.sdk import DAG

    from kafka_runbooks.failed_broker.failures import Assessment

    context = {"dag": DAG("kafka_failed_broker_sweep", schedule=None), "run_id": "scheduled__1", "ti": TI}
    monkeypatch.setattr(airflow.sdk, "get_current_context", lambda: context)
    alert = decisions.DecisionRecord(
        step="failure tracking",
        decision="alert",
        reason="broker 4 failed 912s ago (alert after 900s)",
        subject="broker 4",
    )
    notify.notify_broker_alerts(
        "kafka_default", Assessment(now_ms=0, brokers=4, failed={}, alerts=[4], records=[alert])
    )
    assert receivers.mail.messages == []  # alerted before: nothing new to tell
    fresh = Assessment(now_ms=0, brokers=4, failed={}, alerts=[4], new_alerts=[4], records=[alert])
    notify.notify_broker_alerts("kafka_default", fresh)
    [mail] = receivers.mail.messages
    assert mail["Subject"] == "[sweep alert] broker(s) [4] failed on kafka_default"
    html = mail.get_body(("html",)).get_content()
    assert "broker 4 failed 912s ago (alert after 900s)" in html and f"{BASE}/kafka-console/" in html


def test_the_approvers_a_gate_assigns_are_mailed_and_mentioned_in_person(receivers, monkeypatch):
    config = json.loads(os.environ["AIRFLOW_VAR_KAFKA_RUNBOOKS_NOTIFY"])
    config["approvers"] = {"ada": {"email": "ada@example.com", "slack_id": "U0ADA123"}}
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_RUNBOOKS_NOTIFY", json.dumps(config))
    from airflow.providers.standard.operators.hitl import HITLOperator

    two = HITLOperator(
        task_id="approval_gate",
        subject="Restart brokers 1, 2, 3 one at a time",
        body="plan digest abc123",
        options=["Approve", "Reject"],
        assigned_users=[{"id": "ada", "name": "Ada"}, {"id": "grace", "name": "Grace"}],
    )
    record = notify.notify_gate_waiting({"ti": TI}, two, {"deadline": None})
    assert record.decision == "notified"
    [mail] = receivers.mail.messages
    assert mail["X-Envelope-To"] == "oncall@example.com, ada@example.com"
    [post] = receivers.slack.posts
    assert post["text"].startswith("<@U0ADA123> [gate waiting] ")
    assert {"type": "mrkdwn", "text": "for <@U0ADA123>"} in [b.get("text") for b in post["blocks"]]
    # grace is assigned but the Variable gives no way to reach her: the record says so
    assert record.observed["approvers"] == {"addressed": ["ada"], "unreachable": ["grace"]}
    assert "approvers addressed in person: ada (no address in the Variable for grace)" in record.reason
