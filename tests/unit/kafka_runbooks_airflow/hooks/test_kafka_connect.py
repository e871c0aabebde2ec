"""KafkaConnectHook on its own: the Connect client built from an ``http`` connection.

The e2e tests reach this hook through real task runs; here it is driven alone from a
connection given the way a deployment gives it (an ``AIRFLOW_CONN_*`` environment variable),
and its client talks to a small real HTTP server standing in for the worker.
"""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from kafka_runbooks.errors import BadInput
from kafka_runbooks_airflow.hooks.kafka_connect import KafkaConnectHook

SECRET = "c0nnect-s3cret-71"


def _connection(monkeypatch, conn_id: str, **fields) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "http", **fields}))


class _Worker(BaseHTTPRequestHandler):
    seen: list[tuple[str, str | None]] = []

    def do_GET(self):  # noqa: N802
        self.seen.append((self.path, self.headers.get("Authorization")))
        body = json.dumps(
            {"sink": {"status": {"name": "sink", "connector": {"state": "RUNNING"}, "tasks": []}, "info": {}}}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def worker():
    _Worker.seen = []
    server = HTTPServer(("127.0.0.1", 0), _Worker)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_the_client_talks_to_the_connections_host_and_port_with_its_basic_auth(monkeypatch, worker):
    _connection(monkeypatch, "connect_unit", host="127.0.0.1", port=worker, login="ops", password=SECRET)
    with KafkaConnectHook("connect_unit").get_conn() as client:
        assert client.url == f"http://127.0.0.1:{worker}"
        assert list(client.list_connectors()) == ["sink"]
    ((path, auth),) = _Worker.seen
    assert path.startswith("/connectors?expand=status")
    assert auth == "Basic " + base64.b64encode(f"ops:{SECRET}".encode()).decode()
    assert SECRET not in repr(client)


def test_schema_tls_and_timeout_extras_reach_the_client(monkeypatch):
    _connection(
        monkeypatch,
        "connect_tls",
        host="connect.example",
        port=8443,
        schema="https",
        extra={"verify": "false", "cert": "/etc/c.pem", "key": "/etc/k.pem", "timeout": 7},
    )
    client = KafkaConnectHook("connect_tls", timeout_s=30).get_conn()
    assert client.url == "https://connect.example:8443"
    assert client._session.verify is False and client._session.cert == ("/etc/c.pem", "/etc/k.pem")
    assert client.timeout_s == 7.0  # the connection's timeout wins over the hook's default
    assert client._session.auth is None  # no login: no basic auth


def test_without_a_timeout_extra_the_hooks_timeout_applies(monkeypatch):
    _connection(monkeypatch, "connect_plain", host="http://connect:8083/")
    hook = KafkaConnectHook("connect_plain", timeout_s=3)
    assert hook.client.timeout_s == 3 and hook.client.url == "http://connect:8083"
    assert hook.client is hook.client  # built once per hook


def test_a_connection_without_a_host_or_an_empty_conn_id_is_refused(monkeypatch):
    _connection(monkeypatch, "connect_empty", extra={"timeout": 5})
    with pytest.raises(BadInput, match="no host"):
        KafkaConnectHook("connect_empty").get_conn()
    with pytest.raises(BadInput, match="must name an Airflow connection"):
        KafkaConnectHook("")
