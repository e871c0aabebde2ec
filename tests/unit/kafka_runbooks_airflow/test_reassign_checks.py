"""What the reassigning runbooks check against the cluster before the gate (issue #37).

The glue runs as in a task (the data store on a tmp folder, the lease queue, the decision records);
only the cluster is stood in for, answering as ClusterAdmin does: DescribeCluster's registered
brokers (fenced ones included), the quorum's voters, a broker's own answer, and a broker's rates
changed by a request to that broker.

- the run's first task refuses broker ids the cluster does not have, naming the ones it has;
- the log-dir failure refuses receivers that cannot hold the replication factor of the failed
  dir's partitions (and only of those), before the snapshot and the planner;
- validate takes off a throttle any reassigning runbook left on a broker that was dead at its
  cleanup, once that broker answers again.
"""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException

from kafka_runbooks import decisions
from kafka_runbooks.failed_broker.execute import ChunkState, ExecState, load_state, save_state
from kafka_runbooks.failed_broker.throttle import FOLLOWER_RATE, LEADER_RATE, ThrottleRecord
from kafka_runbooks.log_dirs import KAFKA_STORAGE_ERROR
from kafka_runbooks.model import (
    Broker,
    ClusterState,
    LogDir,
    LogDirReplica,
    PartitionState,
    Quorum,
    QuorumMember,
)
from kafka_runbooks_airflow import inputs
from kafka_runbooks_airflow.hooks import kafka_admin
from kafka_runbooks_airflow.run_state import mark_cluster, run_dir
from tests.acl_fakes import no_authorizer

CONN = "kafka_unit"


class Cluster:
    """Brokers 1-4 registered (``fenced``: those whose session timed out), controllers 9001-9003."""

    def __init__(self, partitions, fenced=(), log_dirs=None):
        self.partitions = partitions
        self.fenced = set(fenced)
        self.log_dirs = log_dirs or {}
        self.configs: dict[str, dict[str, str]] = {}
        self.asked: list[str] = []

    def describe_brokers(self):
        self.asked.append("DescribeCluster")
        return {b: Broker(b, rack=None, fenced=b in self.fenced) for b in (1, 2, 3, 4)}

    def describe_partitions(self, topics=None):
        self.asked.append("Metadata")
        return list(self.partitions)

    def describe_quorum(self):
        self.asked.append("DescribeQuorum")
        voters = tuple(QuorumMember(n, 10, None, None) for n in (9001, 9002, 9003))
        return Quorum(9001, 3, 10, voters=voters, observers=())

    def read_state(self, topics=None, include_log_dirs=True):
        return ClusterState(
            cluster_id="c",
            brokers=self.describe_brokers(),
            quorum=self.describe_quorum(),
            partitions=self.partitions,
        )

    def describe_log_dir_states(self, broker_ids):
        return {b: self.log_dirs[b] for b in broker_ids if b in self.log_dirs}, {}

    def list_reassignments(self):
        return {}

    def authorized_operations(self, topics=None):
        """No authorizer on this cluster: every operation allowed (the up-front ACL check passes)."""
        self.asked.append("DescribeCluster")
        return no_authorizer(topics, {p.topic for p in self.partitions})

    def broker_answers(self, broker_id, timeout_s=5.0):
        return None if broker_id not in self.fenced else "KafkaConnectionError: ECONNREFUSED"

    def broker_configs(self, broker_ids, keys):
        """Kafka's defaults for the throttle's enforcement (replica.fetch.max.bytes, the quota window)."""
        defaults = {"replica.fetch.max.bytes": "1048576", "replication.quota.window.num": "11"}
        defaults["replication.quota.window.size.seconds"] = "1"
        return {b: {k: defaults.get(k) for k in keys} for b in broker_ids}, {}

    def describe_config_values(self, kind, names, keys, asked_of=None):
        return {n: {k: v for k, v in self.configs.get(f"{kind} {n}", {}).items() if k in keys} for n in names}

    def incremental_alter_configs(self, kind, changes):
        for name, entries in changes.items():
            values = self.configs.setdefault(f"{kind} {name}", {})
            for k, (op, v) in entries.items():
                if op == "DELETE":
                    values.pop(k, None)
                else:
                    values[k] = v
        return dict.fromkeys(changes, "OK")

    def close(self):
        pass


@pytest.fixture
def cluster_of(tmp_path, monkeypatch):
    """Install a cluster for the glue's KafkaAdminHook; the connection exists."""
    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(inputs, "_connection_exists", lambda conn_id: True)
    decisions.forget()

    def install(cluster: Cluster) -> Cluster:
        class Hook:
            def __init__(self, kafka_config_id):
                self.admin = cluster

        monkeypatch.setattr(kafka_admin, "KafkaAdminHook", Hook)
        return cluster

    return install


def _refusals() -> list[str]:
    return [r.reason for r in decisions.made() if r.decision == "refuse the run: nothing was done"]


PARTS = [PartitionState("t", 0, 1, 1, (1, 4), (1, 4)), PartitionState("t", 1, 2, 1, (2, 3), (2, 3))]


