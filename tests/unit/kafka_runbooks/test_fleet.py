"""The fleet setting: which clusters the sweeps cover, read at run time, one mapped group each."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_runbooks.fleet import FleetSettingError, parse_clusters, probe_conn_id, resolve_clusters

ROOT = Path(__file__).resolve().parents[3]
FLEET_SWEEPS = ("kafka_cluster_health", "kafka_failed_broker_sweep", "kafka_connect_autorestart")


def test_first_setting_found_wins():
    assert resolve_clusters(None, None, None) == (["kafka_default"], "default")
    assert resolve_clusters(None, None, "kafka_a, kafka_b") == (
        ["kafka_a", "kafka_b"],
        "environment KAFKA_RUNBOOKS_CLUSTERS",
    )
    assert resolve_clusters(None, '["kafka_v"]', "kafka_a")[0] == ["kafka_v"]
    assert resolve_clusters(["kafka_p"], "kafka_v", "kafka_a") == (["kafka_p"], "param kafka_config_ids")
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


# tasks outside the cluster group that read no cluster (a bad setting fails there, before any cluster)
READ_NO_CLUSTER = {"kafka_cluster_health": {"health_settings"}}


@pytest.mark.parametrize("dag_id", FLEET_SWEEPS)
def test_sweeps_map_one_group_per_cluster(dags, dag_id):
    """Every task that reads a cluster sits in the ``cluster`` group mapped over the
    ``clusters`` task (so a failing cluster fails only its own instances)."""
    dag = dags[dag_id]
    group = dag.task_group_dict["cluster"]
    assert type(group).__name__ == "MappedTaskGroup"
    assert "clusters" in dag.task_dict and dag.get_task("clusters").retries == 0
    outside = {t for t in dag.task_ids if not t.startswith("cluster.")}
    # besides the fleet, only settings read from params and a Variable (no cluster) may sit outside
    assert outside == {"clusters"} | READ_NO_CLUSTER.get(dag_id, set())
    assert "kafka_config_ids" in dag.params and "kafka_config_id" not in dag.params
    assert dag.params["kafka_config_ids"] is None  # null = the deployment's setting


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
            where = write_report({"kafka_config_id": cluster, "nodes": []})
            assert where.endswith(f"/reports/metadata_errors/by_connection/{cluster}.json")
        folder = tmp_path / "reports" / "metadata_errors" / "by_connection"
        assert {json.loads(p.read_text())["kafka_config_id"] for p in folder.glob("*.json")} == {
            "kafka_a",
            "kafka_b",
        }
    finally:
        storage._STORES.clear()


def test_each_kafka_cluster_names_its_connect_clusters_in_its_connection():
    """Today's main swept one list of Connect clusters for the whole deployment, tied to no Kafka
    cluster; now each Kafka connection's extra names its own."""
    from kafka_runbooks.fleet import FleetSettingError, connect_conn_ids_of, connect_groups

    assert connect_conn_ids_of("kafka_default", {}) == ["kafka_connect_default"]
    assert connect_conn_ids_of("kafka_eu1", None) == []  # never guessed from the name
    assert connect_conn_ids_of("kafka_eu1", {"connect_conn_ids": "c1, c2,c1"}) == ["c1", "c2"]
    assert connect_conn_ids_of("kafka_default", {"connect_conn_ids": []}) == []
    with pytest.raises(FleetSettingError, match="kafka_eu1"):
        connect_conn_ids_of("kafka_eu1", {"connect_conn_ids": [3]})
    groups = connect_groups(
        ["kafka_default", "kafka_eu1", "kafka_us1", "kafka_gone"],
        {
            "kafka_default": {},
            "kafka_eu1": {"connect_conn_ids": ["c_eu", "kafka_connect_default"]},
            "kafka_us1": {"connect_conn_ids": 7},
            "kafka_gone": LookupError("The conn_id `kafka_gone` isn't defined"),
        },
    )
    by = {g["kafka_config_id"]: g for g in groups}
    assert by["kafka_default"]["connect_conn_ids"] == ["kafka_connect_default"]
    # a Connect cluster named twice is swept once, under the first; the second reports the clash
    assert by["kafka_eu1"]["connect_conn_ids"] == ["c_eu"]
    assert by["kafka_eu1"]["shared"] == {"kafka_connect_default": "kafka_default"}
    assert "must be a list" in by["kafka_us1"]["error"] and by["kafka_us1"]["connect_conn_ids"] == []
    assert "isn't defined" in by["kafka_gone"]["error"]


