"""Approval gates whose answer is a record bound to the plan, and the check before every destructive task.

Airflow's ``ApprovalOperator`` treats "Reject" as a successful answer (downstream tasks are
skipped, the run ends success), a timeout as a generic failure, and leaves nothing that
a later task could check: clear the task after the gate and it runs as if approved. Here:

- the gate computes the plan's digest from what the destructive task will read (the
  roll-state file, the reassignment's execution state, the election choices), shows it
  in the body, and stores a record with the run (XCom ``approval`` of the gate task):
  outcome, who, when, the digest, who triggered the run;
- Reject fails the gate ("rejected by <user>"), so does a timeout ("not approved within
  ..."), an approval by the triggering user under four-eyes, and a plan that changed while
  the gate waited; nothing after the gate runs;
- the destructive task calls :func:`require_approval` before acting: it recomputes the
  digest and refuses unless the gate approved exactly that for this run, and unless the
  approval is younger than ``approval_max_age_s`` when the task started (a clear of the
  destructive task alone, long after the gate, goes back to the gate);
- a run started by another run's approved decision (a sweep's gate) carries that approval
  in its conf (``upstream_approvals``, bound into its digest); the gate reads the parent
  gate's own record to verify it, and under four-eyes nobody in that chain may approve.

Runs with ``require_approval=false`` and dry runs pass the gate without asking, with a
``not_required`` record; ungated runs only where the deployment allows them
(:mod:`kafka_runbooks.approval`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator, HITLBranchOperator, HITLOperator
from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator

from kafka_runbooks import approval as rules
from kafka_runbooks import decisions
from kafka_runbooks.errors import BadInput

log = logging.getLogger("kafka_runbooks.approval")

RECORD_KEY = "approval"  # XCom key of the gate's record
REQUEST_KEY = "approval_request"  # XCom key of what the gate asked (digest, trigger user)


def load_policy():
    """The approval policy, read now (run time) from the Variables and the environment."""
    from airflow.sdk import Variable

    def variable(name: str) -> str | None:
        """An Airflow Variable as text, or None when unset (the policy then takes its safe value)."""
        value = Variable.get(name, default=None)
        return None if value is None else str(value)

    policy = rules.load_policy(variable)
    for error in policy.errors:
        log.error("approval policy: %s (the safe value is taken)", error)
    return policy


def refuse_ungated_run(runbook: str, require_approval: bool, dry_run: bool) -> None:
    """First thing in a runbook's plan task: an ungated run the deployment does not allow fails here.

    A DECISION record says why; nothing has touched the cluster yet.
    """
    from airflow.sdk.exceptions import AirflowFailException

    refusal = rules.ungated_refusal(require_approval, dry_run, load_policy())
    if refusal:
        decisions.record(
            "approval", "refuse the run", refusal, subject=runbook, logger=log, level=logging.ERROR
        )
        raise AirflowFailException(f"nothing was done: {refusal}")


# ------------------------------------------------------------------ what each gate approves


def run_xcom(context, task_id: str, key: str = "return_value") -> Any:
    """An XCom of this run; in a mapped task group, of the caller's own map index (its cluster):
    without ``map_indexes`` Airflow returns every map index's value."""
    ti = context["ti"]
    map_index = getattr(ti, "map_index", None)
    if isinstance(map_index, int) and map_index >= 0:
        return ti.xcom_pull(task_ids=task_id, key=key, map_indexes=map_index)
    return ti.xcom_pull(task_ids=task_id, key=key)


ActionFn = Callable[[Any], dict[str, Any]]
_ACTIONS: dict[str, ActionFn] = {}


def register_action(kind: str, fn: ActionFn) -> ActionFn:
    """Make ``fn`` what gates and destructive tasks of kind ``kind`` approve (:func:`current_action`).

    Each runbook's glue module registers its own "what is the plan" function when it is
    imported, so the gate holds no per-runbook table. A second, different function for a
    kind already taken is refused (two runbooks would approve each other's plans); the same
    function registered again (its module imported again) is a no-op.
    """
    known = _ACTIONS.get(kind)
    if known is not None and _qualified(known) != _qualified(fn):
        raise BadInput(f"action_kind {kind!r} is already registered by {_qualified(known)}")
    _ACTIONS[kind] = fn
    return fn


def gate_action(kind: str) -> Callable[[ActionFn], ActionFn]:
    """Decorator form of :func:`register_action`."""
    return lambda fn: register_action(kind, fn)


