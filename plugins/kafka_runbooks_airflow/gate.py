"""Approval gates' glue: what each gate approves, its record, and the check before every destructive task.

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
  approval was younger than ``approval_max_age_s`` when this task's work first started (a clear
  of the destructive task alone, long after the gate, goes back to the gate). Both times are
  Airflow's API server's (:mod:`kafka_runbooks_airflow.api_clock`): the answer's
  ``responded_at``, and the API server's ``Date`` at this task's first approval check, kept in
  Airflow's task state store (:func:`work_started`) so every later poke and retry ages the
  approval from the same moment;
- a run started by another run's approved decision (a sweep's gate) carries that approval
  in its conf (``upstream_approvals``, bound into its digest); the gate reads the parent
  gate's own record to verify it, and under four-eyes nobody in that chain may approve.

Runs with ``require_approval=false`` and dry runs pass the gate without asking, with a
``not_required`` record; ungated runs only where the deployment allows them
(:mod:`kafka_runbooks.approval`).

The gate operators themselves live in :mod:`kafka_runbooks_airflow.operators.gate`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kafka_runbooks import approval as rules
from kafka_runbooks import decisions
from kafka_runbooks.errors import BadInput
from kafka_runbooks.evidence import AIRFLOW_API_SERVER, Stamp
from kafka_runbooks_airflow import api_clock

log = logging.getLogger("kafka_runbooks.approval")

RECORD_KEY = "approval"  # XCom key of the gate's record
REQUEST_KEY = "approval_request"  # XCom key of what the gate asked (digest, trigger user, deadline)
WORK_STARTED_KEY = "kafka_runbooks.approval.work_started"  # task state store key (destructive tasks)


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


def run_conf(context) -> dict[str, Any]:
    """The run's conf as a dict (an empty one when the run has none)."""
    conf = getattr(context.get("dag_run"), "conf", None)
    return dict(conf) if isinstance(conf, dict) else {}


def current_action(kind: str, context) -> tuple[dict[str, Any], str]:
    """What the destructive task would do now, and its digest.

    The approvals that started the run (``upstream_approvals`` in its conf) are part of what
    is approved: the chain the four-eyes check reads cannot differ from the one shown.
    """
    action = registered_action(kind)(context)
    conf = run_conf(context)
    if rules.UPSTREAM_KEY in conf:
        action[rules.UPSTREAM_KEY] = conf[rules.UPSTREAM_KEY]
    return action, rules.plan_digest(action)


def upstream_approvals(context) -> list[dict[str, Any]]:
    """The approvals that started this run (its conf); NotApproved when the conf's chain is malformed."""
    return rules.upstream_entries(run_conf(context).get(rules.UPSTREAM_KEY))


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


def try_series(ti) -> Any:
    """Which run of tries this try belongs to: Airflow's ``max_tries`` of the task instance.

    A retry keeps it (``handle_failure`` leaves it alone); a clear sets it to the try number plus
    the task's retries, always higher than before. So what a try keeps in the task state store
    (which Airflow keeps across retries and clears alike) is read back only within its own run of
    tries: a retry or a poke finds it, a clear starts afresh.
    """
    return getattr(ti, "max_tries", None)


def work_started(context) -> Stamp:
    """When this task's work first started in this run of tries, on the API server's clock.

    The first approval check reads the API server's ``Date`` (the end of that second) and keeps
    it in Airflow's task state store (``context["task_state_store"]``, kept across pokes and
    retries of the task instance); every later check reads it back. Not an XCom of the task:
    Airflow deletes a task's own XComs each time it starts, a reschedule sensor's every poke
    included. ClockUnreadable (a refusal) when the clock or the store cannot be read or written.
    """
    store = context.get("task_state_store")
    if store is None:
        raise api_clock.ClockUnreadable(
            "this task has no task state store (Airflow 3.3's context['task_state_store']): the time its "
            "work first started cannot be kept, so an approval cannot be aged"
        )
    series = try_series(context["ti"])
    try:
        kept = store.get(WORK_STARTED_KEY)
    except Exception as exc:  # the supervisor or the API server did not answer
        raise api_clock.ClockUnreadable(f"the task state store could not be read: {exc}") from exc
    if isinstance(kept, dict) and kept.get("series") == series and isinstance(kept.get("ms"), int):
        return Stamp(kept["ms"], str(kept.get("clock")))
    started = api_clock.latest_in_second(api_clock.api_server_now())
    entry = {"series": series, "ms": started.ms, "clock": started.clock, "at": started.isoformat()}
    try:
        store.set(WORK_STARTED_KEY, {**entry, "try_number": getattr(context["ti"], "try_number", None)})
    except Exception as exc:
        raise api_clock.ClockUnreadable(f"the task state store could not be written: {exc}") from exc
    return started


# ------------------------------------------------------------------ before every destructive task


def require_approval(context, kind: str, gate_task_id: str, logger: logging.Logger | None = None) -> dict:
    """Refuse (AirflowFailException, DECISION record) unless the gate approved this run's current plan,
    and the approval was younger than its limit when this task's work first started (API server's clock)."""
    from airflow.sdk.exceptions import AirflowFailException

    logger = logger or log
    action, digest = current_action(kind, context)
    record = run_xcom(context, gate_task_id, RECORD_KEY)
    started: Stamp | None = None
    try:
        if isinstance(record, dict) and record.get("outcome") == rules.APPROVED:
            started = work_started(context)
        approved = rules.check_approval(
            record, digest, load_policy(), started_at=started, upstream=upstream_approvals(context)
        )
    except (rules.NotApproved, api_clock.ClockUnreadable) as exc:
        decisions.record(
            "approval",
            "refuse to act",
            str(exc),
            subject=context["ti"].task_id,
            observed={
                "digest": digest,
                "gate_record": record,
                "action": action,
                "work_started": str(started) if started else None,
            },
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
        observed={
            "digest": digest,
            "triggered_by": approved.get("triggered_by"),
            "work_started": str(started) if started else None,
            "clock": AIRFLOW_API_SERVER,
        },
        logger=logger,
    )
    return approved
