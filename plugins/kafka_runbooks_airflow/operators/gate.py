"""The approval gates: HITL operators whose answer is a record bound to the plan.

Airflow's ``ApprovalOperator`` treats "Reject" as a successful answer and leaves nothing a
later task could check; these gates fail on Reject and on a timeout, show the plan's digest
and store a record (XCom ``approval``) that :func:`kafka_runbooks_airflow.gate.require_approval`
checks before every destructive task. What each gate approves, the record's keys and that
check are the gate's glue (:mod:`kafka_runbooks_airflow.gate`); the operators are here, with
the trigger operator that starts a run only on an approval of exactly that run.

The record keeps who answered, when (``at``, the HITL answer's ``responded_at``, which Airflow's
API server stamps: ``at_clock``) and what was chosen (``chosen_options``). When it asks, a gate
reads the API server's clock (:mod:`kafka_runbooks_airflow.api_clock`) and records its deadline
on it (the API server's now plus the response timeout): an answer given after that deadline
fails the gate as timed out ("answered at X, after the deadline Y"), however Airflow resumed it
(the scheduler's timeout sweep and the old ``HITLTrigger`` resume with any response they find).

A gate answered within seconds of asking can have its try failed by Airflow 3.3.2
(:mod:`kafka_runbooks_airflow.gate_ledger` says how; apache/airflow#67287). The gates retry
(:data:`GATE_RETRIES`), and a retry that finds its run of tries asked and never decided does not
ask again (that would erase the answer Airflow kept): it waits for Airflow to take its own
report, then takes the kept answer (:class:`KeptAnswerTrigger`). A try lost after deciding is
not decided again: its next try restates the recorded outcome (if Airflow refused the record, the
try being failed already, the next try judges the same answer again, to the same outcome).

Airflow stores an operator's module (``_task_module``) in each serialized DAG version, but
only to show it (the REST API's ``class_ref``) and to match plugin extra links (none here);
a worker builds the task from the DAG file, and a deferred gate resumes from the HITL
trigger and the DAG file too, so nothing imports these classes by their old path.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import re
from datetime import datetime, timedelta, timezone
from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator, HITLBranchOperator, HITLOperator
from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.providers.standard.triggers.hitl import HITLTrigger

from kafka_runbooks import approval as rules
from kafka_runbooks import decisions
from kafka_runbooks.errors import BadInput
from kafka_runbooks.evidence import AIRFLOW_API_SERVER, Stamp
from kafka_runbooks_airflow import api_clock, notify
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
from kafka_runbooks_airflow.gate_ledger import GateLedger

log = logging.getLogger("kafka_runbooks.approval")


DIGEST_SHOWN = re.compile(r"\*\*Plan digest:\*\* `(sha256:[0-9a-f]{64})`")
# a gate's try Airflow fails after its answer (its late-report race) is tried again; the retry
# takes the kept answer instead of asking again. Reject, a timeout, a refusal fail without a retry
# (AirflowFailException)
GATE_RETRIES = 2
GATE_RETRY_DELAY = timedelta(seconds=5)
KEPT_ANSWER_TRIGGER = "kafka_runbooks_airflow.operators.gate.KeptAnswerTrigger"
# a gate parks for at most this long at a time, then looks again (until its own deadline): on a
# SQLite metadata database (no row locks) an answer given while the gate parks can be recorded
# without resuming it, and Airflow would resume it only at the deadline
RECHECK = timedelta(seconds=60)


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


def settle_s() -> float:
    """How long a retried gate waits before taking a kept answer: longer than Airflow takes to hear
    that the retry's own deferral exited (its supervisor notices within ``[workers]
    min_heartbeat_interval``, the scheduler reads it in its next loop), so the resume it triggers
    is not failed by that report too."""
    from airflow.configuration import conf

    return max(10.0, 3.0 * conf.getfloat("workers", "min_heartbeat_interval", fallback=5.0))


class KeptAnswerTrigger(HITLTrigger):
    """``HITLTrigger`` that first waits ``settle_s``: a retried gate's wait for the answer Airflow kept.

    The trigger reads the gate's HITL detail (the triggerer may; a task may not in Airflow 3.3.2)
    and resumes the gate with its answer, or waits for one until the deadline. It waits first
    because a resume while the deferring try's exit report is still on its way would be failed
    by that report (the race that lost the earlier try).
    """

    def __init__(self, *, settle_s: float = 10.0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.settle_s = settle_s

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """Its own class path, HITLTrigger's arguments and the settle time."""
        _, kwargs = super().serialize()
        return KEPT_ANSWER_TRIGGER, {**kwargs, "settle_s": self.settle_s}

    async def run(self):
        """Wait ``settle_s``, then poll the HITL detail as ``HITLTrigger`` does."""
        await asyncio.sleep(self.settle_s)
        async for event in super().run():
            yield event