def action_kinds() -> list[str]:
    """The kinds registered so far (the glue modules imported in this process)."""
    return sorted(_ACTIONS)


def registered_action(kind: str) -> ActionFn:
    """The action function of ``kind``; BadInput naming the known kinds when nobody registered it."""
    if kind not in _ACTIONS:
        raise BadInput(f"unknown action_kind {kind!r}; known: {action_kinds()}")
    return _ACTIONS[kind]


def _qualified(fn: ActionFn) -> str:
    """The function's source file and name: the same function even when its module is imported
    under two names (Airflow's plugin manager loads ``plugins/kafka_runbooks_airflow/*.py`` as
    top-level modules too, so ``unclean`` and ``kafka_runbooks_airflow.unclean`` both register)."""
    code = getattr(fn, "__code__", None)
    where = code.co_filename if code is not None else getattr(fn, "__module__", "?")
    return f"{where}:{getattr(fn, '__qualname__', repr(fn))}"


def _run_conf(context) -> dict[str, Any]:
    conf = getattr(context.get("dag_run"), "conf", None)
    return dict(conf) if isinstance(conf, dict) else {}


def current_action(kind: str, context) -> tuple[dict[str, Any], str]:
    """What the destructive task would do now, and its digest.

    The approvals that started the run (``upstream_approvals`` in its conf) are part of what
    is approved: the chain the four-eyes check reads cannot differ from the one shown.
    """
    action = registered_action(kind)(context)
    conf = _run_conf(context)
    if rules.UPSTREAM_KEY in conf:
        action[rules.UPSTREAM_KEY] = conf[rules.UPSTREAM_KEY]
    return action, rules.plan_digest(action)


def upstream_approvals(context) -> list[dict[str, Any]]:
    """The approvals that started this run (its conf); NotApproved when the conf's chain is malformed."""
    return rules.upstream_entries(_run_conf(context).get(rules.UPSTREAM_KEY))


def _parent_record(context, entry: dict[str, Any]) -> Any:
    """The record the parent's gate stored (its XCom), read through this task's own Airflow access.

    Why read it rather than trust the conf: anyone allowed to trigger a run can write any
    conf in the trigger form. A task can read another run's XCom (``xcom_pull`` with
    ``dag_id`` and ``run_id``), so the chain is checked against what the parent gate itself
    recorded; a chain that names an approval the parent did not record is refused.
    """
    map_index = entry.get("map_index")
    return context["ti"].xcom_pull(
        task_ids=entry["task_id"],
        dag_id=entry["dag_id"],
        run_id=entry["run_id"],
        key=RECORD_KEY,
        map_indexes=map_index if isinstance(map_index, int) and map_index >= 0 else None,
    )


def verified_upstream(context) -> list[dict[str, Any]]:
    """The run's upstream chain, each entry checked against its parent gate's record; else NotApproved."""
    entries = upstream_approvals(context)
    for entry in entries:
        mismatch = rules.upstream_mismatch(entry, _parent_record(context, entry))
        if mismatch:
            raise rules.NotApproved(mismatch)
    return entries


def task_started_at(context) -> Any:
    """When this task started, as Airflow recorded it (a reschedule sensor: its first poke).

    Compared with the HITL answer's time, which Airflow's API server recorded: both are
    Airflow's times, never a Kafka timestamp. A sensor re-checks its approval at every poke,
    so "started" must stay the first poke's start, or a long roll would expire mid-way.
    """
    ti = context["ti"]
    if context.get("task_reschedule_count"):
        first = ti.get_first_reschedule_date(context)
        if first is not None:
            return first
    return getattr(ti, "start_date", None)


# ------------------------------------------------------------------ the gates

DIGEST_SHOWN = re.compile(r"\*\*Plan digest:\*\* `(sha256:[0-9a-f]{64})`")


