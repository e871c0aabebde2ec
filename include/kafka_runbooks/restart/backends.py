"""How a node is actually restarted: Kubernetes pods, Docker containers
(docker-compose.yaml; see ``docker.py``), or a back end another package registers by
name (the local stack's processes: ``kafka_runbooks_dev.restart_backend``).

A back end only acts; every decision to act is the roller's. ``restart`` is the clean
path (SIGTERM: a broker moves leadership away and shuts down in order);
``force_restart`` is for a node that is stuck and not recovering, and only when the run
allows it.

A restart is observed, never assumed: ``evidence`` tells what identifies the node's
current process (pid or pod UID, start time, container restart count) and the roller
counts a node as restarted only when that evidence changed from what the same source
said just before the request (``restart_observed``), never by comparing a remote start
time with the worker's clock. Asking is not doing: a Strimzi-annotated pod keeps running
until the operator rolls it, a stop can time out, an engine can answer and do nothing.
"""

from __future__ import annotations

from typing import Any, Protocol

from kafka_runbooks.errors import BadInput
from kafka_runbooks.restart.timestamps import parse_rfc3339_ms

#: evidence that identifies one process of a node: a restart changes at least one of them.
#: Start times are read from the node's own host, engine or exporter: they are compared
#: only with the same key read from the same source before the request, never with the
#: worker's clock (a host two minutes ahead would make every process look new).
EVIDENCE_KEYS = ("identity", "restart_count", "started_at_ms", "process_start_ms")


class RestartBackend(Protocol):
    name: str

    def is_running(self, node_id: int) -> bool | None:
        """True/False when the back end can tell, None when it cannot."""

    def restart(self, node_id: int) -> str:
        """Clean restart; returns a sentence for the decision record."""

    def force_restart(self, node_id: int) -> str:
        """Hard restart of a stuck node."""

    def evidence(self, node_id: int) -> dict[str, Any]:
        """What identifies the node's current process now; never raises (``error`` says why not)."""


def restart_observed(before: dict, now: dict) -> tuple[bool, str]:
    """Has the node's process changed since the evidence read just before the request?

    Each key (start time, pid or pod UID, container restart count) is compared only with
    the same key from the same source before the request: a changed value is a new
    process. A source that said no process ran before (``running: False``) and names one now
    saw a new process. A key not read on both sides proves nothing ("unknown" is never "restarted");
    a roll still pending (the Strimzi annotation still on the pod) is not done, whatever
    else changed.
    """
    if now.get("roll_pending"):
        return False, "the roll is still pending (the pod still carries the roll annotation)"
    if before.get("running") is False and now.get("identity"):
        # the same source said no process ran before the request (a crashed node being
        # force-restarted): a process now is a new one
        return True, f"no process ran just before the restart request; now {now['identity']}"
    for key in EVIDENCE_KEYS:
        value, old = now.get(key), before.get(key)
        if value is not None and old is not None and value != old:
            return True, f"{key} changed from {old} (read just before the restart request) to {value}"
    if not any(now.get(k) is not None for k in EVIDENCE_KEYS):
        return False, "no restart evidence could be read: " + str(now.get("error") or "no source")
    if not any(now.get(k) is not None and before.get(k) is not None for k in EVIDENCE_KEYS):
        return False, (
            "no evidence read before the restart request to compare with: "
            + str(before.get("error") or "none recorded")
        )
    return False, "no evidence changed since just before the restart request yet"


STRIMZI_MANUAL_ROLL = "strimzi.io/manual-rolling-update"


