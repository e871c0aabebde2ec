"""Where the failed-broker sweep's settings come from: params > Variable > env > defaults."""

from __future__ import annotations

import json

import pytest

from kafka_runbooks_airflow.failed_broker import SWEEP_DEFAULTS, sweep_settings


def test_defaults_then_env_then_variable_then_params(monkeypatch):
    assert sweep_settings({}, None) == SWEEP_DEFAULTS
    assert SWEEP_DEFAULTS["failure_threshold_minutes"] == 30 and SWEEP_DEFAULTS["require_approval"] is True
    monkeypatch.setenv("KAFKA_RUNBOOKS_FAILED_BROKER_FAILURE_THRESHOLD_MINUTES", "-1")
    monkeypatch.setenv("KAFKA_RUNBOOKS_FAILED_BROKER_THROTTLE_BYTES_PER_SEC", "1000")
    got = sweep_settings({}, None)
    assert got["failure_threshold_minutes"] == -1 and got["throttle_bytes_per_sec"] == 1000
    variable = json.dumps({"failure_threshold_minutes": 60, "alert_after_minutes": 20})
    got = sweep_settings({}, variable)
    assert got["failure_threshold_minutes"] == 60 and got["alert_after_minutes"] == 20
    assert got["throttle_bytes_per_sec"] == 1000
    got = sweep_settings({"failure_threshold_minutes": 0.25, "alert_after_minutes": None}, variable)
    assert got["failure_threshold_minutes"] == 0.25 and got["alert_after_minutes"] == 20


def test_a_bad_variable_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown keys"):
        sweep_settings({}, json.dumps({"failure_threshold": 5}))
    with pytest.raises(ValueError, match="must be a JSON object"):
        sweep_settings({}, "[1]")


def test_a_sweep_set_to_start_ungated_runs_is_refused_unless_the_deployment_allows_them(
    monkeypatch, tmp_path
):
    """Who may remove the reassignment's gate is the deployment's decision, also for the sweep."""
    from airflow.sdk import Variable
    from airflow.sdk.exceptions import AirflowFailException

    from kafka_runbooks import approval
    from kafka_runbooks_airflow import failed_broker as reassign

    variables = {reassign.SWEEP_VARIABLE: json.dumps({"require_approval": False})}
    monkeypatch.setattr(Variable, "get", staticmethod(lambda key, default=None: variables.get(key, default)))
    monkeypatch.delenv(approval.ALLOW_UNGATED_ENV, raising=False)
    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))

    class ClusterRead(Exception):
        pass

    def no_cluster(**kwargs):
        raise ClusterRead("the sweep went on to read the cluster")

    monkeypatch.setattr("kafka_runbooks_airflow.hooks.kafka_admin.KafkaAdminHook", no_cluster)
    params = {"kafka_config_id": "kafka_default"}
    # the sweep task reads its settings first (checked_sweep_settings), then hands them to run_sweep
    with pytest.raises(AirflowFailException, match="require_approval=false is not allowed"):
        reassign.checked_sweep_settings(params)
    variables[approval.ALLOW_UNGATED_VARIABLE] = "true"  # allowed: it goes on (here: to the cluster)
    with pytest.raises(ClusterRead):
        reassign.run_sweep(reassign.checked_sweep_settings(params), "kafka_default", "scheduled__x", ti=None)


def test_the_sweeps_thresholds_and_sizes_take_units_like_the_reassignments_form():
    """'2h' / '90s' / minutes, 'off' or -1; '50 MiB' / bytes: the sweep passes bytes on (issue #24.4)."""
    from kafka_runbooks.failed_broker.sweep import sweep_sizes, sweep_thresholds

    settings = sweep_settings(
        {
            "alert_after_minutes": "off",
            "failure_threshold_minutes": "2h",
            "retrigger_after_minutes": "90s",
            "max_bytes_per_chunk": "512MiB",
            "throttle_bytes_per_sec": "50 MiB",
        },
        None,
    )
    thresholds = sweep_thresholds(settings)
    assert (thresholds.alert_after_s, thresholds.failure_threshold_s, thresholds.retrigger_after_s) == (
        -1.0,
        7200.0,
        90.0,
    )
    assert sweep_sizes(settings) == {"max_bytes_per_chunk": 512 << 20, "throttle_bytes_per_sec": 50 << 20}
    plain = sweep_settings({}, None)  # the defaults: minutes and bytes, as before
    assert sweep_thresholds(plain).failure_threshold_s == 1800.0
    assert sweep_sizes(plain) == {"max_bytes_per_chunk": 1 << 30, "throttle_bytes_per_sec": 50 << 20}


