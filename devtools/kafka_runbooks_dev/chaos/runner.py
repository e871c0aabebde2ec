"""One schedule from incident to verdict, and a campaign of many, on one real stack and one Airflow.

For each schedule: the scenario builds its incident and the schedule's topic; the producer and the
watcher start; the run is triggered; the injector carries out the faults at their points while the
answerer answers the gate; the run is waited for (a run with no end is stopped and is a violation
itself); the faults are undone; after the cluster's ``broker.session.timeout.ms`` the end state is
read back; the invariants are judged; the record (seed, schedule, what was done, verdict) is
appended to the results file; the stack is put back for the next schedule.
"""

from __future__ import annotations

import json
import logging
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.failed_broker.throttle import leftover_throttles
from kafka_runbooks_dev.chaos import invariants as inv
from kafka_runbooks_dev.chaos import schedule as sch
from kafka_runbooks_dev.chaos.answer import LATE_TIMEOUT_S, Answerer
from kafka_runbooks_dev.chaos.faults import Injector
from kafka_runbooks_dev.chaos.scenarios import SCENARIOS, Context, Scenario, Setup, every_node_back
from kafka_runbooks_dev.chaos.traffic import Traffic, lost_records
from kafka_runbooks_dev.chaos.watch import Watcher

log = logging.getLogger(__name__)
RUN_BOUND_S = 300.0  # a run not ended this long after its last fault (or answer) has no end


@dataclass
class Result:
    """One schedule's record in the campaign's results file."""

    runbook: str
    seed: int
    schedule: dict
    run_id: str | None = None
    run_state: str | None = None
    tasks: dict = field(default_factory=dict)
    faults: list[str] = field(default_factory=list)
    answers: list = field(default_factory=list)
    violations: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """No invariant was broken."""
        return not any(self.violations.values())


