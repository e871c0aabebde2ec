"""Approval records: what a person approved, bound to the exact plan the gate showed.

An approval gate is only worth something if the destructive step that follows acts on
what was approved and on nothing else. So the gate stores a record with the run: who
answered, when, and the digest of the plan it showed (sha256 of the plan's canonical
JSON). Before acting, the destructive step recomputes the digest from what it is about
to do and refuses unless an approval of that digest exists for this run. A cleared run,
a resumed run, a new run or a plan that changed since the gate therefore goes back to the
gate instead of past it.

Who may remove a gate is the deployment's decision (``allow_ungated``), not the trigger
form's; and with ``four_eyes`` the person who triggered a run cannot approve it, nor can
anyone who approved a decision upstream that started it (the run's ``upstream_approvals``:
a sweep's gate whose answer started this run). An approval also expires
(``approval_max_age_s``, default one hour), and a gate's answer counts only when it came by the
gate's deadline. Every time these rules compare is on one clock, Airflow's API server's
(:data:`kafka_runbooks.evidence.AIRFLOW_API_SERVER`): the HITL answer's ``responded_at`` (the
API server stamps it), the gate's deadline (the API server's now when it asked, plus its
timeout) and the time the destructive work first started (the API server's ``Date`` when the
destructive task first checked its approval), never a worker's clock: a worker 50 minutes behind
must not make a 1 h 40 min old approval look 50 minutes old. An unknown time, or one another
clock stamped, never counts as fresh or in time.

No Airflow here: the adapters in ``plugins/kafka_runbooks_airflow/gate.py`` read the
settings and the run, and call these functions.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

from kafka_runbooks.errors import BadInput, SafetyRefusal
from kafka_runbooks.evidence import AIRFLOW_API_SERVER, Stamp, age_ms

ALLOW_UNGATED_ENV = "KAFKA_RUNBOOKS_ALLOW_UNGATED"
ALLOW_UNGATED_VARIABLE = "kafka_runbooks_allow_ungated"
FOUR_EYES_ENV = "KAFKA_RUNBOOKS_FOUR_EYES"
FOUR_EYES_VARIABLE = "kafka_runbooks_four_eyes"
MAX_AGE_ENV = "KAFKA_RUNBOOKS_APPROVAL_MAX_AGE_S"
MAX_AGE_VARIABLE = "kafka_runbooks_approval_max_age_s"
DEFAULT_MAX_AGE_S = 3600.0
UPSTREAM_KEY = "upstream_approvals"  # conf key of the approvals that started a run

APPROVED = "approved"
REJECTED = "rejected"
TIMED_OUT = "timed_out"
REFUSED = "refused"  # an answer that does not count (four-eyes, plan changed while waiting)
NOT_REQUIRED = "not_required"  # dry run, or an ungated run the deployment allows

# The approval gates' two options (issue #39 point 7: a bare "Approve" and "Reject" looked alike and
# said nothing of what each does). Every place that offers, sends or compares them imports these.
APPROVE_OPTION = "Approve: run the plan"
REJECT_OPTION = "Reject: do nothing"
GATE_OPTIONS = (APPROVE_OPTION, REJECT_OPTION)
# what a gate asked before the options were renamed offered, and its answer names: read as the new ones
EARLIER_OPTIONS = {"Approve": APPROVE_OPTION, "Reject": REJECT_OPTION}

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
    approval_max_age_s: float = DEFAULT_MAX_AGE_S  # older than this when the work first started: expired
    source: str = "defaults"  # where the settings came from, for the decision record
    errors: tuple[str, ...] = ()  # settings that could not be read (the safe value was taken)

    def as_dict(self) -> dict[str, Any]:
        """The policy in force, as the gate's decision record shows it."""
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
    max_age, where, error = _max_age(variable, environ)
    sources.append(f"approval_max_age_s={max_age:g} ({where})")
    errors.extend([error] if error else [])
    return ApprovalPolicy(
        allow_ungated=values["allow_ungated"],
        four_eyes=values["four_eyes"],
        approval_max_age_s=max_age,
        source="; ".join(sources),
        errors=tuple(errors),
    )


