"""Right before a submission to Kafka, ask Airflow whether this try is still the running one.

The fence (:mod:`kafka_runbooks.fence`) stops a superseded process once someone claimed the run's
state after it. It leaves a gap: between a Clear (or "mark failed") through the REST API and the
old try's SIGTERM at its supervisor's next heartbeat (~5 s by default), the newer try is only
queued and has claimed nothing, so the old try's poke could still submit one more chunk of its
approved plan. Airflow knows at once: a cleared running task instance is put in ``restarting``,
one marked failed in ``failed``. So the executor asks, through a callable the Airflow glue passes
in (this library imports nothing from Airflow), right before each reassignment or throttle it
submits, and submits only when Airflow answers ``running``. An answer it could not get is
unknown: nothing is submitted then either, and the next poke or try asks again.

What this does not tell apart: a newer try already running under the same task instance answers
``running`` too; from its first poke on, its claim of the run's state fences this one out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from kafka_runbooks import decisions
from kafka_runbooks.errors import SafetyRefusal
from kafka_runbooks.fence import Superseded

RUNNING = "running"


@dataclass(frozen=True)
class TaskStateReading:
    """Airflow's answer about this try's task instance: its ``state`` (``None``: the task instance
    has no state, e.g. cleared and not yet scheduled), or ``unknown`` saying why there is no
    answer (an error, a timeout, the task instance not listed). Never a guess."""

    state: str | None = None
    unknown: str | None = None

    @property
    def running(self) -> bool:
        """True only when Airflow answered, and answered ``running``."""
        return self.unknown is None and self.state == RUNNING


StillCurrent = Callable[[], TaskStateReading]
"""Asks Airflow for this try's task instance's state now (one call to its execution API)."""


class TaskStateUnknown(SafetyRefusal):
    """Airflow could not say whether this try still runs: nothing was submitted (the next poke or
    try asks again)."""


def require_running(
    still_current: StillCurrent,
    action: str,
    *,
    step: str = "execute",
    subject: str | None = None,
    logger: logging.Logger | None = None,
) -> None:
    """Return only when Airflow says this try is ``running``; else record the refusal of ``action``
    and raise :class:`Superseded` (Airflow named another state: this process must not act again)
    or :class:`TaskStateUnknown` (no answer: unknown is not "running")."""
    reading = still_current()
    if reading.running:
        return
    if reading.unknown is not None:
        reason = (
            f"Airflow could not say whether this try is still running ({reading.unknown}): nothing submitted"
        )
        decisions.record(
            step,
            "refuse: this try's state is unknown",
            f"{reason}; the next poke or try asks again",
            subject=subject,
            observed={"refused": action},
            logger=logger,
            level=logging.ERROR,
        )
        raise TaskStateUnknown(f"{reason} ({action})")
    reason = f"Airflow says this try is {reading.state or 'without a state'}, not running: nothing submitted"
    decisions.record(
        step,
        "refuse: this try was superseded",
        reason,
        subject=subject,
        observed={"refused": action, "task_state": reading.state},
        logger=logger,
        level=logging.WARNING,
    )
    raise Superseded(f"{reason} ({action})")
