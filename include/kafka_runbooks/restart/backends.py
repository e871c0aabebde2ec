"""How a node is actually restarted: the local stack's processes, Kubernetes pods, or
Docker containers (docker-compose.yaml; see ``docker.py``).

A back end only acts; every decision to act is the roller's. ``restart`` is the clean
path (SIGTERM: a broker moves leadership away and shuts down in order);
``force_restart`` is for a node that is stuck and not recovering, and only when the run
allows it.
"""

from __future__ import annotations

from typing import Protocol


class RestartBackend(Protocol):
    name: str

    def is_running(self, node_id: int) -> bool | None:
        """True/False when the back end can tell, None when it cannot."""

    def restart(self, node_id: int) -> str:
        """Clean restart; returns a sentence for the decision record."""

    def force_restart(self, node_id: int) -> str:
        """Hard restart of a stuck node."""


class LocalStackBackend:
    """The local stack's process control (tests, demo, benchmarks)."""

    name = "localstack"

    def __init__(self, stack_home: str, stop_timeout_s: float = 120.0) -> None:
        from kafka_runbooks.localstack import LocalStack

        self.stack = LocalStack(home=stack_home)
        self.stop_timeout_s = stop_timeout_s

    def _check(self, node_id: int) -> None:
        self.stack.node(node_id)  # KeyError names the known nodes

    def is_running(self, node_id: int) -> bool | None:
        self._check(node_id)
        return self.stack.is_running(node_id)

    def restart(self, node_id: int) -> str:
        self._check(node_id)
        old = self.stack.pid(node_id)
        self.stack.stop_node(node_id, timeout=self.stop_timeout_s)
        self.stack.start_node(node_id)
        return f"stopped pid {old} with SIGTERM, started pid {self.stack.pid(node_id)}"

    def force_restart(self, node_id: int) -> str:
        self._check(node_id)
        old = self.stack.pid(node_id)
        self.stack.kill(node_id)
        self.stack.start_node(node_id)
        return f"killed pid {old} (SIGKILL), started pid {self.stack.pid(node_id)}"


STRIMZI_MANUAL_ROLL = "strimzi.io/manual-rolling-update"


class KubernetesBackend:
    """Kubernetes pods, through a ``kubernetes.client.CoreV1Api``.

    - Strimzi-managed (``strimzi=True``): annotate the pod with
      ``strimzi.io/manual-rolling-update=true``; Strimzi's own roller restarts it at its
      next reconciliation, with its own checks. That is how Strimzi expects a manual roll
      of one pod; deleting the pod under the operator's feet is not.
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
    ) -> None:
        self.core_v1 = core_v1
        self.namespace = namespace
        self.pod_name_template = pod_name_template
        self.strimzi = strimzi
        self.grace_period_s = grace_period_s

    def pod_name(self, node_id: int) -> str:
        return self.pod_name_template.format(node_id=node_id)

    def is_running(self, node_id: int) -> bool | None:
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
        name = self.pod_name(node_id)
        self.core_v1.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0)
        return f"deleted pod {self.namespace}/{name} with grace period 0"


def backend_from_config(extra: dict, core_v1=None) -> RestartBackend:
    kind = extra.get("backend", "localstack")
    if kind == "localstack":
        if not extra.get("stack_home"):
            raise ValueError("a localstack restart back end needs 'stack_home' in the connection extras")
        return LocalStackBackend(extra["stack_home"], float(extra.get("stop_timeout_s", 120)))
    if kind == "kubernetes":
        missing = [k for k in ("namespace", "pod_name_template") if not extra.get(k)]
        if missing:
            raise ValueError(
                f"a kubernetes restart back end needs {', '.join(missing)} in the connection extras"
            )
        if core_v1 is None:
            raise ValueError("a kubernetes restart back end needs a CoreV1Api client")
        return KubernetesBackend(
            core_v1,
            extra["namespace"],
            extra["pod_name_template"],
            strimzi=bool(extra.get("strimzi", False)),
            grace_period_s=extra.get("grace_period_s"),
        )
    if kind == "docker":
        from kafka_runbooks.restart.docker import DEFAULT_DOCKER_HOST, DockerBackend

        return DockerBackend(
            containers=extra.get("containers"),
            container_name_template=extra.get("container_name_template"),
            docker_host=extra.get("docker_host", DEFAULT_DOCKER_HOST),
            stop_timeout_s=int(extra.get("stop_timeout_s", 120)),
        )
    raise ValueError(f"unknown restart back end {kind!r}")
