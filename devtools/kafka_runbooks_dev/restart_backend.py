"""The local stack's process control as a restart back end (tests, demo, benchmarks).

The product does not import this module: it registers under the name ``localstack`` in
the ``kafka_runbooks.restart_backends`` entry-point group (pyproject.toml), and
``kafka_runbooks.restart.backends.backend_from_config`` finds it there when a
``kafka_restart_default`` connection says ``{"backend": "localstack", "stack_home": ...}``.
An install without the dev package (the production image) cannot select it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kafka_runbooks_dev.localstack import LocalStack


def _proc_start_ms(pid: int) -> int | None:
    """When process ``pid`` started (epoch ms), from /proc; None if it cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # field 22 (starttime), counted after the ")"
        # btime is whole seconds, rounded down: the start time can read early, never late
        btime = next(
            int(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
        return int((btime + ticks / os.sysconf("SC_CLK_TCK")) * 1000)
    except (OSError, ValueError, IndexError, StopIteration):
        return None


class LocalStackBackend:
    """The local stack's process control (tests, demo, benchmarks)."""

    name = "localstack"

    def __init__(self, stack_home: str, stop_timeout_s: float = 120.0) -> None:
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

    def evidence(self, node_id: int) -> dict[str, Any]:
        """The node's pid and its start time (/proc); the start time is second-accurate at worst."""
        try:
            pid = self.stack.pid(node_id)
        except Exception as exc:
            return {"source": self.name, "error": f"{type(exc).__name__}: {exc}"}
        if pid is None:
            return {"source": self.name, "running": False, "error": "no process running"}
        return {"source": self.name, "identity": f"pid {pid}", "started_at_ms": _proc_start_ms(pid)}


def from_config(extra: dict) -> LocalStackBackend:
    """The back end a ``kafka_restart_default`` connection's extras describe (entry point)."""
    if not extra.get("stack_home"):
        raise ValueError("a localstack restart back end needs 'stack_home' in the connection extras")
    return LocalStackBackend(extra["stack_home"], float(extra.get("stop_timeout_s", 120)))
