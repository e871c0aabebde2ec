"""How a node is actually restarted: the local stack's processes, or Kubernetes pods.

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


def backend_from_config(extra: dict) -> RestartBackend:
    kind = extra.get("backend", "localstack")
    if kind == "localstack":
        if not extra.get("stack_home"):
            raise ValueError("a localstack restart back end needs 'stack_home' in the connection extras")
        return LocalStackBackend(extra["stack_home"], float(extra.get("stop_timeout_s", 120)))
    raise ValueError(f"unknown restart back end {kind!r}")
