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

import json
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
from kafka_runbooks_airflow.run_state import EXEC_STATE, read_roll_state, run_dir

log = logging.getLogger("kafka_runbooks.approval")

RECORD_KEY = "approval"  # XCom key of the gate's record
REQUEST_KEY = "approval_request"  # XCom key of what the gate asked (digest, trigger user)


def load_policy():
    """The approval policy, read now (run time) from the Variables and the environment."""
    from airflow.sdk import Variable

    def variable(name: str) -> str | None:
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


def restart_action(context) -> dict[str, Any]:
    """kafka_broker_restart: the roll the sensor will drive (from the roll-state file it reads).

    Covers everything the roll reads that decides what it does or how it checks: the
    order, each node's role, every option (timeouts, attempts, force, quorum lag), the
    evidence rows the approver was shown (``gate_rows``), and the connections the sensor
    acts through (cluster, probe, restart back end). Not the progress (phases, attempts,
    evidence read during the roll): it changes at every step of an approved roll.
    """
    dag_id, run_id = context["dag"].dag_id, context["run_id"]
    params = context["params"]
    plan = run_xcom(context, "plan_restart") or {}
    state = json.loads(read_roll_state(dag_id, run_id) or "{}")
    return {
        "runbook": dag_id,
        "run_id": run_id,
        "kafka_conn_id": params.get("kafka_conn_id"),
        "probe_conn_id": params.get("probe_conn_id") or None,
        "restart_conn_id": params.get("restart_conn_id"),
        "reason": state.get("reason"),
        "order": state.get("order"),
        "roles": {n: p.get("role") for n, p in (state.get("nodes") or {}).items()},
        "options": state.get("options"),
        "evidence": state.get("gate_rows") or [],
        "dry_run": bool((state.get("options") or {}).get("dry_run", plan.get("dry_run"))),
        "require_approval": bool(params["require_approval"]),
    }


def unclean_action(context) -> dict[str, Any]:
    """kafka_unclean_recovery: the elections run_elections will make (from the plan document).

    Also what decides how they are made and checked: the cluster, the settle period each
    election must hold for, whether the replica order is put back, and the replica orders an
    earlier run left changed (this run restores them too: a change the approver must see).
    """
    from kafka_runbooks.unclean.elect import ReorderState

    params = context["params"]
    document = run_xcom(context, "plan_recovery") or {}
    cluster = params.get("kafka_conn_id")
    left_changed = ReorderState(cluster).read_entries() if cluster else {}
    return {
        "runbook": context["dag"].dag_id,
        "run_id": context["run_id"],
        "kafka_conn_id": cluster,
        "mode": document.get("mode"),
        # every choice with what was seen (log end offsets, epochs): what the approver weighed
        "choices": document.get("choices"),
        "election_attempts": document.get("recovery_election_attempts"),
        "restore_replica_order": bool(params["restore_replica_order"]),
        "settle_period_s": params.get("settle_period_s", 30),
        "orders_left_changed": {k: v.get("original") for k, v in sorted(left_changed.items())},
        "dry_run": False,
        "require_approval": True,
    }


def reassign_action(context) -> dict[str, Any]:
    """kafka_failed_broker_reassignment: the chunks execute_chunks will submit (its state file)."""
    dag_id, run_id = context["dag"].dag_id, context["run_id"]
    reviewed = run_xcom(context, "review_plan") or {}
    checked = run_xcom(context, "validate") or {}
    path = run_dir(dag_id, run_id) / EXEC_STATE
    state = json.loads(path.read_text()) if path.exists() else {}
    action = {
        "runbook": dag_id,
        "run_id": run_id,
        "kafka_conn_id": context["params"].get("kafka_conn_id"),
        "failed_brokers": state.get("failed_brokers"),
        "throttle_bytes_per_sec": state.get("throttle_bytes_per_sec"),
        "chunks": [c.get("targets") for c in state.get("chunks", [])],
        "elect_preferred_leaders": checked.get("elect_preferred_leaders"),  # done after healing
        "dry_run": bool(checked.get("dry_run", reviewed.get("dry_run"))),
        "require_approval": bool(checked.get("require_approval", reviewed.get("require_approval", True))),
    }
    leader_moves = planned_leader_moves(checked)
    if leader_moves:  # the rebalance's reorders, applied after the chunks: approved with them
        action["leader_moves"] = leader_moves
    return action


