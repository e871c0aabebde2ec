"""The Connect client's pure parts, and its fallback for workers older than KIP-745.

The real 4.3.1 worker (tests/integration) answers the KIP-745 call; it cannot behave like a
2.x worker, so that behaviour is played by a small real HTTP server here, in Connect's wire
format: ``GET /`` answers its version, it ignores the restart flags and answers 204, and
answers the listing with names only (pre-2.3). The same server plays answers the real
worker cannot be made to give on demand (409 while rebalancing, a status stuck in
RESTARTING).
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
    ConnectError,
    ConnectUnreachable,
    UnaddressableConnector,
    UnknownConnector,
    client_from_fields,
    kip745_from_version,
)
from kafka_runbooks.connect.manual import RestartNotSettled, manual_restart, validate_request
from kafka_runbooks.connect.policy import RestartPolicy
from kafka_runbooks.connect.state import JsonStateStore

MM2 = "src->tgt.MirrorSourceConnector"


class OldWorker(BaseHTTPRequestHandler):
    """A Connect 2.2-like worker: no expand, no KIP-745 (flags ignored, 204)."""

    calls: list[tuple[str, str]] = []
    version: str | None = "2.2.0"  # None: GET / is not answered (e.g. a proxy in front)
    post_answer: tuple[int, dict | None] = (204, None)
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
        if path == "/":
            if self.version is None:
                return self._send(404, {"error_code": 404, "message": "HTTP 404 Not Found"})
            return self._send(200, {"version": self.version, "commit": "abc", "kafka_cluster_id": "x"})
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
        self._send(*self.post_answer)


@pytest.fixture
def old_worker():
    OldWorker.calls = []
    OldWorker.version = "2.2.0"
    OldWorker.post_answer = (204, None)
    server = ThreadingHTTPServer(("127.0.0.1", 0), OldWorker)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_old_worker_known_by_its_version_gets_the_old_calls_only(old_worker, tmp_path):
    client = ConnectClient(old_worker)
    report = sweep_cluster("old", client, JsonStateStore("old", tmp_path), RestartPolicy())
    assert client.kip745 is False and client.worker_version == "2.2.0"
    (restart,) = report["restarts"]
    assert restart["method"] == "legacy" and restart["restarted_connector"] is True
    assert restart["restarted_tasks"] == [0]
    posts = [p for m, p in OldWorker.calls if m == "POST"]
    quoted = "src-%3Etgt.MirrorSourceConnector"
    assert posts == [f"/connectors/{quoted}/restart", f"/connectors/{quoted}/tasks/0/restart"]
    assert [p for m, p in OldWorker.calls if m == "GET" and p == "/"] == ["/"]  # read once


def test_without_a_version_the_first_204_decides_for_the_worker_and_is_remembered(old_worker, tmp_path):
    OldWorker.version = None
    client = ConnectClient(old_worker)
    report = sweep_cluster("old", client, JsonStateStore("old", tmp_path), RestartPolicy())
    assert client.kip745 is False and client.worker_version is None
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


@pytest.mark.parametrize(
    ("version", "kip745"),
    [
        ("4.3.1", True),
        ("3.0.0", True),
        ("2.8.2", False),
        ("2.2.0", False),
        ("7.5.0-ccs", True),  # Confluent Platform 7.5 = Kafka 3.5
        ("6.2.1-ce", False),  # Confluent Platform 6.2 = Kafka 2.8
        ("3.9.0-SNAPSHOT", True),
        ("", None),
        (None, None),
        ("unknown", None),
    ],
)
def test_kip745_is_decided_from_the_worker_version(version, kip745):
    assert kip745_from_version(version) is kip745


def test_one_answer_about_one_connector_never_changes_how_the_others_are_restarted(old_worker):
    """Version unknown and a 400 for one connector: an error for that connector only; the
    client does not conclude that the worker is old (it kept doing so for every connector
    after it)."""
    OldWorker.version = None
    OldWorker.post_answer = (400, {"error_code": 400, "message": "Bad request"})
    client = ConnectClient(old_worker)
    with pytest.raises(ConnectError, match="HTTP 400: Bad request") as err:
        client.restart("ok")
    assert not isinstance(err.value, UnaddressableConnector) and not err.value.refused
    assert client.kip745 is None  # still undecided
    body = {"name": "ok", "connector": {"state": "RUNNING"}, "tasks": [{"id": 0, "state": "RESTARTING"}]}
    OldWorker.post_answer = (202, body)
    outcome = client.restart("ok")
    assert outcome.method == "kip-745" and outcome.restarted_tasks == (0,) and client.kip745 is True


def test_jettys_ambiguous_uri_page_is_an_unaddressable_connector(old_worker):
    OldWorker.version = "4.3.1"
    page = (
        '<html>\n<head>\n<meta http-equiv="Content-Type" content="text/html;charset=ISO-8859-1"/>\n'
        "<title>Error 400 Ambiguous URI path separator</title>\n</head>\n<body>\n"
        "<h2>HTTP ERROR 400 Ambiguous URI path separator</h2>\n</body>\n</html>\n"
    )

    class Jetty(OldWorker):
        def do_POST(self):
            self.calls.append(("POST", self.path))
            data = page.encode()
            self.send_response(400)
            self.send_header("Content-Type", "text/html;charset=iso-8859-1")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Jetty)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = ConnectClient(f"http://127.0.0.1:{server.server_address[1]}")
        with pytest.raises(UnaddressableConnector) as err:
            client.restart("a/b")
    finally:
        server.shutdown()
        server.server_close()
    assert err.value.answer == "restarting 'a/b': HTTP 400: Error 400 Ambiguous URI path separator"
    assert "connector-a/b" in str(err.value) and "target-state-a/b" in str(err.value)
    assert client.kip745 is True  # the version decided; the answer about one name did not change it


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


def test_restart_calls_that_keep_failing_alert_and_fail_raise_alerts(old_worker, tmp_path):
    """409 (a rebalance) on every sweep: nothing restarted, not counted, but after
    errors_before_alert answers in a row every sweep alerts and raise_alerts fails."""
    from kafka_runbooks_airflow.connect import raise_on_alerts

    OldWorker.version = "4.3.1"
    OldWorker.post_answer = (409, {"error_code": 409, "message": "Cannot complete request momentarily"})
    store = JsonStateStore("busy", tmp_path)
    policy = RestartPolicy(errors_before_alert=3)
    reports = [sweep_cluster("busy", ConnectClient(old_worker), store, policy) for _ in range(4)]
    rows = [next(r for r in rep["connectors"] if r["name"] == MM2) for rep in reports]
    assert [r["action"] for r in rows] == ["restart_failed"] * 4
    assert [(r["restart_count"], r["error_streak"]) for r in rows] == [(0, 1), (0, 2), (0, 3), (0, 4)]
    assert [len(rep["errors"]) for rep in reports] == [1, 1, 1, 1]
    assert [[a["alert"] for a in rep["alerts"]] for rep in reports] == [
        [],
        [],
        ["restart calls failing"],
        ["restart calls failing"],
    ]
    assert "HTTP 409" in reports[2]["alerts"][0]["error"]
    top = {"alerts": reports[2]["alerts"], "errors": reports[2]["errors"], "restarts": []}
    with pytest.raises(RuntimeError, match="restart calls failing"):
        raise_on_alerts(top, fail_on_alert=True)
    assert raise_on_alerts({"alerts": [], "errors": reports[0]["errors"]}, True)["errors"] == 1
    # the connector recovers by itself: the streak is forgotten
    OldWorker.status = {**OldWorker.status, MM2: {"state": "RUNNING", "tasks": {0: "RUNNING", 1: "RUNNING"}}}
    try:
        healed = sweep_cluster("busy", ConnectClient(old_worker), store, policy)
    finally:
        OldWorker.status = {
            **OldWorker.status,
            MM2: {"state": "FAILED", "tasks": {0: "FAILED", 1: "RUNNING"}},
        }
    row = next(r for r in healed["connectors"] if r["name"] == MM2)
    assert row["error_streak"] == 0 and healed["alerts"] == [] and MM2 not in store.load()


def test_a_manual_restart_whose_task_stays_restarting_fails_with_what_was_seen(old_worker, monkeypatch):
    monkeypatch.setattr(OldWorker, "status", {"stuck": {"state": "RUNNING", "tasks": {0: "RESTARTING"}}})
    client = ConnectClient(old_worker)
    with pytest.raises(RestartNotSettled, match=r"task 0 RESTARTING not RUNNING after 1s") as err:
        manual_restart(client, "stuck", "tasks", [0], settle_timeout_s=1.0, stable_s=0.5)
    assert err.value.seen == {"connector": ["RUNNING"], "task 0": ["RESTARTING"]}
    warned = manual_restart(
        client, "stuck", "tasks", [0], settle_timeout_s=0.5, stable_s=0.5, fail_if_not_settled=False
    )
    assert warned["settled"] is False and warned["after"]["tasks"] == {"0": "RESTARTING"}
    assert warned["http_statuses"] == [204]
