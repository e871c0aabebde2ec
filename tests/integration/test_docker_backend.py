"""The Docker restart back end against a fake Docker Engine on a unix socket, speaking the
Engine API's wire format (no Docker engine can run on this machine). The fake records
every request, so each test asserts exactly what the back end asked the engine to do."""

from __future__ import annotations

import json
import socketserver
import threading
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler

import pytest

from kafka_runbooks.restart.backends import backend_from_config
from kafka_runbooks.restart.docker import DockerApiError, DockerBackend

_pids = iter(range(4000, 9000))


def _start(state: dict) -> None:
    """A (re)start as the engine reports it: a new main pid and StartedAt (RFC 3339, ns)."""
    state.update(
        Running=True,
        Pid=next(_pids),
        StartedAt=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z",
    )


class FakeEngine(BaseHTTPRequestHandler):
    containers: dict[str, dict] = {}
    requests: list[dict] = []
    restart_does_nothing = False  # an engine that answers 204 and restarts nothing

    def _reply(self, code: int, body: dict | None = None) -> None:
        payload = b"" if body is None else json.dumps(body).encode()
        self.send_response(code)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _handle(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        path, _, query = self.path.partition("?")
        self.requests.append({"method": method, "path": path, "query": query})
        parts = path.strip("/").split("/")  # containers/<name>/<action>
        name = parts[1] if len(parts) == 3 and parts[0] == "containers" else None
        if name not in self.containers:
            self._reply(404, {"message": f"No such container: {name}"})
            return
        state = self.containers[name]["State"]
        action = parts[2]
        if (method, action) == ("GET", "json"):
            self._reply(200, self.containers[name])
        elif (method, action) == ("POST", "restart"):
            if not self.restart_does_nothing:
                _start(state)
            self._reply(204)
        elif (method, action) == ("POST", "kill"):
            if not state["Running"]:
                self._reply(409, {"message": f"Container {name} is not running"})
                return
            state["Running"] = False
            self._reply(204)
        elif (method, action) == ("POST", "start"):
            if state["Running"]:
                self._reply(304)
                return
            _start(state)
            self._reply(204)
        else:
            self._reply(404, {"message": "page not found"})

    def do_GET(self):  # noqa: N802
        self._handle("GET")

    def do_POST(self):  # noqa: N802
        self._handle("POST")

    def log_message(self, *args):
        pass


class _UnixHTTPServer(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True

    def get_request(self):
        request, _ = super().get_request()
        return request, ("fake-engine", 0)  # BaseHTTPRequestHandler wants a (host, port)


def _container(name: str, running: bool = True) -> dict:
    state = {"Status": "running", "Running": running, "Pid": 0, "StartedAt": "0001-01-01T00:00:00Z"}
    if running:
        _start(state)
    return {"Id": "c-" + name, "Name": "/" + name, "State": state}


@pytest.fixture
def engine(tmp_path):
    FakeEngine.containers = {
        "kafka-runbooks-broker-1": _container("kafka-runbooks-broker-1"),
        "kafka-runbooks-broker-2": _container("kafka-runbooks-broker-2"),
        "kafka-runbooks-controller-9001": _container("kafka-runbooks-controller-9001", running=False),
    }
    FakeEngine.requests = []
    FakeEngine.restart_does_nothing = False
    sock = tmp_path / "docker.sock"
    server = _UnixHTTPServer(str(sock), FakeEngine)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"unix://{sock}"
    server.shutdown()
    server.server_close()


def test_restart_is_one_engine_restart_with_the_stop_timeout(engine):
    backend = DockerBackend(container_name_template="kafka-runbooks-broker-{node_id}", docker_host=engine)
    action = backend.restart(2)
    assert FakeEngine.requests == [
        {"method": "POST", "path": "/containers/kafka-runbooks-broker-2/restart", "query": "t=120"}
    ]
    assert "kafka-runbooks-broker-2" in action and "SIGTERM" in action


def test_force_restart_kills_then_starts(engine):
    backend = DockerBackend(
        containers={"1": "kafka-runbooks-broker-1"}, docker_host=engine, stop_timeout_s=30
    )
    backend.force_restart(1)
    assert [(r["method"], r["path"]) for r in FakeEngine.requests] == [
        ("POST", "/containers/kafka-runbooks-broker-1/kill"),
        ("POST", "/containers/kafka-runbooks-broker-1/start"),
    ]
    assert FakeEngine.containers["kafka-runbooks-broker-1"]["State"]["Running"] is True


def test_running_reads_the_container_state(engine):
    backend = DockerBackend(
        containers={"9001": "kafka-runbooks-controller-9001"},
        container_name_template="kafka-runbooks-broker-{node_id}",
        docker_host=engine,
    )
    assert backend.is_running(1) is True
    assert backend.is_running(9001) is False  # exited
    assert backend.is_running(7) is False  # no such container
    assert [r["path"] for r in FakeEngine.requests] == [
        "/containers/kafka-runbooks-broker-1/json",
        "/containers/kafka-runbooks-controller-9001/json",
        "/containers/kafka-runbooks-broker-7/json",
    ]


def test_engine_errors_are_raised_with_the_engine_message(engine):
    backend = DockerBackend(container_name_template="kafka-runbooks-broker-{node_id}", docker_host=engine)
    with pytest.raises(DockerApiError, match="No such container: kafka-runbooks-broker-7"):
        backend.restart(7)
    with pytest.raises(DockerApiError, match="409"):
        DockerBackend(containers={9001: "kafka-runbooks-controller-9001"}, docker_host=engine).force_restart(
            9001
        )


def test_unreachable_engine_means_unknown_state(tmp_path):
    backend = DockerBackend(
        container_name_template="x-{node_id}", docker_host=f"unix://{tmp_path / 'absent.sock'}"
    )
    assert backend.is_running(1) is None


def test_config_builds_the_docker_back_end_and_names_what_is_missing(engine):
    backend = backend_from_config(
        {
            "backend": "docker",
            "container_name_template": "kafka-runbooks-broker-{node_id}",
            "docker_host": engine,
        }
    )
    assert isinstance(backend, DockerBackend) and backend.is_running(2) is True
    with pytest.raises(ValueError, match="containers"):
        backend_from_config({"backend": "docker"})
    with pytest.raises(ValueError, match="docker_host"):
        backend_from_config({"backend": "docker", "container_name_template": "x", "docker_host": "ssh://h"})


def test_restart_evidence_is_the_engines_start_time_and_pid(engine):
    from kafka_runbooks.restart.backends import restart_observed

    backend = DockerBackend(container_name_template="kafka-runbooks-broker-{node_id}", docker_host=engine)
    before = backend.evidence(1)
    assert before["started_at_ms"] and before["identity"].startswith("pid ")
    FakeEngine.restart_does_nothing = True
    backend.restart(1)  # 204, and nothing happened
    assert restart_observed(before, backend.evidence(1))[0] is False
    FakeEngine.restart_does_nothing = False
    backend.restart(1)
    observed, why = restart_observed(before, backend.evidence(1))
    assert observed, why
    never_started = DockerBackend(containers={"9001": "kafka-runbooks-controller-9001"}, docker_host=engine)
    assert never_started.evidence(9001)["started_at_ms"] is None  # Docker's zero time
    assert (
        "404"
        in DockerBackend(container_name_template="nope-{node_id}", docker_host=engine).evidence(1)["error"]
    )
    assert "error" in DockerBackend(
        container_name_template="x-{node_id}", docker_host="unix:///nonexistent"
    ).evidence(1)
