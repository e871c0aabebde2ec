"""Alertmanager's webhook as alerts, and the decision per alert (``kafka_runbooks.alerts``)."""

from __future__ import annotations

import copy

import pytest

from kafka_runbooks.alerts import ROUTES, dispatch, incident_run_id, parse_webhook
from kafka_runbooks.errors import BadInput

# what Alertmanager 0.25 posts (webhook payload version 4), two alerts of one group
BODY = {
    "receiver": "kafka-runbooks",
    "status": "firing",
    "alerts": [
        {
            "status": "firing",
            "labels": {"alertname": "KafkaBrokerDown", "broker_id": "4", "kafka_config_id": "kafka_eu1"},
            "annotations": {"summary": "broker 4 is not scraped"},
            "startsAt": "2026-12-02T03:00:05.123Z",
            "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "http://prometheus:9090/graph?g0.expr=up",
            "fingerprint": "5b2c5c1f0e6d9a11",
        },
        {
            "status": "firing",
            "labels": {"alertname": "DiskAlmostFull", "instance": "broker-2"},
            "annotations": {},
            "startsAt": "2026-12-02T03:01:00Z",
            "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "",
            "fingerprint": "77aa00bb11cc22dd",
        },
    ],
    "groupLabels": {},
    "commonLabels": {},
    "commonAnnotations": {},
    "externalURL": "http://alertmanager:9093",
    "version": "4",
    "groupKey": "{}:{}",
    "truncatedAlerts": 0,
}


def test_a_post_is_read_into_its_alerts():
    down, disk = parse_webhook(BODY)
    assert (down.name, down.firing, down.fingerprint, down.ends_at) == (
        "KafkaBrokerDown",
        True,
        "5b2c5c1f0e6d9a11",
        None,
    )
    assert down.labels["broker_id"] == "4" and down.generator_url.startswith("http://prometheus")
    assert disk.generator_url is None


def test_a_firing_alert_with_a_route_starts_its_sweep_on_the_cluster_it_names_and_the_rest_is_said():
    start, unrouted = dispatch(parse_webhook(BODY))
    assert (start.action, start.dag_id, start.conf) == (
        "start",
        "kafka_failed_broker_sweep",
        {"kafka_config_ids": ["kafka_eu1"]},
    )
    assert start.run_id == incident_run_id(start.alert) and start.run_id.startswith(
        "alert__KafkaBrokerDown__5b2c5c1f0e6d9a11__"
    )
    assert unrouted.action == "unrouted" and "no runbook handles the alert DiskAlmostFull" in unrouted.why


def test_one_incident_is_one_run_id_and_a_new_firing_is_another():
    again = copy.deepcopy(BODY)  # Alertmanager's retry or repeat_interval: the same firing
    assert dispatch(parse_webhook(again))[0].run_id == dispatch(parse_webhook(BODY))[0].run_id
    refired = copy.deepcopy(BODY)
    refired["alerts"][0]["startsAt"] = "2026-12-02T04:10:00Z"  # resolved in between, firing again
    assert dispatch(parse_webhook(refired))[0].run_id != dispatch(parse_webhook(BODY))[0].run_id


def test_alerts_of_one_post_for_the_same_sweep_start_one_run():
    body = copy.deepcopy(BODY)
    second = copy.deepcopy(body["alerts"][0])
    second["labels"]["broker_id"], second["fingerprint"] = "3", "1111222233334444"
    body["alerts"].insert(1, second)
    first, covered, _ = dispatch(parse_webhook(body))
    assert first.action == "start" and (covered.action, covered.run_id) == ("covered", first.run_id)
    assert covered.why == f"the run {first.run_id} of kafka_failed_broker_sweep covers it"


def test_a_resolved_alert_is_recorded_never_started():
    resolved = copy.deepcopy(BODY)
    resolved["alerts"][0].update(status="resolved", endsAt="2026-12-02T03:20:00Z")
    [d] = dispatch(parse_webhook(resolved))[:1]
    assert (d.action, d.dag_id, d.why) == (
        "resolved",
        None,
        "KafkaBrokerDown resolved at 2026-12-02T03:20:00Z",
    )


def test_a_connect_alert_names_its_connect_cluster():
    body = copy.deepcopy(BODY)
    body["alerts"] = [body["alerts"][0]]
    body["alerts"][0]["labels"] = {"alertname": "KafkaConnectFailedTask", "connect_conn_id": "connect_eu1"}
    [d] = dispatch(parse_webhook(body))
    assert (d.dag_id, d.conf) == ("kafka_connect_autorestart", {"connect_conn_ids": ["connect_eu1"]})


def test_every_route_names_a_runbook_dag_and_each_alert_name_once():
    from pathlib import Path

    dags = {p.stem for p in (Path(__file__).resolve().parents[3] / "dags").glob("kafka_*.py")}
    assert {r.dag_id for r in ROUTES} <= dags
    assert len({r.alertname for r in ROUTES}) == len(ROUTES)


@pytest.mark.parametrize(
    ("mutate", "says"),
    [
        (lambda b: b.update(version="3"), "only version 4"),
        (lambda b: b.update(alerts={}), "alerts: a list"),
        (lambda b: b["alerts"][0].update(status="pending"), "alerts[0].status"),
        (lambda b: b["alerts"][0]["labels"].pop("alertname"), "alerts[0].labels.alertname"),
        (lambda b: b["alerts"][1].pop("fingerprint"), "alerts[1].fingerprint"),
        (lambda b: b["alerts"][0]["labels"].update(broker_id=4), "alerts[0].labels: an object of strings"),
    ],
)
def test_a_body_that_is_not_alertmanagers_names_its_field(mutate, says):
    body = copy.deepcopy(BODY)
    mutate(body)
    with pytest.raises(BadInput) as err:
        parse_webhook(body)
    assert says in str(err.value)
