"""When to restart a FAILED connector: the back-off policy, and the per-connector state it reads.

Default = Strimzi proposal 007: restart at minutes 0, 2, 6, 12, 20 and 30 after the first
failure (the wait grows by 2 minutes after each restart), then no more: the connector stays
FAILED and the sweep raises an alert. Configurable:

- ``max_interval_minutes``: the cap on the wait between two restarts (30 by default);
- ``max_restarts``: 6 by default; ``None`` = unlimited (Strimzi today: it keeps restarting,
  its wait capped at 60 minutes);
- the count resets once the connector has been healthy for longer than its current
  interval (the wait that would come before its next restart);
- ``minute_seconds``: how long a policy "minute" is (60; tests make it a second);
- ``errors_before_alert``: restart calls in a row answered with an error (the worker
  refused the restart, a rebalance, a timeout) before every further one raises an alert
  (3 by default). A refused restart (``500 Failed to start ...``), and every other error
  answer but the documented no-op 409 (400, 403, 503, a timeout, a refused connection),
  also counts as a restart: it is on the same back-off schedule and ends in the same
  give-up alert, never retried every sweep forever.

The restart unit is the connector: its own state and its tasks' together, like Strimzi.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from kafka_runbooks.errors import BadInput

RESTART = "restart"
WAIT = "wait"
GIVE_UP = "give_up"
RESET = "reset"
HEALTHY = "healthy"
RECOVERING = "recovering"


def iso(ts: float | None) -> str | None:
    """Epoch seconds (the worker's clock) as an ISO-8601 UTC string with milliseconds, for reports; None
    stays None."""
    if ts is None:
        return None
    return (
        datetime.fromtimestamp(ts, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


@dataclass(frozen=True)
class RestartPolicy:
    step_minutes: float = 2.0
    max_interval_minutes: float = 30.0
    max_restarts: int | None = 6
    minute_seconds: float = 60.0
    errors_before_alert: int = 3

    def __post_init__(self) -> None:
        if not self.step_minutes > 0:
            raise BadInput(f"step_minutes must be > 0, got {self.step_minutes}")
        if not self.max_interval_minutes > 0:
            raise BadInput(f"max_interval_minutes must be > 0, got {self.max_interval_minutes}")
        if self.max_restarts is not None and (isinstance(self.max_restarts, bool) or self.max_restarts < 0):
            raise BadInput(f"max_restarts must be None (unlimited) or >= 0, got {self.max_restarts}")
        if not self.minute_seconds > 0:
            raise BadInput(f"minute_seconds must be > 0, got {self.minute_seconds}")
        if isinstance(self.errors_before_alert, bool) or self.errors_before_alert < 1:
            raise BadInput(f"errors_before_alert must be >= 1, got {self.errors_before_alert}")

    def interval_minutes(self, count: int) -> float:
        """The wait after the ``count``-th restart before the next one (capped)."""
        return min(self.step_minutes * count, self.max_interval_minutes)

    def interval_seconds(self, count: int) -> float:
        """The wait after the ``count``-th restart in seconds (policy minutes times ``minute_seconds``)."""
        return self.interval_minutes(count) * self.minute_seconds

    def schedule_minutes(self, restarts: int | None = None) -> list[float]:
        """Minutes after the first failure at which restarts happen, if each is on time.

        ``restarts`` bounds an unlimited policy; by default the policy's ``max_restarts``.
        """
        n = self.max_restarts if restarts is None else restarts
        if n is None:
            raise BadInput("an unlimited policy needs a bound: schedule_minutes(restarts=...)")
        out, at = [], 0.0
        for k in range(n):
            out.append(at)
            at += self.interval_minutes(k + 1)
        return out

    def exhausted(self, count: int) -> bool:
        """Whether ``count`` restarts used the budget; an unlimited policy (``max_restarts`` None) never
        is."""
        return self.max_restarts is not None and count >= self.max_restarts

    def as_dict(self) -> dict[str, Any]:
        """The policy as the report shows it, with its restart schedule (the first 8 restarts when
        unlimited or long)."""
        return {
            "step_minutes": self.step_minutes,
            "max_interval_minutes": self.max_interval_minutes,
            "max_restarts": self.max_restarts,
            "minute_seconds": self.minute_seconds,
            "errors_before_alert": self.errors_before_alert,
            "schedule_minutes": self.schedule_minutes(
                None if self.max_restarts is not None and self.max_restarts <= 20 else 8
            ),
        }


@dataclass(frozen=True)
class RestartState:
    """What the sweep remembers about one connector (persisted between runs)."""

    count: int = 0
    first_failure_at: float | None = None
    last_restart_at: float | None = None
    healthy_since: float | None = None
    total_restarts: int = 0  # never reset: for the report
    # restart calls in a row that the worker answered with an error (refused, 409, ...)
    error_streak: int = 0
    last_error: str | None = None
    # the worker's answer when its REST API was found unable to address this name: it is
    # reported once and never called again (a name cannot change)
    unaddressable: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The state as the sweep persists it between runs (read back by :meth:`from_dict`)."""
        return {
            "count": self.count,
            "first_failure_at": self.first_failure_at,
            "last_restart_at": self.last_restart_at,
            "healthy_since": self.healthy_since,
            "total_restarts": self.total_restarts,
            "error_streak": self.error_streak,
            "last_error": self.last_error,
            "unaddressable": self.unaddressable,
        }

    @property
    def worth_keeping(self) -> bool:
        """Whether the sweep must remember anything about this connector."""
        return bool(
            self.count
            or self.total_restarts
            or self.first_failure_at
            or self.error_streak
            or self.unaddressable
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RestartState:
        """Read the persisted state; a missing timestamp stays None (unknown), and ``total_restarts`` falls
        back to ``count`` for state written before it existed."""

        def num(key):
            """A stored timestamp as float, or None when it was never set."""
            value = data.get(key)
            return None if value is None else float(value)

        return cls(
            count=int(data.get("count", 0)),
            first_failure_at=num("first_failure_at"),
            last_restart_at=num("last_restart_at"),
            healthy_since=num("healthy_since"),
            total_restarts=int(data.get("total_restarts", data.get("count", 0))),
            error_streak=int(data.get("error_streak", 0)),
            last_error=data.get("last_error"),
            unaddressable=data.get("unaddressable"),
        )

    def after_restart(self, now: float) -> RestartState:
        """The state after a restart at ``now`` (the worker's clock): one more in the count, the health and
        error streaks start over."""
        return replace(
            self,
            count=self.count + 1,
            last_restart_at=now,
            healthy_since=None,
            total_restarts=self.total_restarts + 1,
            error_streak=0,
            last_error=None,
        )

    def after_refused_restart(self, now: float, error: str) -> RestartState:
        """The worker tried and the start threw, or answered any error but 409: a restart
        that failed at once. Counted like any restart, so the back-off and the give-up alert
        apply to it.
        """
        return replace(self.after_restart(now), error_streak=self.error_streak + 1, last_error=error)

    def after_error(self, error: str) -> RestartState:
        """The restart call was a documented no-op (409, rebalancing): not counted."""
        return replace(self, error_streak=self.error_streak + 1, last_error=error)


@dataclass(frozen=True)
class Verdict:
    action: str  # RESTART, WAIT, GIVE_UP, RESET, HEALTHY, RECOVERING
    reason: str
    state: RestartState  # the state to persist (before the restart call, for RESTART)
    due_at: float | None = None
    observed: dict[str, Any] = field(default_factory=dict)


def decide(policy: RestartPolicy, state: RestartState | None, failed: bool, now: float) -> Verdict:
    """Decide for one connector; pure: the caller makes the call and persists the state."""
    state = state or RestartState()
    if failed:
        return _decide_failed(policy, state, now)
    return _decide_healthy(policy, state, now)


def _decide_failed(policy: RestartPolicy, state: RestartState, now: float) -> Verdict:
    """A failed connector: restart at once the first time, then after the policy's back-off, and
    give up (left FAILED for a person) once the policy's maximum of restarts is spent."""
    state = replace(
        state,
        healthy_since=None,
        first_failure_at=now if state.first_failure_at is None else state.first_failure_at,
    )
    if state.count == 0:
        if policy.exhausted(0):
            return Verdict(GIVE_UP, "max_restarts is 0: auto-restart never restarts", state)
        return Verdict(RESTART, "first failure seen: restart at once (minute 0)", state, due_at=now)
    if policy.exhausted(state.count):
        return Verdict(
            GIVE_UP,
            f"restarted {state.count} times since {iso(state.first_failure_at)}, the policy's maximum; "
            "left FAILED for a person to look at",
            state,
        )
    interval = policy.interval_seconds(state.count)
    due = (now if state.last_restart_at is None else state.last_restart_at) + interval
    if now >= due:
        return Verdict(
            RESTART,
            f"still failed {policy.interval_minutes(state.count):g} policy minutes after restart #{state.count}",
            state,
            due_at=due,
        )
    return Verdict(
        WAIT,
        f"restart #{state.count + 1} due at {iso(due)} (back-off after restart #{state.count})",
        state,
        due,
    )


def _decide_healthy(policy: RestartPolicy, state: RestartState, now: float) -> Verdict:
    """A connector not failed: its restart count resets only after it stayed healthy longer than
    the current interval, so one that flaps keeps its back-off."""
    state = replace(state, error_streak=0, last_error=None)  # no restart call needed: no error to carry
    if state.count == 0:
        return Verdict(HEALTHY, "not failed", replace(state, healthy_since=None, first_failure_at=None))
    since = state.healthy_since if state.healthy_since is not None else now
    state = replace(state, healthy_since=since)
    interval = policy.interval_seconds(state.count)
    if now - since > interval:
        return Verdict(
            RESET,
            f"healthy for {now - since:.0f}s, longer than the current interval "
            f"({policy.interval_minutes(state.count):g} policy minutes = {interval:.0f}s): restart count reset",
            replace(state, count=0, first_failure_at=None, healthy_since=None),
        )
    return Verdict(
        RECOVERING,
        f"healthy since {iso(since)}; the count ({state.count}) resets after {interval:.0f}s healthy",
        state,
        due_at=since + interval,
    )
