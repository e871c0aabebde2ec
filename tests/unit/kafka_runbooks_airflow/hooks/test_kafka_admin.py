"""The hooks on their own: connections read lazily, clients built on first use, secrets kept out.

The e2e tests reach these hooks through real task runs; here each is driven alone from a
connection given the way a deployment gives it (an ``AIRFLOW_CONN_*`` environment variable).
"""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from kafka_runbooks.probes import PrometheusProbe
from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook
from kafka_runbooks_airflow.hooks.restart import BrokerProbeHook, RestartBackendHook

SECRET = "s3cret-password-9f2"


def _connection(monkeypatch, conn_id: str, conn_type: str, extra: dict) -> None:
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": conn_type, "extra": extra})
    )


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_admin_hook_builds_the_facade_lazily_and_never_shows_the_password(monkeypatch):
    port = _closed_port()
    _connection(
        monkeypatch,
        "kafka_unit",
        "kafka",
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "runbooks",
            "sasl.password": SECRET,
        },
    )
    hook = KafkaAdminHook(kafka_config_id="kafka_unit", timeout_s=2)
    admin = hook.admin  # no broker listens: building it must not connect
    assert admin.bootstrap_servers == f"127.0.0.1:{port}"
    assert admin.timeout_s == 2
    assert hook.admin is admin  # one facade per hook
    assert SECRET not in repr(admin)
    assert hook.client_config()["sasl.password"] == SECRET  # passed through untouched to librdkafka
    assert "_kafka_python" not in admin.__dict__ and "confluent" not in admin.__dict__


def test_admin_hook_on_a_connection_without_bootstrap_servers_is_refused(monkeypatch):
    from kafka_runbooks.errors import BadInput

    _connection(monkeypatch, "kafka_empty", "kafka", {"security.protocol": "PLAINTEXT"})
    with pytest.raises((BadInput, ValueError), match="bootstrap"):
        _ = KafkaAdminHook(kafka_config_id="kafka_empty").admin


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
