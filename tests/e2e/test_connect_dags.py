"""kafka_connect_restart and kafka_connect_autorestart on a real Airflow against the real Connect worker."""

from __future__ import annotations

import json
import time

import pytest

from kafka_runbooks_dev.localstack.airflow import AirflowError
from tests.connect_helpers import all_running, file_sink, status_records, task_failed, unique_name
from tests.helpers import create_topic, unique_topic, wait_until

pytestmark = pytest.mark.timeout(900)
AUTO, MANUAL = "kafka_connect_autorestart", "kafka_connect_restart"


@pytest.fixture
def topic(kafka_stack):
    name = unique_topic("connect-e2e")
    create_topic(kafka_stack.bootstrap_servers, name, 2, 3)
    return name


def _states(airflow, dag_id, run_id):
    return {ti["task_id"]: ti["state"] for ti in airflow.task_instances(dag_id, run_id)}


def _retry_db(call):
    """SQLite answers 'database is locked' (HTTP 500) now and then while the scheduler
    writes: try again, as an operator would."""
    for attempt in range(5):
        try:
            return call()
        except AirflowError as exc:
            if exc.status != 500 or attempt == 4:
                raise
            time.sleep(2)
    raise AssertionError("unreachable")


def _post_run(airflow, dag_id, conf):
    _retry_db(lambda: airflow.unpause(dag_id))
    body = {"logical_date": None, "conf": conf}
    return _retry_db(lambda: airflow.api("POST", f"/dags/{dag_id}/dagRuns", json=body)["dag_run_id"])


def _run(airflow, dag_id, conf, expect="success"):
    run_id = _post_run(airflow, dag_id, conf)
    state = airflow.wait_for_run(dag_id, run_id, timeout=300)
    assert state == expect, f"{dag_id} run {run_id} ended {state}: {_states(airflow, dag_id, run_id)}"
    return run_id


def test_manual_restart_dag_restarts_one_task_and_refuses_unknown_ids(
    airflow_local, connect, topic, tmp_path, kafka_stack
):
    airflow_local.wait_for_dag(MANUAL, timeout=120)
    name = unique_name("e2e-manual")
    (tmp_path / "out").mkdir()
    file_sink(connect, name, tmp_path / "out" / "out.txt", topic, tasks=2)
    connect.created.append(name)
    connect.wait_for(name, all_running(2))
    key1, key0 = f"status-task-{name}-1", f"status-task-{name}-0"
    before1 = len(status_records(kafka_stack.bootstrap_servers, key1))
    before0 = len(status_records(kafka_stack.bootstrap_servers, key0))

    # three requests at once: one good, one unknown connector, one bad input
    good = _post_run(airflow_local, MANUAL, {"connector": name, "scope": "tasks", "task_ids": [1]})
    unknown = _post_run(airflow_local, MANUAL, {"connector": "no-such-connector-e2e"})
    bad = _post_run(airflow_local, MANUAL, {"connector": name, "scope": "tasks", "task_ids": []})

    assert airflow_local.wait_for_run(MANUAL, good, timeout=300) == "success"

    def new1():
        return [r["state"] for r in status_records(kafka_stack.bootstrap_servers, key1)[before1:]]

    # the worker's status-topic writes can lag its REST answers on a loaded machine: wait for them
    wait_until(lambda: new1()[-1:] == ["RUNNING"], 120, 1, "task 1 RUNNING again in the status topic")
    assert new1() == ["UNASSIGNED", "RUNNING"]  # the worker stopped and started task 1 ...
    assert len(status_records(kafka_stack.bootstrap_servers, key0)) == before0  # ... and only task 1
    log = airflow_local.task_log_text(MANUAL, good, "restart")
    assert "DECISION connect-restart" in log and "tasks=[1]" in log

    assert airflow_local.wait_for_run(MANUAL, unknown, timeout=300) == "failed"
    assert _states(airflow_local, MANUAL, unknown) == {"check_request": "success", "restart": "failed"}
    assert "connector 'no-such-connector-e2e' does not exist" in airflow_local.task_log_text(
        MANUAL, unknown, "restart"
    )
    assert airflow_local.wait_for_run(MANUAL, bad, timeout=300) == "failed"
    assert _states(airflow_local, MANUAL, bad)["check_request"] == "failed"
    assert "needs task_ids" in airflow_local.task_log_text(MANUAL, bad, "check_request")


def _row(report: dict, cluster: str, name: str) -> dict:
    c = next(c for c in report["clusters"] if c["cluster"] == cluster)
    return next(r for r in c["connectors"] if r["name"] == name)


def _report(airflow, run_id) -> dict:
    """The report of the run's one group (one Kafka cluster, or the connect_conn_ids param's)."""
    ti = airflow.task_instance(AUTO, run_id, "cluster.sweep", map_index=0)
    assert ti["state"] == "success", ti
    xcom = airflow.api(
        "GET",
        f"/dags/{AUTO}/dagRuns/{_q(run_id)}/taskInstances/cluster.sweep/xcomEntries/return_value",
        params={"deserialize": "true", "stringify": "false", "map_index": 0},
    )
    value = xcom["value"]
    return json.loads(value) if isinstance(value, str) else value


def _q(s: str) -> str:
    from urllib.parse import quote

    return quote(s, safe="")


