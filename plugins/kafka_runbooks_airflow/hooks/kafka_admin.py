"""Hook: the project's admin facade, built from an Airflow Kafka connection.

It reuses the apache-kafka provider's connection type (``kafka_default``, extras =
librdkafka client config), so SASL and TLS settings pass through untouched, and builds
the facade only when a task first asks for it.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from airflow.providers.apache.kafka.hooks.base import KafkaBaseHook

from kafka_runbooks.admin import ClusterAdmin


class KafkaAdminHook(KafkaBaseHook):
    """Read the cluster (brokers, quorum, partitions, sizes) through ``ClusterAdmin``.

    :param kafka_config_id: Airflow connection of type ``kafka``; defaults to ``kafka_default``.
    :param timeout_s: per-call timeout for admin requests.
    """

    hook_name = "Kafka runbooks admin"

    def __init__(
        self, kafka_config_id: str = KafkaBaseHook.default_conn_name, timeout_s: float = 30.0
    ) -> None:
        super().__init__(kafka_config_id=kafka_config_id)
        self.timeout_s = timeout_s

    def _get_client(self, config: dict[str, Any]) -> ClusterAdmin:
        return ClusterAdmin(config, timeout_s=self.timeout_s)

    @cached_property
    def admin(self) -> ClusterAdmin:
        """The hook's ClusterAdmin, made once (the caller closes it)."""
        return self.get_conn

    def client_config(self) -> dict[str, Any]:
        """The connection's client config (contains secrets: never log it unredacted)."""
        return self._build_config()
