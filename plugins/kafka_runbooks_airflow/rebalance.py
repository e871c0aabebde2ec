"""Task bodies of ``kafka_rebalance``: the decommission's pipeline with the rebalance's request.

The rebalance runs the heal's tasks (``kafka_runbooks_airflow.failed_broker``) with its own parser
and broker choice (``kafka_runbooks.rebalance``: modes, live brokers, new brokers, what the racks
allow), the planner's ``--rebalance`` with the target spreads and each receiver's room under the
disk ceiling, the decommission's disk check before the gate, and its own end state: the moved
partitions on their targets and in sync, the approved leader-only moves made and the preferred
leaders elected (at the end of ``execute_chunks``, behind its approval), the spreads read back within the target (or as close as the plan said it gets)
for the settle period, no throttle left. Mode ``replication-factor`` (``kafka_runbooks.replication_factor``)
picks its topics from the cluster in validate and ends with every partition of them read back at
the target, in sync; it lowers topics above the target only with ``allow_replication_factor_decrease``,
after validate read each one's effective ``min.insync.replicas`` and ISR (``check_lowering``).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from kafka_runbooks import decisions
from kafka_runbooks.rebalance import (  # the trigger form's target defaults, one place
    DEFAULT_BYTES_SPREAD_PERCENT,
    DEFAULT_SPREAD,
)

if TYPE_CHECKING:
    from kafka_runbooks.failed_broker.request import ReassignRequest
    from kafka_runbooks.rebalance import RebalanceRequest
    from kafka_runbooks.replication_factor import RfRequest

__all__ = ["DEFAULT_BYTES_SPREAD_PERCENT", "DEFAULT_SPREAD"]

log = logging.getLogger("kafka_runbooks.rebalance")


def _settle(admin, step: str, partitions_of) -> dict:
    """A read-back's keyword arguments: its timeout and settle (never shorter than the session timeout,
    recorded), and the last read's ask of the leaders and ISR members of ``partitions_of(answer)``."""
    from kafka_runbooks_airflow.verify_settings import partitions_ask, verify_settle

    return {**verify_settle(admin, step, log), "ask": partitions_ask(admin, partitions_of)}


def check_input(dag_id: str, run_id: str, params: dict[str, Any]) -> dict[str, Any]:
    """What needs no cluster, before the run waits for the lease (then it joins the lease queue):
    the mode (remove-brokers refused naming the decommission), the new brokers, the targets."""
    from kafka_runbooks.rebalance import build_rebalance_request
    from kafka_runbooks_airflow.inputs import check_before_lease
    from kafka_runbooks_airflow.lease import join_lease_queue

    checked = check_before_lease(dag_id, params, build_rebalance_request, ("kafka_config_id",), log.name)
    join_lease_queue(dag_id, run_id, dict(params))
    return checked


def rebalance_request(params: dict[str, Any]) -> RebalanceRequest:
    """The run's typed request (``build_rebalance_run``: the pipeline's request and, in mode
    replication-factor, the mode's own), built once by the validate task; a bad one is a
    ``refuse`` DECISION before any cluster call."""
    from kafka_runbooks.rebalance import build_rebalance_run
    from kafka_runbooks_airflow.inputs import refuse_bad_input

    return refuse_bad_input(build_rebalance_run, params, log.name)


def validate(run: RebalanceRequest, kafka_config_id: str, dag_id: str, run_id: str) -> dict[str, Any]:
    """The heal's validate with the rebalance's request and brokers; then the spreads now (within
    the target and nothing adopted: nothing to do) and each receiver's room under the disk ceiling."""
    from kafka_runbooks.rebalance import resolve_rebalance
    from kafka_runbooks_airflow.failed_broker import validate_request

    request = run.reassign
    if run.replication_factor is not None:
        return _validate_rf(run.replication_factor, request, kafka_config_id, dag_id, run_id)
    checked = validate_request(request, kafka_config_id, dag_id, run_id, resolve_rebalance)
    now, room, errors = _spread_and_room(kafka_config_id, request, checked["receivers"])
    within = now.within(*now.limits)
    nothing = checked["nothing_to_do"] or (within and not checked["adopted"])
    decisions.record(
        "spread",
        "nothing to do" if nothing else "plan the rebalance",
        f"replicas, leaders and bytes per broker are within the target (replicas {now.limits[0]}, leaders "
        f"{now.limits[1]}, bytes {now.bytes_limit})"
        if within
        else f"the spread is above the target or unknown (replicas {now.limits[0]}, leaders {now.limits[1]}, "
        f"bytes {now.bytes_limit}: None when a broker's bytes are unknown)",
        observed={
            **now.observed(),
            "room_bytes": {str(b): n for b, n in room.items()},
            "log_dir_errors": errors,
        },
        logger=log,
    )
    return {
        **checked,
        "nothing_to_do": nothing,
        "kafka_config_id": kafka_config_id,  # review_plan reads the disks there
        "new_brokers_csv": ",".join(str(b) for b in request.new_brokers or ()),
        "room_csv": ",".join(f"{b}={n}" for b, n in sorted(room.items())),
        "spread_before": now.observed()["spread"],
        "replication_factor": "",
        "topics_csv": "",
        "allow_replication_factor_decrease": "",
    }


