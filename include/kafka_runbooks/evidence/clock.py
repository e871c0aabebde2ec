"""Ages and "newer than" on one clock: a time is never compared with a time another clock stamped.

Every time a runbook decides on carries the clock that stamped it (:class:`Stamp`): the quorum
leader's (DescribeQuorum's timestamps, the leader's own entry being its "now"), Airflow's API
server (a HITL answer's ``responded_at``, the gate's deadline, the server's ``Date`` header),
the worker's (a task's own ``time.time()``). An age between two stamps of different clocks is
unknown (None), never a number: a worker 50 minutes behind the API server must not make a
1 h 40 min old approval look 50 minutes old.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

AIRFLOW_API_SERVER = "Airflow's API server"
WORKER = "this worker"


def quorum_leader_clock(leader_id: int) -> str:
    """The name of controller ``leader_id``'s clock (every DescribeQuorum timestamp it answers)."""
    return f"controller {leader_id}"


@dataclass(frozen=True)
class Stamp:
    """A time in epoch milliseconds and the clock that stamped it; ``ms`` None: unknown."""

    ms: int | None
    clock: str

    @staticmethod
    def of(value: datetime | str | None, clock: str) -> Stamp:
        """A stamp from an aware datetime or ISO text; unknown when missing, unparsable or naive."""
        if isinstance(value, str):
            try:
                value = datetime.fromisoformat(value)
            except ValueError:
                value = None
        if not isinstance(value, datetime) or value.tzinfo is None:
            return Stamp(None, clock)
        return Stamp(int(value.timestamp() * 1000), clock)

    @property
    def known(self) -> bool:
        """Whether the time is known."""
        return self.ms is not None

    def isoformat(self) -> str | None:
        """The time as ISO text (UTC), None when unknown."""
        if self.ms is None:
            return None
        return datetime.fromtimestamp(self.ms / 1000, tz=timezone.utc).isoformat()

    def plus_ms(self, ms: int) -> Stamp:
        """This time plus ``ms`` on the same clock (unknown stays unknown)."""
        return Stamp(None if self.ms is None else self.ms + ms, self.clock)

    def __str__(self) -> str:
        return f"{self.isoformat() or 'unknown'} ({self.clock}'s clock)"


def age_ms(then: Stamp, now: Stamp) -> int | None:
    """How long before ``now`` ``then`` was, in ms; None when either is unknown or the two were
    stamped by different clocks (negative: ``then`` is later than ``now``)."""
    if then.ms is None or now.ms is None or then.clock != now.clock:
        return None
    return now.ms - then.ms


def newer_than(evidence: Stamp, action: Stamp) -> bool | None:
    """Whether ``evidence`` was stamped after ``action``; None when that cannot be told (an unknown
    time, or two clocks)."""
    age = age_ms(action, evidence)
    return None if age is None else age > 0


def after(then: Stamp, deadline: Stamp) -> bool | None:
    """Whether ``then`` is past ``deadline``; None when that cannot be told."""
    age = age_ms(deadline, then)
    return None if age is None else age > 0