def _triggering_user(context) -> str | None:
    return getattr(context.get("dag_run"), "triggering_user_name", None)


def _timeout(context, default: timedelta | None, param: str | None) -> timedelta | None:
    """The run's response timeout: the DAG param ``param`` ('12h', '30m' or seconds) when the DAG has it."""
    from kafka_runbooks.units import parse_duration

    value = (context.get("params") or {}).get(param) if param else None
    return timedelta(seconds=parse_duration(value, param)) if value else default


def _answer_of(event: dict[str, Any]) -> dict[str, Any]:
    """Who answered, when (the API server's ``responded_at``) and what: the record's answer keys."""
    return {
        "by": event.get("responded_by_user"),
        "at": event.get("responded_at"),
        "chosen_options": list(event.get("chosen_options") or []),
    }


def _in_current_words(event: dict[str, Any]) -> dict[str, Any]:
    """The resume event with its chosen options in today's words, for Airflow's check that they are
    among the gate's options: a gate asked before the options were renamed offered the bare
    "Approve"/"Reject" (Airflow keeps that question), and its answer names them. The record keeps
    the options as the answer named them."""
    chosen = event.get("chosen_options")
    if not chosen:
        return event
    return {**event, "chosen_options": [rules.current_option(o) for o in chosen]}


def gate_notes(action, digest: str, user: str | None, policy) -> list[str]:
    """What every gate's question adds to its body: the digest it binds, who triggered the run, what
    else the approval covers and whether four-eyes rules the triggering user out."""
    notes = [
        f"**Plan digest:** `{digest}` (the approval is bound to this plan; any other plan needs a new approval)",
        f"**Triggered by:** {user or 'the scheduler / a sweep'}",
    ]
    if action.get("orders_left_changed"):
        restores = ", ".join(f"{name} -> {order}" for name, order in action["orders_left_changed"].items())
        notes.append(f"**Also restores the replica order an earlier run left changed:** {restores}")
    if policy.four_eyes:
        notes.append(f"**Four-eyes is on:** an approval by {user or '(no user)'} does not count.")
    return notes


