"""The fleet setting: which clusters the sweeps cover, read at run time, one mapped group each."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_runbooks.fleet import FleetSettingError, parse_clusters, probe_conn_id, resolve_clusters

ROOT = Path(__file__).resolve().parents[2]
FLEET_SWEEPS = ("kafka_cluster_health", "kafka_failed_broker_sweep")


def test_first_setting_found_wins():
    assert resolve_clusters(None, None, None) == (["kafka_default"], "default")
    assert resolve_clusters(None, None, "kafka_a, kafka_b") == (
        ["kafka_a", "kafka_b"],
        "environment KAFKA_RUNBOOKS_CLUSTERS",
    )
    assert resolve_clusters(None, '["kafka_v"]', "kafka_a")[0] == ["kafka_v"]
    assert resolve_clusters(["kafka_p"], "kafka_v", "kafka_a") == (["kafka_p"], "param kafka_conn_ids")
    assert resolve_clusters([], "", "kafka_a")[0] == ["kafka_a"]  # empty = not set


def test_order_kept_duplicates_dropped():
    assert parse_clusters("b,a,,b , a", "x") == ["b", "a"]


@pytest.mark.parametrize(
    "raw, message",
    [
        (",, ,", "names no cluster"),
        ("[1, 2]", "is not a connection id"),
        ("[not json", "not a valid JSON list"),
        ("kafka a", "is not an Airflow connection id"),
        ('{"a": 1}', "is not an Airflow connection id"),
    ],
)
def test_bad_settings_are_refused_with_their_source(raw, message):
    with pytest.raises(FleetSettingError, match=message) as err:
        resolve_clusters(None, raw, None)
    assert "Variable kafka_runbooks_clusters" in str(err.value)


def test_companion_connections_follow_the_cluster_id():
    assert probe_conn_id("kafka_default") == "kafka_broker_probe_default"
    assert probe_conn_id("kafka_eu1") == "kafka_eu1_probe"


@pytest.fixture(scope="module")
def dags():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags"), safe_mode=False)
    assert bag.import_errors == {}
    return bag.dags


@pytest.mark.parametrize("dag_id", FLEET_SWEEPS)
def test_sweeps_map_one_group_per_cluster(dags, dag_id):
    """Every task that reads a cluster sits in the ``cluster`` group mapped over the
    ``clusters`` task (so a failing cluster fails only its own instances)."""
    dag = dags[dag_id]
    group = dag.task_group_dict["cluster"]
    assert type(group).__name__ == "MappedTaskGroup"
    assert "clusters" in dag.task_dict and dag.get_task("clusters").retries == 0
    outside = {t for t in dag.task_ids if not t.startswith("cluster.")}
    assert outside == {"clusters"}
    assert "kafka_conn_ids" in dag.params and "kafka_conn_id" not in dag.params
    assert dag.params["kafka_conn_ids"] is None  # null = the deployment's setting


def test_metadata_error_reports_are_kept_per_cluster(tmp_path, monkeypatch):
    """Runs for two clusters each leave their own latest report (before: one latest.json,
    the last cluster's, overwrote the other's)."""
    import json

    from kafka_runbooks import storage
    from kafka_runbooks.metadata_errors.sweep import write_report

    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("KAFKA_RUNBOOKS_DATA_URL", raising=False)
    storage._STORES.clear()
    try:
        for cluster in ("kafka_a", "kafka_b"):
            where = write_report({"kafka_conn_id": cluster, "nodes": []})
            assert where.endswith(f"/reports/metadata_errors/by_connection/{cluster}.json")
        folder = tmp_path / "reports" / "metadata_errors" / "by_connection"
        assert {json.loads(p.read_text())["kafka_conn_id"] for p in folder.glob("*.json")} == {
            "kafka_a",
            "kafka_b",
        }
    finally:
        storage._STORES.clear()
