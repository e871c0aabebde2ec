"""Task bodies of ``kafka_broker_decommission``: the failed-broker glue with the decommission's request.

The decommission runs the heal's tasks (``kafka_runbooks_airflow.failed_broker``) with its own
parser and broker choice (``kafka_runbooks.failed_broker.decommission``: live, registered
brokers; what the rest can hold), the planner's ``--drain``, one more check before the gate
(the receivers' disks after the plan) and the drained rule in the verification (the shared
``verify`` reads it from ``checked["drain"]``).
"""

from __future__ import annotations

import logging
from typing import Any

from kafka_runbooks import decisions

log = logging.getLogger("kafka_runbooks.failed_broker")


def check_input(dag_id: str, run_id: str, params: dict[str, Any]) -> dict[str, Any]:
    """What can be judged before the run waits for the lease (then it joins the lease queue): the
    params, and the broker ids they name against the brokers the cluster has (one read-only
    DescribeCluster)."""
    from kafka_runbooks.failed_broker.decommission import build_decommission_request
    from kafka_runbooks.fleet import DEFAULT_CLUSTER
    from kafka_runbooks_airflow.inputs import check_before_lease, refuse_unknown_broker_ids
    from kafka_runbooks_airflow.lease import join_lease_queue

    checked = check_before_lease(dag_id, params, build_decommission_request, ("kafka_config_id",), log.name)
    request = build_decommission_request(params)  # checked just above: it parses
    named = {"broker_ids": request.failed_brokers, "receivers": request.receivers}
    refuse_unknown_broker_ids(params.get("kafka_config_id") or DEFAULT_CLUSTER, named, log.name)
    join_lease_queue(dag_id, run_id, dict(params))
    return checked


def decommission_request(params: dict[str, Any]):
    """The run's typed request (``build_decommission_request``), built once by the validate task; a
    bad one is a ``refuse`` DECISION before any cluster call."""
    from kafka_runbooks.failed_broker.decommission import build_decommission_request
    from kafka_runbooks_airflow.failed_broker import reassign_request

    return reassign_request(params, build_decommission_request)


def validate(request, kafka_config_id: str, dag_id: str, run_id: str) -> dict[str, Any]:
    """The heal's validate with the decommission's request: the brokers to drain are live and
    registered, the brokers left can hold their replicas (replication factor, racks)."""
    from kafka_runbooks.failed_broker.decommission import resolve_drain
    from kafka_runbooks_airflow.failed_broker import validate_request

    checked = validate_request(request, kafka_config_id, dag_id, run_id, resolve_drain)
    return {**checked, "kafka_config_id": kafka_config_id}  # review_plan reads the disks there


def review_plan(
    checked: dict[str, Any] | None, snapshot_info: dict[str, Any] | None, dag_id: str, run_id: str
) -> dict[str, Any]:
    """The disk ceiling (no receiver log dir past ``max_disk_usage_percent`` after the plan: a
    ``refuse`` DECISION), then the heal's review of the plan, which writes the execution state:
    a refused plan leaves nothing to execute. Without a plan (validate or the planner failed) the
    heal's review says why."""
    from kafka_runbooks import storage
    from kafka_runbooks.snapshot_contract import SUMMARY_FILE
    from kafka_runbooks_airflow.failed_broker import review_plan as shared

    planned = checked is not None and snapshot_info is not None
    if planned and (storage.locate(checked["plan_dir"]) / SUMMARY_FILE).exists():
        check_disks(checked)
    return shared(checked, snapshot_info, dag_id, run_id)


def check_disks(checked: dict[str, Any]) -> list[dict]:
    """Read the receivers' log dirs now (DescribeLogDirs total and usable bytes) and judge the plan's gains."""
    import json
    from dataclasses import asdict

    from kafka_runbooks import storage
    from kafka_runbooks.errors import SafetyRefusal
    from kafka_runbooks.failed_broker.decommission import over_ceiling, receiver_disk_use
    from kafka_runbooks.snapshot_contract import SUMMARY_FILE
    from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook

    summary = json.loads((storage.locate(checked["plan_dir"]) / SUMMARY_FILE).read_text())
    ceiling = float(checked["max_disk_usage_percent"])
    admin = KafkaAdminHook(kafka_config_id=checked["kafka_config_id"]).admin
    try:
        dirs, errors = admin.describe_log_dir_states([int(b) for b in summary["receivers"]])
    finally:
        admin.close()
    uses = receiver_disk_use(summary, dirs)
    over = over_ceiling(uses, ceiling)
    observed = {"log_dirs": [u.line() for u in uses], "errors": errors, "max_disk_usage_percent": ceiling}
    if over:
        reason = (
            f"the plan would fill receiver log dir(s) past {ceiling:g} % (or their size is unknown): "
            + "; ".join(u.line() for u in over[:10])
        )
        decisions.record(
            "validate",
            "refuse the run: nothing was done",
            reason,
            observed=observed,
            logger=log,
            level=logging.ERROR,
        )
        raise SafetyRefusal(reason)
    decisions.record(
        "disk ceiling",
        "room on every receiver",
        f"after the plan no receiver log dir passes {ceiling:g} % (each dir judged as if it got all its broker gains)",
        observed=observed,
        logger=log,
    )
    return [asdict(u) for u in uses]
