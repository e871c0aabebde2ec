"""Which clusters a metadata-error sweep run covers, each with the connections it acts through.

One target per Kafka cluster of the fleet (:mod:`kafka_runbooks.fleet`): its Kafka connection,
its metrics connection and the restart back end the restart runs it starts will use. The
companions follow the cluster's id, as everywhere in the fleet: ``kafka_default`` keeps
``kafka_broker_probe_default`` and ``kafka_restart_default``, any other cluster ``X`` has
``X_probe`` and ``X_restart``.

A run may name the metrics or restart connection itself (``metrics_conn_id`` /
``restart_conn_id``), but only for a single cluster: one metrics connection for several
clusters would read the same nodes for all of them, and one restart back end would restart
one cluster's node for another's flag.
"""

from __future__ import annotations

from typing import Any

from kafka_runbooks.errors import BadInput
from kafka_runbooks.fleet import DEFAULT_CLUSTER, probe_conn_id

DEFAULT_RESTART = "kafka_restart_default"


def restart_conn_id(kafka_config_id: str) -> str:
    """The restart back end of a cluster: the default one for ``kafka_default``, else ``<id>_restart``."""
    return DEFAULT_RESTART if kafka_config_id == DEFAULT_CLUSTER else f"{kafka_config_id}_restart"


def sweep_targets(
    clusters: list[str], metrics_conn_id: str | None = None, restart_conn_id_: str | None = None
) -> list[dict[str, Any]]:
    """One entry per cluster: ``kafka_config_id``, ``metrics_conn_id``, ``restart_conn_id``."""
    if not clusters:
        raise BadInput("no cluster to sweep")
    named = {
        k: v for k, v in (("metrics_conn_id", metrics_conn_id), ("restart_conn_id", restart_conn_id_)) if v
    }
    if named and len(clusters) > 1:
        raise BadInput(
            f"{', '.join(sorted(named))} set for {len(clusters)} clusters ({', '.join(clusters)}): one "
            "connection would serve every cluster (the same nodes read, or restarted, for all); set it "
            "only with one cluster in kafka_config_ids, else each cluster uses its own (<id>_probe, <id>_restart)"
        )
    return [
        {
            "kafka_config_id": cluster,
            "metrics_conn_id": metrics_conn_id or probe_conn_id(cluster),
            "restart_conn_id": restart_conn_id_ or restart_conn_id(cluster),
        }
        for cluster in clusters
    ]