def _validate_rf(
    rf_request: RfRequest, request: ReassignRequest, kafka_config_id: str, dag_id: str, run_id: str
) -> dict[str, Any]:
    """Mode replication-factor: the heal's validate with the topics chosen from the cluster it read
    (a target above the live brokers, unknown topics, a lowering not allowed or not safe: the run's
    ``refuse`` DECISION); nothing off the target: nothing to do; each live broker's room under the
    disk ceiling."""
    from kafka_runbooks.rebalance import resolve_rebalance
    from kafka_runbooks.replication_factor import select_topics
    from kafka_runbooks_airflow.failed_broker import validate_request

    chosen = []

    def choose(req, state):
        """Choose the topics off the target from the state validate read (refusals first), check any
        lowering, then resolve the run's brokers."""
        chosen.append(select_topics(rf_request, state))  # the refusals come first
        if chosen[0].above:
            _check_lowering(kafka_config_id, chosen[0], state)
        return resolve_rebalance(req, state)

    checked = validate_request(request, kafka_config_id, dag_id, run_id, choose)
    selection = chosen[0]
    _, room, errors = _spread_and_room(kafka_config_id, request, checked["receivers"])
    nothing = checked["nothing_to_do"] or (not selection.changed and not checked["adopted"])
    _record_rf_selection(selection, rf_request, nothing, room, errors)
    return {
        **checked,
        "nothing_to_do": nothing,
        "kafka_config_id": kafka_config_id,  # review_plan reads the disks there
        "new_brokers_csv": "",
        "room_csv": ",".join(f"{b}={n}" for b, n in sorted(room.items())),
        "replication_factor": str(selection.replication_factor),
        "topics_csv": ",".join(selection.changed),
        "allow_replication_factor_decrease": "true" if rf_request.allow_decrease else "",
    }


def _record_rf_selection(selection, rf_request: RfRequest, nothing: bool, room: dict, errors) -> None:
    """The replication-factor decision record: nothing off the target, or what is below and above it,
    with each receiver's room read under the disk ceiling."""
    decisions.record(
        "replication factor",
        "nothing to do" if nothing else ("plan the lowering" if selection.above else "plan the raise"),
        f"every partition of the topics has {selection.replication_factor} replicas"
        + ("" if rf_request.allow_decrease else " or more")
        if not selection.changed
        else f"{sum(selection.below.values())} partition(s) of {len(selection.below)} topic(s) are below "
        f"{selection.replication_factor} replicas, {sum(selection.above.values())} partition(s) of "
        f"{len(selection.above)} topic(s) above",
        observed={
            **selection.observed(),
            "room_bytes": {str(b): n for b, n in room.items()},
            "log_dir_errors": errors,
        },
        logger=log,
    )


def _check_lowering(conn_id: str, selection, state) -> None:
    """The lowering's rules (``check_lowering``) on each lowered topic's effective
    ``min.insync.replicas`` as the cluster reports it; one it cannot read stays unknown (refused)."""
    from kafka_runbooks.errors import AdminError
    from kafka_runbooks.replication_factor import check_lowering
    from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook

    admin = KafkaAdminHook(kafka_config_id=conn_id).admin
    try:
        min_isr: dict[str, int | None] = admin.min_insync_replicas(sorted(selection.above))
    except AdminError as exc:
        log.warning("min.insync.replicas unread: %s", exc)
        min_isr = {}
    finally:
        admin.close()
    check_lowering(selection, state, min_isr)


