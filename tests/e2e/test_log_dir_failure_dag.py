"""kafka_log_dir_failure through a real Airflow, on a real JBOD stack (issue #28).

Broker 1's second log dir fails under an acks=all producer (the broker lives on). A first run
stops at the gate, which names exactly the failed dir's replicas (validate's selection, the
subject's counts and the plan files the body names); Reject fails the run and nothing moved:
the assignment read from the cluster is what it was, no throttle. A fresh run is approved: the
run succeeds, and the cluster read here shows those replicas off broker 1, its healthy dir's
replicas still on it, every partition in sync, no throttle left, and every acknowledged message
still there. Then a Clear of the whole successful run: nothing moves again and nothing gets past
the gate without a new approval (docs/approval-gates.md).

The session stack has one log dir per broker, so this module starts a small JBOD stack of its
own (1 controller, 3 brokers with two dirs each; ports 600 above the lane's base) and gives the
running Airflow a connection to it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.failed_broker.execute import chunks_from_plan_dir, split
from kafka_runbooks.failed_broker.throttle import leftover_throttles
from kafka_runbooks_dev.localstack.airflow import AirflowLocal
from kafka_runbooks_dev.localstack.stack import LocalStack
from kafka_runbooks_dev.localstack.topology import Topology
from tests.e2e.test_broker_restart_dag import Producer
from tests.helpers import create_topic, produce, wait_until
from tests.unclean_scenario import count_messages

DAG_ID = "kafka_log_dir_failure"
GATE = "approval_gate"
CONN = "kafka_jbod_e2e"
TOPIC = "ldf-e2e"
BROKER = 1
# broker 1 holds a replica of every partition but 5; a third broker takes what moves
ASSIGNMENT = {0: [1, 2], 1: [2, 1], 2: [1, 3], 3: [3, 1], 4: [1, 2], 5: [2, 3], 6: [1, 3], 7: [3, 1]}
ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = float(os.environ.get("KR_TEST_STACK_START_TIMEOUT", "900"))
pytestmark = pytest.mark.timeout(1200)


@pytest.fixture(scope="module")
def jbod_stack():
    """The e2e lane's own JBOD stack: a failed disk is not undone by a restart, so never the session's."""
    home = Path(os.environ.get("KR_TEST_STACK_HOME") or ROOT / ".stack" / "test")
    base = int(os.environ.get("KR_TEST_PORT_BASE", "29000")) + 600
    topology = Topology(
        brokers=3, controllers=1, racks=("rack-a",), connect=False, port_base=base, log_dirs=2
    )
    stack = LocalStack(home=home.with_name(home.name + "-jbod-e2e"), topology=topology)
    stack.destroy()
    try:
        stack.start(timeout=START_TIMEOUT_S)
        yield stack
    finally:
        stack.stop()


@pytest.fixture(scope="module")
def jbod_conn(airflow_local: AirflowLocal, jbod_stack: LocalStack) -> str:
    """An Airflow connection to the JBOD stack, made through the REST API (Airflow is running)."""
    extra = json.dumps({"bootstrap.servers": jbod_stack.bootstrap_servers})
    airflow_local.api(
        "POST", "/connections", json={"connection_id": CONN, "conn_type": "kafka", "extra": extra}
    )
    yield CONN
    airflow_local.request("DELETE", f"/api/v2/connections/{CONN}")


def _dirs(admin: ClusterAdmin) -> dict[str, list[tuple[str, int]]]:
    """Broker 1's log dirs as its own DescribeLogDirs answer has them: path -> its replicas."""
    states, errors = admin.describe_log_dir_states([BROKER])
    assert not errors, errors
    return {d.path: sorted((r.topic, r.partition) for r in d.replicas) for d in states[BROKER] if d.online}


def _assignment(admin: ClusterAdmin) -> dict[tuple[str, int], tuple[int, ...]]:
    return {(p.topic, p.partition): tuple(p.replicas) for p in admin.describe_topic_partitions([TOPIC])}


def _states(airflow: AirflowLocal, run_id: str) -> dict[str, str | None]:
    return {ti["task_id"]: ti["state"] for ti in airflow.task_instances(DAG_ID, run_id)}


def _xcom(airflow: AirflowLocal, run_id: str, task_id: str) -> dict:
    path = f"{airflow._ti_path(DAG_ID, run_id, task_id)}/xcomEntries/return_value"
    value = airflow.api("GET", path, params={"deserialize": "true"})["value"]
    return value if isinstance(value, dict) else json.loads(value)


def _at_gate(airflow: AirflowLocal, run_id: str, truth: list[tuple[str, int]]) -> dict:
    """Wait for the gate; check it asks about exactly the failed dir's replicas; return its request."""
    request = airflow.wait_for_approval(DAG_ID, run_id, GATE, timeout=600)
    checked = _xcom(airflow, run_id, "validate")
    assert sorted(split(k) for k in checked["moved"]) == truth
    n = len(truth)
    assert request["subject"] == (
        f"Broker [{BROKER}] lost a log dir: move {n} replica(s) of {n} partition(s) off it?"
    ), request["subject"]
    plan_dir = request["body"].split("| Plan files | `", 1)[1].split("`", 1)[0]
    targets = {split(k): v for c in chunks_from_plan_dir(plan_dir) for k, v in c.targets.items()}
    assert sorted(targets) == truth and all(BROKER not in r for r in targets.values()), targets
    return request


