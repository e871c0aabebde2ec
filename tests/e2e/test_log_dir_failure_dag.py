"""kafka_log_dir_failure and kafka_controller_replace through a real Airflow, on one JBOD
stack with a dynamic controller quorum (issue #28).

Broker 1's second log dir fails under an acks=all producer (the broker lives on). Each run's
gate names exactly the failed dir's replicas (validate's selection, the subject's counts and the
plan files the body names). A first run is approved at a
slow throttle (each failed-dir partition holds ~6 MB) and, while its chunk copies, stopped
through kafka_reassignment_stop: the run fails STOPPED with nothing moved, and read from the
cluster here its reassignments are cancelled, no throttle is left, every partition is back on the
replicas it had in their order (Kafka's cancel restores the set; the stop puts the order back)
with those outside the failed dir in sync. A second run (a partition a chunk, at 500 kB/s) is
approved and, while a chunk copies under its throttle (read from the cluster), cleared as a whole
through the REST API, as the UI's Clear does: watched from the cluster until it ends, nothing is
headed anywhere new (what was in flight finishes, adopted by the cleared run before its gate; no
new chunk starts) and the old try of execute_chunks submitted nothing the cluster did not already
show at the Clear. Airflow 3.3.2 keeps a cleared gate's first question, so the cleared run, planned
again without what moved, is another plan: its gate refuses to ask under the old question ("trigger
a new run"), the run fails, nothing executed, no throttle left. A new run is approved for what is
still on the failed dir: the run succeeds, and the cluster read here shows those replicas off
broker 1 (the ones that left at the Clear where they were headed then: none moved twice), its
healthy dir's replicas still on it, every partition in sync, no throttle left, and every
acknowledged message still there (the producer's messages to the failed dir's partitions wait from
the failure to the heal: see where the producer is built). Then a Clear of the whole successful
run: nothing moves again and nothing gets past the gate without a new approval
(docs/approval-gates.md). A Reject is not tried here: the gate is the one every gated runbook
shares; tests/e2e/test_approval_records.py rejects one, and a rejected replacement below changes
no voter.

Then a controller is killed -9 for good and replaced through kafka_controller_replace's gate by
the spare controller (formatted --no-initial-controllers, an observer), while a thread polls
DescribeQuorum every 200 ms from outside: no answer shows fewer live, caught-up voters than a
majority; a rejected run changes no voter; the approved run ends with the voter set its gate
showed, read back by DescribeQuorum; and that quorum then loses another controller and still
commits a topic creation.

The session stack has one log dir per broker and a static quorum, so this module starts one
small stack of its own for both (3 controllers formatted with --initial-controllers, a spare,
3 brokers with two dirs each; ports 600 above the lane's base) and gives the running Airflow a
connection to it and the stack's Kafka jars (kafka-metadata-quorum).
"""

from __future__ import annotations

import json
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.approval import APPROVE_OPTION, REJECT_OPTION
from kafka_runbooks.controller_replace.plan import caught_up, observer, voter, voter_ids
from kafka_runbooks.controller_replace.quorum_tool import LIBS_VARIABLE
from kafka_runbooks.failed_broker.execute import chunks_from_plan_dir, split, target_of
from kafka_runbooks.failed_broker.throttle import leftover_throttles
from kafka_runbooks_dev.localstack.airflow import AirflowLocal
from kafka_runbooks_dev.localstack.stack import LocalStack
from kafka_runbooks_dev.localstack.topology import Topology
from tests.e2e.test_broker_restart_dag import Producer
from tests.helpers import SHARED_DISK_CEILING, create_topic, produce, unique_topic, wait_until
from tests.quorum_watch import QuorumWatch, created
from tests.unclean_scenario import count_messages

