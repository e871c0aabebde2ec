"""Decision records: the audit trail every runbook step leaves in its task log.

A record says what was observed, what was decided and why, and what was done. It is
logged as one line a person can read, with the same facts as structured fields (Airflow
3's task logs are JSON: extra keys land in the record), so a reviewer can follow a run
and a machine can query it.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any

log = logging.getLogger("kafka_runbooks.decisions")

# The records made in this process (one Airflow task = one process): the task's closing
# summary is built from them. Bounded, so a sensor poking for days cannot grow it.
_made: list[DecisionRecord] = []
_MAX_KEPT = 1000


@dataclass(frozen=True)
class DecisionRecord:
    step: str
    decision: str
    reason: str
    observed: dict[str, Any] = field(default_factory=dict)
    action: str | None = None
    subject: str | None = None
    at_ms: int = field(default_factory=lambda: int(time.time() * 1000))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        subject = f" [{self.subject}]" if self.subject else ""
        action = f"; action: {self.action}" if self.action else ""
        return f"DECISION {self.step}{subject}: {self.decision} because {self.reason}{action}"


def record(
    step: str,
    decision: str,
    reason: str,
    *,
    observed: dict[str, Any] | None = None,
    action: str | None = None,
    subject: str | None = None,
    logger: logging.Logger | None = None,
    level: int = logging.INFO,
) -> DecisionRecord:
    """Log a decision record and return it (callers may also collect them for reports)."""
    rec = DecisionRecord(
        step=step, decision=decision, reason=reason, observed=observed or {}, action=action, subject=subject
    )
    (logger or log).log(
        level,
        "%s | observed=%s",
        rec.summary(),
        json.dumps(rec.observed, sort_keys=True, default=str),
        extra={"decision_record": rec.as_dict()},
    )
    _made.append(rec)
    del _made[:-_MAX_KEPT]
    from kafka_runbooks import journal

    journal.append({**rec.as_dict(), "level": logging.getLevelName(level)})
    return rec


def made() -> list[DecisionRecord]:
    """The decision records made in this process so far (oldest first)."""
    return list(_made)


def forget() -> None:
    """Start a new collection (a new task in the same process, e.g. in tests)."""
    _made.clear()


def closing_summary(records: list[DecisionRecord], limit: int = 10) -> str:
    """A few lines for the end of a task log: how many decisions, then the last ones, one line each."""
    if not records:
        return "DECISIONS this task: none"
    shown = records[-limit:]
    head = f"DECISIONS this task: {len(records)}" + (f" (last {len(shown)})" if len(records) > limit else "")
    lines = [f"  - {r.step}{f' [{r.subject}]' if r.subject else ''}: {r.decision}" for r in shown]
    return "\n".join([head, *lines])
