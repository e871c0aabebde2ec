"""Hooks for the broker-restart runbook: the broker-state probe and the restart back end.

Both are Airflow connections (type ``generic``) whose extras say what to build, so a
team switches from the local stack to Kubernetes, or from the JMX exporter to
Strimzi's agent, without touching a DAG:

- ``kafka_broker_probe_default``: ``{"kind": "prometheus", "endpoints": {"1": "http://..."}}``
  or ``{"kind": "prometheus", "url_template": "http://kafka-{node_id}:9404/metrics"}`` or
  ``{"kind": "strimzi-agent", "url_template": "https://...:8443/v1/broker-state",
  "cert_file": ..., "key_file": ..., "ca_file": ...}`` or ``{"kind": "combined", "probes":
  [<one of those>, ...]}``;
- ``kafka_restart_default``: ``{"backend": "localstack", "stack_home": "..."}`` or
  ``{"backend": "kubernetes", "kubernetes_conn_id": "kubernetes_default", "namespace": "kafka",
  "pod_name_template": "my-cluster-kafka-{node_id}", "strimzi": true}`` (optionally
  ``"container_name"``, default ``kafka``: whose restart count and start time are evidence).
"""

from __future__ import annotations

from airflow.sdk import BaseHook


class BrokerProbeHook(BaseHook):
    conn_name_attr = "probe_conn_id"
    default_conn_name = "kafka_broker_probe_default"
    conn_type = "generic"
    hook_name = "Kafka broker-state probe"

    def __init__(self, probe_conn_id: str = default_conn_name) -> None:
        super().__init__()
        self.probe_conn_id = probe_conn_id

    def get_probe(self):
        """The broker-state probe the probe connection's extras describe."""
        from kafka_runbooks.probes import probe_from_config

        return probe_from_config(self.get_connection(self.probe_conn_id).extra_dejson)


class RestartBackendHook(BaseHook):
    conn_name_attr = "restart_conn_id"
    default_conn_name = "kafka_restart_default"
    conn_type = "generic"
    hook_name = "Kafka node restart back end"

    def __init__(self, restart_conn_id: str = default_conn_name) -> None:
        super().__init__()
        self.restart_conn_id = restart_conn_id

    def get_backend(self):
        """The restart back end the restart connection's extras name (a Kubernetes one gets its API client
        from the kubernetes connection)."""
        from kafka_runbooks.restart.backends import backend_from_config

        extra = self.get_connection(self.restart_conn_id).extra_dejson
        core_v1 = None
        if extra.get("backend") == "kubernetes":
            from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook

            core_v1 = KubernetesHook(
                conn_id=extra.get("kubernetes_conn_id", "kubernetes_default")
            ).core_v1_client
        return backend_from_config(extra, core_v1=core_v1)
