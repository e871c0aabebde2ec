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
    run_id = airflow_local.trigger(DAG_ID, {"max_listed": 100000})  # every partition listed
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


def test_killed_brokers_show_up_as_under_replicated_and_offline(airflow_local, restore_stack, admin):
    """One health run sees both: brokers 3 and 4 killed; a topic with one or two replicas on
    them is under-replicated (still led), a partition whose replicas are all on them is offline
    and only offline (never also listed as under-replicated)."""
    stack = restore_stack
    bs = stack.bootstrap_servers
    urp = unique_topic("health-urp")
    create_topic(bs, urp, assignment={0: [1, 3, 4], 1: [2, 4, 1], 2: [4, 1, 2], 3: [1, 2, 3]})
    produce(bs, urp, 200)
    offline = unique_topic("health-offline")
    create_topic(bs, offline, assignment={0: [3, 4], 1: [1, 2]})
    produce(bs, offline, 100)
    stack.kill(3)
    stack.kill(4)
    wait_until(
        lambda: (
            next(p for p in admin.describe_partitions([offline]) if p.partition == 0).leader == -1
            and all(not {3, 4} & set(p.isr) for p in admin.describe_partitions([urp]))
        ),
        60,
        what=f"{offline}-0 without a leader, {urp} without brokers 3 and 4 in its ISRs",
    )

    run_id, report, publish_log = _run_health(airflow_local)

    assert {f"{urp}-{p}" for p in range(4)} <= _names(report["under_replicated"])
    assert not {f"{urp}-{p}" for p in range(4)} & _names(report["offline"])
    assert f"{offline}-0" in _names(report["offline"])
    assert f"{offline}-1" not in _names(report["offline"]) | _names(report["under_replicated"])
    assert f"{offline}-0" not in _names(report["under_replicated"])
    brokers = {b["broker_id"]: b for b in report["brokers"]}
    assert brokers[3]["alive"] is False and brokers[4]["alive"] is False and brokers[1]["alive"] is True
    assert "under replicated" in publish_log and "offline" in publish_log and "DECISION health" in publish_log
    assert urp in publish_log and f"{offline}-0" in publish_log
