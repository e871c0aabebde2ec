"""Task bodies of ``kafka_log_dir_failure``: the failed-broker glue with a failed log dir's request.

The runbook runs the heal's tasks (``kafka_runbooks_airflow.failed_broker``) with its own parser
and selection (``kafka_runbooks.log_dir_failure``: a live broker, the replicas of its offline
dirs), the planner's ``--drain-replicas`` (only those replicas move), the decommission's disk
ceiling before the gate, and its own end state: the moved partitions off the broker, the
healthy dirs' replicas still on it, everything in sync. ``mode=verify_replaced`` moves nothing:
``validate`` waits until the broker's replicas are back in healthy dirs and in sync, and the run
ends there.
"""

from __future__ import annotations

import logging
from typing import Any

from kafka_runbooks import decisions

log = logging.getLogger("kafka_runbooks.log_dir_failure")


def _settle(admin, step: str, partitions_of) -> dict:
    """The verify's keyword arguments: its timeout and settle (never shorter than the session timeout,
    recorded), and the last read's ask of the leaders and ISR members of ``partitions_of(answer)``."""
    from kafka_runbooks_airflow.verify_settings import partitions_ask, verify_settle

    return {**verify_settle(admin, step, log), "ask": partitions_ask(admin, partitions_of)}


def check_input(dag_id: str, run_id: str, params: dict[str, Any]) -> dict[str, Any]:
    """What can be judged before the run waits for the lease (then it joins the lease queue): the
    params, and the broker ids they name against the cluster's brokers (read-only DescribeCluster)."""
    from kafka_runbooks.fleet import DEFAULT_CLUSTER
    from kafka_runbooks.log_dir_failure import build_log_dir_request
    from kafka_runbooks_airflow.inputs import check_before_lease, refuse_unknown_broker_ids
    from kafka_runbooks_airflow.lease import join_lease_queue

    checked = check_before_lease(dag_id, params, build_log_dir_request, ("kafka_config_id",), log.name)
    request = build_log_dir_request(params)  # checked just above: it parses
    named = {"broker_id": (request.broker_id,), "receivers": request.reassign.receivers}
    refuse_unknown_broker_ids(params.get("kafka_config_id") or DEFAULT_CLUSTER, named, log.name)
    join_lease_queue(dag_id, run_id, dict(params))
    return checked


def read_failed_dirs(conn_id: str, broker: int, log_dir: str | None):
    """The cluster's metadata with the broker's own DescribeLogDirs answer, and the selection."""
    from kafka_runbooks.log_dir_failure import failed_dir_replicas
    from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook

    admin = KafkaAdminHook(kafka_config_id=conn_id).admin
    try:
        state = admin.read_state(include_log_dirs=False)
        if broker in state.brokers and state.is_available(broker):
            state.log_dir_states, state.log_dir_errors = admin.describe_log_dir_states([broker])
    finally:
        admin.close()
    return state, failed_dir_replicas(state, broker, log_dir)


def log_dir_request(params: dict[str, Any]):
    """The run's typed request (``build_log_dir_request``: the broker, the dir, the mode and the
    pipeline's ``reassign``), built once by the validate task; a bad one is a ``refuse`` DECISION
    before any cluster call."""
    from kafka_runbooks.log_dir_failure import build_log_dir_request
    from kafka_runbooks_airflow.inputs import refuse_bad_input

    return refuse_bad_input(build_log_dir_request, params, log.name)


