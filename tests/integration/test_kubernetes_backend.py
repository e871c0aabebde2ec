"""The Kubernetes restart back end, through the real ``kubernetes`` client, against a fake
API server that speaks the real wire format (no API server can run on this machine).
The fake records every request so the test can assert exactly what was sent.

It behaves as the real API and controllers do: a PATCH with the Strimzi roll annotation
changes nothing else (the pod keeps running until the operator rolls it, which the
test does by calling ``strimzi_roll``), a DELETE leaves the pod terminating until its
StatefulSet recreates it (``recreate``) under a new UID."""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kafka_runbooks.restart.backends import STRIMZI_MANUAL_ROLL, KubernetesBackend, backend_from_config
from kafka_runbooks.restart.roller import WAIT_BACK, Roller, RollFailed, RollOptions
from tests.unit.kafka_runbooks.restart.test_roller import Clock, Cluster

_resource_versions = itertools.count(1000)


def _now_rfc3339() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod(name: str, phase: str = "Running", restart_count: int = 0) -> dict:
    """A pod as the API returns it (the fields the kubernetes client requires included)."""
    started = _now_rfc3339()
    running = phase == "Running"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "kafka",
            "uid": str(uuid.uuid4()),
            "resourceVersion": str(next(_resource_versions)),
            "creationTimestamp": started,
            "labels": {"strimzi.io/cluster": "my-cluster", "strimzi.io/kind": "Kafka"},
            "annotations": {"strimzi.io/revision": "abc123"},
            "ownerReferences": [
                {
                    "apiVersion": "core.strimzi.io/v1beta2",
                    "kind": "StrimziPodSet",
                    "name": "my-cluster-kafka",
                    "uid": "podset-uid",
                    "controller": True,
                }
            ],
        },
        "spec": {"containers": [{"name": "kafka", "image": "quay.io/strimzi/kafka:0.49.0-kafka-4.3.1"}]},
        "status": {
            "phase": phase,
            "containerStatuses": [
                {
                    "name": "kafka",
                    "image": "quay.io/strimzi/kafka:0.49.0-kafka-4.3.1",
                    "imageID": "quay.io/strimzi/kafka@sha256:0123",
                    "containerID": "containerd://" + uuid.uuid4().hex,
                    "ready": running,
                    "started": running,
                    "restartCount": restart_count,
                    "state": {"running": {"startedAt": started}}
                    if running
                    else {"waiting": {"reason": "ContainerCreating"}},
                }
            ],
        },
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
        if method == "PATCH":  # a metadata patch: the pod keeps running as it is
            pod["metadata"]["annotations"].update(body["metadata"]["annotations"])
            pod["metadata"]["resourceVersion"] = str(next(_resource_versions))
        if method == "DELETE":  # graceful: terminating until its controller replaces it
            pod["metadata"]["deletionTimestamp"] = _now_rfc3339()
            pod["metadata"]["deletionGracePeriodSeconds"] = int(
                dict(q.split("=") for q in query.split("&") if "=" in q).get("gracePeriodSeconds", 30)
            )
        self._reply(200, pod)

    def do_GET(self):  # noqa: N802
        self._handle("GET")

    def do_PATCH(self):  # noqa: N802
        self._handle("PATCH")

    def do_DELETE(self):  # noqa: N802
        self._handle("DELETE")

    def log_message(self, *args):
        pass


def strimzi_roll(name: str) -> None:
    """What Strimzi does with an annotated pod at its next reconciliation: delete it, and
    its StrimziPodSet creates a new one (new UID, new start, no roll annotation)."""
    FakeApiServer.pods[name] = _pod(name)


def recreate(name: str) -> None:
    """The StatefulSet controller replacing a deleted pod."""
    FakeApiServer.pods[name] = _pod(name)


def restart_container_in_place(name: str) -> None:
    """The kubelet restarting the container (liveness probe): same pod, restartCount + 1."""
    pod = FakeApiServer.pods[name]
    status = pod["status"]["containerStatuses"][0]
    old = datetime.strptime(status["state"]["running"]["startedAt"], "%Y-%m-%dT%H:%M:%SZ")
    # startedAt has second resolution: the new start is a later second than the old one
    new = max(datetime.now(timezone.utc).replace(tzinfo=None), old + timedelta(seconds=1))
    status["restartCount"] += 1
    status["state"] = {"running": {"startedAt": new.strftime("%Y-%m-%dT%H:%M:%SZ")}}


