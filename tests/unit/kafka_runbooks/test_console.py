"""The Kafka page's content, from real artifact files in a data dir (the browser test
checks the same page served by the real Airflow)."""

from __future__ import annotations

import json
import re

from kafka_runbooks import console, journal


def _report(conn: str, offline: int) -> dict:
    brokers = [
        {
            "broker_id": 1,
            "rack": "a",
            "alive": True,
            "fenced": False,
            "replica_count": 77,
            "leader_count": 21,
            "size_bytes": 10 << 20,
        },
        {
            "broker_id": 2,
            "rack": "b",
            "alive": True,
            "fenced": False,
            "replica_count": 78,
            "leader_count": 31,
            "size_bytes": 12 << 20,
        },
        {
            "broker_id": 4,
            "rack": "c",
            "alive": False,
            "fenced": True,
            "replica_count": 51,
            "leader_count": 0,
            "size_bytes": None,
        },
    ]
    return {
        "kafka_conn_id": conn,
        "cluster_id": "c-1",
        "taken_at_ms": 1_795_000_000_000,
        "partitions": 103,
        "counts": {"offline": offline, "under_min_isr": 2, "at_min_isr": 0, "under_replicated": 51},
        "brokers": brokers,
        "imbalance": {
            "leaders": {"imbalanced": True, "threshold_pct": 10.0, "mean": 26.0, "min": 21, "max": 31},
            "replicas": {"imbalanced": False, "threshold_pct": 10.0, "mean": 77.5, "min": 77, "max": 78},
        },
    }


def test_the_page_shows_health_per_connection_runs_with_progress_gates_and_decisions(tmp_path, monkeypatch):
    by_conn = tmp_path / "reports" / "cluster_health" / "by_connection"
    by_conn.mkdir(parents=True)
    (by_conn / "kafka_default.json").write_text(json.dumps(_report("kafka_default", 3)))
    (by_conn / "kafka_dr.json").write_text(json.dumps(_report("kafka_dr", 0)))
    run_dir = tmp_path / "reassign" / "kafka_failed_broker_reassignment" / "manual__2026-11-23T15_00_00_00_00"
    run_dir.mkdir(parents=True)
    (run_dir / "progress.json").write_text(
        json.dumps({"line": "chunk 3 of 8 | 41% bytes (4.2 GiB of 10.3 GiB)", "percent_bytes": 41.0})
    )
    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("AIRFLOW_CTX_DAG_ID", "kafka_unclean_recovery")
    monkeypatch.setenv("AIRFLOW_CTX_TASK_ID", "plan_recovery")
    from kafka_runbooks import decisions

    decisions.record("validate", "refuse the run: nothing was done", "partitions_json <script> is not JSON")
    runs = [
        {
            "dag_id": "kafka_failed_broker_reassignment",
            "run_id": "manual__2026-11-23T15:00:00+00:00",
            "state": "running",
            "start_date": None,
            "url": "/dags/x/runs/y",
            "stop_url": "/dags/kafka_reassignment_stop",
            "kafka_conn_id": "kafka_default",
        },
        {
            "dag_id": "kafka_broker_restart",
            "run_id": "r",
            "state": "running",
            "start_date": None,
            "url": "/dags/kafka_broker_restart/runs/r",
        },
    ]
    gates = [
        {
            "dag_id": "kafka_broker_restart",
            "run_id": "r",
            "task_id": "approval_gate",
            "subject": "Restart Kafka nodes [2]?",
            "created_at": None,
            "url": "/dags/kafka_broker_restart/runs/r/tasks/approval_gate/required_actions",
        }
    ]
    view = console.overview(runs, gates)
    page = console.render_page(view)

    assert [h["kafka_conn_id"] for h in view["health"]] == ["kafka_default", "kafka_dr"]
    default = page[page.index("data-conn='kafka_default'") : page.index("data-conn='kafka_dr'")]
    assert re.search(r"data-count='offline'[^>]*><b>3</b>", default)
    assert re.search(r"data-count='under_replicated'[^>]*><b>51</b>", default)
    assert "data-imbalance='leaders'><b>imbalanced</b>leaders per broker 21 to 31" in default
    assert default.count("<rect") == 9 and "broker 4 (down)" in default  # 3 brokers x 3 bars
    assert "chunk 3 of 8 | 41% bytes" in page and "width:41%" in page
    # a running reassignment (only it) has a Stop link to the stop runbook, opened in the whole window
    assert page.count("class='stop'") == 1
    assert "<a class='stop' data-ui='1' target='_top' href='/dags/kafka_reassignment_stop'" in page
    assert "required_actions" in page and "Restart Kafka nodes [2]?" in page
    assert (
        "refuse the run: nothing was done" in page
        and "&lt;script&gt;" in page
        and page.count("<script>") == 1
    )
    assert view["decisions"][0]["dag_id"] == "kafka_unclean_recovery"


def test_no_reports_yet_and_the_journal_only_inside_a_task(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("AIRFLOW_CTX_DAG_ID", raising=False)
    assert journal.append({"step": "x"}) is False and journal.last() == []
    page = console.render_page(console.overview([], []))
    assert "id='no-health'" in page and "id='no-runs'" in page and "id='no-gates'" in page


def test_each_section_is_its_table_under_its_heading_or_its_empty_sentence():
    assert console._decisions([]) == "<h2>Last decisions</h2><p id='no-decisions'>None recorded yet.</p>"
    assert console._gates([]) == "<h2>Gates waiting for an answer</h2><p id='no-gates'>None.</p>"
    runs = console._runs([{"dag_id": "d", "run_id": "r", "state": "running", "url": "/u"}])
    assert runs.startswith(
        "<h2>Runbooks running now</h2><table id='runs'><tr><th>runbook</th><th>run</th><th>state</th>"
        "<th>started</th><th>progress</th><th></th></tr><tr class='run' data-dag='d'>"
    )
    assert runs.endswith("</tr></table>") and runs.count("<tr") == 2
