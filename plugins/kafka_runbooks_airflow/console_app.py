"""The Kafka page, served by Airflow's own API server (a plugin ``fastapi_apps`` entry mounted
at ``/kafka-console``) and shown inside the UI as a navigation entry (``external_views``).

Who may see it: any logged-in Airflow user (the UI's ``_token`` cookie or a bearer
token), and only the runs and gates of the DAGs that user may read. What it shows comes
from Airflow's database (runs in progress, gates waiting for an answer) and from the
runbooks' own artifacts (see :mod:`kafka_runbooks.console`). It only reads.
"""

from __future__ import annotations

from typing import Any

from airflow.api_fastapi.core_api.security import GetUserDep
from fastapi import FastAPI
from fastapi.responses import HTMLResponse, JSONResponse

URL_PREFIX = "/kafka-console"
KAFKA_DAG_PREFIX = "kafka_"
REASSIGN_DAG_ID = "kafka_failed_broker_reassignment"
STOP_DAG_ID = "kafka_reassignment_stop"

app = FastAPI(title="Kafka runbooks console", docs_url=None, redoc_url=None, openapi_url=None)


def _readable_dag_ids(user) -> set[str]:
    from airflow.api_fastapi.app import get_auth_manager

    return {d for d in get_auth_manager().get_authorized_dag_ids(user=user) if d.startswith(KAFKA_DAG_PREFIX)}


def _ui_path(*parts: str) -> str:
    """A path of Airflow's UI under its base URL (links on the page open in the whole window)."""
    from urllib.parse import quote, urlparse

    from airflow.configuration import conf

    root = urlparse(conf.get("api", "base_url", fallback="/") or "/").path.rstrip("/")
    return root + "/" + "/".join(quote(p, safe="") for p in parts)


def airflow_state(dag_ids: set[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(runs queued or running, gates waiting for an answer) of these DAGs, newest first."""
    from airflow.models.dagrun import DagRun
    from airflow.models.hitl import HITLDetail
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    if not dag_ids:
        return [], []
    with create_session() as session:
        runs = session.execute(
            select(DagRun.dag_id, DagRun.run_id, DagRun.state, DagRun.start_date, DagRun.conf)
            .where(DagRun.dag_id.in_(dag_ids), DagRun.state.in_(["queued", "running"]))
            .order_by(DagRun.start_date.desc())
            .limit(50)
        ).all()
        gates = session.execute(
            select(
                TaskInstance.dag_id,
                TaskInstance.run_id,
                TaskInstance.task_id,
                HITLDetail.subject,
                HITLDetail.created_at,
            )
            .join(HITLDetail, HITLDetail.ti_id == TaskInstance.id)
            .where(TaskInstance.dag_id.in_(dag_ids), HITLDetail.responded_at.is_(None))
            .where(TaskInstance.state.notin_(["success", "failed", "skipped", "upstream_failed", "removed"]))
            .order_by(HITLDetail.created_at.desc())
            .limit(50)
        ).all()
    return (
        [
            {
                "dag_id": r.dag_id,
                "run_id": r.run_id,
                "state": str(getattr(r.state, "value", r.state)),
                "start_date": r.start_date.isoformat(timespec="seconds") if r.start_date else None,
                "url": _ui_path("dags", r.dag_id, "runs", r.run_id),
                **_stop_link(r.dag_id, r.conf, dag_ids),
            }
            for r in runs
        ],
        [
            {
                "dag_id": g.dag_id,
                "run_id": g.run_id,
                "task_id": g.task_id,
                "subject": g.subject,
                "created_at": g.created_at.isoformat(timespec="seconds") if g.created_at else None,
                "url": _ui_path("dags", g.dag_id, "runs", g.run_id, "tasks", g.task_id, "required_actions"),
            }
            for g in gates
        ],
    )


def _stop_link(dag_id: str, conf: Any, dag_ids: set[str]) -> dict[str, Any]:
    """A running reassignment gets a Stop link: the stop runbook's page, where Trigger opens its form
    (Airflow 3.3 has no URL of the form itself). Only for users who may see that runbook."""
    if dag_id != REASSIGN_DAG_ID or STOP_DAG_ID not in dag_ids:
        return {}
    conn = (conf or {}).get("kafka_conn_id") if isinstance(conf, dict) else None
    return {"stop_url": _ui_path("dags", STOP_DAG_ID), "kafka_conn_id": conn or "kafka_default"}


def _overview(user) -> dict[str, Any]:
    from kafka_runbooks.console import overview

    runs, gates = airflow_state(_readable_dag_ids(user))
    return overview(runs, gates)


@app.get("/", response_class=HTMLResponse)
def page(user: GetUserDep) -> HTMLResponse:
    """The page itself (the UI shows it in its Kafka navigation entry)."""
    from kafka_runbooks.console import render_page

    return HTMLResponse(render_page(_overview(user)))


@app.get("/api/overview")
def api_overview(user: GetUserDep) -> JSONResponse:
    """The same figures as JSON, for scripts and tests."""
    return JSONResponse(_overview(user))
