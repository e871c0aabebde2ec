"""Restart back end for Kafka nodes that run as Docker containers (docker-compose.yaml).

It talks to the Docker Engine API directly (HTTP over the engine's unix socket, or a TCP
address such as a socket proxy's), with the standard library only: one request per
action, so what the runbook did is exactly what the engine was asked.

- ``restart``: ``POST /containers/{name}/restart?t=<stop_timeout_s>``: the engine sends
  SIGTERM (a broker does a controlled shutdown), waits, then SIGKILL, then starts it.
- ``force_restart``: ``POST /containers/{name}/kill`` then ``POST /containers/{name}/start``.
- ``is_running``: ``GET /containers/{name}/json``, ``State.Running`` and not restarting.
- ``evidence``: the same answer's ``State.StartedAt`` and ``State.Pid``: a restart is
  counted only when they changed from what the engine said just before the request (the
  engine answering 204 is not), never against the worker's clock.
"""

from __future__ import annotations

import http.client
import json
import socket
from urllib.parse import quote, urlsplit

from kafka_runbooks.errors import BadInput, CallFailed
from kafka_runbooks.restart.timestamps import parse_rfc3339_ms

DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"


class DockerApiError(CallFailed):
    """The engine answered with an error; the message carries its status and reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"Docker Engine API answered {status}: {message}")
        self.status = status


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        """Connect to the Docker daemon's unix socket instead of a TCP host."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


class DockerBackend:
    """Kafka nodes as containers: node id -> container name.

    :param containers: explicit ``{node_id: container name}``, and/or
    :param container_name_template: e.g. ``kafka-runbooks-broker-{node_id}``.
    :param docker_host: ``unix:///var/run/docker.sock`` or ``tcp://host:2375``.
    """

    name = "docker"

    def __init__(
        self,
        containers: dict | None = None,
        container_name_template: str | None = None,
        docker_host: str = DEFAULT_DOCKER_HOST,
        stop_timeout_s: int = 120,
        request_timeout_s: float | None = None,
    ) -> None:
        if not containers and not container_name_template:
            raise BadInput("a docker restart back end needs 'containers' or 'container_name_template'")
        self.containers = {int(k): str(v) for k, v in (containers or {}).items()}
        self.container_name_template = container_name_template
        self.docker_host = docker_host
        self.stop_timeout_s = int(stop_timeout_s)
        # A restart returns only once the container is stopped and started again.
        self.request_timeout_s = request_timeout_s or self.stop_timeout_s + 60.0
        scheme = urlsplit(docker_host).scheme
        if scheme not in ("unix", "tcp", "http"):
            raise BadInput(f"docker_host {docker_host!r}: use unix:///path or tcp://host:port")

    def container(self, node_id: int) -> str:
        """The container of ``node_id``: its configured name, else the template; KeyError when neither
        names it."""
        if node_id in self.containers:
            return self.containers[node_id]
        if self.container_name_template:
            return self.container_name_template.format(node_id=node_id)
        raise KeyError(f"no container configured for node {node_id} (known: {sorted(self.containers)})")

    def _request(self, method: str, path: str) -> tuple[int, dict | None]:
        url = urlsplit(self.docker_host)
        if url.scheme == "unix":
            conn: http.client.HTTPConnection = _UnixConnection(url.path, self.request_timeout_s)
        else:
            conn = http.client.HTTPConnection(
                url.hostname or "localhost", url.port or 2375, timeout=self.request_timeout_s
            )
        try:
            conn.request(method, path, headers={"Content-Type": "application/json", "Content-Length": "0"})
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        body = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = {"message": raw.decode(errors="replace")[:500]}
        return resp.status, body

    def _post(self, path: str) -> None:
        status, body = self._request("POST", path)
        if status not in (204, 304):
            raise DockerApiError(status, (body or {}).get("message", ""))

    def is_running(self, node_id: int) -> bool | None:
        """Docker's inspect (``GET /containers/<name>/json``): running and not restarting; False when the
        container does not exist, None when the daemon cannot tell."""
        try:
            status, body = self._request("GET", f"/containers/{quote(self.container(node_id))}/json")
        except OSError:
            return None
        if status == 404:
            return False
        if status != 200 or not body:
            return None
        state = body.get("State") or {}
        return bool(state.get("Running")) and not state.get("Restarting", False)

    def evidence(self, node_id: int) -> dict:
        """The container's start time and main pid, as the engine reports them; never raises."""
        out: dict = {"source": f"container {node_id}"}
        try:
            name = self.container(node_id)
            out["source"] = f"container {name}"
            status, body = self._request("GET", f"/containers/{quote(name)}/json")
        except (OSError, KeyError, http.client.HTTPException) as exc:
            out["error"] = f"{type(exc).__name__}: {exc}"
            return out
        if status != 200 or not isinstance(body, dict) or not isinstance(body.get("State"), dict):
            out["error"] = f"Docker Engine API answered {status}"
            return out
        state = body["State"]
        out["started_at_ms"] = parse_rfc3339_ms(state.get("StartedAt"))
        pid = state.get("Pid")
        out["identity"] = f"pid {pid}" if isinstance(pid, int) and pid > 0 else None
        return out

    def restart(self, node_id: int) -> str:
        """``POST /containers/<name>/restart``: SIGTERM, up to ``stop_timeout_s`` to stop, then start; the
        sentence for the decision record."""
        name = self.container(node_id)
        self._post(f"/containers/{quote(name)}/restart?t={self.stop_timeout_s}")
        return f"restarted container {name} (SIGTERM, up to {self.stop_timeout_s}s to stop, then started)"

    def force_restart(self, node_id: int) -> str:
        """Kill (SIGKILL) and start the container, for a node stuck in shutdown; the sentence for the
        decision record."""
        name = self.container(node_id)
        self._post(f"/containers/{quote(name)}/kill")
        self._post(f"/containers/{quote(name)}/start")
        return f"killed container {name} (SIGKILL) and started it again"