def test_a_bad_sweep_size_fails_the_sweep_before_it_reads_the_cluster(monkeypatch):
    from airflow.sdk import Variable

    from kafka_runbooks.units import SizeError
    from kafka_runbooks_airflow import failed_broker as reassign

    monkeypatch.setattr(Variable, "get", staticmethod(lambda key, default=None: default))

    def no_cluster(**kwargs):
        raise AssertionError("the sweep went on to read the cluster")

    monkeypatch.setattr("kafka_runbooks_airflow.hooks.kafka_admin.KafkaAdminHook", no_cluster)
    with pytest.raises(SizeError, match="throttle_bytes_per_sec must be a size such as '1 GiB'"):
        settings = reassign.checked_sweep_settings({"throttle_bytes_per_sec": "50 Mib/s"})
        reassign.run_sweep(settings, "kafka_default", "scheduled__x", ti=None)


class _Sweep:
    """The sweep's glue with the cluster reads answered from ClusterStates built here (the real
    DescribeLogDirs read is tests/integration/test_health_quorum_log_dirs.py's)."""

    def __init__(self, monkeypatch, tmp_path, variable: dict | None = None) -> None:
        from airflow.sdk import Variable

        from kafka_runbooks_airflow import failed_broker

        self.glue, self.states, self.asked = failed_broker, [], []
        monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
        monkeypatch.delenv("KAFKA_RUNBOOKS_DATA_URL", raising=False)
        values = {failed_broker.SWEEP_VARIABLE: json.dumps(variable)} if variable else {}
        monkeypatch.setattr(Variable, "get", staticmethod(lambda key, default=None: values.get(key, default)))
        sweep = self

        class Admin:  # the ClusterAdmin calls the sweep makes, answered from the built state
            def read_state(self, include_log_dirs=True):
                assert not include_log_dirs, "every registered broker would be asked, the dead too"
                sweep.state = sweep.states.pop(0)
                return sweep.state

            def describe_log_dir_states(self, broker_ids):
                sweep.asked.append(broker_ids)
                return sweep.state.log_dir_states, sweep.state.log_dir_errors

            def close(self):
                pass

        class Hook:
            def __init__(self, kafka_config_id):
                self.admin = Admin()

        monkeypatch.setattr("kafka_runbooks_airflow.hooks.kafka_admin.KafkaAdminHook", Hook)

    def run(self, state, **params) -> dict:
        class TI:  # no run of any reassigning DAG exists
            def get_dagrun_state(self, dag_id, run_id):
                raise LookupError(f"no run {dag_id}/{run_id}")

        self.states.append(state)
        settings = self.glue.checked_sweep_settings(params)  # as the sweep task reads them
        return self.glue.run_sweep(settings, "kafka_a", "scheduled__x", TI())


def test_the_sweep_reads_log_dirs_and_alerts_only_unless_start_log_dir_failure_is_on(monkeypatch, tmp_path):
    """A live broker's offline log dir past the threshold (issue #28): alert only by default; with the
    setting on (Variable, env or params, as every sweep setting), the run and its conf."""
    from tests.unit.kafka_runbooks.failed_broker.test_offline_dirs import D2, cluster

    assert SWEEP_DEFAULTS["start_log_dir_failure"] is False
    sweep = _Sweep(monkeypatch, tmp_path, {"failure_threshold_minutes": 0, "alert_after_minutes": 0})
    out = sweep.run(cluster({1: (D2,)}))
    assert sweep.asked == [[1, 2, 3]]  # every available broker's DescribeLogDirs is read
    assert out["log_dirs"]["due"] == [1] and out["log_dirs"]["alerts"] == [f"1:{D2}"]
    assert out["log_dir_trigger"] is False and out["trigger"] is False
    out = sweep.run(cluster({1: (D2,)}), start_log_dir_failure=True)
    assert out["log_dir_trigger"] is True and out["log_dir_run_id"] == "sweep__kafka_a__scheduled__x"
    assert out["log_dir_conf"] == {
        "broker_id": 1,
        "log_dir": D2,
        "mode": "move",
        "receivers": "all",
        "max_partitions_per_chunk": 50,
        "max_bytes_per_chunk": 1 << 30,
        "throttle_bytes_per_sec": 50 << 20,
        "require_approval": True,
        "elect_preferred_leaders": True,
        "dry_run": False,
        "kafka_config_id": "kafka_a",
    }


def test_a_dead_broker_and_a_failed_dir_elsewhere_the_heal_starts_first(monkeypatch, tmp_path, caplog):
    import logging

    from tests.unit.kafka_runbooks.failed_broker.test_offline_dirs import D2, cluster

    caplog.set_level(logging.INFO)

    monkeypatch.setenv("KAFKA_RUNBOOKS_FAILED_BROKER_START_LOG_DIR_FAILURE", "true")
    sweep = _Sweep(monkeypatch, tmp_path, {"failure_threshold_minutes": 0})
    out = sweep.run(cluster({1: (D2,)}, down=(3,)))
    assert out["trigger"] is True and out["conf"]["failed_brokers"] == [3]
    assert sweep.asked == [[1, 2]]  # the fenced broker is the heal's: its timeout never delays it
    assert out["log_dirs"]["due"] == [1] and out["log_dir_trigger"] is False
    assert out["log_dir_conf"] == {}
    said = [r.getMessage() for r in caplog.records]
    assert any("the dead broker's heal goes first" in m and "broker(s) [3] are failed" in m for m in said)
