"""The test Airflow's REST driver against a real HTTP server standing in for the API server.

A loaded two-core machine made the API server's SQLite metadata DB answer "Database error"
(HTTP 500, the transaction rolled back) to a PATCH of a task instance: the driver sends such a
request again; any other error is raised at once.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kafka_runbooks_dev.localstack.airflow import AirflowError, AirflowLocal


def _server(answers: list[tuple[int, str]]):
    """An HTTP server that answers each PATCH with the next (status, body) and hands out tokens."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def _send(self, status: int, body: str) -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._send(201, json.dumps({"access_token": "t"}))

        def do_PATCH(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append(self.path)
            self._send(*answers.pop(0))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


def _driver(tmp_path, port: int) -> AirflowLocal:
    """The driver as the tests use it, with the admin password Airflow would have generated."""
    (tmp_path / "simple_auth_manager_passwords.json.generated").write_text(json.dumps({"admin": "pw"}))
    return AirflowLocal(tmp_path, port=port, dags_folders=tmp_path)


def test_a_busy_metadata_db_is_asked_again_and_the_answer_returned(tmp_path, monkeypatch):
    monkeypatch.setattr("kafka_runbooks_dev.localstack.airflow.time.sleep", lambda s: None)
    busy = (500, json.dumps({"detail": "Database error"}))
    server, seen = _server([busy, busy, (200, json.dumps({"state": "failed"}))])
    try:
        assert _driver(tmp_path, server.server_port).api("PATCH", "/x", json={}) == {"state": "failed"}
    finally:
        server.shutdown()
    assert seen == ["/api/v2/x"] * 3


def test_any_other_error_is_raised_at_once(tmp_path, monkeypatch):
    monkeypatch.setattr("kafka_runbooks_dev.localstack.airflow.time.sleep", lambda s: None)
    server, seen = _server([(500, json.dumps({"detail": "Internal Server Error"})), (200, "{}")])
    try:
        with pytest.raises(AirflowError, match="HTTP 500") as failed:
            _driver(tmp_path, server.server_port).api("PATCH", "/x", json={})
    finally:
        server.shutdown()
    assert failed.value.status == 500 and seen == ["/api/v2/x"]
