"""The Connect auto-restart task body: one group's clusters swept, its report written and logged.

Real state and reports in a tmp data store (``KAFKA_RUNBOOKS_DATA_DIR``); the hook is replaced
by a stand-in that builds a stand-in worker, or fails as a broken connection does. The DAGs'
params are in tests/unit/dags/test_kafka_connect.py; the sweep on a real worker in
tests/integration/test_connect_autorestart.py.
"""

from __future__ import annotations

import json
import logging

import pytest

from kafka_runbooks.connect.client import ConnectorStatus, RestartOutcome, TaskStatus
from kafka_runbooks.connect.request import build_sweep_request
from kafka_runbooks.connect.state import JsonStateStore
from kafka_runbooks_airflow import connect
from kafka_runbooks_airflow.hooks import kafka_connect
from tests.unit.kafka_runbooks_airflow.glue_source import callers_of, functions, params_reads

LOG = logging.getLogger("test.connect")
SWEEP = build_sweep_request({})


class Worker:
    """One FAILED connector and one healthy; restarts it when asked."""

    def __init__(self, conn_id: str) -> None:
        self.url = f"http://{conn_id}:8083"
        self.calls = 0
        self.closed = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.closed = True

    def list_connectors(self):
        self.calls += 1
        return {
            "failing": ConnectorStatus("failing", "RUNNING", "sink", "w", None, (TaskStatus(0, "FAILED"),)),
            "fine": ConnectorStatus("fine", "RUNNING", "sink", "w", None, (TaskStatus(0, "RUNNING"),)),
        }

    def restart(self, name, include_tasks=True, only_failed=True, known=None):
        self.calls += 1
        return RestartOutcome(name, "kip-745", 1, False, (0,), (202,))


