"""What each fault of a schedule does, to the stack's processes and to Airflow.

The injector runs in its own thread beside the run: each fault waits for its point (the task it
is tied to running, or a time after the trigger), then acts, then (a node fault) undoes itself
after its duration. Everything it does is logged with the watcher's clock (``time.monotonic``),
and every node it kept away is an :class:`~.invariants.Away`, so the invariants can tell the
schedule's doing from the runbook's.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import threading
import time
from dataclasses import dataclass, field

from kafka_runbooks_dev.chaos import schedule as sch
from kafka_runbooks_dev.chaos.invariants import Away

log = logging.getLogger(__name__)


@dataclass
class FaultLog:
    """What the injector did: one line per act, and the nodes it kept away."""

    lines: list[str] = field(default_factory=list)
    away: list[Away] = field(default_factory=list)
    last_at: float | None = None

    def note(self, line: str) -> None:
        """Log one act with the watcher's clock."""
        self.last_at = time.monotonic()
        self.lines.append(f"+{self.last_at:.1f} {line}")
        log.info("chaos: %s", line)


class Injector(threading.Thread):
    """Carry out ``faults`` against ``stack`` and ``airflow`` for the run ``(dag_id, run_id)``."""

    def __init__(
        self, faults, stack, airflow, dag_id: str, run_id: str, acted_on: list[int], rng: random.Random
    ):
        super().__init__(daemon=True, name="chaos-injector")
        self.faults, self.stack, self.airflow = list(faults), stack, airflow
        self.dag_id, self.run_id, self.acted_on, self.rng = dag_id, run_id, list(acted_on), rng
        self.log = FaultLog()
        self.started = time.monotonic()
        self._done = threading.Event()
        self._undo: list[threading.Thread] = []

    def run(self) -> None:
        for fault in self.faults:
            if self._done.is_set() or not self._reach(fault):
                self.log.note(f"not reached: {fault.describe()}")
                continue
            try:
                self._act(fault)
            except Exception as exc:  # a fault that could not be done is logged, the schedule goes on
                self.log.note(f"could not {fault.kind}: {type(exc).__name__}: {exc}")

    def _reach(self, fault: sch.Fault, timeout_s: float = 600) -> bool:
        """Wait until the fault's point: its task running (then its delay), or its delay after the trigger."""
        if fault.at_task is None:
            return not self._done.wait(max(0.0, self.started + fault.delay_s - time.monotonic()))
        deadline = time.monotonic() + timeout_s
        while not self._done.wait(0.3):
            state = self._task_state(fault.at_task)
            if state == "running":
                return not self._done.wait(fault.delay_s)
            if (
                state in ("success", "failed", "skipped", "upstream_failed", "removed")
                or time.monotonic() > deadline
            ):
                return False
        return False

    def _task_state(self, task_id: str) -> str | None:
        try:
            return self.airflow.task_instance(self.dag_id, self.run_id, task_id)["state"]
        except Exception:
            return None

    def _act(self, fault: sch.Fault) -> None:
        if fault.kind in sch.NODE_FAULTS:
            self._node_fault(fault)
        elif fault.kind == sch.KILL_TASK:
            self._kill_task()
        elif fault.kind == sch.RESTART_SCHEDULER:
            self.log.note("restart the scheduler")
            self.airflow.restart_scheduler()
            self.log.note("scheduler back")
        elif fault.kind == sch.CLEAR:
            self._clear()

    # ------------------------------------------------------------------ nodes
    def _pick_node(self, fault: sch.Fault):
        topo = self.stack.topology
        if fault.target == sch.ACTED_ON and self.acted_on:
            return topo.node(self.rng.choice(self.acted_on))
        if fault.target == sch.ANY_CONTROLLER:
            return self.rng.choice(topo.controller_nodes)
        return self.rng.choice(topo.broker_nodes)

    def _node_fault(self, fault: sch.Fault) -> None:
        node = self._pick_node(fault)
        if not self.stack.is_running(node.name):
            self.log.note(f"{fault.kind} {node.name}: not running, nothing done")
            return
        start = time.monotonic()
        if fault.kind == sch.KILL:
            self.stack.kill(node.name)
        elif fault.kind == sch.FREEZE:
            self.stack.freeze(node.name)
        else:
            self.stack.stop_node(node.name)
        self.log.note(f"{fault.kind} {node.name} for {fault.duration_s:.0f} s")
        away = Away(node.node_id, start, None, fault.kind)
        self.log.away.append(away)
        undo = threading.Thread(target=self._undo_after, args=(fault, node, away), daemon=True)
        undo.start()
        self._undo.append(undo)

    def _undo_after(self, fault: sch.Fault, node, away: Away) -> None:
        time.sleep(fault.duration_s)
        try:
            if fault.kind == sch.FREEZE:
                self.stack.thaw(node.name)
            else:
                self.stack.start_node(node.name)
            self.log.note(f"{node.name} back ({'SIGCONT' if fault.kind == sch.FREEZE else 'started'})")
        except Exception as exc:
            self.log.note(f"could not bring {node.name} back: {type(exc).__name__}: {exc}")
        finally:  # away until it is seen serving again: the end stays open, the invariants see it so
            self.log.away[self.log.away.index(away)] = Away(away.node, away.start, time.monotonic(), away.why)

    # ------------------------------------------------------------------ Airflow
    def _running_tis(self) -> list[dict]:
        return [t for t in self.airflow.task_instances(self.dag_id, self.run_id) if t["state"] == "running"]

    def _kill_task(self) -> None:
        running = self._running_tis()
        if not running:
            self.log.note("kill-task: no task running, nothing done")
            return
        ti = self.rng.choice(running)
        pid = task_process(ti["id"])
        if pid is None:
            self.log.note(f"kill-task {ti['task_id']}: its process was not found")
            return
        os.kill(pid, signal.SIGKILL)
        self.log.note(f"kill -9 the task process of {ti['task_id']} (pid {pid})")

    def _clear(self) -> None:
        tis = [t for t in self.airflow.task_instances(self.dag_id, self.run_id) if t["state"]]
        if not tis:
            self.log.note("clear: no task to clear")
            return
        ti = self.rng.choice(tis)
        body = {
            "dry_run": False,
            "task_ids": [ti["task_id"]],
            "dag_run_id": self.run_id,
            "include_downstream": True,
            "only_failed": False,
            "reset_dag_runs": True,
        }
        self.airflow.api("POST", f"/dags/{self.dag_id}/clearTaskInstances", json=body)
        self.log.note(f"clear {ti['task_id']} (was {ti['state']}) and what follows it")

    def stop(self) -> FaultLog:
        """No more faults; wait until every node fault has been undone."""
        self._done.set()
        self.join(60)
        for undo in self._undo:
            undo.join(120)
        return self.log


def task_process(ti_id: str) -> int | None:
    """The pid of the process Airflow's task runner titled ``airflow worker -- <ti id>``."""
    wanted = f"airflow worker -- {ti_id}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").strip()
        except OSError:
            continue
        if cmdline.startswith(wanted):
            return int(entry)
    return None
