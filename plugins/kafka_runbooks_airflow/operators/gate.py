"""The approval gates: HITL operators whose answer is a record bound to the plan.

Airflow's ``ApprovalOperator`` treats "Reject" as a successful answer and leaves nothing a
later task could check; these gates fail on Reject and on a timeout, show the plan's digest
and store a record (XCom ``approval``) that :func:`kafka_runbooks_airflow.gate.require_approval`
checks before every destructive task. What each gate approves, the record's keys and that
check are the gate's glue (:mod:`kafka_runbooks_airflow.gate`); the operators are here, with
the trigger operator that starts a run only on an approval of exactly that run.

Airflow stores an operator's module (``_task_module``) in each serialized DAG version, but
only to show it (the REST API's ``class_ref``) and to match plugin extra links (none here);
a worker builds the task from the DAG file, and a deferred gate resumes from the HITL
trigger and the DAG file too, so nothing imports these classes by their old path.
"""

from __future__ import annotations

import logging
import re
from datetime import timedelta
from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator, HITLBranchOperator, HITLOperator
from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator

from kafka_runbooks import approval as rules
from kafka_runbooks import decisions
from kafka_runbooks.errors import BadInput
from kafka_runbooks_airflow.gate import (
    RECORD_KEY,
    REQUEST_KEY,
    current_action,
    load_policy,
    registered_action,
    require_approval,
    run_conf,
    run_xcom,
    upstream_approvals,
    verified_upstream,
)

log = logging.getLogger("kafka_runbooks.approval")


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
            rules.UPSTREAM_KEY: run_conf(context).get(rules.UPSTREAM_KEY) or [],
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
