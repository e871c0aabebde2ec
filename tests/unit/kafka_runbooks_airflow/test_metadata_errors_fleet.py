"""The metadata-error sweep per cluster: targets, state and report keys, the per-cluster gate.

Before: one Kafka connection per run. Now the ``cluster`` group is mapped over the fleet; each
instance reads its own cluster's XComs (its map index), keeps its own state and report, and
its controller gate starts a restart only with a "Restart it" of that cluster's gate for that
cluster's escalation. The whole DAG on a running Airflow: tests/e2e/test_metadata_error_sweep_dag.py.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime

import pytest

from kafka_runbooks import approval as rules
from kafka_runbooks.errors import BadInput
from kafka_runbooks.metadata_errors.sweep import SweepOptions
from kafka_runbooks.metadata_errors.targets import sweep_targets
from tests.unit.kafka_runbooks_airflow.airflow_clock import TaskStateStore

RUN_ID = "scheduled__2026-11-24T10:00:00+00:00"


def _options(target: dict) -> SweepOptions:
    """One cluster's options as its sweep task reads them: the run's (empty) params and its target."""
    from kafka_runbooks_airflow.metadata_errors import options_from_params

    return options_from_params(target, "kafka_metadata_error_sweep")


class MappedTI:
    """The part of a mapped task instance the tasks use: XComs keyed (task_id, map_index, key)."""

    def __init__(self, task_id: str, map_index: int, xcoms: dict | None = None) -> None:
        self.task_id = task_id
        self.map_index = map_index
        self.xcoms = dict(xcoms or {})
        self.pulls: list = []
        # when Airflow says the task started: a minute after the approvals these tests record
        self.start_date = datetime(2026, 11, 24, 10, 2, tzinfo=UTC)

    def xcom_push(self, key: str, value) -> None:
        self.xcoms[(self.task_id, self.map_index, key)] = value

    def xcom_pull(self, task_ids, key: str = "return_value", map_indexes=None):
        self.pulls.append((task_ids, map_indexes))
        if map_indexes is None:  # Airflow: every map index of that task
            found = [v for (t, _, k), v in sorted(self.xcoms.items()) if t == task_ids and k == key]
            return found[0] if len(found) == 1 else found or None
        if isinstance(map_indexes, int):
            return copy.deepcopy(self.xcoms.get((task_ids, map_indexes, key)))
        return [copy.deepcopy(self.xcoms.get((task_ids, i, key))) for i in map_indexes]


def escalation(cluster: str, node: int = 9001) -> dict:
    options = SweepOptions(
        kafka_config_id=cluster, metrics_conn_id=f"{cluster}_probe", restart_conn_id=f"{cluster}_restart"
    )
    return {
        "node_id": node,
        "kafka_config_id": cluster,
        "reason": f"errors increasing on {cluster}",
        "trigger_run_id": options.restart_run_id("controller", node, RUN_ID),
        "conf": options.restart_conf(node, f"errors increasing on {cluster}"),
    }


def two_clusters(task_id: str, map_index: int) -> MappedTI:
    """A run sweeping kafka_a (map index 0) and kafka_b (1), both escalated."""
    return MappedTI(
        task_id,
        map_index,
        {
            ("cluster.sweep", 0, "controller_escalation"): escalation("kafka_a"),
            ("cluster.sweep", 1, "controller_escalation"): escalation("kafka_b"),
        },
    )


def context(ti: MappedTI) -> dict:
    from types import SimpleNamespace

    return {
        "ti": ti,
        "dag": SimpleNamespace(dag_id="kafka_metadata_error_sweep"),
        "run_id": RUN_ID,
        "task_state_store": TaskStateStore(),  # the task instance's (Airflow 3.3)
    }


@pytest.fixture
def policy(monkeypatch, api_server):
    """The approval policy off; Airflow's API server (its clock) at 10:02, after the approvals here."""
    from kafka_runbooks_airflow import gate
    from kafka_runbooks_airflow.operators import gate as gates

    api_server.now = datetime(2026, 11, 24, 10, 2, tzinfo=UTC)
    for module in (gate, gates):  # the glue's check and the gate operators read it
        monkeypatch.setattr(module, "load_policy", lambda: rules.load_policy({}.get, {}))


# ------------------------------------------------------------------ targets


