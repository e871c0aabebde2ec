"""Hook: where every Kafka node's Prometheus metrics are, from the probe connection.

The same connection as the restart runbook's broker-state probe
(``kafka_broker_probe_default``, type ``generic``, ``kind: prometheus``), so one place
says where each node's JMX exporter listens: ``endpoints`` (node id -> URL, brokers and
controllers), ``url_template`` (``{node_id}``, ``{host}``), ``controller_url_template``.
"""

from __future__ import annotations

from kafka_runbooks_airflow.hooks.restart import BrokerProbeHook


class KafkaMetricsHook(BrokerProbeHook):
    hook_name = "Kafka node metrics (Prometheus)"

    def get_endpoints(self):
        """The Prometheus endpoints the metrics connection's extras describe."""
        from kafka_runbooks.metadata_errors.endpoints import MetricsEndpoints

        return MetricsEndpoints.from_config(self.get_connection(self.probe_conn_id).extra_dejson)
