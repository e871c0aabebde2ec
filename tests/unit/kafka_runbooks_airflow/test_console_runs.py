"""The Kafka page's run list against Airflow's own metadata tables (issue #37, 3): a day of a failing
sweep never pushes a running run (and its Stop link) off the page, more queued or running runs than
the page holds are counted and linked to Airflow's list, and a run that succeeded stays listed with
its outcome.

The database is Airflow's: every table of its ORM models (``Base.metadata``, what ``airflow db
migrate`` builds) created in a SQLite file, the runs written as ``DagRun`` rows, the app's queries
run through ``airflow.utils.session.create_session`` against it. The page is asked through FastAPI's
test client; Airflow's auth manager needs a running API server, so the DAGs the user may read are
given to the app here, and the fleet's live read is left out (no cluster in a unit test).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from fastapi.testclient import TestClient

from kafka_runbooks import decisions
from kafka_runbooks_airflow import console_app

SWEEP, DECOMMISSION, HEAL = (
    "kafka_failed_broker_sweep",
    "kafka_broker_decommission",
    "kafka_failed_broker_reassignment",
)
NOW = datetime.now(timezone.utc)


@pytest.fixture
def airflow_db(tmp_path, monkeypatch):
    """Airflow's metadata tables in a SQLite file, and the sessions the app opens bound to it."""
    import airflow.models
    from airflow import settings
    from airflow.models.base import Base
    from sqlalchemy import create_engine
    from sqlalchemy.orm import scoped_session, sessionmaker

    airflow.models.import_all_models()
    engine = create_engine(f"sqlite:///{tmp_path / 'airflow.db'}")
    Base.metadata.create_all(engine)
    monkeypatch.setattr(
        settings, "Session", scoped_session(sessionmaker(bind=engine, expire_on_commit=False))
    )
    yield settings.Session
    settings.Session.remove()
    engine.dispose()


def add_run(session_factory, dag_id: str, run_id: str, state: str, started: datetime, ended=None, conf=None):
    """One DagRun row as the scheduler leaves it (queued ones have no start date yet)."""
    from airflow.models.dagrun import DagRun

    run = DagRun(
        dag_id=dag_id,
        run_id=run_id,
        run_type="manual",
        state=state,
        queued_at=started,
        start_date=None if state == "queued" else started,
        run_after=started,
        conf=conf or {},
    )
    run.end_date = ended
    session = session_factory()
    session.add(run)
    session.commit()


@pytest.fixture
def page(tmp_path, monkeypatch):
    """The app for a user who may read every runbook, the data store a local folder."""
    from airflow.api_fastapi.core_api.security import get_user

    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("KAFKA_RUNBOOKS_DATA_URL", raising=False)
    monkeypatch.setattr(console_app, "_readable_dag_ids", lambda user: {SWEEP, DECOMMISSION, HEAL})
    monkeypatch.setattr(console_app, "live_clusters", lambda: [])
    console_app.app.dependency_overrides[get_user] = lambda: object()
    yield TestClient(console_app.app)
    console_app.app.dependency_overrides.clear()


def a_day_of_a_failing_sweep(db) -> None:
    """A decommission running since this morning, a heal that worked, then a sweep failing every 5 min."""
    add_run(
        db, DECOMMISSION, "manual__drain", "running", NOW - timedelta(hours=20), conf={"kafka_config_id": "k"}
    )
    add_run(db, HEAL, "manual__heal", "success", NOW - timedelta(hours=19), NOW - timedelta(hours=18))
    for n in range(240):
        started = NOW - timedelta(hours=18) + timedelta(minutes=4 * n)
        add_run(db, SWEEP, f"scheduled__{n:03d}", "failed", started, started + timedelta(minutes=1))


def test_a_day_of_a_failing_sweep_hides_neither_a_running_run_nor_a_heal_that_worked(airflow_db, page):
    a_day_of_a_failing_sweep(airflow_db)
    view = page.get("/api/overview").json()
    by_id = {r["run_id"]: r for r in view["runs"]}
    drain = by_id["manual__drain"]
    assert drain["state"] == "running" and drain["stop_url"].endswith(
        "/runs/kafka_broker_decommission/manual__drain/stop"
    )
    assert by_id["manual__heal"]["state"] == "success" and by_id["manual__heal"]["status"] == "succeeded"
    sweeps = [r for r in view["runs"] if r["dag_id"] == SWEEP]
    assert len(sweeps) == console_app.FINISHED_PER_RUNBOOK and sweeps[0]["run_id"] == "scheduled__239"
    assert view["runs"][0]["run_id"] == "manual__drain"  # in progress first, then the finished ones
    assert view["runs_not_shown"] == {}
    html = page.get("/").text
    assert "data-dag='kafka_broker_decommission'" in html and "class='stop'" in html


def test_more_queued_or_running_runs_than_the_page_holds_are_counted_and_linked(
    airflow_db, page, monkeypatch
):
    monkeypatch.setattr(console_app, "ACTIVE_RUNS_SHOWN", 3, raising=False)
    for n in range(5):  # a paused sweep's queue: newer than the decommission
        add_run(airflow_db, SWEEP, f"scheduled__{n}", "queued", NOW - timedelta(minutes=10 - n))
    add_run(airflow_db, DECOMMISSION, "manual__drain", "running", NOW - timedelta(hours=3))
    view = page.get("/api/overview").json()
    assert [r["run_id"] for r in view["runs"]] == ["manual__drain", "scheduled__4", "scheduled__3"]
    not_shown = view["runs_not_shown"]
    assert (not_shown["active_total"], not_shown["active_shown"]) == (6, 3)
    assert not_shown["urls"]["queued"].endswith("/dag_runs?state=queued")
    html = page.get("/").text
    assert "6 runs are queued or running; this page lists 3 of them" in html
    assert "/dag_runs?state=running" in html


def test_a_run_that_succeeded_is_listed_with_its_outcome(airflow_db, page, monkeypatch):
    add_run(airflow_db, HEAL, "manual__heal", "success", NOW - timedelta(hours=2), NOW - timedelta(hours=1))
    add_run(airflow_db, HEAL, "manual__old", "success", NOW - timedelta(days=3), NOW - timedelta(days=2))
    monkeypatch.setenv("AIRFLOW_CTX_DAG_ID", HEAL)
    monkeypatch.setenv("AIRFLOW_CTX_DAG_RUN_ID", "manual__heal")
    monkeypatch.setenv("AIRFLOW_CTX_TASK_ID", "verify_result")
    decisions.record("verify", "healed", "no partition names broker 4, every partition in sync")
    view = page.get("/api/overview").json()
    [run] = view["runs"]  # a run that ended days ago is Airflow's list's, not the page's
    assert (run["run_id"], run["status"]) == ("manual__heal", "succeeded")
    assert run["why"] == "verify: healed because no partition names broker 4, every partition in sync"
    assert run["end_date"] and "stop_url" in run and "class='stop'" not in page.get("/").text