def test_each_cluster_is_swept_through_its_own_connections():
    assert sweep_targets(["kafka_default", "kafka_eu1"]) == [
        {
            "kafka_config_id": "kafka_default",
            "metrics_conn_id": "kafka_broker_probe_default",
            "restart_conn_id": "kafka_restart_default",
        },
        {
            "kafka_config_id": "kafka_eu1",
            "metrics_conn_id": "kafka_eu1_probe",
            "restart_conn_id": "kafka_eu1_restart",
        },
    ]
    # a run naming its metrics connection: only for one cluster
    assert sweep_targets(["kafka_eu1"], "m1")[0]["metrics_conn_id"] == "m1"
    for metrics, restart in (("m1", None), (None, "r1")):
        with pytest.raises(BadInput, match="one connection would serve every cluster"):
            sweep_targets(["kafka_a", "kafka_b"], metrics, restart)


def test_the_clusters_task_reads_the_fleet_and_refuses_a_shared_override(monkeypatch):
    from kafka_runbooks_airflow import metadata_errors

    monkeypatch.setenv("KAFKA_RUNBOOKS_CLUSTERS", "kafka_a,kafka_b")
    monkeypatch.setattr("airflow.sdk.Variable.get", lambda name, default=None: default)
    assert [t["kafka_config_id"] for t in metadata_errors.sweep_targets_from_params({})] == [
        "kafka_a",
        "kafka_b",
    ]
    only = metadata_errors.sweep_targets_from_params(
        {"kafka_config_ids": ["kafka_b"], "metrics_conn_id": "m"}
    )
    assert only == [
        {"kafka_config_id": "kafka_b", "metrics_conn_id": "m", "restart_conn_id": "kafka_b_restart"}
    ]
    with pytest.raises(BadInput):
        metadata_errors.sweep_targets_from_params({"metrics_conn_id": "m"})


# ------------------------------------------------------------------ state, report and runs per cluster


def test_state_report_and_restart_runs_are_kept_per_cluster(tmp_path, monkeypatch):
    """Each cluster's sweep: its own state key, its own report naming it, run ids naming it."""
    from kafka_runbooks import storage
    from kafka_runbooks_airflow import metadata_errors
    from kafka_runbooks_airflow.hooks import kafka_admin, metrics

    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("KAFKA_RUNBOOKS_DATA_URL", raising=False)
    storage._STORES.clear()
    seen = []

    class Admin:
        def close(self):
            pass

    monkeypatch.setattr(metrics.KafkaMetricsHook, "get_endpoints", lambda self: self.probe_conn_id)
    monkeypatch.setattr(kafka_admin.KafkaAdminHook, "admin", property(lambda self: Admin()))

    def fake_sweep(admin, endpoints, store, options, run_id, **_):
        seen.append((endpoints, store.path, options.kafka_config_id, options.restart_conn_id))
        with store.locked():
            store.save({})
        return {
            "nodes": [],
            "summary": {},
            "restart_requests": [{"trigger_run_id": options.restart_run_id("broker", 1, run_id)}],
            "controller_escalation": None,
            "alerts": [],
        }

    monkeypatch.setattr(metadata_errors, "run_sweep", fake_sweep)
    try:
        reports = [
            metadata_errors.run_metadata_error_sweep(_options(target), RUN_ID, None)
            for target in sweep_targets(["kafka_a", "kafka_b"])
        ]
        assert [(s[0], s[2], s[3]) for s in seen] == [
            ("kafka_a_probe", "kafka_a", "kafka_a_restart"),
            ("kafka_b_probe", "kafka_b", "kafka_b_restart"),
        ]
        state = tmp_path / "state" / "metadata_errors"
        assert [s[1] for s in seen] == [state / "kafka_a.json", state / "kafka_b.json"]
        assert all(p.exists() for p in (state / "kafka_a.json", state / "kafka_b.json"))
        folder = tmp_path / "reports" / "metadata_errors" / "by_connection"
        for cluster, report in zip(("kafka_a", "kafka_b"), reports, strict=True):
            assert json.loads((folder / f"{cluster}.json").read_text())["kafka_config_id"] == cluster
            assert report["report_path"].endswith(f"by_connection/{cluster}.json")
        # node 1 of each cluster: two runs, not one taken for the other and skipped as existing
        runs = [r["restart_requests"][0]["trigger_run_id"] for r in reports]
        assert runs == [
            "metadata_errors__kafka_a__broker_1__scheduled__2026-11-24T10_00_00_00_00",
            "metadata_errors__kafka_b__broker_1__scheduled__2026-11-24T10_00_00_00_00",
        ]
    finally:
        storage._STORES.clear()