def test_the_connect_fleet_reads_the_kafka_connections_and_a_broken_one_fails_only_its_group(
    tmp_path, monkeypatch
):
    import json

    from kafka_runbooks import storage
    from kafka_runbooks.connect.request import build_sweep_request
    from kafka_runbooks_airflow import connect
    from kafka_runbooks_airflow.fleet import connect_fleet

    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("KAFKA_RUNBOOKS_DATA_URL", raising=False)
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_EU1",
        json.dumps({"conn_type": "generic", "extra": {"connect_conn_ids": ["c_eu"]}}),
    )
    monkeypatch.setattr(connect, "excluded_from_variable", lambda: [])
    groups = connect_fleet({"kafka_config_ids": ["kafka_eu1", "kafka_missing"]})
    assert [(g["kafka_config_id"], g["connect_conn_ids"], bool(g["error"])) for g in groups] == [
        ("kafka_eu1", ["c_eu"], False),
        ("kafka_missing", [], True),
    ]
    assert connect_fleet({"kafka_config_ids": ["kafka_eu1"], "connect_conn_ids": ["x", "y"]}) == [
        {"kafka_config_id": None, "connect_conn_ids": ["x", "y"], "error": None, "shared": {}}
    ]
    storage._STORES.clear()
    try:
        # the group of the missing connection: reported as an alert naming the Kafka cluster
        report = connect.run_autorestart_sweep(build_sweep_request({}), "r1", group=groups[1])
        assert report["kafka_config_id"] == "kafka_missing"
        assert [(a["cluster"], a["alert"]) for a in report["alerts"]] == [
            ("kafka_missing", "Connect clusters unknown")
        ]
        assert report["report_path"].endswith("/reports/connect_autorestart/by_connection/kafka_missing.json")
        # a Kafka cluster without Connect clusters: nothing to sweep, no alert
        empty = {"kafka_config_id": "kafka_x", "connect_conn_ids": [], "error": None, "shared": {}}
        assert connect.run_autorestart_sweep(build_sweep_request({}), "r1", group=empty)["alerts"] == []
        folder = tmp_path / "reports" / "connect_autorestart" / "by_connection"
        assert {json.loads(p.read_text())["kafka_config_id"] for p in folder.glob("*.json")} == {
            "kafka_missing",
            "kafka_x",
        }
    finally:
        storage._STORES.clear()


def test_a_record_written_before_the_rename_still_names_its_cluster():
    from kafka_runbooks.fleet import config_id_of

    assert config_id_of({"kafka_conn_id": "kafka_old"}) == "kafka_old"
    assert config_id_of({"kafka_config_id": "kafka_new", "kafka_conn_id": "x"}) == "kafka_new"
    assert config_id_of({}, "kafka_default") == "kafka_default"
    assert config_id_of(None, "kafka_default") == "kafka_default"


def test_an_old_param_name_is_refused_in_airflows_params_dict_too():
    """Airflow hands params as ``ParamsDict`` (a mapping, not a dict): the old cluster name in it is
    refused all the same, naming the new one (it passed silently before)."""
    from airflow.sdk.definitions.param import ParamsDict

    from kafka_runbooks.errors import BadInput
    from kafka_runbooks.fleet import refuse_renamed_params

    refuse_renamed_params(ParamsDict({"kafka_config_id": "kafka_default"}))
    with pytest.raises(BadInput, match="kafka_conn_id is now kafka_config_id"):
        refuse_renamed_params(ParamsDict({"kafka_conn_id": "kafka_dr"}))
    with pytest.raises(BadInput, match="kafka_conn_id is now kafka_config_id"):
        refuse_renamed_params({"kafka_conn_id": "kafka_dr"})
