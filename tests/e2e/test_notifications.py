"""Notifications on the real Airflow (issue #41): a gate that waits tells the on-call by mail and by
Slack webhook with the link that answers it, and the run that its Reject fails is told once.

The receivers are real and run here (``kafka_runbooks_dev.receivers``: aiosmtpd, and an HTTP server
that answers as Slack's incoming webhooks do); the Variable and the connections are set through
Airflow's REST API, as a deployment would set them.
"""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, unquote, urlparse

import pytest
import requests

from kafka_runbooks.approval import REJECT_OPTION
from kafka_runbooks_airflow.notify import VARIABLE
from kafka_runbooks_dev.receivers import MailReceiver, SlackWebhookReceiver
from tests.e2e.test_approval_records import DAG_ID, GATE, conf, set_variable
from tests.helpers import wait_until

pytestmark = pytest.mark.timeout(900)
LINK = re.compile(r'<a href="([^"]+)">Answer the gate</a>')


@pytest.fixture
def on_call(airflow_local):
    """The receivers up, two connections to them and the Variable naming both; all removed after."""
    with MailReceiver() as mail, SlackWebhookReceiver() as slack:
        conns = {"e2e_oncall_smtp": mail.connection(), "e2e_oncall_slack": slack.connection()}
        for conn_id, c in conns.items():
            body = {"connection_id": conn_id, **c}
            if "extra" in body:
                body["extra"] = json.dumps(body["extra"])
            airflow_local.api("POST", "/connections", json=body)
        targets = [
            {"kind": "smtp", "conn_id": "e2e_oncall_smtp", "to": ["kafka-oncall@example.com"]},
            {"kind": "slack_webhook", "conn_id": "e2e_oncall_slack"},
        ]
        set_variable(airflow_local, VARIABLE, json.dumps({"targets": targets}))
        try:
            yield mail, slack
        finally:
            set_variable(airflow_local, VARIABLE, None)
            for conn_id in conns:
                airflow_local.request("DELETE", f"/api/v2/connections/{conn_id}")


def test_a_waiting_gate_wakes_the_on_call_with_a_link_that_answers_it_and_the_failed_run_is_told_once(
    airflow_local, restore_stack, on_call
):
    mail, slack = on_call
    airflow_local.wait_for_dag(DAG_ID, timeout=120)
    run_id = airflow_local.trigger(DAG_ID, conf(1, reason="notifications end to end"))
    airflow_local.wait_for_approval(DAG_ID, run_id, GATE, timeout=300)

    # other runs on this Airflow (an earlier test's sweep that ends failed now) are told too: count ours
    def mine():
        """The mails that name this run."""
        return [m for m in mail.messages if f"{DAG_ID} / {run_id}" in m.get_body(("html",)).get_content()]

    def posts():
        """The Slack posts that name this run."""
        return [p for p in slack.posts if f"{DAG_ID} / {run_id}" in json.dumps(p)]

    wait_until(lambda: mine() and posts(), 60, 0.5, "the gate's mail and Slack message")
    # a gate whose try Airflow lost asks again (apache/airflow#67287) and tells again: each says the same run
    asked = [m for m in mine() if m["Subject"].startswith("[gate waiting] ")]
    assert asked and len(asked) == len(mine()), [m["Subject"] for m in mail.messages]
    message = asked[0]
    assert (
        message["Subject"].startswith("[gate waiting] ")
        and message["X-Envelope-To"] == "kafka-oncall@example.com"
    )
    html = message.get_body(("html",)).get_content()
    [link] = LINK.findall(html)
    assert posts()[0]["blocks"][-1]["elements"][0]["url"] == link.replace("&amp;", "&")
    assert f"{DAG_ID} / {run_id}: gate {GATE} waits for an answer; answer before " in html

    # the link is Airflow's own Required action page of this gate: the UI serves it, and the gate
    # it names is the one waiting
    url = urlparse(link.replace("&amp;", "&"))
    assert url.netloc == urlparse(airflow_local.base_url).netloc
    parts = unquote(url.path).split("/")
    assert (
        parts[1:3] == ["dags", DAG_ID]
        and parts[3:5] == ["runs", run_id]
        and parts[5:] == ["tasks", GATE, "required_actions"]
    )
    assert parse_qs(url.query) == {"map_index": ["-1"]}
    page = requests.get(url.geturl(), timeout=60)
    assert page.status_code == 200 and "<html" in page.text.lower()

    airflow_local.answer(parts[2], parts[4], parts[6], [REJECT_OPTION])
    assert airflow_local.wait_for_run(DAG_ID, run_id, timeout=300) == "failed"
    wait_until(
        lambda: (
            any(m["Subject"].startswith("[run failed] ") for m in mine())
            and any(p["text"].startswith("[run failed] ") for p in posts())
        ),
        120,
        0.5,
        "the failed run's mail and Slack message (sent one after the other)",
    )
    failed = [m for m in mine() if m["Subject"].startswith("[run failed] ")]
    assert len(failed) == 1, [m["Subject"] for m in mail.messages]
    assert failed[0]["Subject"].startswith(f"[run failed] {DAG_ID}: approval: rejected because ")
    assert "/kafka-console/decisions/" in failed[0].get_body(("html",)).get_content()
    assert [p["text"].split(" http")[0] for p in posts() if p["text"].startswith("[run failed] ")] == [
        failed[0]["Subject"]
    ]
    assert slack.token not in json.dumps(airflow_local.task_log(DAG_ID, run_id, GATE))
    assert slack.refused == []
    assert len([m for m in mine() if m["Subject"].startswith("[run failed] ")]) == 1  # still one
