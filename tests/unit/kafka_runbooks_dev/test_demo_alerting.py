"""The demo's alerting (``kafka_runbooks_dev.demo_alerting``): its ports follow the stack's base,
the Airflow side names the stand-ins it starts, and the processes it starts are real, answer,
file what the on-call is sent, outlive the starter and are gone after ``stop``."""

from __future__ import annotations

import json
import mailbox
import random
import smtplib
import socket
from email.message import EmailMessage

import requests

from kafka_runbooks.notify import parse_notify_config
from kafka_runbooks_dev import alertmanager, prometheus
from kafka_runbooks_dev.demo_alerting import ONCALL_ADDRESS, SLACK_CONN, SMTP_CONN, DemoAlerting
from kafka_runbooks_dev.localstack.topology import Topology
from tests.helpers import wait_until


def test_its_ports_follow_the_base_and_airflow_is_told_exactly_what_it_starts(tmp_path):
    alerting = DemoAlerting(tmp_path, 23000)
    assert [alerting.port(w) for w in ("prometheus", "alertmanager", "smtp", "slack")] == [
        23060,
        23061,
        23062,
        23063,
    ]
    env = alerting.airflow_env()
    config = parse_notify_config(env["AIRFLOW_VAR_KAFKA_RUNBOOKS_NOTIFY"])
    assert [t.name for t in config.targets] == [f"smtp:{SMTP_CONN}", f"slack_webhook:{SLACK_CONN}"]
    assert config.targets[0].to == (ONCALL_ADDRESS,)
    conns = alerting.airflow_connections()
    assert conns[SMTP_CONN]["port"] == 23062
    assert conns[SLACK_CONN]["host"] == "http://127.0.0.1:23063/services"
    # secrets made once, owner-only, the same on the next start
    assert env["KAFKA_RUNBOOKS_ALERTS_TOKEN"] == DemoAlerting(tmp_path, 23000).alerts_token
    assert (tmp_path / "alerting" / "alerts-token").stat().st_mode & 0o077 == 0
    assert conns[SLACK_CONN]["password"] == alerting.slack_token


def test_it_starts_real_processes_that_file_what_the_on_call_is_sent_and_stops_them(tmp_path):
    assert prometheus.available() and alertmanager.available(), (
        "scripts/bootstrap.sh --alerting installs them"
    )
    base = _free_base()
    alerting = DemoAlerting(tmp_path, base)
    topology = Topology(port_base=base)
    assert sorted(alerting.start(topology, "http://127.0.0.1:1")) == [
        "alertmanager",
        "prometheus",
        "receivers",
    ]
    try:
        for what in ("prometheus", "alertmanager"):
            url = f"http://127.0.0.1:{alerting.port(what)}/-/ready"
            wait_until(lambda u=url: _answers(u), 60, 0.2, f"{what} ready")
        assert alerting.start(topology, "http://127.0.0.1:1") == []  # running: kept
        mail = EmailMessage()
        mail["Subject"], mail["From"], mail["To"] = "[gate waiting] demo", "kr@localhost", ONCALL_ADDRESS
        mail.set_content("a gate waits")
        wait_until(lambda: _answers_smtp(alerting.port("smtp")), 30, 0.2, "the SMTP stand-in")
        with smtplib.SMTP("127.0.0.1", alerting.port("smtp"), timeout=10) as smtp:
            smtp.send_message(mail)
        hook = f"http://127.0.0.1:{alerting.port('slack')}/services/{alerting.slack_token}"
        assert requests.post(hook, json={"text": "[gate waiting] demo"}, timeout=10).text == "ok"
        oncall = tmp_path / "alerting" / "oncall"
        wait_until(lambda: (oncall / "mailbox").exists(), 10, 0.1, "the mailbox")
        [filed] = list(mailbox.mbox(oncall / "mailbox"))
        assert filed["Subject"] == "[gate waiting] demo"
        assert [json.loads(line) for line in (oncall / "slack.jsonl").read_text().splitlines()] == [
            {"text": "[gate waiting] demo"}
        ]
    finally:
        alerting.stop()
    assert not any(alerting.running(w) for w in ("prometheus", "alertmanager", "receivers"))
    assert list((tmp_path / "alerting").glob("*.pid")) == []


def _free_base() -> int:
    """A port base whose alerting ports (+60..+63) nobody listens on now."""
    for _ in range(50):
        base = random.randrange(30000, 60000, 100)
        try:
            for offset in range(60, 64):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", base + offset))
        except OSError:
            continue
        return base
    raise AssertionError("no free port base")


def _answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=2).status_code == 200
    except requests.RequestException:
        return False


def _answers_smtp(port: int) -> bool:
    try:
        with smtplib.SMTP("127.0.0.1", port, timeout=2):
            return True
    except OSError:
        return False
