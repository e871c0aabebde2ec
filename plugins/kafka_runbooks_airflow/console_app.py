"""The Kafka page, served by Airflow's own API server (a plugin ``fastapi_apps`` entry mounted
at ``/kafka-console``) and shown inside the UI as a navigation entry (``external_views``).

Who may see it: any logged-in Airflow user (the UI's ``_token`` cookie or a bearer
token), and only the runs and gates of the DAGs that user may read. What it shows comes
from Airflow's database (every run queued or running, each runbook's latest finished runs with
their outcome, their task states and their DAG's pause flag, gates waiting for an answer), from the runbooks' own artifacts (see
:mod:`kafka_runbooks.console`) and, read when the page loads, from each cluster of the
fleet (read-only through the admin facade, at most a few seconds, cached a few seconds:
``kafka_runbooks.console.LiveReader``; never at DAG parse time). It only reads.
"""

from __future__ import annotations

import re
from typing import Any

from airflow.api_fastapi.core_api.security import GetUserDep
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse

from kafka_runbooks.failed_broker import REASSIGNING_DAG_IDS
from kafka_runbooks.fleet import config_id_of
from kafka_runbooks_airflow.run_state import ADOPT_STATE, EXEC_STATE

URL_PREFIX = "/kafka-console"
KAFKA_DAG_PREFIX = "kafka_"
REASSIGN_DAG_ID = "kafka_failed_broker_reassignment"
# the runs the Stop button applies to: every DAG that moves replicas with the chunked executor
STOPPABLE_DAG_IDS = REASSIGNING_DAG_IDS  # every DAG that moves replicas with the chunked executor
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


