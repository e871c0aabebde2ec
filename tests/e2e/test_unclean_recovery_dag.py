"""kafka_unclean_recovery on a real Airflow and the real stack, gates answered through the API.

The scenario (tests/unclean_scenario.py): two offline partitions assigned [1, 3, 2];
broker 1 (300 messages) is dead, broker 3 holds 100 and broker 2 holds 200, neither in
the ISR or ELR. Partition 0 goes through the runbook, its twin, partition 1, through
Kafka's own UNCLEAN election (the admin API); the messages each keeps are compared.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_runbooks.approval import APPROVE_OPTION
from kafka_runbooks.paths import safe_name
from kafka_runbooks_dev.localstack.airflow import AirflowLocal
from tests import unclean_scenario as sc
from tests.e2e.conftest import AIRFLOW_TEST_HOME
from tests.helpers import wait_until

DAG_ID = "kafka_unclean_recovery"
GATE = "approve_elections"


@pytest.fixture(scope="module")
def scenario(local_stack):
    from kafka_runbooks.admin import ClusterAdmin

    with ClusterAdmin({"bootstrap.servers": local_stack.bootstrap_servers}, timeout_s=15) as admin:
        built = sc.build(local_stack, admin, "unclean-e2e", partitions=2)
        try:
            yield built
        finally:
            sc.restore(local_stack, admin, [built.topic], timeout=600)


def _conf(topic: str, partitions: list[int], mode: str, **extra) -> dict:
    doc = {"partitions": [{"topic": topic, "partitions": partitions}]}
    return {"partitions_json": json.dumps(doc), "mode": mode, "recovery_duration_ms": 10000, **extra}


def _states(airflow: AirflowLocal, run_id: str) -> dict:
    return {ti["task_id"]: ti["state"] for ti in airflow.task_instances(DAG_ID, run_id)}


def _partition(admin, topic: str, partition: int):
    return next(p for p in admin.describe_partitions([topic]) if p.partition == partition)


@pytest.mark.timeout(900)  # includes starting Airflow when this test runs first
def test_dry_run_bad_input_approved_recovery_and_kafkas_own_election(
    airflow_local: AirflowLocal, scenario, local_stack, admin
):
    topic = scenario.topic
    airflow_local.wait_for_dag(DAG_ID, timeout=120)
    assert not [e for e in airflow_local.import_errors() if "kafka_unclean_recovery" in e["filename"]]

    # 1. bad input: fails in plan_recovery, nothing elected
    bad = airflow_local.trigger(DAG_ID, _conf(topic, [0, 9], "automated_recovery"))
    assert airflow_local.wait_for_run(DAG_ID, bad, timeout=180) == "failed"
    assert _states(airflow_local, bad)["plan_recovery"] == "failed"
    assert f"unknown partition(s): {topic}-9" in airflow_local.task_log_text(DAG_ID, bad, "plan_recovery")
    assert _partition(admin, topic, 0).leader == -1

    # 2. the scenario's dead broker 1 is in the ISR: it holds every committed record, so without
    # allow_committed_loss the plan proposes the clean path and chooses no stale replica
    clean = airflow_local.trigger(DAG_ID, _conf(topic, [0], "show_replica_info"))
    assert airflow_local.wait_for_run(DAG_ID, clean, timeout=180) == "success"
    clean_log = airflow_local.task_log_text(DAG_ID, clean, "plan_recovery")
    assert f"DECISION choose [{topic}-0]: no candidate because clean path: broker(s) " in clean_log

    # 3. dry run with the manual recovery file, losing committed records allowed explicitly:
    # names the longest replica, elects nothing
    dry = airflow_local.trigger(
        DAG_ID, _conf(topic, [0, 1], "manual_recovery_file", allow_committed_loss=True)
    )
    assert airflow_local.wait_for_run(DAG_ID, dry, timeout=180) == "success"
    assert _states(airflow_local, dry) == {
        "check_input": "success",
        "acquire_lease": "success",  # a read-only mode: no lease taken, nothing to give back
        "release_lease": "success",
        "plan_recovery": "success",
        "automated_recovery_requested": "success",
        GATE: "skipped",
        "run_elections": "skipped",
        "restore_replica_order": "skipped",  # the short circuit skips all of it: nothing was reordered
    }
    out = AIRFLOW_TEST_HOME / "kafka_runbooks" / "unclean_recovery" / safe_name(dry)
    assert not (out / "manual_recovery.json").exists()  # the designatedLeader file today's tools misread
    elect_file = json.loads((out / "manual" / "elect-after-reorder.json").read_text())
    assert elect_file == {"partitions": [{"topic": topic, "partition": p} for p in (0, 1)]}
    assert "kafka-leader-election.sh" in (out / "manual" / "STEPS.md").read_text()
    log = airflow_local.task_log_text(DAG_ID, dry, "plan_recovery")
    assert f"DECISION choose [{topic}-0]: elect broker {sc.LONGEST}" in log
    table = Path(out / "replica_table.txt").read_text()
    assert any(
        line.split()[:6] == [f"{topic}-0", "2", "0", "200", "0", "CHOSEN"] for line in table.splitlines()
    )
    assert all(p.leader == -1 for p in admin.describe_partitions([topic]))

    # 4. automated: the gate shows the plan; approved, the longest replica is elected, and the
    # run fails naming the acknowledged records lost (never a plain success)
    run = airflow_local.trigger(
        DAG_ID, _conf(topic, [0], "automated_recovery", settle_period_s=5, allow_committed_loss=True)
    )
    request = airflow_local.wait_for_approval(DAG_ID, run, GATE, timeout=180)
    # the gate's body is a GFM table (the UI renders it), not a fenced block shown as one line
    assert f"| {topic}-0 | 2 | 0 | 200 | 0 | CHOSEN | ok |" in request["body"]
    assert "| partition | broker | newest_epoch |" in request["body"] and "```" not in request["body"]
    assert "Kafka's unclean election: broker 3, loses 100" in request["body"]
    assert _partition(admin, topic, 0).leader == -1  # nothing elected before the answer
    assert "LACKS COMMITTED RECORDS" in request["body"]
    airflow_local.answer(DAG_ID, run, GATE, [APPROVE_OPTION])
    assert airflow_local.wait_for_run(DAG_ID, run, timeout=180) == "failed"
    assert _states(airflow_local, run)["run_elections"] == "failed"
    assert "RECOVERED WITH LOSS" in airflow_local.task_log_text(DAG_ID, run, "run_elections")
    elections = json.loads(
        (
            AIRFLOW_TEST_HOME / "kafka_runbooks" / "unclean_recovery" / safe_name(run) / "elections.json"
        ).read_text()
    )
    assert [(o["status"], o["leader"]) for o in elections["outcomes"]] == [("elected_chosen", sc.LONGEST)]
    assert "elected_chosen" in airflow_local.task_log_text(DAG_ID, run, "run_elections")
    assert _partition(admin, topic, 0).leader == sc.LONGEST

    # 5. the twin partition through Kafka's own unclean election (admin API, ElectLeaders UNCLEAN)
    from kafka.admin import KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=local_stack.bootstrap_servers.split(","))
    try:
        kp.elect_leaders(1, {topic: [1]})
    finally:
        kp.close()
    twin = wait_until(
        lambda: (p := _partition(admin, topic, 1)).leader != -1 and p, 30, 0.5, "the twin's unclean election"
    )
    assert twin.leader == sc.KAFKA_PICK

    kept_runbook = sc.count_messages(local_stack.bootstrap_servers, topic, 0)
    kept_kafka = sc.count_messages(local_stack.bootstrap_servers, topic, 1)
    print(
        f"\nmessages kept: runbook {kept_runbook}, Kafka UNCLEAN election {kept_kafka}, most held by a live "
        f"replica {sc.HELD[sc.LONGEST]}, produced {sc.HELD[sc.LOST]}"
    )
    assert kept_runbook == sc.HELD[sc.LONGEST] == 200
    assert kept_kafka == sc.HELD[sc.KAFKA_PICK] == 100

    # 5. running it again is safe: the partition is online, left alone, nothing to approve
    again = airflow_local.trigger(DAG_ID, _conf(topic, [0], "automated_recovery"))
    assert airflow_local.wait_for_run(DAG_ID, again, timeout=180) == "success"
    assert _states(airflow_local, again)[GATE] == "skipped"
    assert f"DECISION resolve [{topic}-0]: leave alone: online" in airflow_local.task_log_text(
        DAG_ID, again, "plan_recovery"
    )
