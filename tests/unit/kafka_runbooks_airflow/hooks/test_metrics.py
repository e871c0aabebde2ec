"""KafkaMetricsHook on its own: the metrics endpoints from the probe connection.

The e2e tests reach this hook through real task runs; here it is driven alone from a
connection given the way a deployment gives it (an ``AIRFLOW_CONN_*`` environment variable),
and the endpoints it gives read a small real HTTP server serving a KIP-859 exposition.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from kafka_runbooks.errors import BadInput
from kafka_runbooks_airflow.hooks.metrics import KafkaMetricsHook


def _connection(monkeypatch, conn_id: str, extra: dict) -> None:
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "generic", "extra": extra})
    )


class _Exporter(BaseHTTPRequestHandler):
    body = (
        b"# TYPE kafka_server_broker_metadata_metrics_metadata_load_error_count gauge\n"
        b"kafka_server_broker_metadata_metrics_metadata_load_error_count 2.0\n"
        b"# TYPE kafka_server_broker_metadata_metrics_metadata_apply_error_count gauge\n"
        b"kafka_server_broker_metadata_metrics_metadata_apply_error_count 0.0\n"
        b"# TYPE kafka_server_brokerstate gauge\nkafka_server_brokerstate 3.0\n"
    )

    def do_GET(self):  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


def test_the_endpoints_of_the_probe_connection_read_each_node(monkeypatch):
    server = HTTPServer(("127.0.0.1", 0), _Exporter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        _connection(
            monkeypatch, "metrics_unit", {"kind": "prometheus", "endpoints": {"1": url}, "timeout_s": 2}
        )
        endpoints = KafkaMetricsHook("metrics_unit").get_endpoints()
        assert endpoints.endpoints == {1: url} and endpoints.timeout_s == 2.0
        readings = endpoints.read_all([(1, False, None), (2, False, "kafka-2")])
    finally:
        server.shutdown()
        server.server_close()
    assert readings[1].metrics.counters == {"metadata_load_errors": 2.0, "metadata_apply_errors": 0.0}
    assert readings[2].metrics is None and readings[2].error  # no URL for node 2: unknown, not healthy


def test_templates_and_the_ca_file_come_from_the_extras(monkeypatch):
    _connection(
        monkeypatch,
        "metrics_tpl",
        {
            "url_template": "https://{host}:9404/metrics",
            "controller_url_template": "https://ctl-{node_id}:9404/metrics",
            "ca_file": "/etc/ca.pem",
        },
    )
    endpoints = KafkaMetricsHook("metrics_tpl").get_endpoints()  # kind defaults to prometheus
    assert endpoints.url_template == "https://{host}:9404/metrics"
    assert endpoints.controller_url_template == "https://ctl-{node_id}:9404/metrics"
    assert endpoints.verify == "/etc/ca.pem"


def test_a_probe_connection_of_another_kind_is_refused_naming_the_param(monkeypatch):
    _connection(
        monkeypatch, "metrics_agent", {"kind": "strimzi-agent", "url_template": "https://{host}:8443/x"}
    )
    with pytest.raises(BadInput, match="metrics_conn_id"):
        KafkaMetricsHook("metrics_agent").get_endpoints()


def test_it_reads_the_same_connection_as_the_broker_state_probe():
    assert KafkaMetricsHook.default_conn_name == "kafka_broker_probe_default"
    assert KafkaMetricsHook("probe_x").probe_conn_id == "probe_x"