def _spread_and_room(conn_id: str, request, receivers: list[int]):
    """The spreads now, and each receiver's room (DescribeLogDirs) under the disk ceiling."""
    from kafka_runbooks.rebalance import room, spread_now
    from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook

    admin = KafkaAdminHook(kafka_config_id=conn_id).admin
    try:  # every live broker's dirs: the receivers' room and everyone's bytes (the bytes target)
        state = admin.read_state(include_log_dirs=True)
    finally:
        admin.close()
    errors = {b: e for b, e in state.log_dir_errors.items() if b in receivers}
    return (
        spread_now(state, request),
        room(state.log_dir_states, list(receivers), float(request.max_disk_usage_percent)),
        errors,
    )


def review_plan(
    checked: dict[str, Any] | None, snapshot_info: dict[str, Any] | None, dag_id: str, run_id: str
) -> dict[str, Any]:
    """The decommission's review: the disk ceiling on the receivers, then the plan check (the
    rebalance's rules) and the gate's Markdown."""
    from kafka_runbooks_airflow.decommission import review_plan as shared

    return shared(checked, snapshot_info, dag_id, run_id)


def _summary(checked: dict[str, Any]) -> dict[str, Any]:
    from kafka_runbooks import storage
    from kafka_runbooks.snapshot_contract import SUMMARY_FILE

    return json.loads((storage.locate(checked["plan_dir"]) / SUMMARY_FILE).read_text())


def verify(checked: dict[str, Any], kafka_config_id: str, dag_id: str, run_id: str) -> dict[str, Any]:
    """After the chunks, the approved leader moves (made at the end of ``execute_chunks``:
    ``kafka_runbooks_airflow.leader_moves``) and the cleanup, read only: the moved partitions on their
    targets and in sync with no throttle left; then the spreads read back within the target (or the
    plan's own "as close as it gets"), each held for the settle period (never shorter than
    ``broker.session.timeout.ms``, its last read asking the leaders and ISR members themselves); then
    the bytes per broker read back and judged (a WARNING when not within, never a failure). Anything
    else fails the run naming what is off."""
    from kafka_runbooks.errors import RunbookFailed

    summary = _summary(checked)
    planned = {f"{m['topic']}:{m['partition']}": m["to"] for m in summary.get("moves", [])}
    moved = _await_moved(kafka_config_id, planned)
    if summary.get("rebalance") == "replication-factor":
        return {"moved": moved, "replication_factor": _await_rf(kafka_config_id, summary)}
    out: dict[str, Any] = {"moved": moved}
    spread = _await_spread(kafka_config_id, summary)
    out["spread"] = spread
    if not spread["done"]:
        raise RunbookFailed(f"the spread read back is not what the plan promised: {spread}")
    out["bytes"] = _read_back_bytes(kafka_config_id, summary)  # never fails the run: see its docstring
    return out


def _await_moved(conn_id: str, planned: dict[str, list[int]]) -> int:
    """Every planned partition on its target's replicas, every partition in sync, no throttle left."""
    from kafka_runbooks.errors import RunbookFailed
    from kafka_runbooks.failed_broker.throttle import leftover_throttles
    from kafka_runbooks.log_dir_failure import await_holding
    from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook

    admin = KafkaAdminHook(kafka_config_id=conn_id).admin

    def read():
        """One read of the cluster (without log dirs) and the throttles still set, judged against the plan."""
        state = admin.read_state(include_log_dirs=False)
        left = leftover_throttles(
            admin, state.alive_broker_ids(), sorted({p.topic for p in state.partitions})
        )
        return _Moved(state, planned, left)

    try:
        seen = await_holding(read, lambda s: s, **_settle(admin, "verify", lambda m: m.partitions))
    finally:
        admin.close()
    decisions.record(
        "verify",
        "moved" if seen.done else "NOT moved",
        "every planned partition is on its target replicas, every partition has its full replication "
        "factor in the ISR, no throttle config remains"
        if seen.done
        else "see observed",
        observed=seen.observed(),
        logger=log,
        level=logging.INFO if seen.done else logging.ERROR,
    )
    if not seen.done:
        raise RunbookFailed(f"the rebalance's moves did not all land in sync: {seen.observed()}")
    return len(planned)


