"""KafkaClusterSnapshotOperator without a cluster: a stand-in admin, the real data store on a tmp folder.

What is checked is what the tasks after it rely on: the snapshot is in the data store under
``snapshots/<dag>/<run>/<connection>`` (one folder per cluster: a fleet sweep snapshots
several clusters in one run), its XCom path is where :func:`kafka_runbooks.storage.locate`
finds those files again (the Spark task and the plan check read it from other workers),
the files hold the cluster as read, and the client is closed whatever happens.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pendulum
import pyarrow.parquet as pq
import pytest
from airflow.sdk import DAG

from kafka_runbooks import decisions, storage
from kafka_runbooks.model import Broker, ClusterState, PartitionState
from kafka_runbooks.snapshot_contract import BROKERS_FILE, META_FILE, REPLICAS_FILE
from kafka_runbooks_airflow.hooks import kafka_admin
from kafka_runbooks_airflow.operators.snapshot import KafkaClusterSnapshotOperator

DAG_ID = "kafka_cluster_health"
RUN_ID = "manual__2026-11-24T10:00:00+00:00"


class StandIn:
    """Stands in for ClusterAdmin: broker 3 is fenced; two partitions, one offline."""

    bootstrap_servers = "b1:9092"

    def __init__(self, fail: bool = False):
        self.fail = fail
        self.closed = 0
        self.include_log_dirs = None

    def read_state(self, include_log_dirs=True):
        self.include_log_dirs = include_log_dirs
        if self.fail:
            raise TimeoutError("no broker answered")
        return ClusterState(
            cluster_id="c-1",
            brokers={1: Broker(1, rack="a"), 2: Broker(2, rack="b"), 3: Broker(3, fenced=True)},
            quorum=None,
            partitions=[
                PartitionState("t", 0, 1, 4, (1, 2, 3), (1, 2)),
                PartitionState("t", 1, -1, 2, (3,), ()),
            ],
            taken_at_ms=1_700_000_000_000,
        )

    def close(self):
        self.closed += 1


@pytest.fixture
def operator(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("KAFKA_RUNBOOKS_DATA_URL", raising=False)
    storage._STORES.clear()
    decisions.forget()
    admins: dict[str, StandIn] = {}

    class AdminHook:
        def __init__(self, kafka_config_id):
            self.admin = admins[kafka_config_id]

    monkeypatch.setattr(kafka_admin, "KafkaAdminHook", AdminHook)
    with DAG(DAG_ID, schedule=None, start_date=pendulum.datetime(2026, 1, 1)):
        task = KafkaClusterSnapshotOperator(task_id="snapshot_cluster", kafka_config_id="kafka_eu1")
    return SimpleNamespace(task=task, admins=admins, data=tmp_path / "data")


def test_the_snapshot_is_in_the_store_under_its_cluster_and_its_path_finds_it_again(operator):
    operator.admins["kafka_eu1"] = admin = StandIn()
    out = operator.task.execute({"run_id": RUN_ID})

    folder = storage.locate(out["path"])
    assert folder.key == "snapshots/kafka_cluster_health/manual__2026-11-24T10_00_00_00_00/kafka_eu1"
    assert folder.store is storage.store()  # the configured store, not a store of its own
    assert sorted(p.name for p in folder.files()) == sorted([BROKERS_FILE, META_FILE, REPLICAS_FILE])
    assert out | {"path": None} == {
        "path": None,
        "cluster_id": "c-1",
        "partitions": 2,
        "brokers": 3,
        "unavailable_brokers": [3],
    }
    with (folder / REPLICAS_FILE).open_binary() as f:
        replicas = pq.read_table(f).to_pylist()
    assert [(r["partition"], r["replica"], r["in_isr"]) for r in replicas] == [
        (0, 1, True),
        (0, 2, True),
        (0, 3, False),
        (1, 3, False),
    ]
    meta = json.loads((folder / META_FILE).read_text())
    assert (meta["cluster_id"], meta["bootstrap_servers"], meta["taken_at_ms"]) == (
        "c-1",
        "b1:9092",
        1_700_000_000_000,
    )
    assert admin.include_log_dirs is True and admin.closed == 1
    [record] = [r for r in decisions.made() if r.step == "snapshot"]
    assert record.observed["unavailable_brokers"] == [3] and str(folder) in record.action


def test_an_output_subdir_is_one_folder_name_in_the_store(operator):
    operator.admins["kafka_eu1"] = StandIn()
    operator.task.output_subdir = "plans/../elsewhere"
    folder = storage.locate(operator.task.execute({"run_id": RUN_ID})["path"])
    assert folder.key == "plans_.._elsewhere"  # never a path that climbs out of the data store
    assert (operator.data / "plans_.._elsewhere" / REPLICAS_FILE).is_file()


def test_a_cluster_that_cannot_be_read_writes_nothing_and_the_client_is_closed(operator):
    operator.admins["kafka_eu1"] = admin = StandIn(fail=True)
    with pytest.raises(TimeoutError):
        operator.task.execute({"run_id": RUN_ID})
    assert admin.closed == 1
    assert not operator.data.exists() or not list(operator.data.rglob("*.parquet"))
