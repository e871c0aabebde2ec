"""The Connect client's pure parts, and its fallback for workers older than KIP-745.

The real 4.3.1 worker (tests/integration) answers the KIP-745 call; it cannot behave like a
2.x worker, so that behaviour is played by a small real HTTP server here: it ignores the
restart flags and answers 204, and answers the listing with names only (pre-2.3).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

import pytest

from kafka_runbooks.connect.autorestart import sweep_cluster
from kafka_runbooks.connect.client import (
    ConnectClient,
    ConnectUnreachable,
    UnknownConnector,
    client_from_fields,
)
from kafka_runbooks.connect.manual import validate_request
from kafka_runbooks.connect.policy import RestartPolicy
from kafka_runbooks.connect.state import JsonStateStore

MM2 = "src->tgt.MirrorSourceConnector"


class OldWorker(BaseHTTPRequestHandler):
    """A Connect 2.2-like worker: no expand, no KIP-745 (flags ignored, 204)."""

    calls: list[tuple[str, str]] = []
    status = {
        MM2: {"state": "FAILED", "tasks": {0: "FAILED", 1: "RUNNING"}},
        "ok": {"state": "RUNNING", "tasks": {0: "RUNNING"}},
    }

    def log_message(self, *args):
        pass

    def _send(self, code, body=None):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        path = urlsplit(self.path).path
        self.calls.append(("GET", self.path))
        if path == "/connectors":
            return self._send(200, sorted(self.status))
        name = unquote(path.split("/")[2])
        s = self.status.get(name)
        if s is None:
            return self._send(404, {"error_code": 404, "message": f"Connector {name} not found"})
        tasks = [{"id": i, "state": st, "worker_id": "w"} for i, st in s["tasks"].items()]
        return self._send(
            200, {"name": name, "connector": {"state": s["state"]}, "tasks": tasks, "type": "source"}
        )

    def do_POST(self):
        self.calls.append(("POST", self.path))
        self._send(204)


@pytest.fixture
def old_worker():
    OldWorker.calls = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), OldWorker)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_old_worker_falls_back_to_per_task_calls_and_remembers(old_worker, tmp_path):
    client = ConnectClient(old_worker)
    report = sweep_cluster("old", client, JsonStateStore("old", tmp_path), RestartPolicy())
    assert client.kip745 is False
    (restart,) = report["restarts"]
    assert restart["method"] == "legacy" and restart["restarted_connector"] is True
    assert restart["restarted_tasks"] == [0]
    posts = [p for m, p in OldWorker.calls if m == "POST"]
    quoted = "src-%3Etgt.MirrorSourceConnector"
    assert posts == [
        f"/connectors/{quoted}/restart?includeTasks=true&onlyFailed=true",  # answered 204: old worker
        f"/connectors/{quoted}/tasks/0/restart",
    ]
    # a later restart goes straight to the old calls
    OldWorker.calls = []
    outcome = client.restart(MM2)
    assert outcome.method == "legacy"
    assert [p for m, p in OldWorker.calls if m == "POST"] == [
        f"/connectors/{quoted}/restart",
        f"/connectors/{quoted}/tasks/0/restart",
    ]


def test_unreachable_worker_is_reported_and_credentials_never_leak(tmp_path):
    client = client_from_fields("http://127.0.0.1:9", login="ops", password="s3cret-pw", extra={"timeout": 2})
    assert "s3cret" not in repr(client)
    with pytest.raises(ConnectUnreachable) as err:
        client.list_connectors()
    assert "s3cret" not in str(err.value)
    report = sweep_cluster("down", client, JsonStateStore("down", tmp_path), RestartPolicy())
    assert report["reachable"] is False and report["alerts"][0]["alert"] == "unreachable"
    assert "s3cret" not in json.dumps(report)


def test_url_from_connection_fields():
    assert client_from_fields("connect.example", port=8083).url == "http://connect.example:8083"
    assert client_from_fields("connect.example", schema="https").url == "https://connect.example"
    assert client_from_fields("http://127.0.0.1:8083/").url == "http://127.0.0.1:8083"
    assert client_from_fields("http://127.0.0.1", port=8083).url == "http://127.0.0.1:8083"
    assert client_from_fields("https://u:p@c:8443").url == "https://c:8443"
    c = client_from_fields("c", extra={"verify": "false", "cert": "/c.pem", "key": "/k.pem"})
    assert c._session.verify is False and c._session.cert == ("/c.pem", "/k.pem")
    with pytest.raises(ValueError, match="no host"):
        client_from_fields("")
    with pytest.raises(ValueError, match="http or https"):
        ConnectClient("ftp://x")


def test_old_worker_unknown_connector(old_worker):
    with pytest.raises(UnknownConnector):
        ConnectClient(old_worker, kip745=False).restart("nope")


@pytest.mark.parametrize(
    ("scope", "ids", "message"),
    [
        ("tasks", [], "needs task_ids"),
        ("failed", [1], "only for scope 'tasks'"),
        ("tasks", [-1], "integers >= 0"),
        ("tasks", ["1"], "integers >= 0"),
        ("everything", [], "scope must be one of"),
    ],
)
def test_bad_manual_requests_fail_before_any_call(scope, ids, message):
    with pytest.raises(ValueError, match=message):
        validate_request("c", scope, ids)


def test_manual_request_needs_a_connector_name():
    with pytest.raises(ValueError, match="connector's name"):
        validate_request(" ", "failed", [])
    assert validate_request("c", "tasks", [2, 0, 2]) == [0, 2]
