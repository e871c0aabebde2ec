"""kafka_broker_decommission through a real Airflow and the real stack.

Broker 4 (live) is drained under an acks=all producer: the gate says "Decommission brokers",
the approval is answered through the API, the run succeeds, and the cluster itself (metadata
read here, not the run's log) shows broker 4 with no replica and no leadership and no throttle
left, the producer without a failed send. A second run naming broker 99, which is not
registered, fails before any gate with the reason.

One disruptive runbook per cluster (issue #27): while the decommission holds the cluster's lease
(from acquire_lease through its gate), a full rebalance asked on the same cluster with
on_lease_held=fail fails at acquire_lease naming the holder and changes nothing; once the
decommission has ended, its teardown has given the lease back.
"""

from __future__ import annotations

import pytest

from kafka_runbooks.approval import APPROVE_OPTION
from kafka_runbooks.failed_broker.throttle import leftover_throttles
from kafka_runbooks.lease import Holder, LeaseRecord
from kafka_runbooks.storage import Records, store
from kafka_runbooks_dev.localstack.airflow import AirflowLocal
from tests.e2e.test_broker_restart_dag import Producer
from tests.helpers import SHARED_DISK_CEILING, create_topic, produce, unique_topic

DAG_ID = "kafka_broker_decommission"
REBALANCE = "kafka_rebalance"
CLUSTER = "kafka_default"
DRAINED = 4
pytestmark = pytest.mark.timeout(1500)


def test_a_live_broker_is_drained_of_replicas_and_leadership_under_acks_all(
    airflow_local: AirflowLocal, restore_stack, admin
):
    stack = restore_stack
    bs = stack.bootstrap_servers
    airflow_local.wait_for_dag(DAG_ID, timeout=120)
    airflow_local.unpause(DAG_ID)
    topic = unique_topic("decommission")
    # broker 4 leads two partitions and follows in three; racks 1 a, 2 b, 3 a, 4 b
    assignment = {0: [4, 1, 2], 1: [1, 4, 3], 2: [2, 3, 4], 3: [4, 2, 3], 4: [3, 1, 4], 5: [1, 2, 3]}
    create_topic(bs, topic, assignment=assignment, config={"min.insync.replicas": "2"})
    assert produce(bs, topic, 5000, size=200) == 5000
    assert any(p.leader == DRAINED for p in admin.describe_topic_partitions([topic]))

    producer = Producer(bs, topic)
    producer.start()
    try:
        run = airflow_local.trigger(
            DAG_ID,
            {
                "broker_ids": str(DRAINED),
                "throttle_bytes_per_sec": "20 MiB",
                "max_disk_usage_percent": SHARED_DISK_CEILING,
            },
        )
        _a_rebalance_fails_while_the_decommission_holds_the_lease(airflow_local, admin, run)
        # the Spark plan is most of the wait: ~30 s on an idle machine, 3 min at a load average of 28
        request = airflow_local.wait_for_approval(DAG_ID, run, "approval_gate", timeout=600)
        assert request["subject"].startswith(f"Decommission broker(s) [{DRAINED}]: move "), request["subject"]
        body = request["body"].splitlines()
        assert body[0].startswith(f"Decommission brokers **{DRAINED} (rack rack-b)**: **"), body[0]
        assert "at the throttle" in body[0] and any(
            line.startswith(f"| **{DRAINED}** (drained) |") for line in body
        )
        airflow_local.answer(DAG_ID, run, "approval_gate", [APPROVE_OPTION])
        state = airflow_local.wait_for_run(DAG_ID, run, timeout=600)
    finally:
        producer.stop_event.set()
        producer.join(320)
    verify_log = airflow_local.task_log_text(DAG_ID, run, "verify_result")
    assert state == "success", f"{airflow_local.task_instances(DAG_ID, run)}\n{verify_log[-3000:]}"
    assert "DECISION verify: drained" in verify_log

    # from the cluster: every topic's partitions as the metadata has them now
    topics = admin.list_topics()
    parts = admin.describe_topic_partitions(topics)
    assert [p.name for p in parts if DRAINED in p.replicas] == []
    assert [p.name for p in parts if p.leader == DRAINED] == []
    assert [p.name for p in parts if set(p.isr) != set(p.replicas)] == []
    assert leftover_throttles(admin, [1, 2, 3, DRAINED], topics) == {}
    assert producer.failed == [] and producer.acked > 100
    assert _lease_holder(airflow_local) is None, "the decommission's teardown gave the lease back"

    # a broker the cluster does not have: refused in the run's first task, before the lease, naming
    # the brokers it has
    refused = airflow_local.trigger(DAG_ID, {"broker_ids": "99"})
    assert airflow_local.wait_for_run(DAG_ID, refused, timeout=300) == "failed"
    assert airflow_local.task_instance(DAG_ID, refused, "check_input")["state"] == "failed"
    check_log = airflow_local.task_log_text(DAG_ID, refused, "check_input")
    assert "DECISION validate: refuse the run: nothing was done" in check_log
    assert (
        "broker id(s) the cluster does not have: broker_ids [99] (its brokers: [1, 2, 3, 4]" in check_log
    ), check_log[-3000:]
    assert airflow_local.task_instance(DAG_ID, refused, "approval_gate")["state"] in (
        "skipped",
        "upstream_failed",
    )


def _lease_holder(airflow_local: AirflowLocal) -> Holder | None:
    """The run holding the cluster's lease, read the way the runbooks read it (the test Airflow's data
    store), or None when the cluster is free."""
    text = Records(store(str(airflow_local.home / "kafka_runbooks")), "state/leases").read(CLUSTER)
    return None if text is None else LeaseRecord.from_json(text).holder


def _a_rebalance_fails_while_the_decommission_holds_the_lease(
    airflow_local: AirflowLocal, admin, holder: str
) -> None:
    """Issue #27: the two planned runbooks exclude each other on one cluster, as reassign and restart
    do. The decommission takes the lease before it plans; a full rebalance asked meanwhile with
    on_lease_held=fail stops at acquire_lease naming the holder, runs none of its cluster steps, and
    its teardown leaves the holder's lease alone. The decommission moves nothing before its gate is
    answered, so any reassignment in flight now would be the rebalance's: there must be none."""
    airflow_local.wait_for_task_state(DAG_ID, holder, "acquire_lease", "success", timeout=600)
    assert _lease_holder(airflow_local) == Holder(DAG_ID, holder)
    refused = airflow_local.trigger(REBALANCE, {"mode": "full", "on_lease_held": "fail"})
    # a rebalance let through would go on to its own gate: fail at once when acquire_lease succeeds
    airflow_local.wait_for_task_state(REBALANCE, refused, "acquire_lease", "failed", timeout=300)
    assert airflow_local.wait_for_run(REBALANCE, refused, timeout=300) == "failed"
    states = {ti["task_id"]: ti["state"] for ti in airflow_local.task_instances(REBALANCE, refused)}
    assert (states["check_input"], states["acquire_lease"]) == ("success", "failed"), states
    cluster_steps = ("validate", "snapshot_cluster", "plan_reassignment", "approval_gate", "execute_chunks")
    assert [t for t in cluster_steps if states.get(t) not in (None, "upstream_failed")] == [], states
    lease_log = airflow_local.task_log_text(REBALANCE, refused, "acquire_lease")
    assert f"cluster {CLUSTER} is held by {DAG_ID} run {holder} since" in lease_log, lease_log[-3000:]
    assert "on_lease_held=fail" in lease_log
    assert _lease_holder(airflow_local) == Holder(DAG_ID, holder)
    assert admin.list_reassignments() == {}
