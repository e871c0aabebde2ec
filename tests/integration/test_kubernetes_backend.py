"""The Kubernetes restart back end, through the real ``kubernetes`` client, against a fake
API server that speaks the real wire format (no API server can run on this machine).
The fake records every request so the test can assert exactly what was sent."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kafka_runbooks.restart.backends import STRIMZI_MANUAL_ROLL, KubernetesBackend, backend_from_config


def _pod(name: str, phase: str = "Running") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "kafka", "uid": "u-" + name, "annotations": {}},
        "spec": {"containers": [{"name": "kafka", "image": "quay.io/strimzi/kafka"}]},
        "status": {"phase": phase},
    }


def _status(code: int, reason: str, message: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Status",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


class FakeApiServer(BaseHTTPRequestHandler):
    pods: dict[str, dict] = {}
    requests: list[dict] = []

    def _reply(self, code: int, body: dict) -> None:
        payload = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _handle(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        path, _, query = self.path.partition("?")
        self.requests.append(
            {
                "method": method,
                "path": path,
                "query": query,
                "body": body,
                "content_type": self.headers.get("Content-Type"),
            }
        )
        prefix = "/api/v1/namespaces/kafka/pods/"
        name = path[len(prefix) :] if path.startswith(prefix) else None
        if name is None or name not in self.pods:
            self._reply(404, _status(404, "NotFound", f'pods "{name}" not found'))
            return
        pod = self.pods[name]
        if method == "PATCH":
            pod["metadata"]["annotations"].update(body["metadata"]["annotations"])
        if method == "DELETE":
            del self.pods[name]
        self._reply(200, pod)

    def do_GET(self):  # noqa: N802
        self._handle("GET")

    def do_PATCH(self):  # noqa: N802
        self._handle("PATCH")

    def do_DELETE(self):  # noqa: N802
        self._handle("DELETE")

    def log_message(self, *args):
        pass


@pytest.fixture
def api():
    FakeApiServer.pods = {f"my-cluster-kafka-{i}": _pod(f"my-cluster-kafka-{i}") for i in (0, 1, 2)}
    FakeApiServer.pods["my-cluster-kafka-2"]["status"]["phase"] = "Pending"
    FakeApiServer.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeApiServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    from kubernetes import client

    config = client.Configuration()
    config.host = f"http://127.0.0.1:{server.server_address[1]}"
    yield client.CoreV1Api(client.ApiClient(config))
    server.shutdown()


def test_strimzi_pods_are_rolled_by_annotation_not_deleted(api):
    backend = KubernetesBackend(api, "kafka", "my-cluster-kafka-{node_id}", strimzi=True)
    action = backend.restart(1)
    [req] = FakeApiServer.requests
    assert (req["method"], req["path"]) == ("PATCH", "/api/v1/namespaces/kafka/pods/my-cluster-kafka-1")
    assert req["body"] == {"metadata": {"annotations": {STRIMZI_MANUAL_ROLL: "true"}}}
    assert req["content_type"].startswith("application/") and "patch" in req["content_type"]
    assert "my-cluster-kafka-1" in FakeApiServer.pods and STRIMZI_MANUAL_ROLL in action


def test_statefulset_pods_are_deleted(api):
    backend = KubernetesBackend(api, "kafka", "my-cluster-kafka-{node_id}", grace_period_s=120)
    backend.restart(0)
    [req] = FakeApiServer.requests
    assert (req["method"], req["path"]) == ("DELETE", "/api/v1/namespaces/kafka/pods/my-cluster-kafka-0")
    assert "gracePeriodSeconds=120" in req["query"]
    assert "my-cluster-kafka-0" not in FakeApiServer.pods


def test_force_restart_deletes_with_zero_grace(api):
    KubernetesBackend(api, "kafka", "my-cluster-kafka-{node_id}", strimzi=True).force_restart(2)
    [req] = FakeApiServer.requests
    assert req["method"] == "DELETE" and "gracePeriodSeconds=0" in req["query"]


def test_running_means_phase_running(api):
    backend = KubernetesBackend(api, "kafka", "my-cluster-kafka-{node_id}")
    assert backend.is_running(0) is True
    assert backend.is_running(2) is False  # Pending
    assert backend.is_running(7) is False  # no such pod
    assert [r["method"] for r in FakeApiServer.requests] == ["GET", "GET", "GET"]


def test_config_errors_name_what_is_missing(api):
    with pytest.raises(ValueError, match="pod_name_template"):
        backend_from_config({"backend": "kubernetes", "namespace": "kafka"}, core_v1=api)
    with pytest.raises(ValueError, match="unknown restart back end"):
        backend_from_config({"backend": "ssh"})