def test_a_broken_connection_is_that_clusters_alert(tmp_path, monkeypatch):
    from kafka_runbooks import storage
    from kafka_runbooks.errors import RunbookFailed
    from kafka_runbooks_airflow import metadata_errors

    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("KAFKA_RUNBOOKS_DATA_URL", raising=False)
    storage._STORES.clear()
    try:
        target = sweep_targets(["kafka_gone"])[0]  # no such connection
        report = metadata_errors.run_metadata_error_sweep(_options(target), RUN_ID, None)
        assert report["kafka_config_id"] == "kafka_gone" and report["nodes"] == []
        assert report["restart_requests"] == [] and report["controller_escalation"] is None
        assert [a["alert"] for a in report["alerts"]] == [report["discovery_errors"][0]]
        assert report["alerts"][0]["alert"].startswith("cannot sweep kafka_gone: ")
        assert report["report_path"].endswith("by_connection/kafka_gone.json")
        with pytest.raises(RunbookFailed, match="^kafka_gone: 1 alert"):
            metadata_errors.raise_on_alerts(report, True)
    finally:
        storage._STORES.clear()


def test_the_broker_restarts_of_every_cluster_are_collected_a_failed_one_adds_none():
    from kafka_runbooks_airflow.metadata_errors import collect_restart_requests

    ti = MappedTI(
        "broker_restart_requests",
        -1,
        {
            ("cluster.sweep", 0, "return_value"): [{"trigger_run_id": "a1"}, {"trigger_run_id": "a2"}],
            # map index 1: its sweep failed, no XCom
            ("cluster.sweep", 2, "return_value"): [{"trigger_run_id": "c1"}],
        },
    )
    assert [r["trigger_run_id"] for r in collect_restart_requests(ti, 3)] == ["a1", "a2", "c1"]
    assert ti.pulls == [("cluster.sweep", [0, 1, 2])]  # explicit: one cluster's list is never unpacked
    single = MappedTI(
        "broker_restart_requests", -1, {("cluster.sweep", 0, "return_value"): [{"trigger_run_id": "a"}]}
    )
    assert collect_restart_requests(single, 1) == [{"trigger_run_id": "a"}]
    assert collect_restart_requests(single, 0) == []


# ------------------------------------------------------------------ the gate, per cluster


def test_every_task_of_the_group_reads_its_own_clusters_xcoms():
    """Without map_indexes a pull inside the mapped group returns every cluster's value."""
    from kafka_runbooks_airflow.gate import current_action, run_xcom
    from kafka_runbooks_airflow.metadata_errors import group_xcom

    for index, cluster in ((0, "kafka_a"), (1, "kafka_b")):
        ti = two_clusters("cluster.controller_decision", index)
        assert group_xcom(context(ti), "sweep", "controller_escalation")["kafka_config_id"] == cluster
        assert run_xcom(context(ti), "cluster.sweep", "controller_escalation")["kafka_config_id"] == cluster
        action, _ = current_action("controller", context(ti))
        assert action["conf"]["kafka_config_id"] == cluster
        assert action["trigger_run_id"].startswith(f"metadata_errors__{cluster}__controller_9001__")
    digests = {current_action("controller", context(two_clusters("cluster.x", i)))[1] for i in (0, 1)}
    assert len(digests) == 2  # an approval of one cluster's escalation is no approval of the other's


def _approved_record(ti: MappedTI, digest: str) -> None:
    ti.xcoms[("cluster.controller_decision", ti.map_index, "approval")] = {
        "outcome": rules.APPROVED,
        "reason": "approved by alice",
        "gate": "cluster.controller_decision",
        "run_id": RUN_ID,
        "by": {"id": "alice", "name": "alice"},
        "at": "2026-11-24T10:01:00+00:00",
        "at_clock": "Airflow's API server",  # the gate's record: responded_at, the API server's clock
        "triggered_by": None,
        "digest": digest,
    }


@pytest.fixture(scope="module")
def sweep_dag():
    from tests.unit.kafka_runbooks_airflow.test_gate import _dag

    return _dag("kafka_metadata_error_sweep")


def _restart_task(sweep_dag, ti: MappedTI):
    """The trigger task as rendered for ``ti``'s cluster (the templates read that map index)."""
    task = copy.copy(sweep_dag.get_task("cluster.restart_active_controller"))
    esc = ti.xcoms[("cluster.sweep", ti.map_index, "controller_escalation")]
    task.trigger_run_id = esc["trigger_run_id"]
    task.conf = dict(esc["conf"])
    return task


