"""The restart runbook's params checked alone, before the run waits for anything.

What can be judged without the cluster (the node list's shape, the reason, the limits) is
judged here, so a run with bad input says so at once instead of after hours waiting for the
cluster's lease. What needs the cluster (does node 7 exist?) is checked by the plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafka_runbooks.restart.roller import RollInputError, RollOptions, parse_node_ids
from kafka_runbooks.units import parse_duration


@dataclass(frozen=True)
class RestartRequest:
    node_ids: list[int] | None  # None: every node
    reason: str
    operation_timeout_s: float
    max_attempts: int
    # the run's switches, read once here so the glue never goes back to the params
    allow_force_restart: bool = False
    dry_run: bool = False
    require_approval: bool = True
    # a broker and a follower controller side by side (restart.lanes); True: strictly one node
    one_node_at_a_time: bool = False

    def roll_options(self) -> RollOptions:
        """The options the roll plan keeps (and the gate's digest covers)."""
        return RollOptions(
            operation_timeout_s=self.operation_timeout_s,
            max_attempts=self.max_attempts,
            allow_force_restart=self.allow_force_restart,
            dry_run=self.dry_run,
            overlap=not self.one_node_at_a_time,
        )


def _number(params: dict[str, Any], name: str, default: float, minimum: float, kind=float):
    value = params.get(name, default)
    try:
        number = kind(value)
    except (TypeError, ValueError):
        raise RollInputError(f"{name} must be a number, not {value!r}") from None
    if isinstance(value, float) and kind is int and value != int(value):
        raise RollInputError(f"{name} must be a whole number, not {value!r}")
    if number < minimum:
        raise RollInputError(f"{name} must be at least {minimum}, not {value!r}")
    return number


def build_request(params: dict[str, Any]) -> RestartRequest:
    """Validate the trigger form's values (no cluster call); RollInputError says which and why."""
    reason = str(params.get("reason") or "").strip()
    if len(reason) < 3:
        raise RollInputError(
            "give a reason for the restart, at least 3 characters (it is logged in every decision record)"
        )
    return RestartRequest(
        node_ids=parse_node_ids(str(params.get("node_ids") or "")),
        reason=reason,
        operation_timeout_s=parse_duration(
            params.get("operation_timeout_s", 300), "operation_timeout_s", minimum_s=5
        ),
        max_attempts=_number(params, "max_attempts", 10, 1, int),
        allow_force_restart=bool(params.get("allow_force_restart", False)),
        dry_run=bool(params.get("dry_run", False)),
        require_approval=bool(params.get("require_approval", True)),
        one_node_at_a_time=bool(params.get("one_node_at_a_time", False)),
    )
