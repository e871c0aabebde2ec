"""The notification's config, words and formats (``kafka_runbooks.notify``), without Airflow."""

from __future__ import annotations

import json

import pytest

from kafka_runbooks.notify import (
    NotifyConfigError,
    Target,
    as_email,
    as_slack,
    gate_waiting,
    parse_notify_config,
    run_failed,
)
from kafka_runbooks_dev.receivers import slack_payload_problem

SMTP = {"kind": "smtp", "conn_id": "oncall_smtp", "to": ["oncall@example.com"]}
SLACK = {"kind": "slack_webhook", "conn_id": "oncall_slack"}


def test_unset_or_empty_means_nobody_is_told():
    assert parse_notify_config(None) is None
    assert parse_notify_config("  ") is None


def test_targets_and_escalation_are_read_from_json():
    config = parse_notify_config(
        json.dumps({"targets": [SMTP, SLACK], "escalate": [SLACK], "escalate_before_minutes": 15})
    )
    assert config.targets == (
        Target("smtp", "oncall_smtp", ("oncall@example.com",)),
        Target("slack_webhook", "oncall_slack"),
    )
    assert config.escalate == (Target("slack_webhook", "oncall_slack"),)
    assert config.escalate_before_s == 900
    assert config.targets[0].name == "smtp:oncall_smtp"


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("{not json", "not JSON"),
        ("[]", "a JSON object is expected"),
        ({"targets": []}, "at least one target"),
        ({"targets": [SMTP], "channel": "#x"}, "unknown field(s) ['channel']"),
        ({"targets": [{"kind": "pager", "conn_id": "x"}]}, "targets[0].kind"),
        ({"targets": [{"kind": "smtp", "conn_id": "x"}]}, "targets[0].to: a list of e-mail addresses"),
        ({"targets": [{"kind": "smtp", "conn_id": "x", "to": ["nobody"]}]}, "targets[0].to"),
        ({"targets": [{**SLACK, "to": ["a@b.c"]}]}, "only smtp targets take addresses"),
        ({"targets": [{"kind": "smtp", "conn_id": " ", "to": ["a@b.c"]}]}, "targets[0].conn_id"),
        ({"targets": [SMTP], "escalate": [SLACK]}, "escalate needs escalate_before_minutes"),
        ({"targets": [SMTP], "escalate_before_minutes": 0}, "a positive number of minutes"),
        ({"targets": [SMTP], "base_url": "airflow.local"}, "base_url: the Airflow UI's URL"),
        ({"targets": [SMTP], "approvers": ["ada"]}, "approvers: an object of user name"),
        (
            {"targets": [SMTP], "approvers": {"ada": {}}},
            "approvers['ada']: an object with email and/or slack_id",
        ),
        ({"targets": [SMTP], "approvers": {"ada": {"phone": "1"}}}, "approvers['ada']: an object"),
        ({"targets": [SMTP], "approvers": {"ada": {"email": "ada"}}}, "approvers['ada'].email"),
        (
            {"targets": [SMTP], "approvers": {"ada": {"slack_id": "@ada"}}},
            "approvers['ada'].slack_id: a Slack member id",
        ),
    ],
)
def test_a_config_that_cannot_work_names_its_field(raw, says):
    with pytest.raises(NotifyConfigError) as err:
        parse_notify_config(raw)
    assert says in str(err.value)


def test_the_approvers_a_gate_assigns_are_added_to_mail_targets_and_mentioned_on_slack():
    config = parse_notify_config(
        {
            "targets": [{**SMTP, "to": ["oncall@example.com", "ada@example.com"]}, SLACK],
            "approvers": {
                "ada": {"email": "ada@example.com", "slack_id": "U0ADA"},
                "bo": {"email": "bo@x.org"},
            },
        }
    )
    reach = config.reach(config.targets, ("ada", "bo", "cy"))
    assert reach.targets[0].to == ("oncall@example.com", "ada@example.com", "bo@x.org")  # never twice
    assert reach.targets[1] == config.targets[1] and reach.mentions == ("U0ADA",)
    assert reach.unreachable == ("cy",)
    # a Slack id reaches nobody without a Slack target; a mail address nobody without a mail target
    only_slack = config.reach((config.targets[1],), ("ada", "bo"))
    assert only_slack.unreachable == ("bo",) and only_slack.mentions == ("U0ADA",)
    assert config.reach((config.targets[0],), ("ada",)).mentions == ()


