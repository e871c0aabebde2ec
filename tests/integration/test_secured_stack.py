"""The runbooks against a cluster that authenticates and authorizes (issue #38, 3).

The lane's secured stack (``Topology(security="sasl_ssl")``: SASL_SSL with SCRAM-SHA-512 and mTLS
listeners, the StandardAuthorizer, ``allow.everyone.if.no.acl.found=false``, ``admin`` the only
super user) and its least-privilege ``runbooks`` principal, granted exactly the ACL table's ACLs
(``kafka_runbooks.acl_table``). With that principal, each runbook's real-stack path that exists as
library calls works: the reads (over SASL_SSL and mTLS, kafka-python and confluent-kafka), a heal's
chunk under its throttle, an unclean election, a rolling restart's availability check and restart
through the local back end, a rebalance's leader move, the log dirs, the controller quorum, a
Connect restart through basic auth. Then, once per ACL of the table, the ACL (with those that imply
its operation) is taken away: the up-front check refuses naming it, and nothing on the cluster
changed. Last, no password, key or keystore secret is in a log, a decision record or an artifact.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest

from kafka_runbooks import acl_table, acls, decisions
from kafka_runbooks.acl_table import Acl
from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.decision_journal import journal_path
from kafka_runbooks.errors import NotAuthorized
from kafka_runbooks_dev.localstack import security
from kafka_runbooks_dev.localstack.stack import LocalStack
from tests.helpers import unique_topic, wait_until

pytestmark = pytest.mark.timeout(600)
HEAL = "kafka_failed_broker_reassignment"
CAPTURED: list[str] = []  # every log line of this module's runs (the hygiene test reads them)


class _Keep(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        CAPTURED.append(self.format(record))


@pytest.fixture(scope="module", autouse=True)
def _every_log_line():
    handler = _Keep(level=logging.DEBUG)
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield
    root.removeHandler(handler)
    root.setLevel(old_level)


def _kafka_python_admin(stack: LocalStack, principal: str = security.ADMIN):
    from kafka.admin import KafkaAdminClient

    from kafka_runbooks import client_config as librdkafka

    return KafkaAdminClient(**librdkafka.to_kafka_python(stack.client_config(principal)))


def _create_topic(stack: LocalStack, name: str, assignment: dict[int, list[int]]) -> None:
    """As the admin: the runbooks' principal may not create topics (no runbook does)."""
    from kafka.admin import NewTopic

    kp = _kafka_python_admin(stack)
    try:
        kp.create_topics([NewTopic(name, -1, -1, replica_assignments=assignment)])
    finally:
        kp.close()
    with ClusterAdmin(stack.client_config(), timeout_s=15) as admin:
        wait_until(lambda: name in admin.list_topics(), 30, 0.5, f"topic {name}")


