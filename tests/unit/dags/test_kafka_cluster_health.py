"""The health sweep proposes, never acts (issue #27): its shape (one trigger of kafka_rebalance, from the
report's own decision), its settings (off by default; kafka_rebalance's own default targets), and the
conf it sends passes kafka_rebalance's params (Airflow checks a triggered run's conf against them)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from kafka_runbooks.errors import BadInput

ROOT = Path(__file__).resolve().parents[3]


def _dag(name: str):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags" / f"{name}.py"), safe_mode=False)
    assert not bag.import_errors
    return bag.dags[name]


def test_the_sweep_starts_kafka_rebalance_only_from_the_reports_decision():
    dag = _dag("kafka_cluster_health")
    start = dag.task_dict["cluster.start_rebalance"]
    assert start.trigger_dag_id == "kafka_rebalance"
    assert start.upstream_task_ids == {"cluster.publish_report"}
    assert (start.due.key, start.trigger_run_id.key, start.conf.key) == (
        "rebalance_trigger",
        "rebalance_run_id",
        "rebalance_conf",
    )
    for name in (
        "start_rebalance",
        "max_replica_spread",
        "max_leader_spread",
        "max_bytes_spread_percent",
        "min_replication_factor",
    ):
        assert dag.params[name] is None  # unset: the Variable, env or default decide


def test_settings_are_off_by_default_with_the_rebalances_own_targets(monkeypatch):
    """The defaults: report only, kafka_rebalance's default targets (the DAG's params and the library's
    constant are one value), the minimum RF left to the job (3, or the live brokers when fewer)."""
    from kafka_runbooks_airflow.health import health_settings

    for key in (
        "START_REBALANCE",
        "MAX_REPLICA_SPREAD",
        "MAX_LEADER_SPREAD",
        "MAX_BYTES_SPREAD_PERCENT",
        "MIN_REPLICATION_FACTOR",
    ):
        monkeypatch.delenv(f"KAFKA_RUNBOOKS_HEALTH_{key}", raising=False)
    settings = health_settings({}, None)
    rebalance = _dag("kafka_rebalance")
    assert settings["start_rebalance"] is False and settings["min_replication_factor"] is None
    assert settings["max_replica_spread"] == rebalance.params["max_replica_spread"]
    assert settings["max_leader_spread"] == rebalance.params["max_leader_spread"]
    assert float(settings["max_bytes_spread_percent"]) == rebalance.params["max_bytes_spread_percent"]
    with pytest.raises(BadInput, match="max_bytes_spread_percent"):
        health_settings({"max_bytes_spread_percent": -1}, None)
    on = health_settings({"max_leader_spread": "2"}, json.dumps({"start_rebalance": True}))
    assert on["start_rebalance"] is True and on["max_leader_spread"] == "2"
    with pytest.raises(BadInput, match="max_replica_spread"):
        health_settings({"max_replica_spread": "ten"}, None)
    with pytest.raises(BadInput, match="unknown keys"):
        health_settings({}, json.dumps({"start_rebalnce": True}))


def _proposed_params(counts: list[int], sizes: list[int] | None = None, **report_extra):
    """kafka_rebalance's params with the conf the sweep proposes for live brokers holding
    ``counts`` replicas (3 preferred leaders each), validated as a trigger of that DAG would be."""
    from kafka_runbooks.health import ProposalInputs, judge_balance, propose_rebalance
    from kafka_runbooks_airflow.health import health_settings

    brokers = [
        {"broker_id": b, "alive": True, "fenced": False, "replica_count": n, "preferred_leader_count": 3}
        | {"size_bytes": 1000 * n if sizes is None else sizes[b - 1]}
        for b, n in enumerate(counts, start=1)
    ]
    report = {
        "brokers": brokers,
        "log_dirs": {"brokers": [], "brokers_with_offline_dirs": []},
        **report_extra,
    }
    settings = health_settings({"start_rebalance": True}, None)
    proposal = propose_rebalance(
        ProposalInputs(
            judge_balance(report, settings), report, True, settings, "kafka_a", "health__a", None, 0, 60
        ),
        lambda: [],
    )
    assert proposal.start
    params = copy.deepcopy(_dag("kafka_rebalance").params)
    assert set(proposal.conf) <= set(params), "the conf names a param the runbook does not have"
    for key, value in proposal.conf.items():
        params[key] = value
    params.validate()
    return params


def test_the_conf_the_sweep_sends_passes_kafka_rebalances_params():
    params = _proposed_params([3, 3, 9])
    assert params["mode"] == "full" and params["require_approval"] is True


def test_bytes_alone_out_of_spread_send_a_full_rebalance_with_the_bytes_target_it_takes():
    """Counts even, bytes not: the proposed run is mode full, and the bytes target (the sweep's default,
    kafka_rebalance's own constant) passes the runbook's number param."""
    params = _proposed_params([3, 3, 3], sizes=[1000, 1000, 5000])
    assert params["mode"] == "full" and params["max_bytes_spread_percent"] == 20.0
    assert params["max_bytes_spread_percent"] == _dag("kafka_rebalance").params["max_bytes_spread_percent"]


def test_the_replication_factor_conf_the_sweep_sends_passes_kafka_rebalances_params():
    below = {"minimum": 3, "minimum_from": "min(3, live brokers)", "below_minimum": 1}
    params = _proposed_params([3, 3, 3], replication=below)
    assert (params["mode"], params["replication_factor"]) == ("replication-factor", 3)
    assert params["require_approval"] is True
