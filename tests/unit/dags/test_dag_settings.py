"""Every DAG's run settings, pinned as Airflow loads them, and set in one place.

The DAGs take their shared settings (owner, retries, start date, no catchup, paused or not
on creation) from ``kafka_runbooks_airflow.dag_settings``; the pins were written from the
DAGs as they were before that builder existed, so moving the settings cannot change what
the scheduler sees (a sweep that ships unpaused, or a manual runbook that retries a
destructive task, would).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pendulum
import pytest

DAGS = sorted((Path(__file__).resolve().parents[3] / "dags").glob("*.py"))
START = pendulum.datetime(2026, 1, 1, tz="UTC")
from kafka_runbooks_airflow.task_failure import record_task_failure  # noqa: E402

# every task's failure leaves its reason as a decision (issue #39 point 4)
FAILED = {"on_failure_callback": record_task_failure}
NO_RETRY = {"owner": "kafka-platform", "retries": 0, **FAILED}
REASSIGN_TAGS = {"kafka", "runbook", "reassignment", "destructive"}


def manual(tags: set[str], max_active_runs: int = 16) -> dict:
    """A manual, gated runbook: unpaused, never scheduled, never retried by Airflow."""
    return {
        "schedule": None,
        "is_paused_upon_creation": False,
        "max_active_runs": max_active_runs,
        "dagrun_timeout": None,
        "tags": tags,
        "default_args": NO_RETRY,
    }


def sweep(schedule: str, tags: set[str], max_active_runs: int, dagrun_timeout, default_args=NO_RETRY) -> dict:
    """A scheduled sweep: paused on creation, one schedule from its environment variable."""
    return {
        "schedule": schedule,
        "is_paused_upon_creation": True,
        "max_active_runs": max_active_runs,
        "dagrun_timeout": dagrun_timeout,
        "tags": tags,
        "default_args": default_args,
    }


PINS = {
    "kafka_alert_intake": {
        "is_paused_upon_creation": False,  # runs only on an authenticated post's asset event
        "max_active_runs": 1,
        "dagrun_timeout": None,
        "tags": {"kafka", "alerts", "intake"},
        "default_args": NO_RETRY,
    },
    "kafka_broker_decommission": manual(REASSIGN_TAGS),
    "kafka_broker_restart": manual({"kafka", "runbook", "restart", "destructive"}),
    "kafka_cluster_health": sweep(
        "*/5 * * * *",
        {"kafka", "sweep", "read-only", "fleet"},
        1,
        None,
        {"owner": "kafka-platform", "retries": 1, "retry_delay": pendulum.duration(seconds=30), **FAILED},
    ),
    "kafka_connect_autorestart": sweep(
        "* * * * *", {"kafka", "connect", "sweep", "remediation"}, 1, pendulum.duration(minutes=10)
    ),
    "kafka_connect_restart": manual({"kafka", "connect", "manual", "remediation"}),
    "kafka_controller_replace": manual({"kafka", "remediation", "kraft", "approval-gate"}, max_active_runs=4),
    "kafka_failed_broker_reassignment": manual(REASSIGN_TAGS),
    "kafka_failed_broker_sweep": sweep(
        "*/5 * * * *", {"kafka", "sweep", "reassignment", "fleet"}, 1, pendulum.duration(minutes=10)
    ),
    "kafka_log_dir_failure": manual(REASSIGN_TAGS),
    "kafka_metadata_error_sweep": sweep(
        "*/5 * * * *", {"kafka", "kraft", "sweep", "remediation", "fleet"}, 2, pendulum.duration(hours=2)
    ),
    "kafka_reassignment_stop": manual({"kafka", "runbook", "reassignment", "stop"}, max_active_runs=1),
    "kafka_rebalance": manual(REASSIGN_TAGS),
    "kafka_unclean_recovery": manual({"kafka", "remediation", "unclean-election", "approval-gate"}),
}


@pytest.fixture(scope="module")
def dags():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS[0].parent), safe_mode=False)
    assert bag.import_errors == {}
    return bag.dags


def test_every_dag_is_pinned(dags):
    assert set(dags) == set(PINS)


@pytest.mark.parametrize("dag_id", sorted(PINS))
def test_a_dags_settings_as_loaded(dags, dag_id):
    dag = dags[dag_id]
    loaded = {name: getattr(dag, name) for name in PINS[dag_id]}
    assert {**loaded, "tags": set(dag.tags)} == PINS[dag_id]
    assert (dag.start_date, dag.catchup, dag.end_date, dag.max_active_tasks) == (START, False, None, 16)
    assert not dag.render_template_as_native_obj and not dag.fail_fast
    assert dag.max_consecutive_failed_dag_runs == 0
    assert dag.owner == "kafka-platform"


def dag_keywords(source: str) -> set[str]:
    """The keywords every ``DAG(...)`` call in a source spells out itself."""
    calls = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)]
    return {k.arg for c in calls if getattr(c.func, "id", None) == "DAG" for k in c.keywords if k.arg}


SHARED = {"default_args", "start_date", "catchup", "is_paused_upon_creation", "schedule"}


@pytest.mark.parametrize("path", DAGS, ids=lambda p: p.name)
def test_a_dag_takes_its_shared_settings_from_the_builder(path: Path):
    """A DAG that spells out its own owner or catchup drifts from the others unseen."""
    assert dag_keywords(path.read_text()) & SHARED == set(), f"{path.name} repeats the shared DAG settings"