DAG_ID = "kafka_log_dir_failure"
GATE = "approval_gate"
STOP_DAG = "kafka_reassignment_stop"
REPLACE_DAG = "kafka_controller_replace"
REPLACE_GATE = "approve_replacement"
CONN = "kafka_jbod_e2e"
TOPIC = "ldf-e2e"
BROKER = 1
# broker 1 holds a replica of every partition but 5; a third broker takes what moves
ASSIGNMENT = {0: [1, 2], 1: [2, 1], 2: [1, 3], 3: [3, 1], 4: [1, 2], 5: [2, 3], 6: [1, 3], 7: [3, 1]}
SLOW = 20_000  # bytes/s: the stopped run's throttle; its chunk copies ~6 MB per partition
# the run cleared mid-chunk: a partition per chunk (the next ones wait while the first copies; a
# receiver takes two at once) at a throttle under which a partition copies for ~12 s: long enough
# to see it copying and Clear, no longer (what was in flight finishes before the cleared run's gate)
CLEARED = {"throttle_bytes_per_sec": 500_000, "max_partitions_per_chunk": 1}
BULK_MESSAGES, BULK_SIZE = 60, 100_000  # per partition of the failed dir: ~6 MB
MESSAGE_TIMEOUT_MS = 900_000  # the producer's, see where it is built
ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = float(os.environ.get("KR_TEST_STACK_START_TIMEOUT", "900"))
pytestmark = pytest.mark.timeout(1800)  # 1176 s for the log-dir test at load 19-24 (Nov 26)


@pytest.fixture(scope="module")
def jbod_stack():
    """The e2e lane's own JBOD stack: a failed disk is not undone by a restart, so never the
    session's; its quorum is a dynamic one with a spare controller, so that the controller
    replacement shares this stack instead of starting another."""
    home = Path(os.environ.get("KR_TEST_STACK_HOME") or ROOT / ".stack" / "test")
    base = int(os.environ.get("KR_TEST_PORT_BASE", "29000")) + 600
    topology = Topology(
        brokers=3,
        controllers=3,
        racks=("rack-a",),
        connect=False,
        port_base=base,
        log_dirs=2,
        dynamic_quorum=True,
        spare_controllers=1,
    )
    stack = LocalStack(home=home.with_name(home.name + "-jbod-e2e"), topology=topology)
    stack.destroy()
    try:
        stack.start(timeout=START_TIMEOUT_S)
        yield stack
    finally:
        _step("JBOD stack teardown")
        # thrown away (the next start destroys it): no controlled shutdown to wait for
        for node in (*topology.broker_nodes, *topology.controller_nodes, *topology.spare_controller_nodes):
            stack.kill(node.name)
        _step("JBOD stack killed")


@pytest.fixture(scope="module")
def jbod_conn(airflow_local: AirflowLocal, jbod_stack: LocalStack) -> str:
    """An Airflow connection to the JBOD stack, made through the REST API (Airflow is running)."""
    extra = json.dumps({"bootstrap.servers": jbod_stack.bootstrap_servers})
    airflow_local.api(
        "POST", "/connections", json={"connection_id": CONN, "conn_type": "kafka", "extra": extra}
    )
    yield CONN
    airflow_local.request("DELETE", f"/api/v2/connections/{CONN}")


@pytest.fixture(scope="module")
def kafka_libs(airflow_local: AirflowLocal, jbod_stack: LocalStack) -> str:
    """The Variable that tells kafka_controller_replace where Kafka's jars are (kafka-metadata-quorum)."""
    airflow_local.api("POST", "/variables", json={"key": LIBS_VARIABLE, "value": str(jbod_stack.lib_dir)})
    yield str(jbod_stack.lib_dir)
    airflow_local.request("DELETE", f"/api/v2/variables/{LIBS_VARIABLE}")


def _dirs(admin: ClusterAdmin) -> dict[str, list[tuple[str, int]]]:
    """Broker 1's log dirs as its own DescribeLogDirs answer has them: path -> its replicas."""
    states, errors = admin.describe_log_dir_states([BROKER])
    assert not errors, errors
    return {d.path: sorted((r.topic, r.partition) for r in d.replicas) for d in states[BROKER] if d.online}


def _assignment(admin: ClusterAdmin) -> dict[tuple[str, int], tuple[int, ...]]:
    return {(p.topic, p.partition): tuple(p.replicas) for p in admin.describe_topic_partitions([TOPIC])}


def _states(airflow: AirflowLocal, run_id: str, dag_id: str = DAG_ID) -> dict[str, str | None]:
    return {ti["task_id"]: ti["state"] for ti in airflow.task_instances(dag_id, run_id)}


def _xcom(airflow: AirflowLocal, run_id: str, task_id: str, dag_id: str = DAG_ID) -> dict:
    path = f"{airflow._ti_path(dag_id, run_id, task_id)}/xcomEntries/return_value"
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
    # the live broker as it is, and the failed dir by name (once: "(failed: registered, fenced)")
    row = next(line for line in request["body"].splitlines() if line.startswith(f"| **{BROKER}** "))
    assert "(registered, unfenced; failed log dir `" in row and "failed:" not in row, row
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


