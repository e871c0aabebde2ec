"""The gate's answerer: answers the run's approval gate as the schedule says, every time it asks.

A cleared gate asks again; each question gets the schedule's answer. The answerer keeps when it
answered what (the watcher's clock) and what the gate then recorded, for ``unapproved_write``.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from kafka_runbooks.approval import APPROVE_OPTION, REJECT_OPTION
from kafka_runbooks_dev.chaos import schedule as sch

log = logging.getLogger(__name__)
LATE_TIMEOUT_S = 20  # approval_timeout_s of a LATE schedule: its answer comes after it


@dataclass
class Answers:
    """What was answered when (monotonic), the approvals a gate try then ended approved on (when
    they were sent), and the errors Airflow gave back."""

    sent: list[tuple[float, str]] = field(default_factory=list)
    accepted: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def errors_for(self, try_number: int) -> bool:
        """Whether Airflow refused an answer to this try already (then the answerer waits for the gate)."""
        return any(e.startswith(f"try {try_number}:") for e in self.errors)

    @property
    def approved_at(self) -> float | None:
        """When the first approval a gate accepted was sent (None: no try was approved)."""
        return min(self.accepted) if self.accepted else None


class Answerer(threading.Thread):
    """Answer ``gate`` of ``(dag_id, run_id)`` per ``answer``, every try, until :meth:`stop`.

    A try whose answer Airflow took is never answered again (an answer Airflow then loses is the
    run's fault to survive, not the answerer's to repair); one Airflow refused is tried again, as a
    person would, once the gate waits."""

    def __init__(self, airflow, dag_id: str, run_id: str, gate: str, answer: str, delay_s: float) -> None:
        super().__init__(daemon=True, name="chaos-answerer")
        self.airflow, self.dag_id, self.run_id, self.gate = airflow, dag_id, run_id, gate
        self.answer, self.delay_s = answer, delay_s
        self.answers = Answers()
        self._done = threading.Event()
        self._taken: dict[int, tuple[float, str]] = {}  # try -> the answer Airflow took
        self._judged: set[int] = set()

    def run(self) -> None:
        while not self._done.wait(0.2):
            try:
                self._step()
            except Exception as exc:  # Airflow busy (SQLite locked), the run moved on: try again
                self.answers.errors.append(f"{type(exc).__name__}: {exc}"[:300])
                self._done.wait(1)

    def _step(self) -> None:
        ti = self.airflow.task_instance(self.dag_id, self.run_id, self.gate)
        try_number, state = ti.get("try_number") or 0, ti["state"]
        taken = self._taken.get(try_number) or self._kept_for(try_number)
        if state == "success" and taken and try_number not in self._judged:
            self._judged.add(try_number)
            at, option = taken
            if option == APPROVE_OPTION:
                self.answers.accepted.append(at)
        if try_number in self._taken or state in (None, "success", "failed", "skipped", "upstream_failed"):
            return
        if self.answer == sch.EARLY and not self.answers.errors_for(try_number):
            if not self._question_exists():
                return
        elif state != "awaiting_input":
            return
        else:
            self.airflow.wait_for_approval(self.dag_id, self.run_id, self.gate, timeout=120)
        self._answer(try_number)

    def _kept_for(self, try_number: int) -> tuple[float, str] | None:
        """The answer an earlier try took, which a retry acts on (the gate keeps an answer whose try
        Airflow failed, apache/airflow#67287): round 3's rebalance:13 read the retry's success on the
        kept early answer as a write with no approval."""
        earlier = [t for t in self._taken if t < try_number]
        return self._taken[max(earlier)] if earlier else None

    def _question_exists(self) -> bool:
        try:
            self.airflow.api(
                "GET", f"{self.airflow._ti_path(self.dag_id, self.run_id, self.gate)}/-1/hitlDetails"
            )
            return True
        except Exception:
            return False

    def _answer(self, try_number: int) -> None:
        if self.answer == sch.LATE:
            self._done.wait(LATE_TIMEOUT_S + self.delay_s)
        elif self.answer != sch.EARLY:
            self._done.wait(self.delay_s)
        option = REJECT_OPTION if self.answer == sch.REJECT else APPROVE_OPTION
        if self._send(option, try_number) and self.answer == sch.TWICE:
            self._done.wait(self.delay_s)
            self._send(option, try_number)

    def _send(self, option: str, try_number: int) -> bool:
        at = time.monotonic()
        try:
            self.airflow.answer(self.dag_id, self.run_id, self.gate, [option])
        except Exception as exc:
            self.answers.errors.append(
                f"try {try_number}: {option} at +{at:.1f}: {type(exc).__name__}: {exc}"[:300]
            )
            self._done.wait(2)
            return False
        self.answers.sent.append((at, option))
        self._taken.setdefault(try_number, (at, option))
        log.info("chaos: answered %s at +%.1f (try %s)", option, at, try_number)
        return True

    def stop(self) -> Answers:
        """Answer no more."""
        self._done.set()
        self.join(30)
        return self.answers