def airflow_state(dag_ids: set[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """(runs, gates waiting for an answer, what the run list leaves out) of these DAGs.

    The runs are two queries: every queued or running run (:func:`active_runs`: no finished run
    can push one off, and when there are more than :data:`ACTIVE_RUNS_SHOWN` the page says how many
    and links Airflow's own list), then each runbook's latest finished ones (:func:`finished_runs`)."""
    from airflow.models.hitl import HITLDetail
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    if not dag_ids:
        return [], [], {}
    with create_session() as session:
        active, total = active_runs(session, dag_ids)
        finished = finished_runs(session, dag_ids)
        gates = session.execute(
            select(
                TaskInstance.dag_id,
                TaskInstance.run_id,
                TaskInstance.task_id,
                HITLDetail.subject,
                HITLDetail.created_at,
                HITLDetail.assignees,
            )
            .join(HITLDetail, HITLDetail.ti_id == TaskInstance.id)
            .where(TaskInstance.dag_id.in_(dag_ids), HITLDetail.responded_at.is_(None))
            .where(TaskInstance.state.notin_(["success", "failed", "skipped", "upstream_failed", "removed"]))
            .order_by(HITLDetail.created_at.desc())
            .limit(50)
        ).all()
    runs = [_run_row(r) for r in [*active, *finished]]
    return runs, [_gate_row(g) for g in gates], _not_shown(total, len(active))


def _not_shown(total: int, shown: int) -> dict[str, Any]:
    """What the page says when it holds fewer queued or running runs than there are (else nothing)."""
    if total <= shown:
        return {}
    return {
        "active_total": total,
        "active_shown": shown,
        "urls": {state: _ui_path("dag_runs") + f"?state={state}" for state in ACTIVE_STATES},
    }


def _run_row(r) -> dict[str, Any]:
    """One run as the page shows it: plain JSON, a link into Airflow's UI, and a Stop link where
    the run moves replicas."""
    return {
        "dag_id": r.dag_id,
        "run_id": r.run_id,
        "state": str(getattr(r.state, "value", r.state)),
        "start_date": r.start_date.isoformat(timespec="seconds") if r.start_date else None,
        "end_date": r.end_date.isoformat(timespec="seconds") if r.end_date else None,
        "url": _ui_path("dags", r.dag_id, "runs", r.run_id),
        **_stop_link(r.dag_id, r.run_id, r.conf),
    }


def _gate_row(g) -> dict[str, Any]:
    """One gate waiting for an answer, linked to the task's required-actions page where it is
    answered (the page itself only reads)."""
    return {
        "dag_id": g.dag_id,
        "run_id": g.run_id,
        "task_id": g.task_id,
        "subject": g.subject,
        "created_at": g.created_at.isoformat(timespec="seconds") if g.created_at else None,
        "assignees": list(g.assignees or []),
        "url": _ui_path("dags", g.dag_id, "runs", g.run_id, "tasks", g.task_id, "required_actions"),
    }


def _stop_link(dag_id: str, run_id: str, conf: Any) -> dict[str, Any]:
    """A running reassignment gets a Stop link: this app's stop page of that run (a reason and a Stop
    button that acts at once, see :func:`stop_run`). The stop runbook stays for API and CLI users."""
    if dag_id not in STOPPABLE_DAG_IDS:
        return {}
    return {"stop_url": _stop_path(dag_id, run_id), "kafka_config_id": config_id_of(conf, "kafka_default")}


def _overview(user) -> dict[str, Any]:
    from kafka_runbooks.console import overview

    runs, gates, not_shown = airflow_state(_readable_dag_ids(user))
    _add_run_facts(runs)
    return overview(runs, gates, live=live_clusters(), runs_not_shown=not_shown)


# ------------------------------------------------------------------ each run's true state

ACTIVE_STATES = ("queued", "running")
# queued and running runs the page lists; past this many it says how many more and links Airflow's list
ACTIVE_RUNS_SHOWN = 500
FINISHED_RUNS_SHOWN_H = 24  # finished runs (success, failed) stay on the page this long, with their outcome
FINISHED_PER_RUNBOOK = 5  # the latest finished runs of each runbook: one failing sweep hides no other's
_RUN_COLUMNS = ("dag_id", "run_id", "state", "start_date", "end_date", "conf")


def active_runs(session, dag_ids: set[str]) -> tuple[list[Any], int]:
    """(the queued and running runs of these DAGs, how many there are): the runs that move replicas
    (their Stop link) first, then newest first, at most :data:`ACTIVE_RUNS_SHOWN`; the count is whole."""
    from airflow.models.dagrun import DagRun
    from sqlalchemy import case, func, select

    active = (DagRun.dag_id.in_(dag_ids), DagRun.state.in_(ACTIVE_STATES))
    total = session.execute(select(func.count()).select_from(DagRun).where(*active)).scalar_one()
    rows = session.execute(
        select(*(getattr(DagRun, c) for c in _RUN_COLUMNS))
        .where(*active)
        .order_by(
            case((DagRun.dag_id.in_(STOPPABLE_DAG_IDS), 0), else_=1),
            func.coalesce(DagRun.start_date, DagRun.queued_at).desc(),
            DagRun.id.desc(),
        )
        .limit(ACTIVE_RUNS_SHOWN)
    ).all()
    return list(rows), int(total)


def finished_runs(session, dag_ids: set[str]) -> list[Any]:
    """The runs of these DAGs that ended (success or failed) within :data:`FINISHED_RUNS_SHOWN_H`
    hours: the latest :data:`FINISHED_PER_RUNBOOK` of each runbook, newest ended first."""
    from datetime import datetime, timedelta, timezone

    from airflow.models.dagrun import DagRun
    from sqlalchemy import func, select

    since = datetime.now(timezone.utc) - timedelta(hours=FINISHED_RUNS_SHOWN_H)
    rank = (
        func.row_number()
        .over(partition_by=DagRun.dag_id, order_by=(DagRun.end_date.desc(), DagRun.id.desc()))
        .label("run_rank")
    )
    ended = (
        select(*(getattr(DagRun, c) for c in _RUN_COLUMNS), rank)
        .where(
            DagRun.dag_id.in_(dag_ids),
            DagRun.state.in_(("success", "failed")),
            DagRun.end_date >= since,
        )
        .subquery()
    )
    return list(
        session.execute(
            select(*(ended.c[c] for c in _RUN_COLUMNS))
            .where(ended.c.run_rank <= FINISHED_PER_RUNBOOK)
            .order_by(ended.c.end_date.desc())
        ).all()
    )


def _add_run_facts(runs: list[dict[str, Any]]) -> None:
    """Each run's task instance states and its DAG's pause flag: what its true state is read from
    (``kafka_runbooks.console.run_status``)."""
    from airflow.models.dag import DagModel
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    if not runs:
        return
    dag_ids, run_ids = {r["dag_id"] for r in runs}, {r["run_id"] for r in runs}
    with create_session() as session:
        paused = dict(
            session.execute(
                select(DagModel.dag_id, DagModel.is_paused).where(DagModel.dag_id.in_(dag_ids))
            ).all()
        )
        rows = session.execute(
            select(
                TaskInstance.dag_id,
                TaskInstance.run_id,
                TaskInstance.task_id,
                TaskInstance.map_index,
                TaskInstance.state,
            ).where(TaskInstance.dag_id.in_(dag_ids), TaskInstance.run_id.in_(run_ids))
        ).all()
    tasks: dict[tuple[str, str], dict[str, str]] = {}
    for t in rows:
        state = str(getattr(t.state, "value", t.state)) if t.state is not None else "none"
        name = t.task_id if t.map_index < 0 else f"{t.task_id}[{t.map_index}]"  # each mapped instance
        tasks.setdefault((t.dag_id, t.run_id), {})[name] = state
    for r in runs:
        r["dag_paused"] = bool(paused.get(r["dag_id"]))
        r["tasks"] = tasks.get((r["dag_id"], r["run_id"]), {})


# ------------------------------------------------------------------ live cluster state

_live_reader = None


def live_clusters() -> list[dict[str, Any]]:
    """Each cluster of the fleet as it answers now (bounded and cached by ``LiveReader``), or why not."""
    global _live_reader
    from kafka_runbooks.console import LiveReader

    try:
        clusters = _fleet()
    except Exception as exc:  # an unusable fleet setting: the page says which and why
        return [
            {"kafka_config_id": "(fleet setting)", "error": f"{type(exc).__name__}: {exc}", "read_at": None}
        ]
    if _live_reader is None:
        _live_reader = LiveReader(_open_admin, open_probe=_open_probe)
    return [
        {**cluster, "pending_restores": _pending_restores(cluster)} for cluster in _live_reader.read(clusters)
    ]


def _pending_restores(cluster: dict[str, Any]) -> list[str] | str:
    """Replica orders an unclean recovery left changed on this cluster (the next run of the
    runbook restores them first): partition names, or why they could not be read."""
    from kafka_runbooks_airflow.unclean import pending_restores

    try:
        return sorted(pending_restores(cluster["kafka_config_id"]))
    except Exception as exc:  # the store unreadable: say so, never "none"
        return f"unknown: {type(exc).__name__}: {exc}"


def _fleet() -> list[str]:
    """The sweeps' cluster list (Variable, else environment, else kafka_default), read per page load."""
    import os

    from airflow.models.variable import Variable

    from kafka_runbooks.fleet import CLUSTERS_ENV, CLUSTERS_VARIABLE, resolve_clusters

    variable = Variable.get(CLUSTERS_VARIABLE, default_var=None)
    return resolve_clusters(None, variable, os.environ.get(CLUSTERS_ENV))[0]


def _open_admin(conn_id: str):
    """The admin facade of one cluster from its Airflow connection (the API server reads
    connections from its secrets backends and the metadata DB, not through a task's supervisor)."""
    from airflow.models.connection import Connection

    from kafka_runbooks.admin import ClusterAdmin
    from kafka_runbooks.console import LIVE_DEADLINE_S

    config = Connection.get_connection_from_secrets(conn_id).extra_dejson
    return ClusterAdmin(config, timeout_s=LIVE_DEADLINE_S)


def _open_probe(conn_id: str):
    """The cluster's broker-state probe (the restart runbook's: ``kafka_broker_probe_default`` for
    ``kafka_default``, else ``<id>_probe``), or why there is none: the page says it, never "not
    recovering"."""
    from airflow.exceptions import AirflowNotFoundException
    from airflow.models.connection import Connection

    from kafka_runbooks.console_states import BrokerStates
    from kafka_runbooks.fleet import probe_conn_id
    from kafka_runbooks.probes import probe_from_config

    probe_id = probe_conn_id(conn_id)
    try:
        return BrokerStates(probe_from_config(Connection.get_connection_from_secrets(probe_id).extra_dejson))
    except AirflowNotFoundException:
        return BrokerStates(None, f"no connection {probe_id}")
    except ValueError as exc:  # BadInput: the extras do not describe a probe
        return BrokerStates(None, f"connection {probe_id}: {exc}")


@app.get("/", response_class=HTMLResponse)
def page(user: GetUserDep) -> HTMLResponse:
    """The page itself (the UI shows it in its Kafka navigation entry)."""
    from kafka_runbooks.console import render_page

    return HTMLResponse(render_page(_overview(user)))


@app.get("/api/overview")
def api_overview(user: GetUserDep) -> JSONResponse:
    """The same figures as JSON, for scripts and tests."""
    return JSONResponse(_overview(user))


# ------------------------------------------------------------------ Stop


def _stop_path(dag_id: str, run_id: str) -> str:
    """This app's stop page of one run, under Airflow's base URL."""
    return _ui_path("kafka-console", "runs", dag_id, run_id, "stop")


def stop_refusal(
    dag_id: str, run_state: str | None, may_edit_runs: bool, approvers: list[str] | None, user_id: str
) -> str | None:
    """Why this user may not stop this run (None: they may). The same people as the gate: those who
    may edit the DAG's runs and, when the deployment names approvers, only them."""
    if dag_id not in STOPPABLE_DAG_IDS:
        return f"only {', '.join(STOPPABLE_DAG_IDS)} runs are stopped here"
    if run_state is None:
        return "no such run"
    if not may_edit_runs:
        return f"you may not edit the runs of {dag_id}"
    if approvers is not None and user_id not in approvers:
        return f"only the approvers of its gate may stop it ({', '.join(approvers)})"
    if run_state not in ("queued", "running"):
        return f"the run is {run_state}: nothing to stop"
    return None


def _run_of(dag_id: str, run_id: str) -> tuple[str | None, dict[str, Any]]:
    """(state, conf) of a run from Airflow's database; (None, {}) when there is none."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        row = session.execute(
            select(DagRun.state, DagRun.conf).where(DagRun.dag_id == dag_id, DagRun.run_id == run_id)
        ).first()
    if row is None:
        return None, {}
    return str(getattr(row.state, "value", row.state)), dict(row.conf or {})


def _refusal_for(user, dag_id: str, run_id: str) -> tuple[str | None, dict[str, Any]]:
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails

    from kafka_runbooks_airflow.approvers import assigned_approvers

    state, conf = _run_of(dag_id, run_id)
    may_edit = get_auth_manager().is_authorized_dag(
        method="PUT", access_entity=DagAccessEntity.RUN, details=DagDetails(id=dag_id), user=user
    )
    approvers = [a["id"] for a in assigned_approvers() or []] or None
    return stop_refusal(dag_id, state, may_edit, approvers, str(user.get_id())), conf


# what each of a run's state files holds, in the words of the Stop page
STATE_LABELS = {ADOPT_STATE: "moves adopted from an earlier run", EXEC_STATE: "this run's plan"}


def _stop_page(title: str, body: str, status: int = 200) -> HTMLResponse:
    """A page of the Stop in the Kafka page's look (its stylesheet), with the way back to it."""
    from html import escape

    from kafka_runbooks.console import STYLE

    return HTMLResponse(
        f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
        f"<style>{STYLE}</style></head><body><h1>{escape(title)}</h1>{body}"
        f"<p><a href='{escape(_ui_path('plugin', 'kafka'))}'>Back to the Kafka page</a></p></body></html>",
        status_code=status,
    )


def stop_result_html(result: dict[str, Any]) -> tuple[str, str]:
    """(title, body) of a Stop's answer: the headline and each state's line, both from the stop's
    own result (``stop_run_now``), so that they can never disagree."""
    from html import escape

    lines = "".join(
        f"<li class='ending' data-state='{escape(name)}'>{escape(STATE_LABELS.get(name, name))}: "
        f"{escape(str(r.get('line') or r.get('taken_over') or r))}</li>"
        for name, r in result["states"].items()
    )
    request = result["request"]
    body = f"<p>{escape(request['by'])}: {escape(request['reason'])}</p>"
    return result["headline"], body + (f"<ul>{lines}</ul>" if lines else "")


@app.get("/runs/{dag_id}/{run_id}/stop", response_class=HTMLResponse)
def stop_form(dag_id: str, run_id: str, user: GetUserDep) -> HTMLResponse:
    """The run's Stop button, with the reason it needs (recorded with the stop)."""
    from html import escape

    refusal, conf = _refusal_for(user, dag_id, run_id)
    if refusal:
        return _stop_page("Cannot stop this run", f"<p class='refused'>{escape(refusal)}</p>", 403)
    conn = escape(str(config_id_of(conf, "kafka_default")))
    return _stop_page(
        f"Stop {run_id}",
        f"<p>Cancels what this run has in flight on <b>{conn}</b> (only its own reassignments; the "
        "partitions go back to their replicas before the move), removes its throttles, and ends the run "
        "saying what moved, what was cancelled and what never started. The chunks done stay done.</p>"
        f"<form method='post' action='{escape(_stop_path(dag_id, run_id))}'>"
        "<label>Reason <input id='reason' name='reason' required minlength='1' size='60'></label> "
        "<button id='stop' type='submit'>Stop</button></form>",
    )


@app.post("/runs/{dag_id}/{run_id}/stop")
async def stop_run(dag_id: str, run_id: str, request: Request, user: GetUserDep):
    """Record the stop request with the user and stop the run now (``failed_broker.stop_run_now``)."""
    from html import escape
    from urllib.parse import urlparse

    from starlette.concurrency import run_in_threadpool

    origin = request.headers.get("origin")
    if origin and origin != "null" and urlparse(origin).netloc != request.headers.get("host"):
        return _stop_page("Refused", "<p class='refused'>a stop from another site is refused</p>", 403)
    form = await request.form() if "form" in request.headers.get("content-type", "") else await request.json()
    reason = str(form.get("reason") or "").strip()
    refusal, conf = _refusal_for(user, dag_id, run_id)
    if refusal or not reason:
        why = refusal or "a reason is required (it is recorded with the stop)"
        return _stop_page("Not stopped", f"<p class='refused'>{escape(why)}</p>", 403 if refusal else 400)
    from kafka_runbooks_airflow.failed_broker import stop_run_now

    conn = str(config_id_of(conf, "kafka_default"))  # the run's own cluster, never the caller's
    result = await run_in_threadpool(stop_run_now, dag_id, run_id, conn, str(user.get_name()), reason)
    if "json" in request.headers.get("accept", ""):
        return JSONResponse(result)
    return _stop_page(*stop_result_html(result))


# ------------------------------------------------------------------ one decision record

RECORD_ID = re.compile(r"[0-9a-f]{12}")  # decisions.DecisionRecord.record_id


def readable_decision(record_id: str, readable: set[str]) -> dict[str, Any] | None:
    """The journal's record with this id when its DAG is one the user may read; None otherwise
    (an unknown id and a record of a DAG the user may not read look the same)."""
    from kafka_runbooks import decision_journal

    if not RECORD_ID.fullmatch(record_id):
        return None
    record = decision_journal.find(record_id)
    if record is None or record.get("dag_id") not in readable:
        return None
    return record


@app.get("/decisions/{record_id}")
def decision(record_id: str, request: Request, user: GetUserDep):
    """One decision record from the journal, facts in full: what a DECISION line's
    ``(decision <id>)`` names. Only records of DAGs the user may read (like the page)."""
    from html import escape

    from kafka_runbooks.console import render_decision

    record = readable_decision(record_id, _readable_dag_ids(user))
    wants_json = "json" in request.headers.get("accept", "")
    if record is None:
        why = f"no decision record {record_id} of a runbook you may read (the journal keeps the last few MiB)"
        if wants_json:
            return JSONResponse({"detail": why}, status_code=404)
        return HTMLResponse(f"<!doctype html><p class='refused'>{escape(why)}</p>", status_code=404)
    return JSONResponse(record) if wants_json else HTMLResponse(render_decision(record))
