"""The sweeps' ``clusters`` task: the fleet setting, read at run time (never at parse time)."""

from __future__ import annotations

import logging
import os
from typing import Any

from kafka_runbooks import decisions
from kafka_runbooks.fleet import CLUSTERS_ENV, CLUSTERS_VARIABLE, resolve_clusters

log = logging.getLogger("kafka_runbooks.fleet")


def kafka_config_ids_param():
    """The sweeps' ``kafka_config_ids`` param: a list of Kafka connection ids, or null for the deployment's
    list."""
    from airflow.sdk import Param

    return Param(
        None,
        type=["null", "array"],
        items={"type": "string", "minLength": 1},
        description="Kafka connection ids to sweep, one mapped task each; null = the deployment's list "
        f"(Variable {CLUSTERS_VARIABLE}, else environment {CLUSTERS_ENV}, else kafka_default)",
    )


def fleet_clusters(params: dict[str, Any]) -> list[str]:
    """The clusters this sweep covers, with a DECISION record saying which setting named them."""
    from airflow.sdk import Variable

    from kafka_runbooks.errors import BadInput
    from kafka_runbooks.fleet import refuse_renamed_params

    try:
        refuse_renamed_params(params)
        variable = Variable.get(CLUSTERS_VARIABLE, default=None)
        clusters, source = resolve_clusters(
            params.get("kafka_config_ids"), variable, os.environ.get(CLUSTERS_ENV)
        )
    except BadInput as exc:
        decisions.record(
            "fleet", "refuse the sweep: nothing was read", str(exc), logger=log, level=logging.ERROR
        )
        raise
    decisions.record(
        "fleet",
        f"sweep {len(clusters)} cluster(s)",
        f"named by {source}; one mapped task per cluster",
        observed={"clusters": clusters},
        logger=log,
    )
    return clusters


def connect_fleet(params: dict[str, Any]) -> list[dict[str, Any]]:
    """The Connect sweep's groups: per Kafka cluster of the fleet, the Connect clusters its
    connection's extra names (``connect_conn_ids``); or, when the run's ``connect_conn_ids``
    param is set, exactly those, as one group tied to no Kafka cluster."""
    from kafka_runbooks.fleet import connect_groups

    if params.get("connect_conn_ids"):
        from kafka_runbooks_airflow.connect import conn_ids_from_params

        ids = conn_ids_from_params(params)
        decisions.record(
            "fleet",
            "sweep the Connect clusters named by the run",
            "param connect_conn_ids is set: the fleet's Kafka connections are not read",
            observed={"connect_conn_ids": ids},
            logger=log,
        )
        return [{"kafka_config_id": None, "connect_conn_ids": ids, "error": None, "shared": {}}]
    clusters = fleet_clusters(params)
    groups = connect_groups(clusters, {c: _extra(c) for c in clusters})
    decisions.record(
        "fleet",
        f"sweep the Connect clusters of {len(groups)} Kafka cluster(s)",
        "named by each Kafka connection's extra connect_conn_ids (kafka_default: kafka_connect_default)",
        observed={g["kafka_config_id"]: g["connect_conn_ids"] or g["error"] for g in groups},
        logger=log,
    )
    return groups


def _extra(conn_id: str) -> Any:
    """A Kafka connection's extra, or the exception that says why it cannot be read."""
    from airflow.sdk import BaseHook

    try:
        return BaseHook.get_connection(conn_id).extra_dejson
    except Exception as exc:  # missing or broken: that cluster's sweep reports it
        return exc