def _produce(stack: LocalStack, topic: str, count: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({**stack.client_config(security.ADMIN), "acks": "all", "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, b"x" * 200, key=str(i).encode())
        producer.poll(0)
    assert producer.flush(60) == 0


@pytest.fixture
def runbooks_admin(secured_stack):
    with ClusterAdmin(secured_stack.client_config(), timeout_s=15) as admin:
        yield admin


def test_a_rolling_restart_checks_availability_and_restarts_through_the_local_back_end(secured_stack):
    from kafka_runbooks.probes import PrometheusProbe
    from kafka_runbooks.restart.roller import Roller, RollOptions
    from kafka_runbooks_dev.restart_backend import LocalStackBackend

    """First in the module: later tests leave RF-2 topics on broker 3, whose restart the availability
    check would then refuse (min.insync.replicas=2). The roll reads as the runbooks principal over mTLS."""
    with ClusterAdmin(secured_stack.client_config(auth="mtls"), timeout_s=15) as admin:
        acls.require(admin, "kafka_broker_restart")
        probe = PrometheusProbe(
            endpoints={n.node_id: n.metrics_url for n in secured_stack.topology.broker_nodes}
        )
        before = secured_stack.pid(3)
        roller = Roller(admin, LocalStackBackend(str(secured_stack.home)), probe)
        state = roller.plan([3], "test: a secured roll", RollOptions(operation_timeout_s=120))
        deadline = time.monotonic() + 240
        while not roller.step(state):
            assert time.monotonic() < deadline, state.to_json()
            time.sleep(0.5)
    assert secured_stack.pid(3) not in (None, before)


def test_the_runbooks_principal_reads_the_cluster_over_sasl_ssl_and_mtls(secured_stack):
    """Both listeners, both clients; the principal is the same User:runbooks (the check passes)."""
    from confluent_kafka.admin import AdminClient

    topic = unique_topic("sec-read")
    _create_topic(secured_stack, topic, {0: [1, 2], 1: [2, 3]})
    for auth in ("sasl_ssl", "mtls"):
        config = secured_stack.client_config(auth=auth)
        with ClusterAdmin(config, timeout_s=15) as admin:
            state = admin.read_state()
            assert sorted(state.brokers) == [1, 2, 3] and state.quorum.leader_id == 9001
            assert {p.partition for p in state.partitions if p.topic == topic} == {0, 1}
            assert sorted(state.log_dir_states) == [1, 2, 3] and not state.log_dir_errors
            assert admin.min_insync_replicas([topic]) == {topic: 2}
            assert admin.cluster_timeouts().broker_session_timeout_s == 6
            acls.require(admin, HEAL)
        listed = AdminClient(config).list_topics(timeout=15)
        assert topic in listed.topics and sorted(listed.brokers) == [1, 2, 3]
    assert "***" in repr(ClusterAdmin(secured_stack.client_config(auth="mtls")))  # the key password


def test_a_plaintext_or_wrong_password_client_is_turned_away(secured_stack):
    from kafka_runbooks.errors import KafkaRunbookError

    wrong = {**secured_stack.client_config(), "sasl.password": "not-the-password"}
    plaintext = {"bootstrap.servers": secured_stack.bootstrap_servers}
    for config in (wrong, plaintext):
        with pytest.raises(KafkaRunbookError), ClusterAdmin(config, timeout_s=6) as admin:
            admin.ping()


def test_a_heal_chunk_moves_under_its_throttle_and_takes_it_off(secured_stack, runbooks_admin, tmp_path):
    """The chunk executor as the runbooks principal: throttle (IncrementalAlterConfigs on brokers
    and topics), AlterPartitionReassignments, ListPartitionReassignments, the verification."""
    from kafka_runbooks.failed_broker.execute import (
        ChunkExecutor,
        ExecState,
        chunks_from_plan_dir,
        save_state,
    )
    from kafka_runbooks.failed_broker.throttle import leftover_throttles
    from tests.integration.test_failed_broker_executor import write_plan

    admin = runbooks_admin
    topic = unique_topic("sec-heal")
    _create_topic(secured_stack, topic, {0: [1, 2], 1: [1, 3]})
    _produce(secured_stack, topic, 2000)
    moves = [
        {"topic": topic, "partition": 0, "from": [1, 2], "to": [3, 2], "bytes": 0},
        {"topic": topic, "partition": 1, "from": [1, 3], "to": [2, 3], "bytes": 0},
    ]
    plan = write_plan(tmp_path / "plan", [moves])
    state = ExecState(
        run_id="sec",
        failed_brokers=[1],
        throttle_bytes_per_sec=5_000_000,
        chunks=chunks_from_plan_dir(plan),
        drain=True,
    )
    path = tmp_path / "exec-state.json"
    executor = ChunkExecutor(admin, checkpoint=lambda s: save_state(path, s), progress_every_s=0)
    acls.require(admin, HEAL, topics=[topic])
    executor.step(state)
    assert state.throttle is not None, "the chunk starts under its throttle"

    def advance():
        executor.step(state)
        return state.finished

    wait_until(advance, 180, 1, "the chunk to finish")
    assert [list(p.replicas) for p in admin.describe_topic_partitions([topic])] == [[3, 2], [2, 3]]
    # the executor takes each broker's throttle off once nothing of its chunk moves there; the
    # cleanup task's step finds nothing left, and says so
    assert executor.remove_throttle(state) == {}
    assert leftover_throttles(admin, [1, 2, 3], [topic]) == {}


def test_an_unclean_election_and_a_replicas_log_end_as_the_runbooks_principal(secured_stack, runbooks_admin):
    """ListOffsets to each replica's broker and ElectLeaders(UNCLEAN) (not needed on a led partition:
    the broker said so, which it says only to a principal with ALTER on the cluster)."""
    admin = runbooks_admin
    topic = unique_topic("sec-unclean")
    _create_topic(secured_stack, topic, {0: [2, 3]})
    _produce(secured_stack, topic, 50)
    acls.require(admin, "kafka_unclean_recovery", topics=[topic])
    ends, sent = admin.list_replica_log_ends({2: [(topic, 0)], 3: [(topic, 0)]}, timeout_ms=10000)
    assert sent == 4 and all(rows[0][2] == 0 and rows[0][3] == 50 for rows in ends.values()), ends
    # a led partition: the broker says the election is not needed, which it says only to a principal
    # with ALTER on the cluster (any other is told CLUSTER_AUTHORIZATION_FAILED)
    answer = admin.elect_unclean([(topic, 0)])
    assert list(answer) == [(topic, 0)] and "ElectionNotNeeded" in str(answer[(topic, 0)]), answer


def test_a_rebalance_leader_move_as_the_runbooks_principal(secured_stack, runbooks_admin):
    """A reorder (AlterPartitionReassignments, no data moves) and the preferred election after it."""
    from kafka_runbooks.approval import APPROVED, plan_digest
    from kafka_runbooks.approval_proof import approved_action
    from kafka_runbooks.evidence import silent_brokers
    from kafka_runbooks.failed_broker.leaders import elect_preferred_leaders

    admin = runbooks_admin
    topic = unique_topic("sec-leader")
    _create_topic(secured_stack, topic, {0: [1, 2, 3]})
    wait_until(lambda: admin.describe_topic_partitions([topic])[0].leader == 1, 60, 0.5, "leader 1")
    acls.require(admin, "kafka_rebalance", topics=[topic])
    assert admin.reorder_replicas({(topic, 0): [2, 1, 3]}) == {(topic, 0): None}
    wait_until(
        lambda: list(admin.describe_topic_partitions([topic])[0].replicas) == [2, 1, 3], 60, 0.5, "reorder"
    )
    keys = {f"{topic}:0"}
    action = {"chunks": [{k: [] for k in sorted(keys)}], "elect_preferred_leaders": True, "dry_run": False}
    digest = plan_digest(action)
    proof = approved_action({"outcome": APPROVED, "digest": digest, "by": {"id": "test"}}, digest, action)
    result = elect_preferred_leaders(
        read=lambda: admin.describe_topic_partitions([topic]),
        elect=admin.elect_preferred,
        keys=keys,
        approval=proof,
        silent=lambda brokers: silent_brokers(admin, brokers),
        timeouts=admin.cluster_timeouts(),
        settle_s=2,
        poll_s=1,
    )
    assert result.ok, result
    assert admin.describe_topic_partitions([topic])[0].leader == 2


def test_log_dirs_and_the_controller_quorum_as_the_runbooks_principal(runbooks_admin):
    states, errors = runbooks_admin.describe_log_dir_states([1, 2, 3])
    assert not errors and all(len(dirs) == 1 and dirs[0].online for dirs in states.values())
    quorum = runbooks_admin.describe_quorum()
    assert [v.node_id for v in quorum.voters] == [9001] and quorum.fetch_timeout_ms is not None


def test_a_connect_restart_through_basic_auth(secured_stack, tmp_path):
    from kafka_runbooks.connect.client import ConnectClient, ConnectError
    from kafka_runbooks.connect.manual import manual_restart

    if secured_stack.connect_url is None:  # its start said why (LocalStack.lacking)
        pytest.fail(
            f"the secured stack runs no Connect worker: {[m.line() for m in secured_stack.lacking()]}"
        )
    conn = secured_stack.airflow_connections()["kafka_connect_default"]
    anonymous = ConnectClient(conn["host"])
    with pytest.raises(ConnectError) as refused:
        anonymous.list_connectors()
    assert "401" in str(refused.value)
    client = ConnectClient(conn["host"], auth=(conn["login"], conn["password"]))
    topic = unique_topic("sec-connect")
    _create_topic(secured_stack, topic, {0: [1, 2]})
    name = unique_topic("sec-sink")
    client.put_connector(
        name,
        {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "tasks.max": "1",
            "topics": topic,
            "file": str(tmp_path / "sink.txt"),
        },
    )
    try:
        wait_until(lambda: _running(client, name), 90, 1, "running")
        outcome = manual_restart(client, name, scope="all", settle_timeout_s=90, stable_s=2)
        assert outcome, outcome
    finally:
        client.delete_connector(name)
    assert conn["password"] not in repr(client)


def _running(client, name: str) -> bool:
    """The connector and a task RUNNING; a 404 right after the PUT is Connect not having started it yet."""
    from kafka_runbooks.connect.client import UnknownConnector

    try:
        status = client.connector_status(name)
    except UnknownConnector:
        return False
    return bool(status.tasks) and status.state == "RUNNING"


def _cluster_picture(admin: ClusterAdmin, topic: str) -> dict:
    """What a write would change: the topic's replicas and leaders, reassignments in flight, throttles."""
    from kafka_runbooks.failed_broker.throttle import leftover_throttles

    return {
        "partitions": [
            (p.partition, list(p.replicas), p.leader) for p in admin.describe_topic_partitions([topic])
        ],
        "reassignments": admin.list_reassignments(),
        "throttles": leftover_throttles(admin, [1, 2, 3], [topic]),
    }


@pytest.fixture
def acl_topic(secured_stack) -> str:
    topic = unique_topic("sec-acl")
    _create_topic(secured_stack, topic, {0: [1, 2], 1: [2, 3]})
    return topic


def _wait_authorized(stack: LocalStack, topic: str, expect: bool) -> None:
    """ACL changes reach every broker through the metadata log: wait until the check agrees."""

    def settled() -> bool:
        with ClusterAdmin(stack.client_config(), timeout_s=10) as admin:
            try:
                acls.require(admin, HEAL, topics=[topic])
            except NotAuthorized:
                return not expect
            return expect

    wait_until(settled, 30, 0.5, f"the ACLs {'back' if expect else 'gone'}")


@pytest.mark.parametrize("lacking", acl_table.all_needed(), ids=str)
def test_each_missing_acl_is_refused_before_any_write_naming_it(secured_stack, acl_topic, lacking, tmp_path):
    """The ACL taken away (and those that imply its operation: ALTER gives DESCRIBE, ALTER_CONFIGS
    gives DESCRIBE_CONFIGS), the heal's chunk is attempted as its validate step does it: the check
    first, then the writes. The check refuses naming the operation and the resource; nothing changed."""
    from kafka_runbooks.failed_broker.execute import ChunkExecutor, ExecState, chunks_from_plan_dir
    from tests.integration.test_failed_broker_executor import write_plan

    held = acl_table.all_needed()
    removed = acl_table.granting(lacking, held)
    bindings = {
        Acl(b.resource_pattern.resource_type.name, b.operation.name): b for b in security.acl_bindings()
    }
    with ClusterAdmin(secured_stack.client_config(security.ADMIN), timeout_s=15) as root:
        before = _cluster_picture(root, acl_topic)
    kp = _kafka_python_admin(secured_stack)
    try:
        kp.delete_acls([bindings[a] for a in removed])
        _wait_authorized(secured_stack, acl_topic, expect=False)
        with ClusterAdmin(secured_stack.client_config(), timeout_s=15) as admin:
            moves = [{"topic": acl_topic, "partition": 0, "from": [1, 2], "to": [3, 2], "bytes": 0}]
            state = ExecState(
                run_id="acl",
                failed_brokers=[1],
                throttle_bytes_per_sec=1_000_000,
                chunks=chunks_from_plan_dir(write_plan(tmp_path / "plan", [moves])),
                drain=True,
            )
            with pytest.raises(NotAuthorized) as refused:
                acls.require(admin, HEAL, topics=[acl_topic])
                ChunkExecutor(admin, progress_every_s=0).step(state)  # never reached
        where = "the cluster" if lacking.resource == acl_table.CLUSTER else f"TOPIC {acl_topic}"
        assert f"{lacking.operation} on {where}" in str(refused.value), str(refused.value)
        assert str(refused.value).startswith(f"{HEAL} refused before any write")
        assert any(
            r.step == acls.STEP and r.decision == "refuse" and f"{lacking.operation} on {where}" in r.reason
            for r in decisions.made()
        )
        assert state.throttle is None
    finally:
        kp.create_acls([bindings[a] for a in removed])
        kp.close()
    _wait_authorized(secured_stack, acl_topic, expect=True)
    with ClusterAdmin(secured_stack.client_config(security.ADMIN), timeout_s=15) as root:
        assert _cluster_picture(root, acl_topic) == before


def _secrets(stack: LocalStack) -> dict[str, str]:
    """Every password of the stack, and a line of each private key and keystore (base64 bodies)."""
    import base64

    found = {f"password {k}": v for k, v in security.passwords(stack).items()}
    key_lines = (security.folder(stack) / "runbooks.key").read_text().splitlines()
    found["runbooks key"] = key_lines[len(key_lines) // 2]
    keystore = base64.b64encode((security.folder(stack) / "node.p12").read_bytes()).decode()
    found["node keystore"] = keystore[200:260]
    return found


def test_no_secret_reaches_a_log_a_decision_record_or_an_artifact(secured_stack, tmp_path_factory):
    """Every log line of this module's runs (the library's, the clients', the runbooks'), every
    decision record, the nodes' own logs and the tests' artifacts hold no password and no key."""
    secrets = _secrets(secured_stack)
    records = json.dumps([r.as_dict() for r in decisions.made()])
    artifacts = [p for p in Path(tmp_path_factory.getbasetemp()).rglob("*") if p.is_file()]
    node_logs = [
        p for name in ("server.log", "stdout.log", "format.log") for p in secured_stack.home.rglob(name)
    ]
    journal = journal_path()
    texts = {
        "the module's log lines": "\n".join(CAPTURED),
        "decision records": records,
        "the decision journal": journal.read_text() if journal.exists() else "",
        **{str(p): p.read_text(errors="replace") for p in artifacts + node_logs},
    }
    assert len(CAPTURED) > 100 and node_logs and artifacts
    leaks = [
        f"{what} in {where}: " + _line_of(text, value)
        for what, value in secrets.items()
        for where, text in texts.items()
        if value in text
    ]
    assert leaks == []


def _line_of(text: str, secret: str) -> str:
    """The first line holding ``secret``, the secret masked (so the failure says where, not what)."""
    line = next(line for line in text.splitlines() if secret in line)
    return line.replace(secret, "***")[:300]