def validate(request, kafka_config_id: str, dag_id: str, run_id: str) -> dict[str, Any]:
    """The broker is live and has replicas offline on a failed dir (none: nothing to do, a success);
    those are chosen (``kafka_runbooks.evidence.replica_dirs``); then the heal's validate (receivers,
    in-flight, adoption).
    ``verify_replaced``: the replacement is verified here and nothing moves."""
    from kafka_runbooks.log_dir_failure import VERIFY_REPLACED
    from kafka_runbooks_airflow.failed_broker import validate_request
    from kafka_runbooks_airflow.inputs import refuse_bad_input

    if request.mode == VERIFY_REPLACED:
        return {**verify_replaced(kafka_config_id, request.broker_id), "nothing_to_do": True}
    state, found = refuse_bad_input(
        lambda _: read_failed_dirs(kafka_config_id, request.broker_id, request.log_dir),
        {},
        log.name,
    )
    nothing = _nothing_to_move(request.broker_id, found)
    if nothing is not None:
        return nothing
    decisions.record(
        "select replicas",
        f"move the {len(found.replicas)} replica(s) of broker {request.broker_id}'s failed log dir(s)",
        "the broker's replicas in the metadata whose current log none of its online dirs holds, or that "
        "the controller's offline replicas name (offline where the two disagree: see observed); its "
        f"{len(found.in_healthy_dirs)} healthy replica(s) stay",
        observed=found.observed(),
        logger=log,
    )
    checked = validate_request(
        request.reassign,
        kafka_config_id,
        dag_id,
        run_id,
        lambda req, now: _receivers(req, now, request.broker_id),
        moving=found.replicas,  # the receivers must hold these partitions' replication factor
    )
    return {
        **checked,
        "nothing_to_do": checked["nothing_to_do"],
        "kafka_config_id": kafka_config_id,  # review_plan reads the disks there
        "drain_replicas_csv": found.selection_csv,
        "failed_dirs": list(found.offline_dirs),  # the gate names them on the broker's row
        "moved": [f"{t}:{p}" for t, p in found.replicas],
        "kept": [f"{t}:{p}" for t, p in found.in_healthy_dirs],
    }


def _nothing_to_move(broker: int, found) -> dict[str, Any] | None:
    """The run's "nothing to do" (a record and validate's result), or None when replicas sat in a
    failed dir. A dir still offline whose replicas were all moved (an earlier run, or this run
    cleared after its success) is nothing to do too: handed to the heal's validate, the broker's
    healthy replicas made it record "go on to the plan" for a run that then ended at once."""
    if found.nothing_to_do:
        why = (
            f"broker {broker} has no offline log dir (its DescribeLogDirs answer) and the controller names "
            "none of its replicas offline: nothing moves"
        )
    elif not found.replicas:
        why = (
            f"broker {broker}'s offline log dir(s) hold none of its replicas any more (each replica of the "
            "broker has its current log in an online dir and the controller names none offline): nothing moves"
        )
    else:
        return None
    decisions.record("validate", "nothing to do", why, observed=found.observed(), logger=log)
    return {"nothing_to_do": True, "failed": [broker], "selection": found.observed()}


def _receivers(request, state, broker: int) -> tuple[list[int], list[int]]:
    """(the broker, receivers): every other live broker, or the named ones (live, not the broker)."""
    from kafka_runbooks.failed_broker.request import RequestError, _not_controllers

    live = state.alive_broker_ids()
    if request.receivers is None:
        receivers = [b for b in live if b != broker]
    else:
        _not_controllers(request.receivers, "receiver(s)", state)
        bad = [b for b in request.receivers if b == broker or b not in live]
        if bad:
            raise RequestError(f"receiver(s) {bad} are not live brokers other than broker {broker}")
        receivers = list(request.receivers)
    if not receivers:
        raise RequestError(f"no live broker other than {broker} can receive the replicas")
    return [broker], receivers


def review_plan(
    checked: dict[str, Any] | None, snapshot_info: dict[str, Any] | None, dag_id: str, run_id: str
) -> dict[str, Any]:
    """The decommission's review: the disk ceiling on the receivers, then the heal's plan check."""
    from kafka_runbooks_airflow.decommission import review_plan as shared

    return shared(checked, snapshot_info, dag_id, run_id)


def _keys(names: list[str]) -> list[tuple[str, int]]:
    return [(t, int(p)) for t, _, p in (n.rpartition(":") for n in names)]


