"""Bad input from a trigger form ends as a DECISION record saying what was wrong, then a clean failure.

Without this, a value the schema let through but the runbook rejects (an unknown mode,
"4;5" as a broker list, an unparsable JSON partition list) shows up as a Python
traceback; the person who filled in the form needs one line: which param, what was
wrong, and that nothing was done.

The form fields' schemas (``kafka_runbooks_airflow.forms``) and the duration parser are re-exported
here, so the DAGs import only the plugin layer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from kafka_runbooks import decisions
from kafka_runbooks.errors import BadInput
from kafka_runbooks.fleet import DEFAULT_CLUSTER, refuse_renamed_params
from kafka_runbooks.units import parse_duration
from kafka_runbooks_airflow.forms import (
    broker_list_schema,
    duration_schema,
    id_list_schema,
    node_list_schema,
    partition_items_schema,
    size_schema,
)

__all__ = [
    "broker_list_schema",
    "duration_schema",
    "id_list_schema",
    "kafka_config_param",
    "node_list_schema",
    "parse_duration",
    "partition_items_schema",
    "refuse_bad_input",
    "size_schema",
]

T = TypeVar("T")


def kafka_config_param(
    description: str = "Airflow connection id of the Kafka cluster (Admin > Connections).",
) -> Any:
    """The trigger form's Kafka cluster: one default for every runbook's form, the one the sweeps'
    cluster list falls back to too (``kafka_runbooks.fleet.DEFAULT_CLUSTER``)."""
    from airflow.sdk import Param

    return Param(DEFAULT_CLUSTER, type="string", minLength=1, description=description)


def refuse_bad_input(parse: Callable[[Any], T], params: Mapping[str, Any], logger: str) -> T:
    """``parse(params)``; a ValueError becomes a DECISION record and an AirflowFailException (no retry)."""
    from airflow.sdk.exceptions import AirflowFailException

    try:
        refuse_renamed_params(params)
        return parse(dict(params))
    except ValueError as exc:
        decisions.record(
            "validate",
            "refuse the run: nothing was done",
            f"a parameter is not valid: {exc}",
            logger=logging.getLogger(logger),
            level=logging.ERROR,
        )
        raise AirflowFailException(f"bad input, nothing was done: {exc}") from None


def check_before_lease(
    dag_id: str,
    params: Mapping[str, Any],
    parse: Callable[[Any], Any],
    conn_params: tuple[str, ...],
    logger: str,
) -> dict[str, Any]:
    """The run's first task, before it waits for the cluster's lease: judge what needs no cluster.

    An ungated run the deployment does not allow, a param the runbook rejects, a connection
    id that names no connection: each is a DECISION record and a failed run at once, not
    after hours of waiting for the lease. Checks that read the cluster come after the lease.
    """
    from airflow.sdk.exceptions import AirflowFailException

    from kafka_runbooks_airflow.gate import refuse_ungated_run

    params = dict(params)
    refuse_ungated_run(dag_id, bool(params.get("require_approval", True)), bool(params.get("dry_run")))
    refuse_bad_input(parse, params, logger)
    on_held = params.get("on_lease_held", "wait")
    if on_held not in ("wait", "fail"):
        refuse_bad_input(_raise(f"on_lease_held must be 'wait' or 'fail', not {on_held!r}"), params, logger)
    missing = {
        name: params[name]
        for name in conn_params
        if params.get(name) and not _connection_exists(params[name])
    }
    if missing:
        why = ", ".join(f"{name}={conn_id!r}" for name, conn_id in missing.items())
        decisions.record(
            "validate",
            "refuse the run: nothing was done",
            f"no Airflow connection with this id: {why} (Admin > Connections)",
            logger=logging.getLogger(logger),
            level=logging.ERROR,
        )
        raise AirflowFailException(f"bad input, nothing was done: no connection {why}")
    decisions.record(
        "validate",
        "input is valid: take the cluster's lease",
        "the params and connection ids were checked before waiting for anything",
        observed={name: params.get(name) for name in conn_params},
        logger=logging.getLogger(logger),
    )
    return {name: params.get(name) for name in conn_params}


def refuse_unknown_broker_ids(
    kafka_config_id: str, named: dict[str, tuple[int, ...] | None], logger: str
) -> None:
    """The run's first task: broker ids its params name (``failed_brokers``, ``broker_ids``,
    ``receivers``) that the cluster does not have are refused at once, with the brokers it has,
    instead of after the wait for the cluster's lease. One DescribeCluster, read-only (a failed broker
    no longer registered may still be named by replicas: then the assignments too); nothing named
    (detect, all): no read. A KRaft controller's id is left to ``validate``, which names it so."""
    from kafka_runbooks.failed_broker.request import RequestError, unknown_broker_ids
    from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook

    if not any(named.values()):
        return
    admin = KafkaAdminHook(kafka_config_id=kafka_config_id).admin
    try:
        known = set(admin.describe_brokers())
        if unknown_broker_ids(named, known).get("failed_brokers"):  # unregistered, still in assignments?
            known |= {b for p in admin.describe_partitions() for b in p.replicas}
        unknown = unknown_broker_ids(named, known)
        if unknown:  # a controller's id is validate's to name
            voters = {v.node_id for v in admin.describe_quorum().voters}
            unknown = unknown_broker_ids(named, known | voters)
    finally:
        admin.close()
    if not unknown:
        return
    why = (
        "broker id(s) the cluster does not have: "
        + "; ".join(f"{name} {ids}" for name, ids in unknown.items())
        + f" (its brokers: {sorted(known)}, controllers: {sorted(voters - known)})"
    )

    def refuse(_params):
        """The refusal, as the run's ``refuse`` DECISION."""
        raise RequestError(why)

    refuse_bad_input(refuse, {}, logger)