class Campaign:
    """Schedules on ``stack`` (a started LocalStack) through ``airflow`` (a started AirflowLocal)."""

    def __init__(self, env, results: Path) -> None:
        self.env, self.stack, self.airflow, self.results = env, env.stack, env.airflow, Path(results)
        self.admin = ClusterAdmin({"bootstrap.servers": env.stack.bootstrap_servers}, timeout_s=15)

    def run(self, runbook: str, seed: int, replay: sch.Schedule | None = None) -> Result:
        """One schedule (``replay``, or the one ``seed`` draws), recorded and judged."""
        scenario = SCENARIOS[runbook]
        schedule = replay or sch.draw(
            runbook, seed, scenario.tasks, scenario.variants, scenario.gate is not None
        )
        result = Result(runbook, seed, schedule.as_dict())
        started = time.monotonic()
        ctx = Context(self.stack, self.admin, self.airflow, random.Random(f"{runbook}:{seed}:setup"))
        setup = None
        try:
            if scenario.fresh_stack:
                self.env.fresh_stack()
            setup = scenario.prepare(ctx, f"chaos-{runbook}-{seed}-{int(time.time())}", schedule.variant)
            self._one(scenario, schedule, setup, ctx, result)
        except Exception as exc:  # the harness failed: recorded, never taken for a pass
            log.exception("schedule %s/%s", runbook, seed)
            result.violations["harness"] = [f"{type(exc).__name__}: {exc}"[:2000]]
        finally:
            result.seconds = round(time.monotonic() - started, 1)
            self._append(result)
            self._restore(scenario, ctx, setup, result)
        return result

    def _one(
        self, scenario: Scenario, schedule: sch.Schedule, setup: Setup, ctx: Context, result: Result
    ) -> None:
        bs = self.stack.bootstrap_servers
        pids = lambda: {n.node_id: self.stack.pid(n.name) for n in self.stack.topology.nodes}  # noqa: E731
        watcher, traffic = Watcher(bs, [setup.topic], pids=pids), Traffic(bs, setup.topic)
        watcher.start()
        traffic.start()
        conf = dict(setup.conf)
        if scenario.gate:
            conf["approval_timeout_s"] = LATE_TIMEOUT_S if schedule.answer == sch.LATE else 3600
        result.run_id = run_id = self.airflow.trigger(scenario.dag_id, conf)
        injector = Injector(
            schedule.faults, self.stack, self.airflow, scenario.dag_id, run_id, setup.acted_on, ctx.rng
        )
        answerer = (
            Answerer(
                self.airflow, scenario.dag_id, run_id, scenario.gate, schedule.answer, schedule.answer_delay_s
            )
            if scenario.gate
            else None
        )
        injector.start()
        if answerer:
            answerer.start()
        ended = self._wait_end(scenario, run_id, injector)
        faults = injector.stop()
        answers = answerer.stop() if answerer else None
        acked = traffic.stop()
        acked.records.update(setup.acked_before)
        time.sleep(self.admin.cluster_timeouts().broker_session_timeout_s)
        self._judge(scenario, setup, ctx, result, ended, faults, answers, watcher, acked)

    def _wait_end(self, scenario: Scenario, run_id: str, injector: Injector) -> bool:
        """Until the run ends; False (and the run marked failed) when for ``RUN_BOUND_S`` no task of
        it changed state (a sensor's pokes move it up_for_reschedule -> running) and no fault acted:
        a run that waits with no end, however long a healthy run may take."""
        moved_at, last = time.monotonic(), None
        while True:
            state = self.airflow.dag_run(scenario.dag_id, run_id)["state"]
            if state in ("success", "failed"):
                return True
            tis = {
                (t["task_id"], t.get("try_number"), t["state"])
                for t in self.airflow.task_instances(scenario.dag_id, run_id)
            }
            if tis != last:
                moved_at, last = time.monotonic(), tis
            since = max(moved_at, injector.log.last_at or injector.started)
            if time.monotonic() - since > RUN_BOUND_S:
                self.airflow.api(
                    "PATCH", f"/dags/{scenario.dag_id}/dagRuns/{run_id}", json={"state": "failed"}
                )
                return False
            time.sleep(2)

    def _judge(self, scenario, setup, ctx, result, ended, faults, answers, watcher, acked) -> None:
        run = self.airflow.dag_run(scenario.dag_id, result.run_id)
        result.run_state = run["state"]
        result.tasks = {
            t["task_id"]: t["state"] for t in self.airflow.task_instances(scenario.dag_id, result.run_id)
        }
        result.faults = faults.lines
        result.answers = answers.sent + answers.errors if answers else []
        result.notes += self._failed_task_logs(scenario, result)
        final = scenario.final_check(ctx, setup)
        seen = watcher.stop()
        every_node_back(ctx)  # a throttle left on a broker that was down is read once it is back
        lost = lost_records(self.stack.bootstrap_servers, setup.topic, acked)
        away = faults.away + [inv.Away(n, 0.0, None, "incident") for n in setup.incident]
        controllers = {n.node_id for n in self.stack.topology.controller_nodes}
        approved_at = self._approved_at(scenario, result, answers)
        names_loss = self._names_loss(scenario, result)
        result.notes += [f"acked {len(acked.records)}, failed sends {acked.failed}", f"final read: {final}"]
        result.violations = {
            "acknowledged_loss": inv.acknowledged_loss(
                lost, names_loss, setup.loss_allowed and approved_at is not None
            ),
            "leaderless": inv.leaderless(
                seen.samples, [a for a in away if a.node in controllers], len(controllers) // 2 + 1
            ),
            "min_isr_broken": inv.min_isr_broken(seen.samples, {setup.topic: setup.min_isr}, away),
            "false_success": inv.false_success(result.run_state, final),
            "leftovers": inv.leftovers(*self._leftovers(setup)),
            "unapproved_write": inv.unapproved_write(
                inv.replica_set_changes(seen, away) + inv.restarts(seen, away), approved_at
            )
            if scenario.gate
            else [],
            "no_end": inv.no_end(ended, RUN_BOUND_S),
            # the schedule's own conf refused: the harness is wrong, and nothing was tried
            "harness": ["check_input refused the schedule's conf"]
            if result.tasks.get("check_input") == "failed"
            and not any("check_input" in f for f in result.faults)
            else [],
        }

    def _approved_at(self, scenario: Scenario, result: Result, answers) -> float | None:
        """When the first approval a gate try accepted was sent (None: no try approved)."""
        return answers.approved_at if scenario.gate and answers is not None else None

    def _failed_task_logs(self, scenario: Scenario, result: Result, tail: int = 2500) -> list[str]:
        """The end of each failed task's log (the reason a reader of the record needs first)."""
        out = []
        for ti in self.airflow.task_instances(scenario.dag_id, result.run_id):
            if ti["state"] != "failed":
                continue
            task, tries = ti["task_id"], max(1, ti.get("try_number") or 1)
            try:
                text = self.airflow.task_log_text(scenario.dag_id, result.run_id, task, try_number=tries)
                out.append(f"{task} (try {tries}) log: {text[-tail:]}")
            except Exception as exc:
                out.append(f"{task} log not read: {exc}")
        return out

    def _names_loss(self, scenario: Scenario, result: Result) -> bool:
        """Whether the run's outcome names a loss of acknowledged records (its logs say so)."""
        if scenario.runbook != "unclean":
            return False
        for task in ("run_elections", "restore_replica_order"):  # the last step says it after a kill
            try:
                text = self.airflow.task_log_text(scenario.dag_id, result.run_id, task)
            except Exception as exc:  # no such task or no log: this task names nothing
                log.info("no log of %s: %s", task, exc)
                continue
            if "RECOVERED WITH LOSS" in text or "RecoveredWithLoss" in text:
                return True
        return False

    def _leftovers(self, setup: Setup) -> tuple[dict, dict]:
        from kafka_runbooks.unclean.elect import ReorderState, pending_restores

        brokers = [n.node_id for n in self.stack.topology.broker_nodes]
        throttles = leftover_throttles(self.admin, brokers, self.admin.list_topics())
        try:
            state = ReorderState("kafka_default", directory=self.env.data_dir / "state" / ReorderState.kind)
            reorders = pending_restores(state)
        except Exception as exc:
            reorders = {"unreadable": str(exc)}
        return throttles, reorders

    def _restore(self, scenario: Scenario, ctx: Context, setup: Setup | None, result: Result) -> None:
        try:
            scenario.restore(ctx, setup) if setup else None
        except Exception as exc:
            log.exception("restore after %s/%s", result.runbook, result.seed)
            result.notes.append(f"restore failed: {exc}")

    def _append(self, result: Result) -> None:
        self.results.parent.mkdir(parents=True, exist_ok=True)
        with self.results.open("a") as f:
            f.write(json.dumps({**result.__dict__, "ok": result.ok}, default=str) + "\n")