def _step(what: str) -> None:
    """A timestamped line in the test's output: where the scenario's time goes (issue #25), next to
    the Airflow task logs' times."""
    print(f"{time.strftime('%H:%M:%S')} {what}", flush=True)


def _timeline(airflow: AirflowLocal, run_id: str, dag_id: str = DAG_ID) -> None:
    """The run's tasks, queued/started/ended, in start order: where a run's time went, in the
    test's output (shown when it fails, or with -s)."""
    tis = sorted(airflow.task_instances(dag_id, run_id), key=lambda t: t.get("start_date") or "~")
    for t in tis:
        print(
            f"  {dag_id} {t['task_id']:<24} {t['state']!s:<16} q={(t.get('queued_when') or '')[11:19]} "
            f"s={(t.get('start_date') or '')[11:19]} e={(t.get('end_date') or '')[11:19]} d={t.get('duration')}",
            flush=True,
        )


def _copying(admin: ClusterAdmin, truth: list[tuple[str, int]]) -> set[tuple[str, int]]:
    """The failed dir's partitions in flight, read from the cluster, once a throttle is set too: a
    chunk copying under its throttle (empty before)."""
    inflight = set(admin.list_reassignments()) & set(truth)
    return inflight if inflight and leftover_throttles(admin, [1, 2, 3], [TOPIC]) else set()


def _not_back_in_sync(admin: ClusterAdmin, assigned: dict, truth: list[tuple[str, int]]) -> dict:
    """What differs from "every partition on the replicas it had before the run IN THEIR ORDER,
    nothing in flight, every replica outside the failed dir in the ISR" (broker 1's replica in the
    failed dir is offline: not in it). The order too: Kafka 4.3.1's cancel restores the set, not
    the order, and the stop puts the order back (the preferred leaders). Empty once so."""
    offline = {k: {BROKER} for k in truth}
    inflight = set(admin.list_reassignments()) & set(assigned)
    held = {(p.topic, p.partition): p for p in admin.describe_topic_partitions([TOPIC])}
    differ = {
        k: (held[k].replicas, held[k].isr)
        for k, replicas in assigned.items()
        if tuple(held[k].replicas) != replicas or set(held[k].isr) != set(replicas) - offline.get(k, set())
    }
    return {"in flight": sorted(inflight), "replicas, isr": differ} if inflight or differ else {}


def _wait_back_in_sync(admin: ClusterAdmin, assigned: dict, truth: list[tuple[str, int]]) -> None:
    """Wait until nothing differs (the metadata may trail the cancel); say what still did."""
    last: list[dict] = [{}]

    def back() -> bool:
        last[0] = _not_back_in_sync(admin, assigned, truth)
        return not last[0]

    try:
        wait_until(back, 60, 0.5, "every partition back on its replicas in their order, in sync")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {last[0]}") from exc


def _stopped_mid_chunk(airflow: AirflowLocal, admin: ClusterAdmin, conf: dict, truth: list) -> str:
    """Approve a run at a slow throttle, stop it through kafka_reassignment_stop while its chunk
    copies, and read the cluster back here: nothing of the run in flight, no throttle, every
    partition back on its replicas in their order, in sync; the run failed saying who stopped it
    and why.

    The next run (the one cleared mid-chunk) is triggered as soon as the stopped one ended, and its
    steps up to its gate run while the stop is read back here: it moves nothing before its Approve,
    and a stop request never applies to a run started after it. The next run's id."""
    assigned = _assignment(admin)
    run = airflow.trigger(DAG_ID, {**conf, "throttle_bytes_per_sec": SLOW})
    _at_gate(airflow, run, truth)
    airflow.answer(DAG_ID, run, GATE, [APPROVE_OPTION])
    copying = wait_until(lambda: _copying(admin, truth), 300, 0.5, "the chunk copying under its throttle")
    _step(f"copying {sorted(copying)}: stop requested")
    reason = "e2e: the disk is replaced instead"
    stop = airflow.trigger(STOP_DAG, {"kafka_config_id": conf["kafka_config_id"], "reason": reason})
    assert airflow.wait_for_run(DAG_ID, run, timeout=300) == "failed"
    heal = airflow.trigger(DAG_ID, {**conf, **CLEARED})
    _step("stopped run failed: the run to clear triggered")
    _timeline(airflow, run)
    execute_log = airflow.task_log_text(DAG_ID, run, "execute_chunks")
    assert f"STOPPED (stopped by admin: {reason}): 0 of " in execute_log, execute_log[-3000:]
    assert "; 0 partition(s) moved, " in execute_log, execute_log[-3000:]  # none finished before the stop
    states = _states(airflow, run)
    assert states["verify_result"] == "upstream_failed" and states["remove_throttles"] == "success", states
    assert airflow.wait_for_run(STOP_DAG, stop, timeout=300) == "success", _states(airflow, stop, STOP_DAG)
    _step("stop run succeeded")
    _timeline(airflow, stop, STOP_DAG)
    # read from the cluster: the copies cancelled (none was done), no throttle left
    assert not copying & set(admin.list_reassignments())
    assert leftover_throttles(admin, [1, 2, 3], [TOPIC]) == {}
    _wait_back_in_sync(admin, assigned, truth)
    return heal