def gate(**kw):
    """A waiting gate's notice with a long question."""
    args = {
        "dag_id": "kafka_failed_broker_reassignment",
        "run_id": "manual__1",
        "gate": "approval_gate",
        "subject": "Heal broker 4: 60 partitions, 3 chunks",
        "body": "\n".join(f"| line {i} | <b>&</b> |" for i in range(40)),
        "link": "http://airflow.example:8080/dags/d/runs/r/tasks/approval_gate/required_actions?map_index=-1",
        "deadline": "2026-12-02T19:00:00Z",
        "assignees": ("Ada",),
    }
    return gate_waiting(**{**args, **kw})


def test_a_waiting_gate_says_what_waits_until_when_for_whom_and_shows_the_start_of_its_question():
    notice = gate()
    assert notice.title == "[gate waiting] Heal broker 4: 60 partitions, 3 chunks"
    assert notice.lines[0] == (
        "kafka_failed_broker_reassignment / manual__1: gate approval_gate waits for an answer; "
        "answer before 2026-12-02T19:00:00Z (then it fails and nothing is done)"
    )
    assert notice.lines[1] == "approvers: Ada"
    assert notice.lines[2] == "| line 0 | <b>&</b> |"
    assert notice.lines[-1] == "... 28 more line(s) behind the link"
    assert gate(near_deadline=True).title.startswith("[gate deadline near] ")
    assert "no deadline" in gate(deadline=None).lines[0]


def test_the_mail_escapes_the_question_and_carries_the_link():
    subject, html = as_email(gate())
    assert subject == "[gate waiting] Heal broker 4: 60 partitions, 3 chunks"
    assert "<p>| line 0 | &lt;b&gt;&amp;&lt;/b&gt; |</p>" in html and "<b>&</b>" not in html
    assert (
        '<a href="http://airflow.example:8080/dags/d/runs/r/tasks/approval_gate/required_actions?map_index=-1">'
        in html
    )


def test_the_slack_message_is_one_slack_accepts_with_a_button_to_the_gate():
    payload = as_slack(gate(subject="x" * 400))
    assert slack_payload_problem(payload) is None
    header, section, actions = payload["blocks"]
    assert len(header["text"]["text"]) == 150 and header["text"]["text"].endswith("…")
    assert "&lt;b&gt;&amp;&lt;/b&gt;" in section["text"]["text"]
    assert (
        actions["elements"][0]["url"] == gate().link
        and actions["elements"][0]["text"]["text"] == "Answer the gate"
    )
    assert payload["text"].endswith(gate().link)


def test_a_failed_run_gives_its_recorded_reason_or_says_there_is_none():
    notice = run_failed(
        dag_id="kafka_controller_replace",
        run_id="r1",
        failed_tasks=["replace"],
        reason="replace: refused because the Variable kafka_runbooks_kafka_libs is not set",
        link=None,
    )
    assert notice.lines == (
        "kafka_controller_replace / r1 failed: task(s) replace",
        "reason: replace: refused because the Variable kafka_runbooks_kafka_libs is not set",
    )
    assert slack_payload_problem(as_slack(notice)) is None and len(as_slack(notice)["blocks"]) == 2
    bare = run_failed(dag_id="d", run_id="r", failed_tasks=[], reason=None, link=None)
    assert bare.lines[1] == "reason: none recorded (the task logs have what happened)"
