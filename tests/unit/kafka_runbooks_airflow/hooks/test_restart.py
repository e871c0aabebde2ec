"""BrokerProbeHook and RestartBackendHook on their own, each built from its connection.

The e2e tests reach these hooks through real task runs; here each is driven alone from a
connection given the way a deployment gives it (an ``AIRFLOW_CONN_*`` environment variable).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from kafka_runbooks.probes import PrometheusProbe
from kafka_runbooks_airflow.hooks.restart import BrokerProbeHook, RestartBackendHook


def _connection(monkeypatch, conn_id: str, conn_type: str, extra: dict) -> None:
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": conn_type, "extra": extra})
    )


class _Metrics(BaseHTTPRequestHandler):
    body = b"# TYPE kafka_server_brokerstate gauge\nkafka_server_brokerstate 3.0\n"

    def do_GET(self):  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


def test_probe_hook_reads_its_connection_and_the_probe_answers(monkeypatch):
    server = HTTPServer(("127.0.0.1", 0), _Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        _connection(monkeypatch, "probe_unit", "generic", {"kind": "prometheus", "endpoints": {"1": url}})
        probe = BrokerProbeHook(probe_conn_id="probe_unit").get_probe()
        assert isinstance(probe, PrometheusProbe)
        reading = probe.read(1)
        assert (reading.state, reading.state_name, reading.error) == (3, "RUNNING", None)
    finally:
        server.shutdown()


def test_restart_hook_names_an_unknown_back_end(monkeypatch):
    _connection(monkeypatch, "restart_unit", "generic", {"backend": "telepathy"})
    with pytest.raises(Exception, match="telepathy"):
        RestartBackendHook(restart_conn_id="restart_unit").get_backend()


def test_restart_hook_builds_the_kubernetes_back_end_through_the_named_kubernetes_connection(monkeypatch):
    import airflow.providers.cncf.kubernetes.hooks.kubernetes as k8s

    from kafka_runbooks.restart.backends import KubernetesBackend

    built: list[str] = []

    class FakeKubernetesHook:  # stands in for the cluster API: only the client it hands out
        def __init__(self, conn_id: str) -> None:
            built.append(conn_id)
            self.core_v1_client = f"core-v1 of {conn_id}"

    monkeypatch.setattr(k8s, "KubernetesHook", FakeKubernetesHook)
    extra = {
        "backend": "kubernetes",
        "kubernetes_conn_id": "k8s_prod",
        "namespace": "kafka",
        "pod_name_template": "my-cluster-kafka-{node_id}",
        "strimzi": True,
    }
    _connection(monkeypatch, "restart_k8s", "generic", extra)
    backend = RestartBackendHook(restart_conn_id="restart_k8s").get_backend()
    assert isinstance(backend, KubernetesBackend) and built == ["k8s_prod"]
    assert backend.core_v1 == "core-v1 of k8s_prod"
    assert (backend.namespace, backend.pod_name_template, backend.strimzi) == (
        "kafka",
        "my-cluster-kafka-{node_id}",
        True,
    )
    del extra["kubernetes_conn_id"]
    _connection(monkeypatch, "restart_k8s", "generic", extra)
    RestartBackendHook(restart_conn_id="restart_k8s").get_backend()
    assert built[-1] == "kubernetes_default"


def test_restart_hook_asks_no_kubernetes_connection_for_another_back_end(monkeypatch):
    import airflow.providers.cncf.kubernetes.hooks.kubernetes as k8s

    from kafka_runbooks.restart.docker import DockerBackend

    monkeypatch.setattr(k8s, "KubernetesHook", lambda **kw: pytest.fail("no Kubernetes client is needed"))
    _connection(
        monkeypatch, "restart_docker", "generic", {"backend": "docker", "containers": {"1": "kafka-1"}}
    )
    assert isinstance(RestartBackendHook(restart_conn_id="restart_docker").get_backend(), DockerBackend)