def _leaving(admin: ClusterAdmin) -> dict | None:
    """Where each partition is headed, read from the cluster: its reassignment's target while one
    is in flight, else its replicas. None while the metadata trails a finished reassignment (more
    replicas than RF and none in flight: ListPartitionReassignments can be ahead of it)."""
    inflight = admin.list_reassignments()
    held = _assignment(admin)
    if any(len(r) > 2 and k not in inflight for k, r in held.items()):
        return None
    return {k: frozenset(target_of(inflight[k]) if k in inflight else r) for k, r in held.items()}


def _submitted(airflow: AirflowLocal, run_id: str, try_number: int) -> set[tuple[str, int]]:
    """The partitions one try of execute_chunks submitted, from its DECISION records (the record
    is in the log line's extra keys; its text names each move as "topic:partition":{"from")."""
    found = set()
    for rec in airflow.task_log(DAG_ID, run_id, "execute_chunks", try_number=try_number):
        record = rec.get("decision_record") or (rec.get("extra") or {}).get("decision_record")
        if record and record["step"] == "execute" and record["decision"].startswith("submit"):
            found |= {split(k) for k in record["observed"]["moves"]}
        elif "]: submit" in str(rec.get("event")):
            found |= {split(k) for k in re.findall(r'"([^"]+:\d+)":\{"from"', rec["event"])}
    return found


def _cleared_mid_chunk(airflow: AirflowLocal, admin: ClusterAdmin, run: str, truth: list) -> dict:
    """Approve the run and, while a chunk copies under its throttle (read from the cluster), Clear
    the whole run as the UI does. Watched from the cluster until the cleared run ends or asks: no
    partition is headed anywhere new after the Clear (what was in flight may finish: the cleared
    run adopts it before its gate, as approved); the old try submitted nothing after the Clear.
    Airflow 3.3.2 keeps a cleared gate's first question, and the run planned again (without what
    moved) is another plan: its gate refuses to ask under the old one and the run fails, nothing
    executed, no throttle left. Where the partitions that left were headed at the Clear."""
    _at_gate(airflow, run, truth)
    airflow.answer(DAG_ID, run, GATE, [APPROVE_OPTION])
    copying = wait_until(lambda: _copying(admin, truth), 300, 0.5, "a chunk copying under its throttle")
    executing = airflow.task_instance(DAG_ID, run, "execute_chunks")["state"]
    body = {"dry_run": False, "dag_run_id": run, "only_failed": False, "reset_dag_runs": True}
    airflow.api("POST", f"/dags/{DAG_ID}/clearTaskInstances", json=body)
    inflight = set(admin.list_reassignments())
    # read after the Clear landed: from here on the old try may act no more
    at_clear = wait_until(lambda: _leaving(admin), 30, 0.2, "the metadata caught up")
    _step(f"copying {sorted(copying)} (execute_chunks {executing}): cleared; in flight {sorted(inflight)}")
    assert inflight, "the chunk finished before the Clear landed: not a Clear mid-chunk"
    assert airflow.task_instance(DAG_ID, run, GATE)["state"] != "success"
    headed_anew: dict = {}

    def watched() -> str | None:
        now = _leaving(admin) or at_clear  # a read that trails a finished copy says nothing
        headed_anew.update({k: sorted(v) for k, v in now.items() if v != at_clear[k]})
        return _ended_or_asking(airflow, run)

    ended = wait_until(watched, 600, 0.5, "the cleared run ended or asking")
    _step(f"cleared run: {ended}")
    _timeline(airflow, run)
    assert headed_anew == {}, headed_anew  # no new chunk, not even one of the cleared run's own plan
    assert ended == "failed", _states(airflow, run)
    states = _states(airflow, run)
    assert states[GATE] == "failed" and states["execute_chunks"] == "upstream_failed", states
    assert states["remove_throttles"] == "success", states
    gate_log = airflow.task_log_text(DAG_ID, run, GATE, try_number=2)
    assert "question from an earlier try" in gate_log and "trigger a new run" in gate_log, gate_log[-3000:]
    # the old try's submissions are all among what was headed off broker 1 at the Clear
    left = {k: v for k, v in at_clear.items() if k in truth and BROKER not in v}
    submitted = _submitted(airflow, run, 1)
    assert submitted and submitted <= set(left), (submitted, left)
    assert not set(admin.list_reassignments()) & set(truth)  # the adopted copies finished
    assert leftover_throttles(admin, [1, 2, 3], [TOPIC]) == {}
    return left


