"""What a gate asked and what it made of the answer, kept across its tries (Airflow's task state store).

Airflow 3.3.2 can lose a gate's try after its answer: a gate answered within seconds of asking is
resumed while the worker's late "success" report of the parked try is still on its way, and the
scheduler takes that report for an external state change and fails the resumed try
(apache/airflow#67287; "finished with state success, but the task instance's state attribute is
queued"). The answer itself is kept (the HITL detail follows the task instance to its next try),
but a gate that simply asks again on its retry erases it (Airflow's upsert of the question removes
an earlier response). So the gate keeps here, where its next try can read it:

- ``asked``: what it asked in this run of tries (digest, the deadline on the API server's clock,
  who triggered the run), written right after the question was written;
- ``answered``: the record it made of the answer (the same as its ``approval`` XCom), written
  before that XCom, so a try lost after deciding is not decided again (unless Airflow refused this
  write because the try had already been failed: then the next try judges the same answer again,
  to the same outcome; seen on the e2e Airflow).

Airflow's task state store (``context["task_state_store"]``) keeps a task instance's keys across
its retries, not per try, and not per run of tries either: a clear keeps them too. So each entry
carries its run of tries (:func:`kafka_runbooks_airflow.gate.try_series`) and is read back only
within it: a retry finds it, a clear starts a new question.
"""

from __future__ import annotations

import logging
from typing import Any

from kafka_runbooks_airflow.gate import try_series

log = logging.getLogger("kafka_runbooks.approval")

ASKED_KEY = "kafka_runbooks.gate.asked"
ANSWERED_KEY = "kafka_runbooks.gate.answered"
ESCALATED_KEY = "kafka_runbooks.gate.escalated"


class GateLedger:
    """A gate task instance's ``asked`` and ``answered`` entries of its current run of tries.

    Without a task state store (or when it cannot be read) the gate still works, it only cannot
    recover a lost try: a warning says so, and a retry asks again.
    """

    def __init__(self, context) -> None:
        ti = context["ti"]
        self.store = context.get("task_state_store")
        self.series = try_series(ti)
        self.try_number = getattr(ti, "try_number", None)

    def asked(self) -> dict[str, Any] | None:
        """What this run of tries asked, or None (not asked yet, or asked before the last clear)."""
        return self._get(ASKED_KEY)

    def answered(self) -> dict[str, Any] | None:
        """``{"record": ..., "try_number": ...}`` when a try of this run already decided on an answer."""
        return self._get(ANSWERED_KEY)

    def keep_asked(self, request: dict[str, Any]) -> None:
        """Keep what was asked (the gate's request) for this run of tries."""
        self._set(ASKED_KEY, {"request": request})

    def keep_answered(self, record: dict[str, Any]) -> None:
        """Keep the record made of the answer for this run of tries."""
        self._set(ANSWERED_KEY, {"record": record})

    def escalated(self) -> bool:
        """Whether this run of tries already told the escalation targets that its deadline is near."""
        return self._get(ESCALATED_KEY) is not None

    def keep_escalated(self) -> None:
        """Keep that the escalation was sent: a later recheck or retry of the same question sends none."""
        self._set(ESCALATED_KEY, {"escalated": True})

    def _get(self, key: str) -> dict[str, Any] | None:
        if self.store is None:
            return None
        try:
            entry = self.store.get(key)
        except Exception as exc:  # the supervisor or the API server did not answer
            log.warning(
                "the gate's task state (%s) could not be read: %s; a lost try is not recovered", key, exc
            )
            return None
        if isinstance(entry, dict) and entry.get("series") == self.series:
            return entry
        return None

    def _set(self, key: str, value: dict[str, Any]) -> None:
        if self.store is None:
            log.warning("no task state store: the gate cannot keep %s for a later try", key)
            return
        try:
            self.store.set(key, {**value, "series": self.series, "try_number": self.try_number})
        except Exception as exc:
            log.warning("the gate's task state (%s) could not be written: %s", key, exc)
