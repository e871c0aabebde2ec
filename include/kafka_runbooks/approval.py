"""Approval records: what a person approved, bound to the exact plan the gate showed.

An approval gate is only worth something if the destructive step that follows acts on
what was approved and on nothing else. So the gate stores a record with the run: who
answered, when, and the digest of the plan it showed (sha256 of the plan's canonical
JSON). Before acting, the destructive step recomputes the digest from what it is about
to do and refuses unless an approval of that digest exists for this run. A cleared run,
a resumed run, a new run or a plan that changed since the gate therefore goes back to the
gate instead of past it.

Who may remove a gate is the deployment's decision (``allow_ungated``), not the trigger
form's; and with ``four_eyes`` the person who triggered a run cannot approve it.

No Airflow here: the adapters in ``plugins/kafka_runbooks_airflow/gate.py`` read the
settings and the run, and call these functions.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from kafka_runbooks.errors import BadInput, SafetyRefusal

ALLOW_UNGATED_ENV = "KAFKA_RUNBOOKS_ALLOW_UNGATED"
ALLOW_UNGATED_VARIABLE = "kafka_runbooks_allow_ungated"
FOUR_EYES_ENV = "KAFKA_RUNBOOKS_FOUR_EYES"
FOUR_EYES_VARIABLE = "kafka_runbooks_four_eyes"

APPROVED = "approved"
REJECTED = "rejected"
TIMED_OUT = "timed_out"
REFUSED = "refused"  # an answer that does not count (four-eyes, plan changed while waiting)
NOT_REQUIRED = "not_required"  # dry run, or an ungated run the deployment allows

_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off", ""})


class NotApproved(SafetyRefusal):
    """The destructive step may not act: no approval of exactly this plan exists."""


class PolicyError(BadInput):
    """A setting of the approval policy cannot be read; the safe reading is taken instead."""


def canonical_json(plan: Any) -> str:
    """One text per plan: sorted keys, no whitespace, so equal plans give equal digests."""
    return json.dumps(plan, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)


def plan_digest(plan: Any) -> str:
    """``sha256:<hex>`` of the plan's canonical JSON: what an approval is bound to."""
    return "sha256:" + hashlib.sha256(canonical_json(plan).encode()).hexdigest()


def parse_flag(text: str | None, name: str) -> bool | None:
    """``true``/``false`` (and 1/0, yes/no, on/off); None when unset; anything else is an error."""
    if text is None:
        return None
    value = str(text).strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise PolicyError(f"{name}={text!r} is not a boolean (true/false)")


@dataclass(frozen=True)
class ApprovalPolicy:
    """The deployment's answer to "may a run skip its gate?" and "may I approve my own run?"."""

    allow_ungated: bool = False
    four_eyes: bool = False
    source: str = "defaults"  # where the settings came from, for the decision record
    errors: tuple[str, ...] = ()  # settings that could not be read (the safe value was taken)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_policy(
    variable: Callable[[str], str | None], environ: Mapping[str, str] | None = None
) -> ApprovalPolicy:
    """Read the policy at run time: the Airflow Variable when set, else the environment, else off.

    ``variable(name)`` returns the Variable's text or None. A value that is not a boolean
    is an error: ``allow_ungated`` then stays off and ``four_eyes`` turns on (the safe
    reading), and the error is named in the record.
    """
    environ = os.environ if environ is None else environ
    values: dict[str, bool] = {}
    sources: list[str] = []
    errors: list[str] = []
    for key, var_name, env_name, safe in (
        ("allow_ungated", ALLOW_UNGATED_VARIABLE, ALLOW_UNGATED_ENV, False),
        ("four_eyes", FOUR_EYES_VARIABLE, FOUR_EYES_ENV, True),
    ):
        try:
            from_var = parse_flag(variable(var_name), f"Variable {var_name}")
            from_env = parse_flag(environ.get(env_name), env_name) if from_var is None else None
        except PolicyError as exc:
            errors.append(str(exc))
            values[key] = safe
            sources.append(f"{key}: unreadable, {safe}")
            continue
        if from_var is not None:
            values[key], where = from_var, f"Variable {var_name}"
        elif from_env is not None:
            values[key], where = from_env, env_name
        else:
            values[key], where = False, "default"
        sources.append(f"{key}={str(values[key]).lower()} ({where})")
    return ApprovalPolicy(
        allow_ungated=values["allow_ungated"],
        four_eyes=values["four_eyes"],
        source="; ".join(sources),
        errors=tuple(errors),
    )


def ungated_refusal(require_approval: bool, dry_run: bool, policy: ApprovalPolicy) -> str | None:
    """Why a run may not skip its gate, or None when it may (gated, dry run, or allowed)."""
    if require_approval or dry_run or policy.allow_ungated:
        return None
    return (
        "require_approval=false is not allowed in this deployment: an admin must set the Airflow "
        f"Variable {ALLOW_UNGATED_VARIABLE} (or {ALLOW_UNGATED_ENV}) to true to allow ungated runs "
        f"({policy.source})"
    )


def user_label(user: Mapping[str, Any] | None) -> str:
    """``name (id)``, or the one of them there is; ``nobody`` for None."""
    if not user:
        return "nobody"
    uid, name = str(user.get("id") or ""), str(user.get("name") or "")
    if uid and name and uid != name:
        return f"{name} ({uid})"
    return name or uid or "nobody"


def same_user(approver: Mapping[str, Any] | None, triggering_user: str | None) -> bool:
    """True when the approver is the user who triggered the run (by id or by name)."""
    if not approver or not triggering_user:
        return False
    names = {str(approver.get("id") or ""), str(approver.get("name") or "")} - {""}
    return triggering_user in names


def four_eyes_refusal(
    approver: Mapping[str, Any] | None, triggering_user: str | None, policy: ApprovalPolicy
) -> str | None:
    """Why this approval does not count under four-eyes, or None when it counts."""
    if policy.four_eyes and same_user(approver, triggering_user):
        return (
            f"four-eyes is on and {user_label(approver)} triggered this run: the approver must be "
            "someone else (an approval by the same user does not count)"
        )
    return None


def check_approval(
    record: Mapping[str, Any] | None, digest: str, policy: ApprovalPolicy
) -> Mapping[str, Any]:
    """The approval that lets the destructive step act on the plan with ``digest``; else NotApproved.

    ``record`` is what the gate stored for this run (None when it stored nothing). It counts
    only when it approves exactly this digest; an ungated record counts only while the
    deployment still allows ungated runs; an approval still has to pass four-eyes.
    """
    if not record:
        raise NotApproved("no approval is recorded for this run: the approval gate has not approved it")
    outcome = record.get("outcome")
    if outcome not in (APPROVED, NOT_REQUIRED):
        by = user_label(record.get("by"))
        raise NotApproved(f"the gate's answer was {outcome!r} (by {by}): {record.get('reason')}")
    if record.get("digest") != digest:
        raise NotApproved(
            f"the plan changed since the gate: approved {record.get('digest')}, about to do {digest}"
        )
    if outcome == NOT_REQUIRED:
        if record.get("dry_run"):
            return record
        if not policy.allow_ungated:
            raise NotApproved(f"the run skipped its gate but ungated runs are not allowed ({policy.source})")
        return record
    refusal = four_eyes_refusal(record.get("by"), record.get("triggered_by"), policy)
    if refusal:
        raise NotApproved(refusal)
    return record