def verify(checked: dict[str, Any], kafka_config_id: str, dag_id: str, run_id: str) -> dict[str, Any]:
    """After the moves and the cleanup: the moved partitions name the broker no more, its healthy
    dirs' partitions still do, every partition is in sync and no throttle is left, on every read
    for the settle period (never shorter than ``broker.session.timeout.ms``; its last read asks every
    partition's leader and ISR members themselves)."""
    from kafka_runbooks.errors import RunbookFailed
    from kafka_runbooks.failed_broker.throttle import leftover_throttles
    from kafka_runbooks.log_dir_failure import await_holding, moved_off
    from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook

    broker = int(checked["failed"][0])
    moved, kept = _keys(checked["moved"]), _keys(checked["kept"])
    admin = KafkaAdminHook(kafka_config_id=kafka_config_id).admin

    def read():
        """One read (no log dirs) and the throttles still set: where the moved replicas are now."""
        state = admin.read_state(include_log_dirs=False)
        left = leftover_throttles(
            admin, state.alive_broker_ids(), sorted({p.topic for p in state.partitions})
        )
        return moved_off(state, broker, moved, kept), left, state.partitions

    try:  # each read judged: the moves' result, the throttles left, the partitions (their nodes asked)
        judged = await_holding(
            read, lambda seen: _Judged(*seen), **_settle(admin, "verify", lambda j: j.partitions)
        )
    finally:
        admin.close()
    observed = {
        **judged.result.__dict__,
        "throttles_left": judged.left,
        "moved": len(moved),
        "kept": len(kept),
    }
    observed["not_answering"] = {str(b): why for b, why in getattr(judged, "silent", {}).items()}
    decisions.record(
        "verify",
        "moved" if judged.done else "NOT moved",
        f"no moved partition names broker {broker}, its healthy dirs' replicas stayed, every partition in "
        "sync, no throttle left"
        if judged.done
        else "see observed",
        observed=observed,
        logger=log,
        level=logging.INFO if judged.done else logging.ERROR,
    )
    if not judged.done:
        raise RunbookFailed(f"the failed log dir's replicas are not all moved and in sync: {observed}")
    return {"moved": len(moved), "kept": len(kept)}


class _Judged:
    def __init__(self, result, left: dict, partitions: list) -> None:
        self.result, self.left, self.partitions = result, left, partitions
        self.done = result.done and not left


class _WithPartitions:
    """A Replaced judgement with the broker's partitions as read (the settle asks their nodes)."""

    def __init__(self, judged, state, broker: int) -> None:
        self.judged, self.done = judged, judged.done
        self.partitions = [p for p in state.partitions if broker in p.replicas]

    def observed(self) -> dict[str, Any]:
        """The judgement's fields, for the decision record."""
        return dict(self.judged.__dict__)


def verify_replaced(conn_id: str, broker: int) -> dict[str, Any]:
    """The disk was replaced and the broker restarted: its replicas are back in healthy dirs and
    in sync (held for the settle period, never shorter than ``broker.session.timeout.ms``, its last
    read asking the leaders and ISR members of the broker's partitions themselves), or the run fails
    naming what is not. Nothing moves."""
    from kafka_runbooks.errors import RunbookFailed
    from kafka_runbooks.log_dir_failure import await_holding, live_broker, replaced
    from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook
    from kafka_runbooks_airflow.inputs import refuse_bad_input

    admin = KafkaAdminHook(kafka_config_id=conn_id).admin

    def read():
        """One read of the cluster with the broker's log dir states (DescribeLogDirs); refuses a broker
        that is not live."""
        state = admin.read_state(include_log_dirs=False)
        refuse_bad_input(lambda _: live_broker(state, broker), {}, log.name)
        state.log_dir_states, state.log_dir_errors = admin.describe_log_dir_states([broker])
        return state

    try:
        seen = await_holding(
            read,
            lambda state: _WithPartitions(replaced(state, broker), state, broker),
            **_settle(admin, "verify replaced", lambda j: j.partitions),
        )
    finally:
        admin.close()
    observed = seen.observed()
    decisions.record(
        "verify replaced",
        "replaced" if seen.done else "NOT replaced",
        f"every replica of broker {broker} is in one of its healthy log dirs and in the ISR, no dir offline"
        if seen.done
        else "see observed",
        observed=observed,
        logger=log,
        level=logging.INFO if seen.done else logging.ERROR,
    )
    if not seen.done:
        raise RunbookFailed(f"broker {broker}'s replicas are not all back and in sync: {observed}")
    return {"replaced": True, "failed": [broker]}
