"""The sweeps' ``clusters`` task: the fleet setting, read at run time (never at parse time)."""

from __future__ import annotations

import logging
import os
from typing import Any

from kafka_runbooks import decisions
from kafka_runbooks.fleet import CLUSTERS_ENV, CLUSTERS_VARIABLE, resolve_clusters

log = logging.getLogger("kafka_runbooks.fleet")


def kafka_conn_ids_param():
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

    from kafka_runbooks.fleet import FleetSettingError

    variable = Variable.get(CLUSTERS_VARIABLE, default=None)
    try:
        clusters, source = resolve_clusters(
            params.get("kafka_conn_ids"), variable, os.environ.get(CLUSTERS_ENV)
        )
    except FleetSettingError as exc:
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
