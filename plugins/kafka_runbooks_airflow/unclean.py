"""Task bodies of ``kafka_unclean_recovery``: thin glue over ``kafka_runbooks.unclean.runbook``.

Each task turns the params into a request once (``recovery_request``: bad input is refused
before any cluster call) and hands the glue that typed request and the cluster's
``kafka_config_id``, never the params themselves; the artifacts get their folder in the
data store, the hook supplies the admin client, and the runbook's results go back as XCom.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from kafka_runbooks import decisions, storage
from kafka_runbooks.paths import safe_name
from kafka_runbooks.storage import StorePath
from kafka_runbooks_airflow.gate import gate_action, run_xcom

if TYPE_CHECKING:
    from kafka_runbooks.unclean.request import RecoveryRequest

ARTIFACTS = "unclean_recovery"

log = logging.getLogger("kafka_runbooks.unclean")


def artifacts(run_id: str) -> StorePath:
    """The run's folder in the data store (replica table, plan, manual files, elections.json)."""
    return StorePath(storage.store(), f"{ARTIFACTS}/{safe_name(run_id)}")


def recovery_request(params: Mapping[str, Any]) -> RecoveryRequest:
    """The run's params as the library's request, built once per task and before any cluster
    call: a bad one fails the task with a decision record, nothing done."""
    from kafka_runbooks.unclean.request import build_request
    from kafka_runbooks_airflow.inputs import refuse_bad_input

    return refuse_bad_input(build_request, params, log.name)


def plan_recovery(request: RecoveryRequest, kafka_config_id: str, run_id: str) -> dict[str, Any]:
    """Gather every replica's log info, choose, write the table (read-only)."""
    from kafka_runbooks.unclean.runbook import plan
    from kafka_runbooks_airflow.acl_check import require_acls
    from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook

    admin = KafkaAdminHook(kafka_config_id=kafka_config_id).admin
    try:
        require_acls(admin, "kafka_unclean_recovery", kafka_config_id)  # before a restore's writes
        with _journal_if_lease_held(request, kafka_config_id) as journal:
            return plan(admin, request, artifacts(run_id), logger=log, state_file=journal)
    finally:
        admin.close()


@contextmanager
def _journal_if_lease_held(request: RecoveryRequest, kafka_config_id: str):
    """The cluster's reorder journal, when this run may restore what it holds; else None.

    Restoring changes the cluster, so it is done under the cluster's lease: an automated run
    holds it already; a read-only run takes it only for the restore, and leaves a pending
    restore alone (a decision record says so) while another run holds it: that run may be
    between its own reorder and election.
    """
    from airflow.sdk import get_current_context

    from kafka_runbooks.unclean.elect import ReorderState, pending_restores
    from kafka_runbooks_airflow.lease import cluster_lease, lease_needed

    journal = ReorderState(kafka_config_id)
    context = get_current_context()
    # the lease's own rule, asked with the request's mode (an automated run holds the lease already)
    if lease_needed(context["dag"].dag_id, {"mode": request.mode}) or not pending_restores(journal):
        yield journal
        return
    lease = cluster_lease(context, kafka_config_id)
    taken = lease.acquire(hold_for_s=600)
    if not taken.acquired:
        decisions.record(
            "restore-order",
            "pending restore left for later",
            f"the cluster's lease is held by {taken.record.holder}; it may be between a reorder and its election",
            observed={"pending": sorted(pending_restores(journal))},
            level=logging.WARNING,
        )
        yield None
        return
    try:
        yield journal
    finally:
        lease.release()


def pending_restores(kafka_config_id: str) -> dict[str, dict]:
    """Replica orders an unclean recovery left changed on this cluster (health report, console)."""
    from kafka_runbooks.unclean.elect import ReorderState
    from kafka_runbooks.unclean.elect import pending_restores as pending

    return pending(ReorderState(kafka_config_id))