def _healed(
    airflow: AirflowLocal, admin: ClusterAdmin, conf: dict, truth: list, stayed: list, left: dict
) -> str:
    """A new run plans what is still on the failed dir and is approved: the run succeeds; read here:
    the failed dir's replicas are off broker 1 (those that left at the Clear where they were headed
    then: none moved twice), its healthy dir's replicas still on it, every partition in sync, no
    throttle left. The run's id."""
    remaining = sorted(k for k, v in _assignment(admin).items() if k in truth and BROKER in v)
    approved = airflow.trigger(DAG_ID, conf)
    _at_gate(airflow, approved, remaining)
    airflow.answer(DAG_ID, approved, GATE, [APPROVE_OPTION])
    state = airflow.wait_for_run(DAG_ID, approved, timeout=600)
    _step("healed")
    _timeline(airflow, approved)
    verify_log = airflow.task_log_text(DAG_ID, approved, "verify_result")
    assert state == "success", f"{_states(airflow, approved)}\n{verify_log[-3000:]}"
    assert "DECISION verify: moved" in verify_log
    healed = _assignment(admin)
    assert [k for k in truth if BROKER in healed[k]] == []
    assert {k: frozenset(healed[k]) for k in left} == left
    assert [k for k in stayed if k[0] == TOPIC and BROKER not in healed[k]] == []
    assert [p.name for p in admin.describe_topic_partitions([TOPIC]) if set(p.isr) != set(p.replicas)] == []
    assert leftover_throttles(admin, [1, 2, 3], [TOPIC]) == {}
    return approved


def _cleared(airflow: AirflowLocal, admin: ClusterAdmin, approved: str) -> None:
    """A Clear of the whole successful run: nothing moves again, nothing gets past the gate."""
    healed = _assignment(admin)
    _clear(airflow, approved)
    again = wait_until(lambda: _ended_or_asking(airflow, approved), 600, 1, "the cleared run")
    _step("cleared run ended")
    _timeline(airflow, approved)
    assert again == "success", _states(airflow, approved)
    cleared = airflow.task_log_text(DAG_ID, approved, "validate", try_number=2)
    # its record says so (it said "go on to the plan" for the broker's healthy replicas)
    assert (
        f"DECISION validate: nothing to do because broker {BROKER}'s offline log dir(s) hold none" in cleared
    )
    assert "go on to the plan" not in cleared, cleared[-3000:]
    states = _states(airflow, approved)
    assert states[GATE] == "skipped" and states["execute_chunks"] == "skipped", states
    assert _assignment(admin) == healed  # nothing moved again


