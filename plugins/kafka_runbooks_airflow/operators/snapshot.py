"""Operator: write a cluster snapshot (Parquet) for the Spark jobs."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator

from kafka_runbooks import decisions, storage
from kafka_runbooks.paths import safe_name
from kafka_runbooks.snapshot import store_snapshot
from kafka_runbooks.storage import StorePath

log = logging.getLogger(__name__)


def _features(admin):
    """The features the cluster finalized, for the report; None (shown unknown) when not read."""
    try:
        return admin.describe_features()
    except Exception as exc:  # a report without features says so; the snapshot stays good
        log.warning("features not read: %s", exc)
        return None


class KafkaClusterSnapshotOperator(BaseOperator):
    """Read brokers, quorum, partitions and log-dir sizes; write them as a snapshot.

    Read-only: it never changes the cluster. Returns (as XCom) the snapshot folder (its URL in
    the data store, a plain path on a local one) and headline counts, so the next task can
    submit a Spark job over it from any worker.

    :param kafka_config_id: Airflow Kafka connection id.
    :param output_subdir: folder in the runbooks' data store (templated); defaults to
        ``snapshots/<dag_id>/<run_id>/<kafka_config_id>``.
    :param include_log_dirs: also read replica sizes (DescribeLogDirs on every live broker).
    """

    template_fields: Sequence[str] = ("kafka_config_id", "output_subdir")

    def __init__(
        self,
        *,
        kafka_config_id: str = "kafka_default",
        output_subdir: str | None = None,
        include_log_dirs: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.kafka_config_id = kafka_config_id
        self.output_subdir = output_subdir
        self.include_log_dirs = include_log_dirs

    def execute(self, context) -> dict[str, Any]:
        """Read the cluster once and store its snapshot (one folder per cluster and run), recorded as a
        decision; returns where it is and what it holds."""
        from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook

        hook = KafkaAdminHook(kafka_config_id=self.kafka_config_id)
        admin = hook.admin
        try:
            state = admin.read_state(include_log_dirs=self.include_log_dirs)
            state.features = _features(admin)
        finally:
            admin.close()
        # one folder per cluster: a fleet sweep snapshots several clusters in one run
        default = ("snapshots", self.dag_id, context["run_id"], self.kafka_config_id)
        parts = (self.output_subdir,) if self.output_subdir else default
        where = StorePath(storage.store(), "/".join(safe_name(p) for p in parts))
        path = store_snapshot(state, where, bootstrap_servers=admin.bootstrap_servers)
        dead = [b.broker_id for b in state.brokers.values() if not b.available]
        decisions.record(
            "snapshot",
            "snapshot written",
            "a read-only view of the cluster is the input of every analysis",
            observed={
                "cluster_id": state.cluster_id,
                "brokers": len(state.brokers),
                "unavailable_brokers": dead,
                "active_controller": state.active_controller,
                "partitions": len(state.partitions),
                "log_dir_errors": state.log_dir_errors,
            },
            action=f"wrote {path}",
            logger=self.log,
        )
        return {
            "path": str(path),
            "cluster_id": state.cluster_id,
            "partitions": len(state.partitions),
            "brokers": len(state.brokers),
            "unavailable_brokers": dead,
        }