def _clear(airflow: AirflowLocal, run_id: str) -> None:
    """Clear the whole run (every task, the run re-queued), as the UI's Clear on a run does."""
    body = {"dry_run": False, "dag_run_id": run_id, "only_failed": False, "reset_dag_runs": True}
    airflow.api("POST", f"/dags/{DAG_ID}/clearTaskInstances", json=body)
    wait_until(lambda: airflow.dag_run(DAG_ID, run_id)["state"] != "success", 60, 1, "the run re-queued")


def _ended_or_asking(airflow: AirflowLocal, run_id: str) -> str | None:
    """The run's end state, or "asking" once its gate waits (it would wait for its timeout)."""
    state = airflow.dag_run(DAG_ID, run_id)["state"]
    if state in ("success", "failed"):
        return state
    return "asking" if airflow.task_instance(DAG_ID, run_id, GATE)["state"] == "awaiting_input" else None


def test_a_failed_log_dir_is_healed_through_the_gate_under_acks_all(
    airflow_local: AirflowLocal, jbod_stack: LocalStack, jbod_conn: str
):
    stack, bs = jbod_stack, jbod_stack.bootstrap_servers
    airflow_local.wait_for_dag(DAG_ID, timeout=120)
    create_topic(bs, TOPIC, assignment=ASSIGNMENT)
    assert produce(bs, TOPIC, 4000, size=200) == 4000
    producer = Producer(bs, TOPIC)
    producer.start()
    admin = ClusterAdmin({"bootstrap.servers": bs}, timeout_s=15)
    try:
        failing = str(stack.log_dirs(stack.node(BROKER))[1])
        before = _dirs(admin)
        truth, stayed = before[failing], sorted(k for p, ks in before.items() if p != failing for k in ks)
        assert truth and stayed, before
        stack.fail_log_dir(BROKER, 2)
        wait_until(lambda: failing not in _dirs(admin), 60, 0.5, "broker 1's failed dir offline")
        conf = {"broker_id": BROKER, "kafka_config_id": jbod_conn, "throttle_bytes_per_sec": "10 MiB"}

        rejected = airflow_local.trigger(DAG_ID, conf)
        _at_gate(airflow_local, rejected, truth)
        assigned = _assignment(admin)
        airflow_local.answer(DAG_ID, rejected, GATE, ["Reject"])
        assert airflow_local.wait_for_run(DAG_ID, rejected, timeout=300) == "failed"
        states = _states(airflow_local, rejected)
        assert states[GATE] == "failed" and states["execute_chunks"] in ("upstream_failed", "skipped"), states
        assert _assignment(admin) == assigned  # nothing moved
        assert leftover_throttles(admin, [1, 2, 3], [TOPIC]) == {}

        approved = airflow_local.trigger(DAG_ID, conf)
        _at_gate(airflow_local, approved, truth)
        airflow_local.answer(DAG_ID, approved, GATE, ["Approve"])
        state = airflow_local.wait_for_run(DAG_ID, approved, timeout=600)
        verify_log = airflow_local.task_log_text(DAG_ID, approved, "verify_result")
        assert state == "success", f"{_states(airflow_local, approved)}\n{verify_log[-3000:]}"
        assert "DECISION verify: moved" in verify_log
        healed = _assignment(admin)
        assert [k for k in truth if BROKER in healed[k]] == []
        assert [k for k in stayed if k[0] == TOPIC and BROKER not in healed[k]] == []
        assert [
            p.name for p in admin.describe_topic_partitions([TOPIC]) if set(p.isr) != set(p.replicas)
        ] == []
        assert leftover_throttles(admin, [1, 2, 3], [TOPIC]) == {}

        _clear(airflow_local, approved)
        again = wait_until(lambda: _ended_or_asking(airflow_local, approved), 600, 1, "the cleared run")
        assert again == "success", _states(airflow_local, approved)
        cleared = airflow_local.task_log_text(DAG_ID, approved, "validate", try_number=2)
        # its record says so (it said "go on to the plan" for the broker's healthy replicas)
        assert (
            f"DECISION validate: nothing to do because broker {BROKER}'s offline log dir(s) hold none"
            in cleared
        )
        assert "go on to the plan" not in cleared, cleared[-3000:]
        states = _states(airflow_local, approved)
        assert states[GATE] == "skipped" and states["execute_chunks"] == "skipped", states
        assert _assignment(admin) == healed  # nothing moved again
    finally:
        producer.stop_event.set()
        producer.join(300)
        admin.close()
    assert producer.failed == [] and producer.acked > 0
    total = sum(count_messages(bs, TOPIC, p) for p in ASSIGNMENT)
    assert total >= 4000 + producer.acked  # no acknowledged message lost