@pytest.fixture
def rig(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("KAFKA_RUNBOOKS_DATA_URL", raising=False)
    workers: dict[str, Worker] = {}

    class Hook:
        def __init__(self, conn_id: str) -> None:
            if conn_id.startswith("broken"):
                raise LookupError(f"The conn_id `{conn_id}` isn't defined")
            self.conn_id = conn_id

        def get_conn(self) -> Worker:
            return workers.setdefault(self.conn_id, Worker(self.conn_id))

    monkeypatch.setattr(kafka_connect, "KafkaConnectHook", Hook)
    monkeypatch.setattr(connect, "excluded_from_variable", lambda: [])
    return workers


def test_a_cluster_that_cannot_be_swept_is_its_own_alert_and_the_others_are_swept(rig, tmp_path):
    JsonStateStore("corrupt").store.write_text(JsonStateStore("corrupt").key, "{not json")
    policy = SWEEP.policy
    clusters = connect._sweep_each(["broken", "corrupt", "good"], policy, [], LOG)
    assert [(c["cluster"], c["reachable"]) for c in clusters] == [
        ("broken", False),
        ("corrupt", False),
        ("good", True),
    ]
    assert [c["alerts"][0]["alert"] for c in clusters[:2]] == ["bad connection", "sweep failed"]
    assert "not valid JSON" in clusters[1]["error"]
    assert [r["connector"] for r in clusters[2]["restarts"]] == ["failing"]
    assert rig["corrupt"].closed and rig["good"].closed  # every client built is closed


def test_the_group_report_gathers_every_clusters_alerts_errors_and_restarts(rig):
    report = connect.run_autorestart_sweep(
        SWEEP, "run-1", LOG, {"kafka_config_id": "kafka_a", "connect_conn_ids": ["good", "broken"]}
    )
    assert [c["cluster"] for c in report["clusters"]] == ["good", "broken"]
    assert [(r["cluster"], r["connector"]) for r in report["restarts"]] == [("good", "failing")]
    assert [(a["cluster"], a["alert"]) for a in report["alerts"]] == [("broken", "bad connection")]
    assert report["http_calls"] == 2  # the listing and the one restart


def test_each_kafka_cluster_keeps_its_own_report_besides_the_latest(rig, tmp_path):
    a = connect.run_autorestart_sweep(
        SWEEP, "run-a", LOG, {"kafka_config_id": "kafka_a", "connect_conn_ids": ["good"]}
    )
    b = connect.run_autorestart_sweep(
        SWEEP, "run-b", LOG, {"kafka_config_id": "kafka_b", "connect_conn_ids": []}
    )
    reports = tmp_path / "reports" / "connect_autorestart"
    assert a["report_path"] == str(reports / "by_connection" / "kafka_a.json")
    assert json.loads((reports / "by_connection" / "kafka_a.json").read_text())["run_id"] == "run-a"
    assert json.loads((reports / "by_connection" / "kafka_b.json").read_text())["run_id"] == "run-b"
    assert json.loads((reports / "latest.json").read_text())["run_id"] == "run-b"  # the last group's
    assert b["report_path"].endswith("kafka_b.json")
    plain = connect.run_autorestart_sweep(build_sweep_request({"connect_conn_ids": ["good"]}), "run-c", LOG)
    assert plain["report_path"] == str(reports / "latest.json")


def test_the_log_names_what_needs_a_person_and_skips_connectors_without_history(rig, caplog):
    caplog.set_level(logging.INFO, logger="test.connect")
    connect.run_autorestart_sweep(
        SWEEP, "run-1", LOG, {"kafka_config_id": "k", "connect_conn_ids": ["good", "broken"]}
    )
    lines = [
        (r.levelname, r.getMessage()) for r in caplog.records if not r.getMessage().startswith("DECISION")
    ]
    assert lines[0] == ("INFO", "cluster good: reachable=True connectors=2 restarted=1 alerts=0 http_calls=2")
    assert lines[1][1].startswith("  failing: RUNNING failed_tasks=[0] restart_count=1 ")
    assert not any("fine:" in text for _, text in lines)  # healthy, never restarted: not listed
    assert lines[2] == (
        "INFO",
        "cluster broken: reachable=False connectors=0 restarted=0 alerts=1 http_calls=0",
    )
    assert lines[3][0] == "ERROR" and lines[3][1].startswith('ALERT {"alert": "bad connection"')
    assert len(lines) == 4


def test_a_connect_cluster_also_named_by_another_kafka_cluster_is_reported_not_swept_twice(rig):
    group = {"kafka_config_id": "kafka_b", "connect_conn_ids": ["good"], "shared": {"mm2": "kafka_a"}}
    report = connect.run_autorestart_sweep(SWEEP, "run-1", LOG, group)
    assert [c["cluster"] for c in report["clusters"]] == ["mm2", "good"]
    assert report["alerts"] == [
        {
            "cluster": "mm2",
            "alert": "also named by Kafka cluster kafka_a",
            "detail": "RuntimeError: swept with kafka_a only; fix the extra connect_conn_ids of kafka_b",
        }
    ]
    assert "mm2" not in rig  # no client built for it


def test_a_sweep_without_a_group_sweeps_only_what_its_request_names(rig):
    with pytest.raises(ValueError, match="connect_conn_ids must be a non-empty list"):
        connect.run_autorestart_sweep(SWEEP, "run-1", LOG)  # the fleet's groups come from fleet.py
    report = connect.run_autorestart_sweep(build_sweep_request({"connect_conn_ids": "good"}), "run-2", LOG)
    assert [c["cluster"] for c in report["clusters"]] == ["good"] and report["kafka_config_id"] is None


def test_the_glue_reads_the_typed_request_never_the_params():
    """Issue #26: the task bodies read the params once into the request (``sweep_request``,
    ``restart_request``); the glue that runs the sweep and the restart reads the request only.
    ``conn_ids_from_params`` is fleet.py's reader of the run's list, the one params reader left."""
    readers = {name: params_reads(f) for name, f in functions(connect).items() if params_reads(f)}
    assert readers == {"conn_ids_from_params": ["params.get"]}
    assert callers_of(connect, "build_sweep_request") == ["sweep_request"]
    assert callers_of(connect, "build_restart_request") == ["restart_request"]
    for name in ("run_autorestart_sweep", "run_manual_restart"):
        assert functions(connect)[name].args.args[0].arg == "request", name