def test_the_decommissions_first_task_refuses_a_broker_the_cluster_does_not_have(cluster_of):
    from kafka_runbooks_airflow.decommission import check_input

    cluster = cluster_of(Cluster(PARTS))
    with pytest.raises(AirflowFailException, match="bad input"):
        check_input(
            "kafka_broker_decommission",
            "r1",
            {"broker_ids": "4", "receivers": "2,7", "kafka_config_id": CONN},
        )
    assert _refusals() == [
        "a parameter is not valid: broker id(s) the cluster does not have: receivers [7] "
        "(its brokers: [1, 2, 3, 4], controllers: [9001, 9002, 9003])"
    ]
    decisions.forget()
    assert check_input("kafka_broker_decommission", "r2", {"broker_ids": "4", "kafka_config_id": CONN})
    assert _refusals() == []
    assert cluster.asked == ["DescribeCluster", "DescribeQuorum", "DescribeCluster"]  # read-only


def test_the_heals_first_task_refuses_an_unknown_failed_broker_but_not_one_replicas_still_name(cluster_of):
    """Broker 5 was unregistered after it died, and replicas still name it: it is a broker of the
    cluster (its replicas need moving); broker 8 is none."""
    cluster_of(Cluster([*PARTS, PartitionState("u", 0, 1, 1, (1, 5), (1,))]))
    params = {"failed_brokers": "5,8", "kafka_config_id": CONN}
    with pytest.raises(AirflowFailException):
        inputs.check_runbook_input("kafka_failed_broker_reassignment", "r1", params)
    assert "failed_brokers [8] (its brokers: [1, 2, 3, 4, 5]" in _refusals()[0]
    decisions.forget()
    inputs.check_runbook_input("kafka_failed_broker_reassignment", "r2", {**params, "failed_brokers": "5"})
    assert _refusals() == []


def _log_dir_cluster(failed_dir: list[tuple[str, int]], healthy: list[tuple[str, int]]) -> Cluster:
    """Broker 1 of three live ones (4 is dead and fenced) lost its dir /d1; /d2 holds ``healthy``."""
    parts = [
        PartitionState("a", 0, 1, 1, (1, 2, 3), (1, 2, 3)),  # RF 3
        PartitionState("b", 0, 1, 1, (1, 2), (1, 2)),  # RF 2
    ]
    held = tuple(LogDirReplica(1, t, p, 100, "/d2") for t, p in healthy)
    dirs = {1: (LogDir(1, "/d1", KAFKA_STORAGE_ERROR), LogDir(1, "/d2", 0, held, 10**9, 10**8))}
    assert {(p.topic, p.partition) for p in parts} == set(failed_dir) | set(healthy)
    return Cluster(parts, fenced=(4,), log_dirs=dirs)


def test_a_log_dir_failure_whose_receivers_cannot_hold_the_rf_is_refused_before_the_gate(cluster_of):
    """a-0 (RF 3) sat in the failed dir; brokers 2 and 3 are the only receivers and hold it already."""
    from kafka_runbooks_airflow.log_dir_failure import log_dir_request, validate

    cluster_of(_log_dir_cluster(failed_dir=[("a", 0)], healthy=[("b", 0)]))
    request = log_dir_request({"broker_id": 1, "kafka_config_id": CONN})
    with pytest.raises(AirflowFailException):
        validate(request, CONN, "kafka_log_dir_failure", "r1")
    assert _refusals() and "a (RF 3: partition(s) [0])" in _refusals()[0], decisions.made()
    assert "receivers [2, 3] (live brokers: [1, 2, 3], dead: [4])" in _refusals()[0]


def test_a_log_dir_failure_counts_only_the_failed_dirs_partitions(cluster_of):
    """The RF 3 partition sits in the healthy dir and does not move: the RF 2 one moves to broker 3."""
    from kafka_runbooks_airflow.log_dir_failure import log_dir_request, validate

    cluster_of(_log_dir_cluster(failed_dir=[("b", 0)], healthy=[("a", 0)]))
    request = log_dir_request({"broker_id": 1, "kafka_config_id": CONN})
    checked = validate(request, CONN, "kafka_log_dir_failure", "r1")
    assert checked["moved"] == ["b:0"] and not checked["nothing_to_do"] and _refusals() == []


def test_validate_takes_off_a_throttle_a_decommission_left_on_a_broker_dead_at_its_cleanup(cluster_of):
    """The decommission's cleanup could not reach broker 3 (dead); its state keeps broker 3's part of
    the throttle. Broker 3 is back: the next run of any reassigning runbook on the cluster (here a
    heal, holding the lease) takes it off."""
    from kafka_runbooks_airflow.failed_broker import reassign_request, validate

    cluster = cluster_of(Cluster([*PARTS, PartitionState("u", 0, 1, 1, (1, 2, 4), (1, 2))], fenced=(4,)))
    cluster.configs["broker 3"] = {LEADER_RATE: "50000", FOLLOWER_RATE: "50000"}
    folder = run_dir("kafka_broker_decommission", "earlier")
    mark_cluster(folder, CONN)
    left = ThrottleRecord(
        rate=50000,
        brokers={"3": {"previous": {LEADER_RATE: None, FOLLOWER_RATE: None}}},
        left={"broker 3": "does not answer itself (KafkaConnectionError: ECONNREFUSED)"},
    )
    chunk = ChunkState(1, {"t:1": [2, 1]}, status="done")
    save_state(
        folder / "exec-state.json", ExecState("earlier", [3], 50000, [chunk], throttle=left, drain=True)
    )
    request = reassign_request({"failed_brokers": "4", "kafka_config_id": CONN})
    validate(request, CONN, "kafka_failed_broker_reassignment", "r1")
    assert cluster.configs["broker 3"] == {}
    assert load_state(folder / "exec-state.json").throttle is None
