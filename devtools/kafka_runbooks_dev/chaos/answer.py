"""The gate's answerer: answers the run's approval gate as the schedule says, every time it asks.

A cleared gate asks again; each question gets the schedule's answer. The answerer keeps when it
answered what (the watcher's clock) and what the gate then recorded, for ``unapproved_write``.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from kafka_runbooks_dev.chaos import schedule as sch

log = logging.getLogger(__name__)
LATE_TIMEOUT_S = 20  # approval_timeout_s of a LATE schedule: its answer comes after it


@dataclass
class Answers:
    """What was answered when (monotonic), and the errors Airflow gave back."""

    sent: list[tuple[float, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class Answerer(threading.Thread):
    """Answer ``gate`` of ``(dag_id, run_id)`` per ``answer`` until :meth:`stop`."""

    def __init__(self, airflow, dag_id: str, run_id: str, gate: str, answer: str, delay_s: float) -> None:
        super().__init__(daemon=True, name="chaos-answerer")
        self.airflow, self.dag_id, self.run_id, self.gate = airflow, dag_id, run_id, gate
        self.answer, self.delay_s = answer, delay_s
        self.answers = Answers()
        self._done = threading.Event()
        self._answered_tries: set[int] = set()

    def run(self) -> None:
        while not self._done.wait(0.2):
            try:
                self._step()
            except Exception as exc:  # Airflow busy (SQLite locked), the run moved on: try again
                self.answers.errors.append(f"{type(exc).__name__}: {exc}"[:300])
                self._done.wait(1)

    def _step(self) -> None:
        ti = self.airflow.task_instance(self.dag_id, self.run_id, self.gate)
        try_number = ti.get("try_number") or 0
        if try_number in self._answered_tries or ti["state"] in (
            None,
            "success",
            "failed",
            "skipped",
            "upstream_failed",
        ):
            return
        if self.answer == sch.EARLY:
            if not self._question_exists():
                return
        elif ti["state"] != "awaiting_input":
            return
        else:
            self.airflow.wait_for_approval(self.dag_id, self.run_id, self.gate, timeout=120)
        self._answered_tries.add(try_number)
        self._answer(try_number)

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
        option = "Reject" if self.answer == sch.REJECT else "Approve"
        self._send(option)
        if self.answer == sch.TWICE:
            self._done.wait(self.delay_s)
            self._send(option)

    def _send(self, option: str) -> None:
        at = time.monotonic()
        try:
            self.airflow.answer(self.dag_id, self.run_id, self.gate, [option])
            self.answers.sent.append((at, option))
            log.info("chaos: answered %s at +%.1f", option, at)
        except Exception as exc:
            self.answers.errors.append(f"{option} at +{at:.1f}: {type(exc).__name__}: {exc}"[:300])

    def stop(self) -> Answers:
        """Answer no more."""
        self._done.set()
        self.join(30)
        return self.answers
