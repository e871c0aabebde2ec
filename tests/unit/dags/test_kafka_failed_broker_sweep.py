"""The failed-broker sweep's shape: a mapped group per cluster that can start the heal, and (issue #28)
the log-dir failure runbook, each from its own decision in the sweep's result."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_sweep_can_start_the_heal_and_the_log_dir_runbook_from_their_own_decisions():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags" / "kafka_failed_broker_sweep.py"), safe_mode=False)
    assert not bag.import_errors
    dag = bag.dags["kafka_failed_broker_sweep"]
    assert set(dag.task_dict) == {
        "clusters",
        "cluster.sweep",
        "cluster.start_reassignment",
        "cluster.start_log_dir_failure",
    }
    heal, log_dir = (
        dag.task_dict["cluster.start_reassignment"],
        dag.task_dict["cluster.start_log_dir_failure"],
    )
    assert (heal.trigger_dag_id, log_dir.trigger_dag_id) == (
        "kafka_failed_broker_reassignment",
        "kafka_log_dir_failure",
    )
    assert heal.upstream_task_ids == log_dir.upstream_task_ids == {"cluster.sweep"}
    assert log_dir.due.key == "log_dir_trigger" and log_dir.conf.key == "log_dir_conf"
    assert log_dir.trigger_run_id.key == "log_dir_run_id" and heal.due.key == "trigger"
    assert dag.params["start_log_dir_failure"] is None  # unset: the Variable, env or default (false) decide


def test_the_conf_the_sweep_sends_passes_the_log_dir_runbooks_params():
    """Airflow checks a triggered run's conf against the DAG's params: the sweep's conf (sizes in
    bytes, a log dir or null) must pass kafka_log_dir_failure's, or the start fails at the trigger."""
    import copy

    from airflow.dag_processing.dagbag import DagBag

    from kafka_runbooks.failed_broker.offline_dirs import LogDirStart
    from kafka_runbooks.failed_broker.sweep import SWEEP_DEFAULTS, sweep_sizes

    bag = DagBag(dag_folder=str(ROOT / "dags" / "kafka_log_dir_failure.py"), safe_mode=False)
    assert not bag.import_errors
    passed_on = {
        "max_partitions_per_chunk": SWEEP_DEFAULTS["max_partitions_per_chunk"],
        **sweep_sizes(SWEEP_DEFAULTS),
        "require_approval": True,
        "elect_preferred_leaders": True,
    }
    for dirs in (["/k/data-2"], ["/k/data-2", "/k/data-3"]):
        conf = LogDirStart(broker_id=1, offline_dirs=dirs, replicas=["t-1"]).conf("kafka_a", passed_on)
        params = copy.deepcopy(bag.dags["kafka_log_dir_failure"].params)
        assert set(conf) <= set(params), "the conf names a param the runbook does not have"
        for key, value in conf.items():
            params[key] = value
        params.validate()
