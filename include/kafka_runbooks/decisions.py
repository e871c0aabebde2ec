"""Decision records: the audit trail every runbook step leaves in its task log.

A record says what was observed, what was decided and why, and what was done. Its log
event is one line of prose a person reads (``DECISION step [subject]: decision because
reason; action: ...``); the observed facts follow on a second, bounded line (``facts:
key=value, ...``) that names the record's id, and the whole record, facts included, is in
the structured ``decision_record`` key of the JSON log record (machines query it) and in
the decision journal (the Kafka page shows it under that id). A blob of JSON in the prose
line made every DECISION line need horizontal scrolling in the log view.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

log = logging.getLogger("kafka_runbooks.decisions")

# The records made in this process (one Airflow task = one process): the task's closing
# summary is built from them. Bounded, so a sensor poking for days cannot grow it.
_made: list[DecisionRecord] = []
_MAX_KEPT = 1000
# the facts line stays readable: longer facts are cut here and read in full in the journal
FACTS_LINE_CHARS = 240


@dataclass(frozen=True)
class DecisionRecord:
    step: str
    decision: str
    reason: str
    observed: dict[str, Any] = field(default_factory=dict)
    action: str | None = None
    subject: str | None = None
    at_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    # names the record in the journal and on the Kafka page (the facts line points to it)
    record_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    level: str = "INFO"  # the log level it was recorded at (ERROR: a reason the run failed)

    def as_dict(self) -> dict[str, Any]:
        """The record as the journal and XComs keep it."""
        return asdict(self)

    def summary(self) -> str:
        """The record as one ``DECISION`` log line: step, subject, decision, reason and action."""
        subject = f" [{self.subject}]" if self.subject else ""
        action = f"; action: {self.action}" if self.action else ""
        return f"DECISION {self.step}{subject}: {self.decision} because {self.reason}{action}"

    def facts_line(self, limit: int = FACTS_LINE_CHARS) -> str:
        """The observed facts as ``key=value`` pairs on one bounded line, naming the record
        whose journal entry holds them all; empty when nothing was observed."""
        if not self.observed:
            return ""
        pairs = [f"{k}={_compact(v)}" for k, v in sorted(self.observed.items(), key=lambda kv: str(kv[0]))]
        text = ", ".join(pairs)
        if len(text) > limit:
            text = text[:limit].rstrip() + " ..."
        return f"facts: {text} (decision {self.record_id})"

    def event(self) -> str:
        """The log event: the prose line, then the facts line when there are facts."""
        facts = self.facts_line()
        return self.summary() + (f"\n  {facts}" if facts else "")


def _compact(value: Any) -> str:
    """A fact's value without JSON's quotes and spaces where they add nothing."""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))


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
        step=step,
        decision=decision,
        reason=reason,
        observed=observed or {},
        action=action,
        subject=subject,
        level=logging.getLevelName(level),
    )
    (logger or log).log(level, "%s", rec.event(), extra={"decision_record": rec.as_dict()})
    _made.append(rec)
    del _made[:-_MAX_KEPT]
    from kafka_runbooks import decision_journal

    decision_journal.append(rec.as_dict())
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