class _PlanGate:
    """What the runbook gates share: digest in the body, the record, the outcomes that fail, the
    deadline on the API server's clock and the recovery of a try Airflow lost."""

    action_kind: str
    timeout_param: str | None
    approve_option: str
    PASSING: tuple[str, ...] = (rules.APPROVED,)  # outcomes the gate's task succeeds with

    def _store(self, context, outcome: str, reason: str, *, by=None, at=None, final=False, **extra) -> dict:
        at = at.isoformat() if hasattr(at, "isoformat") else at
        record = {
            "outcome": outcome,
            "reason": reason,
            "gate": context["ti"].task_id,
            "run_id": context["run_id"],
            "by": dict(by) if by else None,
            "at": at,
            "at_clock": AIRFLOW_API_SERVER if at else None,
            "triggered_by": _triggering_user(context),
            rules.UPSTREAM_KEY: run_conf(context).get(rules.UPSTREAM_KEY) or [],
            **extra,
        }
        if final:  # before the XCom: a try lost after deciding is not decided again
            GateLedger(context).keep_answered(record)
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

    # ------------------------------------------------------------------ asking

    def _execute_gate(self, context):
        """Ask and park until answered; or, in a retry of a try Airflow lost, take the kept answer; or
        restate the outcome an earlier try already recorded. None when no answer is needed."""
        from airflow.sdk.exceptions import TaskAwaitingInput

        ledger = GateLedger(context)
        kept = ledger.answered()
        if kept is not None:
            return self._restate(context, kept)
        asked = ledger.asked()
        if asked is not None:
            self._wait_for_kept_answer(context, asked)
        if not self._ask(context, ledger):
            return None
        self.log.info("Waiting for response")
        notify.notify_gate_waiting(context, self, self.asked_request)
        for notifier in self.notifiers:
            notifier(context)
        wait = self.response_timeout
        raise TaskAwaitingInput(
            method_name="execute_complete", timeout=min(wait, RECHECK) if wait else RECHECK
        )

    def _ask(self, context, ledger: GateLedger) -> bool:
        """Prepare and write the question; False when this run needs no answer (dry run, allowed ungated run)."""
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
        request = self._request(context, digest, user)
        self.body = "\n\n".join([self.body or "", *gate_notes(action, digest, user, policy)]).strip()
        self._check_shown(context, show_question(self, context["task_instance"].id), digest)
        ledger.keep_asked(request)  # after the question is written: its answer belongs to this request
        self.asked_request = request
        context["ti"].xcom_push(key=REQUEST_KEY, value={**request, "action": action})
        return True

    def _request(self, context, digest: str, user: str | None) -> dict[str, Any]:
        """What is asked: the digest, who triggered the run, and the deadline on the API server's clock
        (its now plus the response timeout; the start of the second its Date names, so never later
        than Airflow's own). Nothing is asked when that clock cannot be read."""
        try:
            now = api_clock.api_server_now()
        except api_clock.ClockUnreadable as exc:
            self._fail(context, rules.REFUSED, f"nothing was asked: the gate's deadline cannot be set: {exc}")
        timeout = self.response_timeout
        deadline = now.plus_ms(int(timeout.total_seconds() * 1000)) if timeout else None
        return {
            "digest": digest,
            "triggered_by": user,
            "asked_at": now.isoformat(),
            "timeout_s": timeout.total_seconds() if timeout else None,
            "deadline": deadline.isoformat() if deadline else None,
            "deadline_clock": AIRFLOW_API_SERVER,
        }

    def _check_shown(self, context, shown: str | None, digest: str) -> None:
        """Airflow shows a cleared gate's first question: refuse when it shows another plan."""
        if shown is None or shown == self.body:
            return
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

    # ------------------------------------------------------------------ a try Airflow lost

    def _wait_for_kept_answer(self, context, asked: dict[str, Any]) -> None:
        """Defer to :class:`KeptAnswerTrigger` for the answer to the question an earlier try asked."""
        request = dict(asked.get("request") or {})
        settle = settle_s()
        decisions.record(
            "approval",
            "take the answer Airflow kept",
            f"try {asked.get('try_number')} of this gate asked at {request.get('asked_at')} "
            f"({AIRFLOW_API_SERVER}'s clock) and ended without its answer reaching the gate: Airflow "
            "3.3.2 fails a gate answered within seconds of asking (the worker's late report of the "
            "parked try fails the resumed one, apache/airflow#67287). This try does not ask again "
            f"(that would erase the answer Airflow kept): it waits {settle:g} s, then takes that "
            f"answer, or waits for one until the deadline {request.get('deadline')}",
            subject=context["ti"].task_id,
            observed={"asked": request},
            logger=log,
            level=logging.WARNING,
        )
        context["ti"].xcom_push(key=REQUEST_KEY, value=request)
        deadline = Stamp.of(request.get("deadline"), AIRFLOW_API_SERVER)
        until = datetime.fromtimestamp(deadline.ms / 1000, tz=timezone.utc) if deadline.known else None
        self.defer(
            trigger=KeptAnswerTrigger(
                ti_id=context["task_instance"].id,
                options=self.options,
                params=copy.deepcopy(self.serialized_params),
                defaults=self.defaults,
                multiple=self.multiple,
                timeout_datetime=until,
                settle_s=settle,
            ),
            method_name="execute_complete",
        )

    def _restate(self, context, kept: dict[str, Any]):
        """The outcome a try of this run of tries already recorded, stated again, not decided again."""
        record = dict(kept.get("record") or {})
        context["ti"].xcom_push(key=RECORD_KEY, value=record)
        decisions.record(
            "approval",
            "keep the recorded answer",
            f"{record.get('outcome')}: {record.get('reason')} (recorded by try {kept.get('try_number')} of "
            "this gate); nothing is decided again, a second delivery of an answer changes nothing",
            subject=context["ti"].task_id,
            observed={"record": record},
            logger=log,
            level=logging.WARNING,
        )
        return self._result(context, record)

    # ------------------------------------------------------------------ the answer

    def _complete(self, context, event: dict[str, Any]) -> Any:
        """Airflow resumed the gate: judge the answer once (a second delivery restates the first)."""
        kept = GateLedger(context).answered()
        if kept is not None:
            return self._restate(context, kept)
        return self._result(context, self._judge(context, event))

    def _judge(self, context, event: dict[str, Any]) -> dict[str, Any]:
        """The final record of an answer: timeout, answer after the deadline, plan changed, rejected,
        refused (each fails the gate) or approved."""
        timeout = _timeout(context, self.response_timeout, self.timeout_param)
        if "error" in event:
            if event.get("error_type") == "timeout":
                self._wait_again_if_open(context, self._asked(context))
                self._fail(
                    context, rules.TIMED_OUT, f"not approved within {timeout}: nobody answered", final=True
                )
            self._fail(context, rules.REFUSED, f"the gate failed: {event.get('error')}", final=True)
        HITLOperator.execute_complete(self, context=context, event=_in_current_words(event))  # validates it
        answer = _answer_of(event)
        asked = self._asked(context)
        late = self._late(event, answer, asked)
        if late:
            outcome, why = late
            label = rules.user_label(answer["by"])
            self._fail(
                context, outcome, f"not approved within {timeout}: {label} {why}", final=True, **answer
            )
        _, digest = current_action(self.action_kind, context)
        if asked.get("digest") != digest:
            self._fail(
                context,
                rules.REFUSED,
                f"the plan changed while the gate waited (shown {asked.get('digest')}, now {digest}): "
                "the answer does not count; clear the run to plan and ask again",
                final=True,
                digest=digest,
                **answer,
            )
        extra = {"digest": digest, "deadline": asked.get("deadline"), **answer}
        if rules.chose(answer["chosen_options"], self.approve_option):
            return self._approve(context, extra)
        reason = rules.answered_words(rules.REJECTED, answer["by"], answer["chosen_options"], answer["at"])
        return self._store(context, rules.REJECTED, reason, final=True, **extra)

    def _wait_again_if_open(self, context, asked: dict[str, Any]) -> None:
        """Park again (TaskAwaitingInput) while the gate's own deadline is ahead: the gate parks for at
        most :data:`RECHECK` at a time, so an answer Airflow recorded without resuming the gate is taken
        within that, not at the deadline. Returns when the deadline has passed."""
        from airflow.sdk.exceptions import TaskAwaitingInput

        wait = RECHECK
        if asked.get("deadline") is not None:
            deadline = Stamp.of(asked["deadline"], str(asked.get("deadline_clock") or "an unrecorded"))
            try:
                left = rules.time_left_ms(api_clock.api_server_now(), deadline)
            except api_clock.ClockUnreadable as exc:
                self._fail(context, rules.REFUSED, f"the gate's deadline cannot be judged: {exc}", final=True)
            if left is None or left <= 0:
                return
            wait = min(wait, timedelta(milliseconds=left))
            notify.escalate_if_near(context, self, asked, left, GateLedger(context))
        elif "deadline" not in asked or asked.get("timeout_s") is not None:
            return  # a deadline that was never recorded is not waited for
        self.log.info("No answer yet; waiting again for up to %s (deadline %s)", wait, asked.get("deadline"))
        raise TaskAwaitingInput(method_name="execute_complete", timeout=wait)

    def _asked(self, context) -> dict[str, Any]:
        """What this run of tries asked: the ledger's request, else this try's XCom."""
        kept = GateLedger(context).asked()
        if kept is not None:
            return dict(kept.get("request") or {})
        return dict(run_xcom(context, context["ti"].task_id, REQUEST_KEY) or {})

    def _late(self, event, answer, asked) -> tuple[str, str] | None:
        """Why the answer does not count for its time: a default Airflow applied at the timeout, or an
        answer after the deadline or not comparable with it; None when in time or without deadline."""
        if event.get("timedout") or answer["by"] is None:
            return rules.TIMED_OUT, f"(Airflow applied {answer['chosen_options']} at the timeout)"
        if "deadline" not in asked:
            return rules.REFUSED, "answered, but the gate's deadline was not recorded when it asked"
        if asked["deadline"] is None and asked.get("timeout_s") is None:
            return None  # asked without a timeout
        answered = Stamp.of(answer["at"], AIRFLOW_API_SERVER)
        deadline = Stamp.of(asked["deadline"], str(asked.get("deadline_clock") or "an unrecorded"))
        return rules.late_answer(answered, deadline)

    def _approve(self, context, extra: dict[str, Any]) -> dict[str, Any]:
        policy = load_policy()
        user = extra["by"]
        try:
            upstream = verified_upstream(context)
        except rules.NotApproved as exc:
            self._fail(context, rules.REFUSED, str(exc), final=True, **extra)
        refusal = rules.four_eyes_refusal(user, _triggering_user(context), policy) or rules.upstream_refusal(
            user, upstream, policy
        )
        if refusal:
            self._fail(context, rules.REFUSED, refusal, final=True, **extra)
        reason = rules.answered_words(rules.APPROVED, user, extra["chosen_options"], extra["at"])
        return self._store(context, rules.APPROVED, reason, final=True, **extra)

    def _result(self, context, record: dict[str, Any]) -> Any:
        """The task's end for a final record: fail unless its outcome is one the gate passes with."""
        from airflow.sdk.exceptions import AirflowFailException

        if record.get("outcome") not in self.PASSING:
            raise AirflowFailException(str(record.get("reason")))
        return record