def refuse_unknown_node_ids(kafka_config_id: str, param: str, ids: Iterable[int] | None, logger: str) -> None:
    """The run's first task: node ids a param names (``node_ids`` of a restart, ``remove_voters`` of a
    controller replacement) that the cluster has nowhere are refused at once with the ids it has, as
    the run's ``refuse`` DECISION, instead of 10-18 s later after the lease. Read-only: one
    DescribeQuorum (voters, observers) and one DescribeCluster; a broker that is down and no longer
    listed (DescribeCluster before v2 lists only live ones) still counts while a replica names it.
    Nothing named: no read."""
    from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook

    ids = sorted(set(ids or ()))
    if not ids:
        return
    admin = KafkaAdminHook(kafka_config_id=kafka_config_id).admin
    try:
        quorum = admin.describe_quorum()
        voters = {v.node_id for v in quorum.voters}
        others = set(admin.describe_brokers()) | {o.node_id for o in quorum.observers}
        if set(ids) - voters - others:
            others |= {b for p in admin.describe_partitions() for b in p.replicas}
    finally:
        admin.close()
    unknown = [n for n in ids if n not in voters | others]
    if unknown:
        why = (
            f"{param}: node id(s) {unknown} the cluster does not have (its voters: {sorted(voters)}, "
            f"other nodes: {sorted(others - voters)})"
        )
        refuse_bad_input(_raise(why), {}, logger)


def _raise(message: str) -> Callable[[Any], Any]:
    def parse(_params):
        """Refuse any params with the prepared BadInput message."""
        raise BadInput(message)

    return parse


def _connection_exists(conn_id: str) -> bool:
    """Is there a connection with this id? (Only "not found" is an answer: other errors propagate.)"""
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return False
    return True


def check_runbook_input(dag_id: str, run_id: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """``check_before_lease`` with the runbook's own parser and connection params (its ``check_input``
    task), for the heal also its broker ids against the cluster's (``refuse_unknown_broker_ids``, one
    read-only DescribeCluster); then the run joins the cluster's lease queue, so sweeps see it while
    it waits."""
    from kafka_runbooks_airflow.lease import join_lease_queue

    if dag_id == "kafka_broker_restart":
        from kafka_runbooks.restart.request import build_request

        conns: tuple[str, ...] = ("kafka_config_id", "probe_conn_id", "restart_conn_id")
        logger = "kafka_runbooks.restart"
    elif dag_id == "kafka_unclean_recovery":
        from kafka_runbooks.unclean.request import build_request

        conns, logger = ("kafka_config_id",), "kafka_runbooks.unclean"
    elif dag_id == "kafka_failed_broker_reassignment":
        from kafka_runbooks.failed_broker.request import build_request

        conns, logger = ("kafka_config_id",), "kafka_runbooks.failed_broker"
    else:
        raise BadInput(f"no input check for {dag_id!r}")
    checked = check_before_lease(dag_id, params, build_request, conns, logger)
    conn = params.get("kafka_config_id") or DEFAULT_CLUSTER
    if dag_id == "kafka_failed_broker_reassignment":  # its broker ids against the cluster's, read-only
        request = build_request(dict(params))  # checked just above: it parses
        named = {"failed_brokers": request.failed_brokers, "receivers": request.receivers}
        refuse_unknown_broker_ids(conn, named, logger)
    if dag_id == "kafka_broker_restart":  # its node ids against the cluster's brokers and quorum
        refuse_unknown_node_ids(conn, "node_ids", build_request(dict(params)).node_ids, logger)
    join_lease_queue(dag_id, run_id, dict(params))
    return checked