class KubernetesBackend:
    """Kubernetes pods, through a ``kubernetes.client.CoreV1Api``.

    - Strimzi-managed (``strimzi=True``): annotate the pod with
      ``strimzi.io/manual-rolling-update=true``; Strimzi's own roller restarts it at its
      next reconciliation, with its own checks. That is how Strimzi expects a manual roll
      of one pod; deleting the pod under the operator's feet is not. The pod keeps
      running until then: the roller waits for a new pod (UID, start time) without the
      annotation before it goes on to the next node.
    - plain StatefulSet: delete the pod; the StatefulSet controller recreates it.
    ``force_restart`` deletes the pod with a zero grace period, in both cases.
    """

    name = "kubernetes"

    def __init__(
        self,
        core_v1,
        namespace: str,
        pod_name_template: str,
        strimzi: bool = False,
        grace_period_s: int | None = None,
        container_name: str = "kafka",
    ) -> None:
        self.core_v1 = core_v1
        self.container_name = container_name
        self.namespace = namespace
        self.pod_name_template = pod_name_template
        self.strimzi = strimzi
        self.grace_period_s = grace_period_s

    def pod_name(self, node_id: int) -> str:
        """The pod of ``node_id`` from the template (a StatefulSet's ordinal naming)."""
        return self.pod_name_template.format(node_id=node_id)

    def is_running(self, node_id: int) -> bool | None:
        """The pod is in phase Running and not being deleted; False when it does not exist, None when the
        API cannot tell."""
        from kubernetes.client.exceptions import ApiException

        try:
            pod = self.core_v1.read_namespaced_pod(self.pod_name(node_id), self.namespace)
        except ApiException as exc:
            if exc.status == 404:
                return False
            return None
        return (
            pod.status is not None
            and pod.status.phase == "Running"
            and pod.metadata.deletion_timestamp is None
        )

    def restart(self, node_id: int) -> str:
        """A clean restart: with Strimzi, annotate the pod for its operator to roll it; else delete it
        (with its grace period) for the StatefulSet to recreate."""
        name = self.pod_name(node_id)
        if self.strimzi:
            body = {"metadata": {"annotations": {STRIMZI_MANUAL_ROLL: "true"}}}
            self.core_v1.patch_namespaced_pod(name, self.namespace, body)
            return (
                f"annotated pod {self.namespace}/{name} with {STRIMZI_MANUAL_ROLL}=true for Strimzi to roll"
            )
        kwargs = {} if self.grace_period_s is None else {"grace_period_seconds": self.grace_period_s}
        self.core_v1.delete_namespaced_pod(name, self.namespace, **kwargs)
        return f"deleted pod {self.namespace}/{name}; its StatefulSet recreates it"

    def force_restart(self, node_id: int) -> str:
        """Delete the pod with grace period 0 (SIGKILL), for a node stuck in shutdown."""
        name = self.pod_name(node_id)
        self.core_v1.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0)
        return f"deleted pod {self.namespace}/{name} with grace period 0"

    def evidence(self, node_id: int) -> dict[str, Any]:
        """The pod's UID, its Kafka container's restart count and start time, and (Strimzi)
        whether the roll annotation is still on it: Strimzi takes it off by replacing the pod."""
        name = self.pod_name(node_id)
        out: dict[str, Any] = {"source": f"pod {self.namespace}/{name}"}
        try:
            pod = self.core_v1.read_namespaced_pod(name, self.namespace)
        except Exception as exc:
            status = getattr(exc, "status", None)
            out["error"] = "no such pod (being replaced)" if status == 404 else f"{type(exc).__name__}: {exc}"
            return out
        meta = pod.metadata
        out["identity"] = f"uid {meta.uid}" if meta is not None and meta.uid else None
        if self.strimzi:
            annotations = (meta.annotations if meta is not None else None) or {}
            out["roll_pending"] = str(annotations.get(STRIMZI_MANUAL_ROLL, "")).lower() == "true"
        statuses = (pod.status.container_statuses if pod.status is not None else None) or []
        container = next(
            (c for c in statuses if c.name == self.container_name), statuses[0] if statuses else None
        )
        if container is not None:
            out["restart_count"] = container.restart_count
            running = container.state.running if container.state is not None else None
            out["started_at_ms"] = parse_rfc3339_ms(running.started_at) if running is not None else None
        return out


#: entry-point group through which other packages add restart back ends by name (the
#: local stack's own, ``localstack``, lives in the dev package ``kafka_runbooks_dev``)
BACKEND_ENTRY_POINTS = "kafka_runbooks.restart_backends"


def _registered_backend(kind: str, extra: dict) -> RestartBackend | None:
    """A back end another installed package registered under ``kind``, or None.

    The product never imports its dev tooling: the local stack's back end is found here,
    by name, only where the dev package is installed (tests, demo, benchmarks).
    """
    from importlib.metadata import entry_points

    for entry in entry_points(group=BACKEND_ENTRY_POINTS):
        if entry.name == kind:
            try:
                factory = entry.load()
            except ImportError:  # registered by the metadata, its package not shipped here
                return None
            return factory(extra)
    return None


def backend_from_config(extra: dict, core_v1=None) -> RestartBackend:
    """The restart back end a connection's extras name (kubernetes, docker, or one registered by the dev
    tooling); BadInput for a missing setting or an unknown kind."""
    kind = extra.get("backend", "localstack")
    if kind == "kubernetes":
        missing = [k for k in ("namespace", "pod_name_template") if not extra.get(k)]
        if missing:
            raise BadInput(
                f"a kubernetes restart back end needs {', '.join(missing)} in the connection extras"
            )
        if core_v1 is None:
            raise BadInput("a kubernetes restart back end needs a CoreV1Api client")
        return KubernetesBackend(
            core_v1,
            extra["namespace"],
            extra["pod_name_template"],
            strimzi=bool(extra.get("strimzi", False)),
            grace_period_s=extra.get("grace_period_s"),
            container_name=extra.get("container_name", "kafka"),
        )
    if kind == "docker":
        from kafka_runbooks.restart.docker import DEFAULT_DOCKER_HOST, DockerBackend

        return DockerBackend(
            containers=extra.get("containers"),
            container_name_template=extra.get("container_name_template"),
            docker_host=extra.get("docker_host", DEFAULT_DOCKER_HOST),
            stop_timeout_s=int(extra.get("stop_timeout_s", 120)),
        )
    registered = _registered_backend(kind, extra)
    if registered is not None:
        return registered
    if kind == "localstack":
        raise BadInput(
            "the localstack restart back end is dev tooling (package kafka_runbooks_dev), "
            "not installed here; use kubernetes or docker"
        )
    raise BadInput(f"unknown restart back end {kind!r}")