def automated_recovery_requested(document: dict[str, Any]) -> bool:
    """Go on to the approval gate only in automated mode and when something can be elected.

    An automated recovery that can elect nothing while partitions stay offline has not recovered
    them: it fails, naming each partition and its clean path (bring a clean replica back), never a
    green run over offline partitions (the fault campaign's unclean seeds 1 and 2). A read-only
    mode ends successfully: showing the table is all it was asked for."""
    from airflow.sdk.exceptions import AirflowFailException

    electable = [c for c in document["choices"] if c["chosen"] is not None]
    automated = document["mode"] == "automated_recovery"
    go = automated and bool(electable)
    left = [c for c in document["choices"] if c["chosen"] is None]
    if automated and not electable and left:
        reasons = "; ".join(
            f"{c['topic']}-{c['partition']}: {c.get('clean_path') or c['reason']}" for c in left
        )
        decisions.record(
            "gate",
            "NOT RECOVERED: nothing can be elected",
            f"{len(left)} partition(s) stay offline and no replica may be elected: {reasons}",
            observed={
                "artifacts": document["artifacts"],
                "offline": [f"{c['topic']}-{c['partition']}" for c in left],
            },
            logger=log,
            level=logging.ERROR,
        )
        raise AirflowFailException(f"not recovered: {len(left)} partition(s) stay offline: {reasons}"[:2000])
    decisions.record(
        "gate",
        "ask for approval" if go else "stop: nothing will be elected",
        f"mode {document['mode']}, {len(electable)} partition(s) with a chosen replica",
        observed={"artifacts": document["artifacts"]},
    )
    return go


def superseded_by_airflow(context):
    """A ``halted`` check for the run's fence: why this try may no longer act, from Airflow's own
    answer (a Clear puts it in ``restarting``, a mark-failed in ``failed``), or None while it runs.

    The fence alone stops an old try once a newer one claims it; a Clear that sends the run back to
    its plan claims nothing until its elections run, and the old try, still running for seconds,
    reordered and elected on (the fault campaign's unclean seed 6). No answer is no licence either."""
    from kafka_runbooks_airflow.task_state import still_current_from

    still_current = still_current_from(context, context["dag"].dag_id, context["ti"].task_id)

    def halted() -> str | None:
        """None while Airflow says this try runs; else why it must not act."""
        reading = still_current()
        if reading.running:
            return None
        return f"Airflow says this try is {reading.state or reading.unknown}, not running: it acts no more"

    return halted


ELECTIONS_TASK = "run_elections"
ELECTIONS_DONE = ("success", "skipped")  # the elections held, or the run chose not to elect


def elections_ended(context) -> str | None:
    """Why the run must not end a success, from Airflow's state of its elections task; None when they
    succeeded or were skipped. The restore step is the run's last and runs whatever happened, so the
    run's state is its state: without this, a run whose recovery failed ended a success (the fault
    campaign's unclean seed 2, once the restore step existed). Unknown is not success."""
    ti = context["ti"]
    try:
        states = ti.get_task_states(
            dag_id=context["dag"].dag_id, task_ids=[ELECTIONS_TASK], run_ids=[context["run_id"]]
        )
        raw = ((states or {}).get(context["run_id"]) or {}).get(ELECTIONS_TASK)
    except Exception as exc:  # the supervisor or the API server did not answer
        return f"the state of {ELECTIONS_TASK} could not be read ({type(exc).__name__}: {exc})"
    state = None if raw is None else str(getattr(raw, "value", raw))
    if state in ELECTIONS_DONE:
        return None
    return f"{ELECTIONS_TASK} ended {state or 'with no state'}"