def parse_seconds(text: str, name: str) -> float:
    """A positive number of seconds; anything else is an error (0 would expire every approval)."""
    try:
        value = float(str(text).strip())
    except ValueError:
        raise PolicyError(f"{name}={text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise PolicyError(f"{name}={text!r} must be a positive number of seconds")
    return value


def _max_age(variable: Callable[[str], str | None], environ: Mapping[str, str]) -> tuple[float, str, str]:
    """(seconds, where from, error): the Variable, else the environment, else one hour.

    An unreadable value is an error and the default is taken: an approval never lives
    longer than the default because a setting was mistyped.
    """
    for text, name in (
        (variable(MAX_AGE_VARIABLE), f"Variable {MAX_AGE_VARIABLE}"),
        (environ.get(MAX_AGE_ENV), MAX_AGE_ENV),
    ):
        if text is None or not str(text).strip():
            continue
        try:
            return parse_seconds(text, name), name, ""
        except PolicyError as exc:
            return DEFAULT_MAX_AGE_S, "unreadable, default", str(exc)
    return DEFAULT_MAX_AGE_S, "default", ""


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


def current_option(option: str) -> str:
    """The option an answer names, in today's words: a gate asked before the options were renamed
    offered (and its stored answer names) the bare "Approve"/"Reject"; it still means the same."""
    return EARLIER_OPTIONS.get(option, option)


def chose(chosen: Sequence[str], option: str) -> bool:
    """Whether the answer ``chosen`` picked ``option``, an answer in the earlier words included."""
    return current_option(option) in {current_option(o) for o in chosen}


def answered_words(outcome: str, by: Mapping[str, Any] | None, chosen: Sequence[str], at: Any) -> str:
    """The answered gate in one phrase, from its record: ``approved by alice (chose 'Approve: run the
    plan') at <time>``; the option as the answer named it, the time the API server stamped on it."""
    picked = ", ".join(f"'{o}'" for o in chosen) or "no option"
    when = at.isoformat() if hasattr(at, "isoformat") else at
    return f"{outcome} by {user_label(by)} (chose {picked})" + (f" at {when}" if when else "")


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


def _names(user: Any) -> set[str]:
    """The ids and names a user is known by: a HITL user dict ``{id, name}`` or a plain name."""
    if isinstance(user, Mapping):
        return {str(user.get("id") or ""), str(user.get("name") or "")} - {""}
    return {str(user)} if user else set()


def upstream_entries(value: Any) -> list[dict[str, Any]]:
    """The run's ``upstream_approvals`` (conf) as a list of entries; NotApproved when malformed.

    Each entry is one approval that started this run: ``{user, at, dag_id, run_id, task_id,
    map_index}``. A malformed chain is not read as "no chain": nobody can approve the run.
    """
    if value is None:
        return []
    if not isinstance(value, list | tuple) or not all(isinstance(e, Mapping) for e in value):
        raise NotApproved(f"{UPSTREAM_KEY} in the run's conf is not a list of approvals: {value!r}")
    for entry in value:
        missing = [k for k in ("user", "at", "dag_id", "run_id", "task_id") if not entry.get(k)]
        if missing:
            raise NotApproved(f"an entry of {UPSTREAM_KEY} lacks {missing}: {dict(entry)!r}")
    return [dict(e) for e in value]


def _where(entry: Mapping[str, Any]) -> str:
    return f"{entry.get('dag_id')} run {entry.get('run_id')}, gate {entry.get('task_id')}"


def upstream_mismatch(entry: Mapping[str, Any], parent_record: Any) -> str | None:
    """Why an upstream entry is not what the parent's gate recorded (its XCom record), or None.

    The conf alone is not trusted: a person can start a run by hand with any conf. The
    parent gate's own record must show an approval by the same user at the same time.
    """
    if not isinstance(parent_record, Mapping):
        return f"the run names an upstream approval ({_where(entry)}) that its gate did not record"
    if parent_record.get("outcome") != APPROVED:
        return (
            f"the upstream gate ({_where(entry)}) recorded {parent_record.get('outcome')!r}, not an approval"
        )
    if _names(parent_record.get("by")) != _names(entry.get("user")) or parent_record.get("at") != entry.get(
        "at"
    ):
        return (
            f"the run says {user_label(entry.get('user'))} approved at {entry.get('at')} ({_where(entry)}), "
            f"but that gate recorded {user_label(parent_record.get('by'))} at {parent_record.get('at')}"
        )
    return None


def upstream_refusal(
    approver: Mapping[str, Any] | None, upstream: Sequence[Mapping[str, Any]], policy: ApprovalPolicy
) -> str | None:
    """Why, under four-eyes, this approver may not approve a run started by their own upstream approval.

    Airflow gives a run started by another run the parent's triggering user (None for a
    scheduled sweep), so the triggering-user rule alone lets one person answer the sweep's
    gate and then approve the run it started. Everyone in the chain is excluded.
    """
    if not policy.four_eyes:
        return None
    mine = _names(approver)
    for entry in upstream:
        if mine and mine & _names(entry.get("user")):
            return (
                f"four-eyes is on and {user_label(approver)} approved the decision that started this run "
                f"({_where(entry)}, at {entry.get('at')}): the approver must be someone who took no part "
                "upstream (an approval by the same user does not count)"
            )
    return None


def approved_at(record: Mapping[str, Any]) -> Stamp:
    """When the gate's answer was given, with the clock that stamped it (``at`` and ``at_clock`` of
    the gate's record); a record without its clock is unknown, never assumed to be the API server's."""
    return Stamp.of(record.get("at"), str(record.get("at_clock") or "an unrecorded"))


def _one_clock(what: str, stamp: Stamp) -> str | None:
    """Why ``stamp`` cannot be used by these rules, or None when it is known on the API server's clock."""
    if stamp.clock != AIRFLOW_API_SERVER:
        return f"{what} was stamped by {stamp.clock} clock, not by {AIRFLOW_API_SERVER}'s"
    if not stamp.known:
        return f"{what} is unknown"
    return None


def expiry_refusal(record: Mapping[str, Any], started: Stamp | None, policy: ApprovalPolicy) -> str | None:
    """Why the approval is too old for work that first started at ``started``, or None.

    Both times are on Airflow's API server's clock: the answer's ``responded_at`` and the API
    server's time when the destructive work first started (its ``Date``, taken as the end of that
    second, so an age is never shorter than the truth). An unknown time, a time another clock
    stamped, or an approval given after the work started (that work did not start under it) does
    not count.
    """
    limit = timedelta(seconds=policy.approval_max_age_s)
    approved = approved_at(record)
    started = started if started is not None else Stamp(None, AIRFLOW_API_SERVER)
    why = _one_clock(f"the approval's time ({record.get('at')!r})", approved) or _one_clock(
        "the time this task's work first started", started
    )
    if why:
        return f"{why}: the approval cannot be shown younger than {limit}, so it does not count"
    age = age_ms(approved, started)
    if age is None:  # both known on the API server's clock: cannot happen, never read as fresh
        return f"the approval's age at {started} is unknown"
    if age < 0:
        return (
            f"approved at {approved}, after this task's work first started at {started}: that work did "
            "not start under this approval; clear this task to start it under the approval"
        )
    if age > limit.total_seconds() * 1000:
        return (
            f"approved at {approved.isoformat()}, expired after {limit} ({policy.source}): this task's work "
            f"first started at {started.isoformat()} ({AIRFLOW_API_SERVER}'s clock), "
            f"{timedelta(milliseconds=age)} later; clear the gate to ask again"
        )
    return None


def time_left_ms(now: Stamp, deadline: Stamp) -> int | None:
    """Milliseconds from ``now`` to ``deadline`` on one clock (negative: past); None when unknown."""
    return age_ms(now, deadline)


def late_answer(answered: Stamp, deadline: Stamp) -> tuple[str, str] | None:
    """(outcome, reason) when a gate's answer came after its deadline (``timed_out``) or cannot be
    compared with it (``refused``); None when it came in time.

    Airflow can resume a gate with an answer given after its deadline (the scheduler's timeout
    sweep resumes with any response it finds; a response between the deadline and the sweep
    resumes the gate at once), so the gate judges the answer's time itself, on the API server's
    clock that stamped both.
    """
    why = _one_clock("the answer's time", answered) or _one_clock("the gate's deadline", deadline)
    if why:
        return REFUSED, f"{why}: the answer cannot be shown to be in time, so it does not count"
    late = age_ms(deadline, answered)
    if late is not None and late > 0:
        return (
            TIMED_OUT,
            f"answered at {answered.isoformat()}, after the deadline {deadline.isoformat()} "
            f"({AIRFLOW_API_SERVER}'s clock): the answer does not count",
        )
    return None


def check_approval(
    record: Mapping[str, Any] | None,
    digest: str,
    policy: ApprovalPolicy,
    *,
    started_at: Stamp | None,
    upstream: Sequence[Mapping[str, Any]] = (),
) -> Mapping[str, Any]:
    """The approval that lets the destructive step act on the plan with ``digest``; else NotApproved.

    ``record`` is what the gate stored for this run (None when it stored nothing). It counts
    only when it approves exactly this digest; an ungated record counts only while the
    deployment still allows ungated runs; an approval still has to pass four-eyes (the
    triggering user and the ``upstream`` chain) and be younger than the policy's maximum age
    at ``started_at``: when the destructive work first started, on the API server's clock
    (None: unknown, the approval does not count).
    """
    if not record:
        raise NotApproved("no approval is recorded for this run: the approval gate has not approved it")
    outcome = record.get("outcome")
    if outcome not in (APPROVED, NOT_REQUIRED):
        by = user_label(record.get("by"))
        raise NotApproved(f"the gate's answer was {outcome!r} (by {by}): {record.get('reason')}")
    if record.get("digest") != digest:
        raise NotApproved(
            f"the plan changed since the gate: approved {record.get('digest')} at {record.get('at')}, "
            f"about to do {digest}; clear the gate to ask again"
        )
    if outcome == NOT_REQUIRED:
        if record.get("dry_run"):
            return record
        if not policy.allow_ungated:
            raise NotApproved(f"the run skipped its gate but ungated runs are not allowed ({policy.source})")
        return record
    refusal = (
        four_eyes_refusal(record.get("by"), record.get("triggered_by"), policy)
        or upstream_refusal(record.get("by"), upstream, policy)
        or expiry_refusal(record, started_at, policy)
    )
    if refusal:
        raise NotApproved(refusal)
    return record