def show_question(operator: HITLOperator, ti_id) -> str | None:
    """Write the gate's question (as ``HITLOperator.execute`` does) and return the body Airflow keeps.

    Airflow 3.3.2 keeps the question of a gate's first try: when a cleared gate asks again,
    the stored subject and body are not replaced (only an earlier answer is removed). The
    body returned here is what the approver will see. None if this Airflow does not say.
    """
    from airflow.sdk.api.datamodels._generated import HITLUser as APIHITLUser
    from airflow.sdk.execution_time.comms import CreateHITLDetailPayload
    from airflow.sdk.execution_time.task_runner import SUPERVISOR_COMMS

    stored = SUPERVISOR_COMMS.send(
        msg=CreateHITLDetailPayload(
            ti_id=ti_id,
            options=operator.options,
            subject=operator.subject,
            body=operator.body,
            defaults=operator.defaults,
            params=operator.serialized_params,
            multiple=operator.multiple,
            assigned_users=[APIHITLUser(id=u["id"], name=u["name"]) for u in operator.assigned_users or []],
        )
    )
    return getattr(stored, "body", None)


def _triggering_user(context) -> str | None:
    return getattr(context.get("dag_run"), "triggering_user_name", None)


def _timeout(context, default: timedelta | None, param: str | None) -> timedelta | None:
    """The run's response timeout: the DAG param ``param`` ('12h', '30m' or seconds) when the DAG has it."""
    from kafka_runbooks.units import parse_duration

    value = (context.get("params") or {}).get(param) if param else None
    return timedelta(seconds=parse_duration(value, param)) if value else default


class _PlanGate:
    """What the runbook gates share: digest in the body, the record, the outcomes that fail."""

    action_kind: str
    timeout_param: str | None

    def _store(self, context, outcome: str, reason: str, *, by=None, at=None, **extra) -> dict[str, Any]:
        record = {
            "outcome": outcome,
            "reason": reason,
            "gate": context["ti"].task_id,
            "run_id": context["run_id"],
            "by": dict(by) if by else None,
            "at": at.isoformat() if hasattr(at, "isoformat") else at,
            "triggered_by": _triggering_user(context),
            rules.UPSTREAM_KEY: _run_conf(context).get(rules.UPSTREAM_KEY) or [],
            **extra,
        }
        context["ti"].xcom_push(key=RECORD_KEY, value=record)
        decisions.record(
            "approval",
            outcome,
            reason,
            subject=context["ti"].task_id,
            observed={k: v for k, v in record.items() if k not in ("outcome", "reason")},
            logger=log,
            level=logging.INFO if outcome in (rules.APPROVED, rules.NOT_REQUIRED) else logging.ERROR,
        )
        return record

    def _fail(self, context, outcome: str, reason: str, **kw) -> None:
        from airflow.sdk.exceptions import AirflowFailException

        self._store(context, outcome, reason, **kw)
        raise AirflowFailException(reason)

    def _ask(self, context) -> bool:
        """Prepare the question; False when this run needs no answer (dry run, allowed ungated run)."""
        action, digest = current_action(self.action_kind, context)
        policy = load_policy()
        if action["dry_run"] or not action["require_approval"]:
            refusal = rules.ungated_refusal(action["require_approval"], action["dry_run"], policy)
            if refusal:
                self._fail(context, rules.REFUSED, refusal, digest=digest)
            why = (
                "a dry run changes nothing" if action["dry_run"] else f"ungated run allowed ({policy.source})"
            )
            self._store(context, rules.NOT_REQUIRED, why, digest=digest, dry_run=action["dry_run"])
            return False
        user = _triggering_user(context)
        self.response_timeout = _timeout(context, self.response_timeout, self.timeout_param)
        notes = [
            f"**Plan digest:** `{digest}` (the approval is bound to this plan; any other plan needs a new approval)",
            f"**Triggered by:** {user or 'the scheduler / a sweep'}",
        ]
        if action.get("orders_left_changed"):
            restores = ", ".join(
                f"{name} -> {order}" for name, order in action["orders_left_changed"].items()
            )
            notes.append(f"**Also restores the replica order an earlier run left changed:** {restores}")
        if policy.four_eyes:
            notes.append(f"**Four-eyes is on:** an approval by {user or '(no user)'} does not count.")
        self.body = "\n\n".join([self.body or "", *notes]).strip()
        shown = show_question(self, context["task_instance"].id)
        if shown is not None and shown != self.body:
            found = DIGEST_SHOWN.search(shown)
            if not found or found.group(1) != digest:
                self._fail(
                    context,
                    rules.REFUSED,
                    "Airflow shows this gate's question from an earlier try (a cleared gate's question "
                    f"is not replaced), for plan {found.group(1) if found else '(no digest)'}, but the plan "
                    f"is now {digest}: the question would not match what is approved; trigger a new run",
                    digest=digest,
                )
            log.warning("the gate shows the question of an earlier try, for the same plan %s", digest)
        context["ti"].xcom_push(
            key=REQUEST_KEY, value={"digest": digest, "triggered_by": user, "action": action}
        )
        return True

    def _answered(self, context, event: dict[str, Any]) -> tuple[dict | None, Any, str]:
        """Common checks of an answer: timeout, plan unchanged; returns (user, at, digest)."""
        if "error" in event:
            timeout = _timeout(context, self.response_timeout, self.timeout_param)
            if event.get("error_type") == "timeout":
                self._fail(context, rules.TIMED_OUT, f"not approved within {timeout}: nobody answered")
            self._fail(context, rules.REFUSED, f"the gate failed: {event.get('error')}")
        HITLOperator.execute_complete(self, context=context, event=event)  # validates the answer
        user, at = event.get("responded_by_user"), event.get("responded_at")
        asked = run_xcom(context, context["ti"].task_id, REQUEST_KEY) or {}
        _, digest = current_action(self.action_kind, context)
        if asked.get("digest") != digest:
            self._fail(
                context,
                rules.REFUSED,
                f"the plan changed while the gate waited (shown {asked.get('digest')}, now {digest}): "
                "the answer does not count; clear the run to plan and ask again",
                by=user,
                at=at,
                digest=digest,
            )
        return user, at, digest

    def _approve(self, context, user, at, digest: str) -> dict[str, Any]:
        policy = load_policy()
        try:
            upstream = verified_upstream(context)
        except rules.NotApproved as exc:
            self._fail(context, rules.REFUSED, str(exc), by=user, at=at, digest=digest)
        refusal = rules.four_eyes_refusal(user, _triggering_user(context), policy) or rules.upstream_refusal(
            user, upstream, policy
        )
        if refusal:
            self._fail(context, rules.REFUSED, refusal, by=user, at=at, digest=digest)
        return self._store(
            context, rules.APPROVED, f"approved by {rules.user_label(user)}", by=user, at=at, digest=digest
        )