def restore_left_orders(kafka_config_id: str, context=None) -> dict[str, Any]:
    """What the run (or an earlier one) left reordered, put back now: the all_done step after the
    elections. A try killed between its reorder and its restore (a Clear, a kill -9) left the journal
    entry; without this step it waited for the next run of the runbook. Then, with ``context``, the
    run fails unless its elections succeeded (:func:`elections_ended`), saying what the cluster
    says of each planned partition now: an election the killed task sent may have held, and lost
    records (:mod:`kafka_runbooks.unclean.unreported`)."""
    from kafka_runbooks.unclean.elect import ReorderState, restore_pending
    from kafka_runbooks.unclean.unreported import partitions_now
    from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook

    admin = KafkaAdminHook(kafka_config_id=kafka_config_id).admin
    try:
        restored = restore_pending(admin, ReorderState(kafka_config_id), log)
        why = elections_ended(context) if context is not None else None
        if why:
            document = context["ti"].xcom_pull(task_ids="plan_recovery") or {}
            now = partitions_now(admin, document, log)
            why = f"{why}; the cluster now: {now or 'no partition was planned'}"
    finally:
        admin.close()
    if any(v.startswith("NOT") for v in restored.values()):
        from airflow.sdk.exceptions import AirflowFailException

        raise AirflowFailException(f"replica order(s) not restored (the next run tries again): {restored}")
    if why:
        from airflow.sdk.exceptions import AirflowFailException

        decisions.record(
            "outcome", "fail the run", f"{why}; the replica orders are restored ({restored or 'none left'})"
        )
        raise AirflowFailException(f"{why} (replica orders restored: {restored or 'none left'})")
    return {"restored": restored}


def run_elections(
    context, document: dict[str, Any], request: RecoveryRequest, kafka_config_id: str, run_id: str
) -> dict[str, Any]:
    """Elect each chosen replica (reorder + UNCLEAN election), verify it holds, fail unless all held.

    Refuses first unless the gate approved exactly these elections for this run, then renews
    the cluster's lease for as long as the elections and their settle periods can take.
    """
    from kafka_runbooks.unclean.elect import ReorderState
    from kafka_runbooks.unclean.runbook import recover
    from kafka_runbooks_airflow.gate import require_approval
    from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook
    from kafka_runbooks_airflow.lease import renew_lease

    require_approval(context, "unclean", "approve_elections")
    # the elections and their settle periods run in this task: hold the lease for all of them
    renew_lease(
        context, kafka_config_id, hold_for_s=len(document["choices"]) * (request.settle_period_s + 60)
    )

    from kafka_runbooks.fence import Guarded, run_guard

    # Airflow lets a task it marked failed or cleared run on for seconds beside the new attempt:
    # this attempt claims the run, and the old one's next reorder, election or restore refuses
    who = f"{run_id} {context['ti'].task_id} try {context['ti'].try_number}"
    guard = run_guard(
        storage.store(),
        f"unclean/{safe_name(context['dag'].dag_id)}/{safe_name(run_id)}/fence.json",
        who,
        halted=superseded_by_airflow(context),
    )
    admin = KafkaAdminHook(kafka_config_id=kafka_config_id).admin
    try:
        report = recover(
            Guarded(admin, guard, ("reorder_replicas", "elect_unclean", "alter_partition_reassignments")),
            document,
            artifacts(run_id),
            restore_order=request.restore_replica_order,
            settle_s=request.settle_period_s,
            state_file=ReorderState(kafka_config_id),
            logger=log,
        )
    finally:
        admin.close()
    return report.as_dict()


@gate_action("unclean")
def unclean_action(context) -> dict[str, Any]:
    """kafka_unclean_recovery: the elections run_elections will make (from the plan document).

    Also what decides how they are made and checked: the cluster, the settle period each
    election must hold for, whether the replica order is put back, and the replica orders an
    earlier run left changed (this run restores them too: a change the approver must see).
    """
    from kafka_runbooks.unclean.elect import ReorderState

    params = context["params"]
    document = run_xcom(context, "plan_recovery") or {}
    cluster = params.get("kafka_config_id")
    left_changed = ReorderState(cluster).read_entries() if cluster else {}
    return {
        "runbook": context["dag"].dag_id,
        "run_id": context["run_id"],
        "kafka_config_id": cluster,
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