def _fail_dir_under_load(stack: LocalStack, admin: ClusterAdmin) -> tuple[list, list]:
    """Give each partition of broker 1's second dir ~6 MB (a chunk that copies for minutes at SLOW),
    then fail that dir; wait until broker 1's DescribeLogDirs no longer lists it. The failed dir's
    replicas and those of its healthy dir."""
    failing = str(stack.log_dirs(stack.node(BROKER))[1])
    before = _dirs(admin)
    truth, stayed = before[failing], sorted(k for p, ks in before.items() if p != failing for k in ks)
    assert truth and stayed, before
    for _, partition in truth:
        produced = produce(stack.bootstrap_servers, TOPIC, BULK_MESSAGES, partition=partition, size=BULK_SIZE)
        assert produced == BULK_MESSAGES
    _step("bulk produced: the dir fails")
    stack.fail_log_dir(BROKER, 2)
    wait_until(lambda: failing not in _dirs(admin), 60, 0.5, "broker 1's failed dir offline")
    return truth, stayed


def test_a_failed_log_dir_is_healed_through_the_gate_under_acks_all(
    airflow_local: AirflowLocal, jbod_stack: LocalStack, jbod_conn: str
):
    stack, bs = jbod_stack, jbod_stack.bootstrap_servers
    _step("start")
    airflow_local.wait_for_dag(DAG_ID, timeout=120)
    create_topic(bs, TOPIC, assignment=ASSIGNMENT)
    assert produce(bs, TOPIC, 4000, size=200) == 4000
    # the failed dir's partitions (RF 2, min ISR 2) take no acks=all write from the failure until
    # the heal has moved them: a Stop, a Clear and a heal through Airflow (141-162 s here with a
    # Reject before them, more on a loaded machine). Messages that reached librdkafka's default 300 s timeout made the
    # idempotent producer go FATAL _INCONSISTENT ('Unable to reconstruct MessageSet') and failed the
    # test: a loss the client's timeout made, not the runbook; hence MESSAGE_TIMEOUT_MS
    producer = Producer(bs, TOPIC, message_timeout_ms=MESSAGE_TIMEOUT_MS)
    producer.start()
    admin = ClusterAdmin({"bootstrap.servers": bs}, timeout_s=15)
    try:
        truth, stayed = _fail_dir_under_load(stack, admin)
        _step("dir offline")
        conf = {
            "broker_id": BROKER,
            "kafka_config_id": jbod_conn,
            "throttle_bytes_per_sec": "10 MiB",
            "max_disk_usage_percent": SHARED_DISK_CEILING,
        }
        cleared = _stopped_mid_chunk(airflow_local, admin, conf, truth)
        _step("stopped")
        left = _cleared_mid_chunk(airflow_local, admin, cleared, truth)
        approved = _healed(airflow_local, admin, conf, truth, stayed, left)
        _cleared(airflow_local, admin, approved)
    finally:
        producer.stop_event.set()
        # healed, its last messages are delivered in seconds; a failed scenario's messages to the
        # failed dir would be waited for until their timeout: the failure is known already
        producer.join(60)
        admin.close()
        _step(f"producer stopped: {producer.acked} acknowledged, {len(producer.failed)} failed")
    assert not producer.is_alive(), "the producer has not delivered its last messages within 60 s"
    assert producer.failed == [] and producer.acked > 0, (len(producer.failed), producer.failed[:3])
    with ThreadPoolExecutor(len(ASSIGNMENT)) as pool:  # each partition read to its end, side by side
        total = sum(pool.map(lambda p: count_messages(bs, TOPIC, p), ASSIGNMENT))
    assert total >= 4000 + BULK_MESSAGES * len(truth) + producer.acked  # no acknowledged message lost


def _settled_quorum(admin: ClusterAdmin, initial: list[int], spare: int):
    """The quorum once its initial voters are all caught up and the spare fetches as an observer."""
    q = admin.describe_quorum()
    joined = observer(q, spare) is not None
    return q if voter_ids(q) == initial and len(caught_up(q)) == 3 and joined else None


def _replace_at_gate(airflow: AirflowLocal, run_id: str, steps: list[tuple]) -> dict:
    """Wait for the replacement's gate; check its plan has exactly these steps and that the gate
    shows that plan's voter set; return the plan."""
    request = airflow.wait_for_approval(REPLACE_DAG, run_id, REPLACE_GATE, timeout=300)
    document = _xcom(airflow, run_id, "plan_replacement", REPLACE_DAG)
    assert [(s["kind"], s["node_id"], s["directory_id"]) for s in document["steps"]] == steps, document
    assert f"Final voters: {document['expected_voters']}" in request["body"], request["body"]
    assert all(c["ok"] for c in document["majority"]), document["majority"]
    return document