class _Moved:
    """One read against the moved rule."""

    def __init__(self, state, planned: dict[str, list[int]], left: dict[str, Any]) -> None:
        self.off_plan = [
            p.name
            for p in state.partitions
            if f"{p.topic}:{p.partition}" in planned
            and set(p.replicas) != set(planned[f"{p.topic}:{p.partition}"])
        ]
        self.isr_short = [p.name for p in state.partitions if len(set(p.isr)) < len(p.replicas)]
        self.left = left
        self.partitions = state.partitions  # the settle asks their leaders and ISR members
        self.done = not self.off_plan and not self.isr_short and not left

    def observed(self) -> dict[str, Any]:
        """The read for the decision record (first 50 partitions off the plan or short of ISR, the
        throttles left)."""
        return {
            "not_on_target": self.off_plan[:50],
            "isr_short": self.isr_short[:50],
            "throttles_left": self.left,
        }


def _await_rf(conn_id: str, summary: dict[str, Any]) -> dict[str, Any]:
    """Every partition of the raised and lowered topics read back at the target, all in the ISR,
    until that holds for the settle period; otherwise the run fails naming the partitions off."""
    from kafka_runbooks.errors import RunbookFailed
    from kafka_runbooks.log_dir_failure import await_holding
    from kafka_runbooks.replication_factor import judge_rf
    from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook

    topics = sorted({*(summary.get("raised") or {}), *(summary.get("lowered") or {})})
    rf = int(summary["replication_factor"])
    admin = KafkaAdminHook(kafka_config_id=conn_id).admin
    try:
        seen = await_holding(
            lambda: admin.read_state(topics, include_log_dirs=False),
            lambda state: _Judged(judge_rf(state, topics, rf), state),
            **_settle(admin, "verify replication factor", lambda j: j.partitions),
        )
    finally:
        admin.close()
    decisions.record(
        "verify replication factor",
        "raised" if seen.done else "NOT raised",
        f"every partition of {len(topics)} topic(s) has {rf} replicas, all in the ISR, held for the settle period"
        if seen.done
        else "see observed",
        observed={**seen.observed(), "topics": topics[:100]},
        logger=log,
        level=logging.INFO if seen.done else logging.ERROR,
    )
    if not seen.done:
        raise RunbookFailed(f"the replication factor read back is not the target: {seen.observed()}")
    return {"done": True, **seen.observed()}


class _Judged:
    """A judgement with the partitions it was made on (the settle asks their leaders and ISR members)."""

    def __init__(self, judged, state) -> None:
        self.judged, self.done, self.partitions = judged, judged.done, state.partitions

    def __getattr__(self, name: str) -> Any:
        return getattr(self.judged, name)


def _await_spread(conn_id: str, summary: dict[str, Any]) -> dict[str, Any]:
    """The spreads read back until they hold for the settle period: within the target, or, when the
    plan said it cannot reach it, no worse than the plan's own figures ("as close as it gets")."""
    from kafka_runbooks.log_dir_failure import await_holding
    from kafka_runbooks.rebalance import judge_spread
    from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook

    admin = KafkaAdminHook(kafka_config_id=conn_id).admin
    try:
        judged = await_holding(
            lambda: admin.read_state(include_log_dirs=False),
            lambda state: _Judged(judge_spread(state, summary), state),
            **_settle(admin, "verify spread", lambda j: j.partitions),
        )
    finally:
        admin.close()
    observed = judged.observed(summary)
    decisions.record(
        "verify spread",
        ("within the target" if summary.get("reached") else "as close as the plan gets")
        if judged.done
        else "NOT within",
        f"replicas per broker spread at most {judged.promised[0]}, preferred leaders at most {judged.promised[1]}, "
        "held for the settle period"
        if judged.done
        else "see observed",
        observed=observed,
        logger=log,
        level=logging.INFO if judged.done else logging.ERROR,
    )
    return {"done": judged.done, **observed}


def _read_back_bytes(conn_id: str, summary: dict[str, Any]) -> dict[str, Any]:
    """Bytes per live broker read back from DescribeLogDirs once the spreads held for the settle
    period, judged and recorded by ``kafka_runbooks.rebalance.record_bytes`` (a WARNING when not
    within, never a failure: its docstring says why)."""
    from kafka_runbooks.rebalance import judge_bytes, record_bytes
    from kafka_runbooks_airflow.hooks.kafka_admin import KafkaAdminHook

    admin = KafkaAdminHook(kafka_config_id=conn_id).admin
    try:
        judged = judge_bytes(admin.read_state(include_log_dirs=True), summary)
    finally:
        admin.close()
    return record_bytes(judged, log)
