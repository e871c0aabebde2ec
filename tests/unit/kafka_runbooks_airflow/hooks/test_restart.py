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