def test_autorestart_heals_reports_unreachable_and_keeps_counts_across_a_scheduler_restart(
    airflow_local, connect, topic, tmp_path
):
    airflow_local.wait_for_dag(AUTO, timeout=120)
    unreachable = {
        "connection_id": "kafka_connect_unreachable",
        "conn_type": "http",
        "host": "http://127.0.0.1:9",
    }
    _retry_db(lambda: airflow_local.api("POST", "/connections", json=unreachable))
    name = unique_name("e2e-auto")
    target = tmp_path / name / "out.txt"
    file_sink(connect, name, target, topic)
    connect.created.append(name)
    connect.wait_for(name, task_failed)
    # switched off for good by the operator: the Variable, read by every sweep
    kept = unique_name("e2e-keep")
    file_sink(connect, kept, tmp_path / kept / "out.txt", topic)
    connect.created.append(kept)
    connect.wait_for(kept, task_failed)
    variable = {"key": "kafka_connect_autorestart_exclude", "value": json.dumps(["e2e-keep-*"])}
    _retry_db(lambda: airflow_local.api("POST", "/variables", json=variable))
    fast = {"minute_seconds": 1}
    try:
        # 1. three clusters, one without a connection, one unreachable: reported (raise_alerts fails)
        first = _run(
            airflow_local,
            AUTO,
            {
                **fast,
                "connect_conn_ids": [
                    "kafka_connect_missing",
                    "kafka_connect_unreachable",
                    "kafka_connect_default",
                ],
            },
            expect="failed",
        )
        assert _states(airflow_local, AUTO, first) == {
            "clusters": "success",
            "cluster.sweep": "success",
            "cluster.raise_alerts": "failed",
        }
        report = _report(airflow_local, first)
        # the first two are reported, the third is swept all the same
        reachable = {c["cluster"]: c["reachable"] for c in report["clusters"]}
        assert reachable == {
            "kafka_connect_missing": False,
            "kafka_connect_unreachable": False,
            "kafka_connect_default": True,
        }
        assert [a["alert"] for a in report["alerts"]] == ["bad connection", "unreachable"]
        kept_row = _row(report, "kafka_connect_default", kept)
        assert (kept_row["action"], kept_row["excluded_by"], kept_row["restart_count"]) == (
            "excluded",
            "e2e-keep-*",
            0,
        )
        row = _row(report, "kafka_connect_default", name)
        # restarted at once (minute 0): no scheduled sweep runs beside the test's
        # (KAFKA_RUNBOOKS_CONNECT_AUTORESTART_SCHEDULE=none in tests/e2e/conftest.py)
        first_count = row["restart_count"]
        assert first_count == 1 and row["last_restart_at"], row
        sweep_log = airflow_local.task_log_text(AUTO, first, "cluster.sweep", map_index=0)
        assert "DECISION connect-autorestart" in sweep_log and name in sweep_log
        alerts_log = airflow_local.task_log_text(AUTO, first, "cluster.raise_alerts", map_index=0)
        assert "alert(s) need a person" in alerts_log

        # 2. the cause goes away; the next due restart (2 policy minutes = 2 s later) heals it
        connect.wait_for(name, task_failed)
        target.parent.mkdir()
        time.sleep(2)
        second = _run(airflow_local, AUTO, fast)
        report = _report(airflow_local, second)
        # no connect_conn_ids: the fleet (kafka_default) and its Connect cluster, named in the report
        assert report["kafka_config_id"] == "kafka_default"
        row = _row(report, "kafka_connect_default", name)
        assert row["restart_count"] == first_count + 1, row
        last_restart = row["last_restart_at"]
        connect.wait_for(name, all_running(1))

        # 3. Airflow's scheduler restarts (same home): the count and the timestamp are still there.
        # The scheduler runs every task (its executor starts the task processes), so nothing a
        # sweep kept in memory survives it; the other components never run a sweep (a restart
        # of the whole standalone cost ~50 s more: DB check, api-server, execution API)
        airflow_local.restart_scheduler(timeout=300)
        third = _run(airflow_local, AUTO, fast)
        row = _row(_report(airflow_local, third), "kafka_connect_default", name)
        # recovering: the restarts made before the restart of Airflow are still counted, with their time
        assert (row["total_restarts"], row["last_restart_at"]) == (first_count + 1, last_restart), row
        assert (row["action"], row["restart_count"]) == ("recovering", first_count + 1), row
        assert row["state"] == "RUNNING"

        # 4. healthy for longer than the current interval (2 policy minutes per restart): the count resets
        time.sleep(2 * (first_count + 1) + 0.5)
        fourth = _run(airflow_local, AUTO, fast)
        row = _row(_report(airflow_local, fourth), "kafka_connect_default", name)
        assert row["restart_count"] == 0 and row["total_restarts"] == first_count + 1, row
        assert row["action"] == "reset", row
        assert row["last_restart_at"] == last_restart
    finally:
        mask, paused = {"update_mask": "is_paused"}, {"is_paused": True}
        _retry_db(lambda: airflow_local.api("PATCH", f"/dags/{AUTO}", params=mask, json=paused))
        _retry_db(
            lambda: airflow_local.request("DELETE", "/api/v2/variables/kafka_connect_autorestart_exclude")
        )
        wait_until(lambda: airflow_local.dag(AUTO)["is_paused"], 30, what="autorestart paused")