@pytest.fixture
def api():
    FakeApiServer.pods = {f"my-cluster-kafka-{i}": _pod(f"my-cluster-kafka-{i}") for i in (0, 1, 2, 3)}
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
    assert FakeApiServer.pods["my-cluster-kafka-0"]["metadata"]["deletionTimestamp"]
    assert backend.is_running(0) is False  # terminating


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


# -- the roller on Kubernetes: a restart is observed, never assumed ------------------------------


def _roller(api, strimzi: bool):
    clock = Clock()
    clock.now = int(time.time() * 1000)  # evidence carries real start times
    cluster = Cluster(clock)
    backend = KubernetesBackend(api, "kafka", "my-cluster-kafka-{node_id}", strimzi=strimzi)
    return clock, backend, Roller(cluster, backend, None, clock=clock)


def _patched(method="PATCH"):
    return [r["path"].rsplit("/", 1)[1] for r in FakeApiServer.requests if r["method"] == method]


def test_strimzi_annotates_one_pod_and_waits_until_strimzi_has_rolled_it(api):
    clock, backend, roller = _roller(api, strimzi=True)
    state = roller.plan([1, 3], "test: strimzi", RollOptions(operation_timeout_s=60, max_attempts=2))
    assert roller.step(state) is False
    for _ in range(3):  # more pokes: the pod is still the old one, still Running, still annotated
        assert roller.step(state) is False
    assert _patched() == ["my-cluster-kafka-1"]
    pod = FakeApiServer.pods["my-cluster-kafka-1"]
    assert (
        pod["status"]["phase"] == "Running" and pod["metadata"]["annotations"][STRIMZI_MANUAL_ROLL] == "true"
    )
    assert state.nodes[1].phase == WAIT_BACK and state.nodes[1].last_evidence["roll_pending"] is True

    old_uid = pod["metadata"]["uid"]
    del FakeApiServer.pods["my-cluster-kafka-1"]  # Strimzi deleted it: 404 for a while
    assert roller.step(state) is False
    assert "no such pod" in state.nodes[1].last_evidence["error"]
    strimzi_roll("my-cluster-kafka-1")
    assert roller.step(state) is False  # node 1 done; node 3 annotated, waiting for its roll
    assert "identity changed from uid " + old_uid in state.nodes[1].restart_observed
    assert _patched() == ["my-cluster-kafka-1", "my-cluster-kafka-3"]
    strimzi_roll("my-cluster-kafka-3")
    assert roller.step(state) is True
    assert _patched("DELETE") == []  # Strimzi's pods are never deleted under the operator


def test_a_pod_strimzi_never_rolls_fails_the_run_with_what_was_seen(api):
    clock, backend, roller = _roller(api, strimzi=True)
    state = roller.plan([1, 3], "test: strimzi stalled", RollOptions(operation_timeout_s=10, max_attempts=2))
    roller.step(state)
    with pytest.raises(RollFailed) as failed:
        for _ in range(5):
            clock.now += 11_000
            roller.step(state)
    message = str(failed.value)
    assert "broker 1: its restart was requested but never observed (2 timeouts)" in message
    assert (
        "the roll is still pending" in message
        and FakeApiServer.pods["my-cluster-kafka-1"]["metadata"]["uid"] in message
    )
    assert _patched() == ["my-cluster-kafka-1"]  # node 3 never touched


def test_a_statefulset_pod_counts_as_restarted_once_it_is_replaced(api):
    clock, backend, roller = _roller(api, strimzi=False)
    state = roller.plan([1], "test: statefulset", RollOptions(operation_timeout_s=60))
    assert roller.step(state) is False
    assert roller.step(state) is False  # terminating: not running, not restarted
    recreate("my-cluster-kafka-1")
    assert roller.step(state) is True
    assert "identity changed from uid" in state.nodes[1].restart_observed


def test_a_container_restarted_in_place_counts_by_restart_count_and_start_time(api):
    backend = KubernetesBackend(api, "kafka", "my-cluster-kafka-{node_id}")
    before = backend.evidence(2)
    restart_container_in_place("my-cluster-kafka-2")
    from kafka_runbooks.restart.backends import restart_observed

    now = backend.evidence(2)
    assert (before["restart_count"], now["restart_count"]) == (0, 1) and now["identity"] == before["identity"]
    assert now["started_at_ms"] > before["started_at_ms"]
    assert restart_observed(before, now)[0] is True  # compared with the kubelet's own times only