class PlanApprovalOperator(_PlanGate, ApprovalOperator):
    """``ApprovalOperator`` whose Reject and timeout fail the run, and whose Approve is a record.

    Its options say what each does (:data:`kafka_runbooks.approval.GATE_OPTIONS`, in place of
    Airflow's bare "Approve"/"Reject", which looked alike); an answer in the bare words, to a gate
    asked before they were renamed, still counts as the same choice.

    :param action_kind: which plan it approves (a kind a glue module registered, :func:`register_action`).
    :param timeout_param: DAG param (seconds) overriding ``response_timeout`` per run.
    """

    APPROVE = rules.APPROVE_OPTION  # ApprovalOperator offers [APPROVE, REJECT]
    REJECT = rules.REJECT_OPTION

    def __init__(
        self, *, action_kind: str, timeout_param: str | None = "approval_timeout_s", **kwargs
    ) -> None:
        registered_action(action_kind)  # an unregistered kind fails the DAG's parse
        kwargs.setdefault("retries", GATE_RETRIES)
        kwargs.setdefault("retry_delay", GATE_RETRY_DELAY)
        super().__init__(**kwargs)
        self.action_kind = action_kind
        self.timeout_param = timeout_param
        self.approve_option = self.APPROVE

    def execute(self, context):
        """Ask for approval and wait until a human answers; None without asking when this run needs no
        answer (dry run, allowed ungated run)."""
        return self._execute_gate(context)

    def execute_complete(self, context, event: dict[str, Any]) -> Any:
        """Airflow resumes here with the human's answer: anything but Approve fails the task (recorded as
        rejected); Approve records the approval bound to the plan's digest."""
        return self._complete(context, event)

    def _result(self, context, record: dict[str, Any]) -> Any:
        result = super()._result(context, record)
        self.log.info("Approved by %s: plan %s", rules.user_label(record.get("by")), record.get("digest"))
        return result