def test_a_restart_it_answer_starts_only_its_own_clusters_run(sweep_dag, policy, monkeypatch):
    from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
    from airflow.sdk.exceptions import AirflowFailException

    from kafka_runbooks_airflow.gate import current_action

    started = []
    monkeypatch.setattr(
        TriggerDagRunOperator, "execute", lambda self, ctx: started.append(self.trigger_run_id)
    )
    # kafka_b's gate approved its own escalation; kafka_a's gate has no record
    b = two_clusters("cluster.restart_active_controller", 1)
    _approved_record(b, current_action("controller", context(b))[1])
    _restart_task(sweep_dag, b).execute(context(b))
    assert started == [escalation("kafka_b")["trigger_run_id"]]
    a = two_clusters("cluster.restart_active_controller", 0)
    a.xcoms.update({k: v for k, v in b.xcoms.items() if k[2] == "approval"})  # only kafka_b's record
    with pytest.raises(AirflowFailException, match="nothing was done"):
        _restart_task(sweep_dag, a).execute(context(a))
    # kafka_b's approval copied onto kafka_a's gate: bound to kafka_b's escalation, refused
    _approved_record(a, current_action("controller", context(b))[1])
    with pytest.raises(AirflowFailException, match="nothing was done"):
        _restart_task(sweep_dag, a).execute(context(a))
    assert started == [escalation("kafka_b")["trigger_run_id"]]


def test_leave_it_skips_the_restart_and_is_recorded_restart_it_skips_the_record(
    sweep_dag, policy, monkeypatch
):
    from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
    from airflow.sdk.exceptions import AirflowSkipException

    from kafka_runbooks_airflow.gate import current_action
    from kafka_runbooks_airflow.metadata_errors import leave_alone_if_chosen

    monkeypatch.setattr(TriggerDagRunOperator, "execute", lambda self, ctx: pytest.fail("started a run"))
    ti = two_clusters("cluster.restart_active_controller", 0)
    ti.xcoms[("cluster.controller_decision", 0, "approval")] = {
        "outcome": rules.REJECTED,
        "reason": "Leave it",
    }
    with pytest.raises(AirflowSkipException):
        _restart_task(sweep_dag, ti).execute(context(ti))
    leave = two_clusters("cluster.leave_active_controller", 0)
    leave.xcoms.update(ti.xcoms)
    assert leave_alone_if_chosen(context(leave)) == {
        "kafka_config_id": "kafka_a",
        "node_id": 9001,
        "decision": "leave it",
    }
    approved = two_clusters("cluster.leave_active_controller", 1)
    _approved_record(approved, current_action("controller", context(approved))[1])
    with pytest.raises(AirflowSkipException):
        leave_alone_if_chosen(context(approved))
    with pytest.raises(AirflowSkipException):  # no answer at all: nothing recorded as left alone
        leave_alone_if_chosen(context(two_clusters("cluster.leave_active_controller", 0)))


def test_the_gate_asks_only_a_cluster_that_escalated_naming_it(sweep_dag, policy, monkeypatch):
    from types import SimpleNamespace

    import airflow.providers.standard.operators.hitl as hitl
    from airflow.sdk.exceptions import AirflowSkipException, TaskAwaitingInput

    from kafka_runbooks_airflow import gate
    from kafka_runbooks_airflow.operators import gate as gates

    shown = {}
    monkeypatch.setattr(
        gates, "show_question", lambda op, ti_id: shown.update(subject=op.subject, body=op.body)
    )
    monkeypatch.setattr(hitl, "upsert_hitl_detail", lambda **kw: None)
    quiet = MappedTI("cluster.controller_decision", 0, {("cluster.sweep", 0, "controller_escalation"): None})
    task = copy.copy(sweep_dag.get_task("cluster.controller_decision"))
    with pytest.raises(AirflowSkipException, match="no controller escalation"):
        task.execute(context(quiet))
    assert shown == {}
    ti = two_clusters("cluster.controller_decision", 1)
    ctx = {
        **context(ti),
        "task_instance": SimpleNamespace(id="ti-1"),
        "dag_run": SimpleNamespace(triggering_user_name="bob"),
        "params": {},
    }
    with pytest.raises(TaskAwaitingInput):
        copy.copy(sweep_dag.get_task("cluster.controller_decision")).execute(ctx)
    assert shown["subject"].startswith("kafka_b: active controller 9001")
    digest = gate.current_action("controller", context(ti))[1]
    assert f"`{digest}`" in shown["body"] and "of **kafka_b**" in shown["body"]
    asked = ti.xcoms[("cluster.controller_decision", 1, gate.REQUEST_KEY)]
    assert asked["action"]["conf"]["kafka_config_id"] == "kafka_b"