def planned_leader_moves(checked: dict[str, Any]) -> list[dict[str, Any]]:
    """The plan's leader-only moves (a rebalance's replica reorders, in its summary.json; none for
    a heal or a drain): what the verify step applies, so the approval must name them too."""
    from kafka_runbooks import storage
    from kafka_runbooks.snapshot_contract import SUMMARY_FILE

    if not checked.get("plan_dir"):
        return []
    summary = storage.locate(checked["plan_dir"]) / SUMMARY_FILE
    return (json.loads(summary.read_text()).get("leader_moves") or []) if summary.exists() else []


def controller_action(context) -> dict[str, Any]:
    """kafka_metadata_error_sweep: the restart run the sweep will start for one cluster's active controller.

    The whole conf the run is started with (which cluster, which node, why): the trigger task
    starts nothing unless what it would send is exactly this (:class:`ApprovedTriggerDagRunOperator`).
    """
    group = context["ti"].task_id.rpartition(".")[0]  # the sweep of the same (per-cluster) group
    escalation = run_xcom(context, f"{group}.sweep" if group else "sweep", "controller_escalation") or {}
    return {
        "runbook": context["dag"].dag_id,
        "run_id": context["run_id"],
        "node_id": escalation.get("node_id"),
        "trigger_run_id": escalation.get("trigger_run_id"),
        "conf": escalation.get("conf"),
        "reason": escalation.get("reason"),
        "dry_run": False,
        "require_approval": True,
    }


def controller_replace_action(context) -> dict[str, Any]:
    """kafka_controller_replace: the voter changes replace will make (the plan document's steps,
    with the directory ids read from DescribeQuorum), the voter set it verifies, and its options."""
    params = context["params"]
    document = run_xcom(context, "plan_replacement") or {}
    return {
        "runbook": context["dag"].dag_id,
        "run_id": context["run_id"],
        "kafka_conn_id": params.get("kafka_conn_id"),
        "steps": document.get("steps"),
        "expected_voters": document.get("expected_voters"),
        "request": document.get("request"),
        "settle_period_s": params.get("settle_period_s"),
        "dry_run": False,
        "require_approval": True,
    }


ACTIONS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "restart": restart_action,
    "unclean": unclean_action,
    "reassign": reassign_action,
    "controller": controller_action,
    "controller_replace": controller_replace_action,
}


def _run_conf(context) -> dict[str, Any]:
    conf = getattr(context.get("dag_run"), "conf", None)
    return dict(conf) if isinstance(conf, dict) else {}


def current_action(kind: str, context) -> tuple[dict[str, Any], str]:
    """What the destructive task would do now, and its digest.

    The approvals that started the run (``upstream_approvals`` in its conf) are part of what
    is approved: the chain the four-eyes check reads cannot differ from the one shown.
    """
    action = ACTIONS[kind](context)
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

    :param action_kind: which plan it approves (a key of :data:`ACTIONS`).
    :param timeout_param: DAG param (seconds) overriding ``response_timeout`` per run.
    """

    def __init__(
        self, *, action_kind: str, timeout_param: str | None = "approval_timeout_s", **kwargs
    ) -> None:
        if action_kind not in ACTIONS:
            raise BadInput(f"unknown action_kind {action_kind!r}; known: {sorted(ACTIONS)}")
        super().__init__(**kwargs)
        self.action_kind = action_kind
        self.timeout_param = timeout_param

    def execute(self, context):
        if not self._ask(context):
            return None
        return super().execute(context)

    def execute_complete(self, context, event: dict[str, Any]) -> Any:
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
        if action_kind not in ACTIONS:
            raise BadInput(f"unknown action_kind {action_kind!r}; known: {sorted(ACTIONS)}")
        super().__init__(**kwargs)
        if approve_option not in self.options:
            raise BadInput(f"approve_option {approve_option!r} is not one of {self.options}")
        self.action_kind = action_kind
        self.approve_option = approve_option
        self.timeout_param = timeout_param

    def execute(self, context):
        if not self._ask(context):
            return None
        return super().execute(context)

    def execute_complete(self, context, event: dict[str, Any]) -> Any:
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
