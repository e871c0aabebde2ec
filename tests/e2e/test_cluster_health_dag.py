"""kafka_cluster_health on a real Airflow against the real stack: it sees what we break."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import create_topic, produce, unique_topic, wait_until

DAG_ID = "kafka_cluster_health"
pytestmark = pytest.mark.timeout(600)


def _run_health(airflow_local) -> tuple[str, dict, str]:
    airflow_local.wait_for_dag(DAG_ID, timeout=120)
    run_id = airflow_local.trigger(DAG_ID, {"max_listed": 500})
    state = airflow_local.wait_for_run(DAG_ID, run_id, timeout=400)
    states = {ti["task_id"]: ti["state"] for ti in airflow_local.task_instances(DAG_ID, run_id)}
    assert state == "success", f"run {run_id} ended {state}: {states}"
    # one mapped 'cluster' group per cluster of the fleet; the default fleet is kafka_default alone
    snapshot_log = airflow_local.task_log_text(DAG_ID, run_id, "cluster.snapshot_cluster", map_index=0)
    publish_log = airflow_local.task_log_text(DAG_ID, run_id, "cluster.publish_report", map_index=0)
    snapshot_dir = _logged_snapshot_dir(snapshot_log)
    report = json.loads((snapshot_dir / "health" / "report.json").read_text())
    return run_id, report, publish_log


def _logged_snapshot_dir(log_text: str) -> Path:
    for line in log_text.splitlines():
        if "DECISION snapshot" in line and "action: wrote " in line:
            return Path(line.split("action: wrote ", 1)[1].split(" |", 1)[0].strip())
    raise AssertionError(f"no snapshot decision record in the log:\n{log_text}")


def _names(entries: list[dict]) -> set[str]:
    return {f"{e['topic']}-{e['partition']}" for e in entries}


def test_a_killed_broker_shows_up_as_under_replicated(airflow_local, restore_stack, admin):
    stack = restore_stack
    topic = unique_topic("health-urp")
    create_topic(stack.bootstrap_servers, topic, 4, 3)
    produce(stack.bootstrap_servers, topic, 200)
    on_4 = {f"{p.topic}-{p.partition}" for p in admin.describe_partitions([topic]) if 4 in p.replicas}
    assert on_4, "broker 4 hosts none of the test topic's partitions"
    stack.kill(4)
    wait_until(
        lambda: all(4 not in p.isr for p in admin.describe_partitions([topic])),
        60,
        what="ISR without broker 4",
    )

    run_id, report, publish_log = _run_health(airflow_local)

    assert on_4 <= _names(report["under_replicated"])
    assert report["counts"]["offline"] == 0
    brokers = {b["broker_id"]: b for b in report["brokers"]}
    assert brokers[4]["alive"] is False and brokers[1]["alive"] is True
    assert "under replicated" in publish_log and "DECISION health" in publish_log
    assert topic in publish_log


def test_a_partition_whose_replicas_are_all_dead_is_offline(airflow_local, restore_stack, admin):
    stack = restore_stack
    topic = unique_topic("health-offline")
    create_topic(stack.bootstrap_servers, topic, assignment={0: [3, 4], 1: [1, 2]})
    produce(stack.bootstrap_servers, topic, 100)
    stack.kill(3)
    stack.kill(4)
    wait_until(
        lambda: next(p for p in admin.describe_partitions([topic]) if p.partition == 0).leader == -1,
        60,
        what=f"{topic}-0 without a leader",
    )

    run_id, report, publish_log = _run_health(airflow_local)

    assert f"{topic}-0" in _names(report["offline"])
    assert f"{topic}-1" not in _names(report["offline"])
    assert f"{topic}-0" not in _names(report["under_replicated"])
    assert "offline" in publish_log and f"{topic}-0" in publish_log
