"""Seeded schedules: which faults, where in the run, and how the gate is answered.

A schedule is drawn from ``random.Random(f"{runbook}:{seed}")`` alone, so a seed names the same
schedule on every machine and in every release of this file that keeps the draw order (the
schedule is also written out whole with its result, and a run can be replayed from that record).
A fault is tied to a point of the run: "while task X runs, N seconds after it started" (every
pair of steps gets its turn), or "N seconds after the trigger".
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field

# what a fault does (faults.py carries each out)
KILL = "kill"  # kill -9 of a node; started again after duration_s
FREEZE = "freeze"  # SIGSTOP of a node, SIGCONT after duration_s
STOP = "stop"  # a clean stop (SIGTERM, controlled shutdown) of a node, started again after duration_s
KILL_TASK = "kill-task"  # kill -9 of the Airflow task process running then
RESTART_SCHEDULER = "restart-scheduler"  # the scheduler stopped and started (its task processes die)
CLEAR = "clear"  # a Clear of the task running then (and what follows it)
NODE_FAULTS = (KILL, FREEZE, STOP)
AIRFLOW_FAULTS = (KILL_TASK, RESTART_SCHEDULER, CLEAR)

# how the gate is answered
APPROVE = "approve"  # once the gate is parked
EARLY = "early"  # as soon as the question exists, before the gate is parked
TWICE = "twice"  # approved, then approved again 0-3 s later
LATE = "late"  # after the gate's deadline (a short approval_timeout_s): must never approve
REJECT = "reject"
ANSWERS = (APPROVE, EARLY, TWICE, LATE, REJECT)
ANSWER_WEIGHTS = (5, 2, 2, 1, 1)

# which node a node fault hits
ACTED_ON = "acted-on"  # a node the runbook acts on (the broker it restarts, a receiver...)
ANY_BROKER = "any-broker"
ANY_CONTROLLER = "any-controller"
TARGETS = (ACTED_ON, ANY_BROKER, ANY_CONTROLLER)


@dataclass(frozen=True)
class Fault:
    """One fault: what, on whom, when (``at_task`` running ``delay_s`` seconds, or after the trigger)."""

    kind: str
    delay_s: float
    at_task: str | None = None
    target: str | None = None
    duration_s: float = 0.0

    def describe(self) -> str:
        """One line for the campaign's report."""
        where = (
            f"{self.delay_s:.1f} s into {self.at_task}"
            if self.at_task
            else f"{self.delay_s:.1f} s after trigger"
        )
        who = f" {self.target}" if self.target else ""
        lasting = f" for {self.duration_s:.0f} s" if self.duration_s else ""
        return f"{self.kind}{who}{lasting} at {where}"


@dataclass(frozen=True)
class Schedule:
    """What one run of one runbook goes through; ``variant`` picks among the scenario's setups."""

    runbook: str
    seed: int
    variant: str
    answer: str
    answer_delay_s: float
    faults: tuple[Fault, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict:
        """JSON-ready (the campaign's record)."""
        return {**asdict(self), "faults": [asdict(f) for f in self.faults]}

    @staticmethod
    def from_dict(d: dict) -> Schedule:
        """A schedule read back from a campaign record (a replay)."""
        return Schedule(**{**d, "faults": tuple(Fault(**f) for f in d["faults"])})


def draw(
    runbook: str, seed: int, tasks: tuple[str, ...], variants: tuple[str, ...], gated: bool = True
) -> Schedule:
    """The schedule of ``seed`` for ``runbook`` whose DAG runs ``tasks`` (fault points)."""
    rng = random.Random(f"{runbook}:{seed}")
    variant = rng.choice(variants)
    answer = rng.choices(ANSWERS, ANSWER_WEIGHTS)[0] if gated else APPROVE
    faults = tuple(_fault(rng, tasks) for _ in range(rng.choice((0, 1, 1, 2, 2, 3))))
    return Schedule(runbook, seed, variant, answer, round(rng.uniform(0, 3), 2), faults)


def _fault(rng: random.Random, tasks: tuple[str, ...]) -> Fault:
    kind = rng.choices((KILL, FREEZE, STOP, KILL_TASK, RESTART_SCHEDULER, CLEAR), (4, 2, 2, 2, 1, 2))[0]
    at_task = rng.choice((None, *tasks)) if tasks else None
    delay = round(rng.uniform(0, 20 if at_task is None else 8), 2)
    if kind in NODE_FAULTS:
        target = rng.choices(TARGETS, (3, 2, 1))[0]
        return Fault(kind, delay, at_task, target, round(rng.uniform(2, 25), 1))
    return Fault(kind, delay, at_task)