def _kill_a_follower(
    stack: LocalStack, admin: ClusterAdmin, spare: int
) -> tuple[list[int], int, list[tuple]]:
    """Kill -9 a follower voter for good once the quorum settled; the initial voters, the dead one,
    and the steps its replacement must plan (directory ids as DescribeQuorum had them before)."""
    initial = [n.node_id for n in stack.topology.controller_nodes]
    quorum = wait_until(
        lambda: _settled_quorum(admin, initial, spare), 120, 0.5, "the quorum settled, the spare observing"
    )
    dead = next(v for v in initial if v != quorum.leader_id)
    steps = [
        ("add", spare, observer(quorum, spare).directory_id),
        ("remove", dead, voter(quorum, dead).directory_id),
    ]
    stack.kill(dead)
    return initial, dead, steps


def _reject_then_approve(
    airflow: AirflowLocal, admin: ClusterAdmin, conf: dict, steps: list[tuple], initial: list[int]
) -> dict:
    """A rejected run changes no voter; an approved one succeeds. The approved plan document."""
    rejected = airflow.trigger(REPLACE_DAG, conf)
    _replace_at_gate(airflow, rejected, steps)
    airflow.answer(REPLACE_DAG, rejected, REPLACE_GATE, [REJECT_OPTION])
    assert airflow.wait_for_run(REPLACE_DAG, rejected, timeout=300) == "failed"
    states = _states(airflow, rejected, REPLACE_DAG)
    assert states[REPLACE_GATE] == "failed" and states["replace"] in ("upstream_failed", "skipped"), states
    assert voter_ids(admin.describe_quorum()) == initial

    approved = airflow.trigger(REPLACE_DAG, conf)
    document = _replace_at_gate(airflow, approved, steps)
    airflow.answer(REPLACE_DAG, approved, REPLACE_GATE, [APPROVE_OPTION])
    state = airflow.wait_for_run(REPLACE_DAG, approved, timeout=600)
    log = airflow.task_log_text(REPLACE_DAG, approved, "replace")
    assert state == "success", f"{_states(airflow, approved, REPLACE_DAG)}\n{log[-3000:]}"
    return document


def test_a_lost_controller_is_replaced_through_the_gate_without_ever_losing_the_majority(
    airflow_local: AirflowLocal, jbod_stack: LocalStack, jbod_conn: str, kafka_libs: str
):
    stack, bs = jbod_stack, jbod_stack.bootstrap_servers
    spare = stack.topology.spare_controller_nodes[0]
    stack.start_node(spare.name)  # formatted with --no-initial-controllers: an observer
    admin = ClusterAdmin({"bootstrap.servers": bs}, timeout_s=15)
    initial, dead, steps = _kill_a_follower(stack, admin, spare.node_id)
    conf = {
        "kafka_config_id": jbod_conn,
        "remove_voters": [dead],
        "new_controller_id": spare.node_id,
        "new_controller_endpoint": f"CONTROLLER://{spare.address}",
        "catch_up_timeout_s": "90s",
        "settle_period_s": "3s",
    }
    watch = QuorumWatch(bs)
    watch.start()
    try:
        document = _reject_then_approve(airflow_local, admin, conf, steps, initial)
    finally:
        watch.stop()
    expected = sorted(set(initial) - {dead} | {spare.node_id})
    assert document["expected_voters"] == expected
    assert voter_ids(admin.describe_quorum()) == expected  # the approved voter set, read back
    assert len(watch.answers) > 20, (len(watch.answers), watch.errors[-3:])
    assert watch.short_of_majority() == [], watch.short_of_majority()[:5]
    assert {tuple(a[0]) for a in watch.answers} >= {tuple(initial), tuple(sorted(initial + [spare.node_id]))}

    # the new quorum of three survives the loss of another controller: a metadata change still commits
    stack.kill(next(v for v in expected if v != spare.node_id))
    topic = unique_topic("after-replace")
    wait_until(lambda: created(bs, topic), 60, 1, "a topic created with two of three voters")
    # created() saw it in one broker's metadata; the broker kafka-python asks may answer from older
    # metadata for a while after the quorum lost its second controller (seen once: not listed yet)
    wait_until(lambda: topic in admin.list_topics(), 60, 0.5, "the topic in every asked broker's metadata")
    admin.close()