class PlanDecisionBranchOperator(_PlanGate, HITLBranchOperator):
    """``HITLBranchOperator`` for a choice between a destructive option and a harmless one.

    Choosing ``approve_option`` is an approval record (four-eyes applies); any other
    option is recorded as ``rejected`` and its branch runs. A timeout fails the gate.
    """

    PASSING = (rules.APPROVED, rules.REJECTED)

    def __init__(
        self, *, action_kind: str, approve_option: str, timeout_param: str | None = None, **kwargs
    ) -> None:
        registered_action(action_kind)  # an unregistered kind fails the DAG's parse
        kwargs.setdefault("retries", GATE_RETRIES)
        kwargs.setdefault("retry_delay", GATE_RETRY_DELAY)
        super().__init__(**kwargs)
        if approve_option not in self.options:
            raise BadInput(f"approve_option {approve_option!r} is not one of {self.options}")
        self.action_kind = action_kind
        self.approve_option = approve_option
        self.timeout_param = timeout_param

    def execute(self, context):
        """Ask which branch to take and wait until a human answers; None without asking when this run
        needs no answer."""
        return self._execute_gate(context)

    def execute_complete(self, context, event: dict[str, Any]) -> Any:
        """Airflow resumes here with the chosen options: the approve option records an approval of the
        digest, anything else a rejection; then branch to the chosen tasks."""
        return self._complete(context, event)

    def _result(self, context, record: dict[str, Any]) -> Any:
        super()._result(context, record)
        chosen = list(record.get("chosen_options") or [])
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