class PlanApprovalOperator(_PlanGate, ApprovalOperator):
    """``ApprovalOperator`` whose Reject and timeout fail the run, and whose Approve is a record.

    :param action_kind: which plan it approves (a kind a glue module registered, :func:`register_action`).
    :param timeout_param: DAG param (seconds) overriding ``response_timeout`` per run.
    """

    def __init__(
        self, *, action_kind: str, timeout_param: str | None = "approval_timeout_s", **kwargs
    ) -> None:
        registered_action(action_kind)  # an unregistered kind fails the DAG's parse
        super().__init__(**kwargs)
        self.action_kind = action_kind
        self.timeout_param = timeout_param

    def execute(self, context):
        """Ask for approval and defer until a human answers; None without asking when this run needs no
        answer (dry run, allowed ungated run)."""
        if not self._ask(context):
            return None
        return super().execute(context)

    def execute_complete(self, context, event: dict[str, Any]) -> Any:
        """Airflow resumes here with the human's answer: anything but Approve fails the task (recorded as
        rejected); Approve records the approval bound to the plan's digest."""
        user, at, digest = self._answered(context, event)
        if event["chosen_options"] != [self.APPROVE]:
            self._fail(
                context,
                rules.REJECTED,
                f"rejected by {rules.user_label(user)}",
                by=user,
                at=at,
                digest=digest,
            )
        record = self._approve(context, user, at, digest)
        self.log.info("Approved by %s: plan %s", rules.user_label(user), digest)
        return record


class PlanDecisionBranchOperator(_PlanGate, HITLBranchOperator):
    """``HITLBranchOperator`` for a choice between a destructive option and a harmless one.

    Choosing ``approve_option`` is an approval record (four-eyes applies); any other
    option is recorded as ``rejected`` and its branch runs. A timeout fails the gate.
    """

    def __init__(
        self, *, action_kind: str, approve_option: str, timeout_param: str | None = None, **kwargs
    ) -> None:
        registered_action(action_kind)  # an unregistered kind fails the DAG's parse
        super().__init__(**kwargs)
        if approve_option not in self.options:
            raise BadInput(f"approve_option {approve_option!r} is not one of {self.options}")
        self.action_kind = action_kind
        self.approve_option = approve_option
        self.timeout_param = timeout_param

    def execute(self, context):
        """Ask which branch to take and defer until a human answers; None without asking when this run
        needs no answer."""
        if not self._ask(context):
            return None
        return super().execute(context)

    def execute_complete(self, context, event: dict[str, Any]) -> Any:
        """Airflow resumes here with the chosen options: the approve option records an approval of the
        digest, anything else a rejection; then branch to the chosen tasks."""
        user, at, digest = self._answered(context, event)
        chosen = list(event["chosen_options"])
        if self.approve_option in chosen:
            self._approve(context, user, at, digest)
        else:
            self._store(
                context,
                rules.REJECTED,
                f"{chosen} chosen by {rules.user_label(user)}",
                by=user,
                at=at,
                digest=digest,
            )
        branches = [self.options_mapping.get(option, option) for option in chosen]
        return self.do_branch(context=context, branches_to_execute=branches)


# ------------------------------------------------------------------ before every destructive task


def require_approval(context, kind: str, gate_task_id: str, logger: logging.Logger | None = None) -> dict:
    """Refuse (AirflowFailException, DECISION record) unless the gate approved this run's current plan."""
    from airflow.sdk.exceptions import AirflowFailException

    logger = logger or log
    action, digest = current_action(kind, context)
    record = run_xcom(context, gate_task_id, RECORD_KEY)
    started = task_started_at(context)
    try:
        approved = rules.check_approval(
            record, digest, load_policy(), started_at=started, upstream=upstream_approvals(context)
        )
    except rules.NotApproved as exc:
        decisions.record(
            "approval",
            "refuse to act",
            str(exc),
            subject=context["ti"].task_id,
            observed={"digest": digest, "gate_record": record, "action": action, "task_started_at": started},
            logger=logger,
            level=logging.ERROR,
        )
        raise AirflowFailException(f"nothing was done: {exc}") from exc
    decisions.record(
        "approval",
        "act on the approved plan",
        f"{approved['outcome']} by {rules.user_label(approved.get('by'))} at {approved.get('at')}: "
        f"{approved['reason']}",
        subject=context["ti"].task_id,
        observed={"digest": digest, "triggered_by": approved.get("triggered_by")},
        logger=logger,
    )
    return approved


class ApprovedTriggerDagRunOperator(TriggerDagRunOperator):
    """``TriggerDagRunOperator`` that starts its run only with an approval of the current plan."""

    def __init__(self, *, action_kind: str, gate_task_id: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.action_kind = action_kind
        self.gate_task_id = gate_task_id

    def execute(self, context):
        """Start the child run only with an approval of exactly this run id and conf, and pass the approval
        chain on in the child's conf."""
        approved = require_approval(context, self.action_kind, self.gate_task_id)
        self.refuse_unless_approved_run(context, approved)
        self.conf = {**dict(self.conf or {}), rules.UPSTREAM_KEY: self.chain_for_child(context, approved)}
        return super().execute(context)

    def chain_for_child(self, context, approved: dict) -> list[dict[str, Any]]:
        """The started run's ``upstream_approvals``: this run's own chain plus the approval that starts it.

        The child's gate verifies each entry against the gate record named here (dag, run,
        task, map index) and, under four-eyes, refuses an approver found in it.
        """
        chain = list(upstream_approvals(context))
        if approved.get("outcome") == rules.APPROVED:
            map_index = getattr(context["ti"], "map_index", None)
            chain.append(
                {
                    "user": approved.get("by"),
                    "at": approved.get("at"),
                    "dag_id": context["dag"].dag_id,
                    "run_id": context["run_id"],
                    "task_id": self.gate_task_id,
                    "map_index": map_index if isinstance(map_index, int) else -1,
                }
            )
        return chain

    def refuse_unless_approved_run(self, context, approved: dict) -> None:
        """The run it would start (run id, conf as rendered) must be the one the digest covers."""
        from airflow.sdk.exceptions import AirflowFailException

        action, digest = current_action(self.action_kind, context)
        would = {"trigger_run_id": self.trigger_run_id, "conf": dict(self.conf or {})}
        bound = {"trigger_run_id": action.get("trigger_run_id"), "conf": action.get("conf")}
        if would == bound:
            return
        why = (
            f"the run this task would start ({would}) is not the one approved under {digest} ({bound}): "
            "nothing was started"
        )
        decisions.record(
            "approval",
            "refuse to act",
            why,
            subject=context["ti"].task_id,
            observed={"approved_by": approved.get("by")},
            logger=log,
            level=logging.ERROR,
        )
        raise AirflowFailException(why)
