"""The approved leader moves of the reassigning runbooks: a rebalance's leader-only reorders and the
preferred-leader election of what a run moved. Both are destructive writes (another broker leads),
so both happen only in an approved step, each behind its own approval check right where it writes:

- when every chunk is done, at the end of ``execute_chunks`` (the sensor that already checks the
  approval at every poke, its age from the task's first poke: a long heal keeps its approval, a
  cleared ``execute_chunks`` goes back to the gate): :func:`after_chunks`;
- when the run ended before that (stopped, failed) having moved replicas, in the ``remove_throttles``
  cleanup after the throttles came off (the throttle removal puts back what the run set and needs
  no approval; the election does, and an approval that expired or was never given elects nothing):
  :func:`after_stop`.

The write functions themselves (``kafka_runbooks.rebalance.apply_leader_moves``,
``kafka_runbooks.failed_broker.leaders.elect_preferred_leaders``) take the proof the approval
check hands out (``kafka_runbooks.approval_proof.ApprovedAction``) and refuse anything it does not
name. ``verify_result`` only reads. A re-run redoes nothing done: the reorders' outcome is kept in
the run's folder (``leader-moves.json``), the election's in the execution state (``leaders``); a
cleared task re-checks the approval before anything is left to write.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from kafka_runbooks import decisions
from kafka_runbooks.errors import RunbookFailed

if TYPE_CHECKING:
    from kafka_runbooks.admin import ClusterAdmin
    from kafka_runbooks.approval_proof import ApprovedAction
    from kafka_runbooks.failed_broker.execute import ExecState
    from kafka_runbooks.storage import StorePath

log = logging.getLogger("kafka_runbooks.leaders")

REORDERS_DONE = "leader-moves.json"  # the leader-only moves' outcome, beside exec-state.json
GATE_TASK_ID = "approval_gate"
# an election's end that a re-run does not redo (one refused for want of an approval is tried again)
DONE_PREFIXES = ("leaders re-balanced", "leaders NOT re-balanced: elect_preferred_leaders is off")


def approve(
    context, gate_task_id: str = GATE_TASK_ID, logger: logging.Logger | None = None
) -> ApprovedAction:
    """The approval check right before a leader write: ``require_approval`` (a DECISION record, and
    AirflowFailException unless the gate approved this run's current plan, unexpired), then the proof
    of exactly that action for the write functions."""
    from kafka_runbooks.approval_proof import approved_action
    from kafka_runbooks_airflow.gate import current_action, require_approval

    record = require_approval(context, "reassign", gate_task_id, logger or log)
    action, digest = current_action("reassign", context)
    return approved_action(record, digest, action)


def after_chunks(
    context, admin: ClusterAdmin, state: ExecState, path: StorePath, checkpoint, stop_asked: bool, logger
) -> dict[str, Any]:
    """Every chunk is done: the approved leader-only moves (not after a stop), then the approved
    election of what moved; nothing already done is done again. RunbookFailed when the election did
    not settle (the partitions named)."""
    from kafka_runbooks_airflow.gate import run_xcom

    checked = run_xcom(context, "validate") or {}
    summary = _summary(checked)
    rf_mode = summary.get("rebalance") == "replication-factor"
    reorders = [] if rf_mode else list(summary.get("leader_moves") or [])
    reorders_left = reorders and not _reorders_done(path) and not stop_asked and not state.stopped
    keys = _moved_keys(state) | {f"{m['topic']}:{m['partition']}" for m in reorders}
    election_left = bool(keys) and not _elected(state) and not rf_mode
    if stop_asked and reorders and not _reorders_done(path):
        _record_no_reorders(len(reorders), logger)
    if election_left and not checked.get("elect_preferred_leaders", True):
        _say_off(
            state, len(keys), checkpoint, logger
        )  # nothing is written to the cluster: no approval needed
        election_left = False
    if not reorders_left and not election_left:
        return {"leaders": state.leaders or "nothing left to do"}
    proof = approve(context, logger=logger)
    out: dict[str, Any] = {}
    if reorders_left:
        out["leader_only_moves"] = leader_only_moves(admin, reorders, proof, path, logger)
    if election_left:
        out["election"] = _elect_and_keep(admin, state, keys, proof, checkpoint, logger)
    return out


def after_stop(admin: ClusterAdmin, path: StorePath, elect: bool, context_of, logger=None) -> str | None:
    """A run that ended before its chunks were all done (stopped, failed) but moved replicas: with
        ``elect``, the approved election of what it moved (never the leader-only moves), and in its state
        and progress whether leadership is balanced. None: the run finished (``execute_chunks`` elected)
        or moved nothing. The adopted moves of an earlier run (``adopt-state.json``) are not this run's
        approved plan: their leaders are named, never elected. ``context_of()``: the task's context, asked
    only when an election is due (the approval check reads the gate's record and the task's start)."""
    import time

    from kafka_runbooks.failed_broker import progress
    from kafka_runbooks.failed_broker.execute import claim, fenced_checkpoint, load_state
    from kafka_runbooks.failed_broker.stop import final_progress
    from kafka_runbooks_airflow.run_state import ADOPT_STATE, EXEC_STATE

    logger = logger or log
    state = _settled_stop(path, load_state)
    keys = _moved_keys(state)
    if state.finished or not keys or _elected(state):
        return None
    state = claim(path, f"leaders after the end of {path.parent.name}")
    if path.name == ADOPT_STATE:
        state.leaders = (
            f"leaders NOT re-balanced: the {len(keys)} partition(s) adopted from an earlier run are not this "
            "run's approved plan; elect them with kafka-leader-election --election-type PREFERRED"
        )
    elif not elect:
        state.leaders = _off_text(len(keys))
    else:
        state.leaders = _elect_if_approved(admin, state, keys, context_of(), logger)
    fenced_checkpoint(path, state.fence)(state)
    if state.stopped:
        # beside the state: progress.json (what the Kafka page reads), adopt-progress.json
        name = "progress.json" if path.name == EXEC_STATE else path.name.replace("state", "progress")
        progress.write(path.parent / name, final_progress(state, time.time()))
    return state.leaders


STOP_SETTLE_S = (
    120.0  # a stop's cancel, throttle removal and read-back take seconds; a crashed one never ends
)


def _settled_stop(path: StorePath, load_state) -> ExecState:
    """The state once a stop that made it final has also read back what landed (seen on the real
    stack: the run's cleanup read a state the Stop page had just made final, its stopped chunk's
    landed moves not yet known, and elected nothing). A stop that never ends is waited for
    :data:`STOP_SETTLE_S`, then the state is taken as it is."""
    import time

    deadline = time.monotonic() + STOP_SETTLE_S
    state = load_state(path)
    while state.stopped and not (state.stop_request or {}).get("settled") and time.monotonic() < deadline:
        time.sleep(0.5)
        state = load_state(path)
    return state


def _elect_if_approved(admin, state, keys: set[str], context, logger) -> str:
    """The election after a stop, only with a valid approval of the run's plan (else the line says why)."""
    from airflow.sdk.exceptions import AirflowFailException

    try:
        proof = approve(context, logger=logger)
    except AirflowFailException as exc:
        return (
            f"leaders NOT re-balanced: no election without a valid approval ({exc}); elect the "
            f"{len(keys)} moved partition(s) with kafka-leader-election --election-type PREFERRED"
        )
    result = elect_preferred(admin, keys, proof, logger)
    return _leaders_text(result, len(keys))


def leader_only_moves(
    admin: ClusterAdmin, moves: list[dict], proof: ApprovedAction, path: StorePath, logger
) -> dict[str, Any]:
    """The approved leader-only moves (``kafka_runbooks.rebalance.apply_leader_moves``), recorded, their
    outcome kept beside the run's state so a re-run sends none of them again."""
    from kafka_runbooks.rebalance import apply_leader_moves

    done = apply_leader_moves(admin, moves, proof)
    decisions.record(
        "leader-only moves",
        "reordered" if not done.errors else "reordered partly",
        "the approved preferred-leader changes: each partition's replica list reordered, no data moves; "
        "partitions whose replicas changed since the plan are left alone, those already in order not sent",
        observed={
            "submitted": len(done.submitted),
            "errors": done.errors,
            "skipped": done.skipped,
            "approval": proof.as_dict(),
        },
        logger=logger,
        level=logging.INFO if not done.errors else logging.ERROR,
    )
    if done.errors:
        raise RunbookFailed(f"leader-only moves refused by the controller: {done.errors}")
    out = {"submitted": len(done.submitted), "skipped": done.skipped, "digest": proof.digest}
    (path.parent / REORDERS_DONE).write_text(json.dumps(out, sort_keys=True))
    return {"submitted": out["submitted"], "skipped": out["skipped"]}


def elect_preferred(admin: ClusterAdmin, keys: set[str], proof: ApprovedAction, logger=None):
    """The approved preferred-leader election of ``keys`` (``topic:partition``), read back until settled
    for a period never shorter than the cluster's session timeout, each preferred replica and each
    leader and ISR member it relies on asked itself."""
    from kafka_runbooks.evidence import silent_brokers
    from kafka_runbooks.failed_broker.leaders import elect_preferred_leaders
    from kafka_runbooks_airflow.verify_settings import election_settle_s

    topics = sorted({k.rsplit(":", 1)[0] for k in keys})
    return elect_preferred_leaders(
        read=lambda: admin.describe_topic_partitions(topics),
        elect=admin.elect_preferred,
        keys=keys,
        approval=proof,
        silent=lambda brokers: silent_brokers(admin, brokers),
        timeouts=admin.cluster_timeouts(),
        logger=logger or log,
        settle_s=election_settle_s(),
    )


def _say_off(state, moved: int, checkpoint, logger) -> None:
    """The finished run's election is off: said once, kept in its state."""
    decisions.record(
        "elect preferred leaders",
        "do not elect",
        "elect_preferred_leaders is off: leadership moves to the new preferred replicas when the "
        "controller's auto leader rebalance gets to it",
        logger=logger,
    )
    state.leaders = _off_text(moved)
    checkpoint(state)


def _elect_and_keep(admin, state, keys: set[str], proof, checkpoint, logger) -> dict[str, Any]:
    """The finished run's election, its outcome kept in its state; RunbookFailed when the elected
    leaders did not settle."""
    result = elect_preferred(admin, keys, proof, logger)
    state.leaders = _leaders_text(result, len(keys))
    checkpoint(state)
    if not result.ok:
        raise RunbookFailed(
            f"{len(result.not_led)} moved partition(s) are not led by their preferred replica: "
            f"{result.not_led[:10]} (election errors {dict(list(result.errors.items())[:10])})"
        )
    return {
        "elected": len(result.asked),
        "skipped": dict(list(result.skipped.items())[:50]),
        "leaders_before": {str(b): n for b, n in result.leaders_before.items()},
        "leaders_after": {str(b): n for b, n in result.leaders_after.items()},
    }


def _leaders_text(result, moved: int) -> str:
    """The state's and the progress line's word on leadership after an election."""
    skipped = f" ({len(result.skipped)} left alone: {sorted(result.skipped)[:5]})" if result.skipped else ""
    if result.ok:
        return (
            f"leaders re-balanced: the {moved} moved partition(s) are led by their preferred replica{skipped}"
        )
    return (
        f"leaders NOT re-balanced: {len(result.not_led)} moved partition(s) not led by their preferred "
        f"replica ({result.not_led[:5]}); elect them with kafka-leader-election --election-type PREFERRED"
    )


def _off_text(moved: int) -> str:
    return (
        "leaders NOT re-balanced: elect_preferred_leaders is off; elect the preferred leaders of the "
        f"{moved} moved partition(s) with kafka-leader-election --election-type PREFERRED"
    )


def _record_no_reorders(count: int, logger) -> None:
    decisions.record(
        "leader-only moves",
        "do not reorder",
        f"a stop was asked for this run: none of the plan's {count} leader-only move(s) is sent",
        logger=logger,
        level=logging.WARNING,
    )


def _moved_keys(state: ExecState) -> set[str]:
    """The partitions the run put on their target replicas (``stop.moved``)."""
    from kafka_runbooks.failed_broker.stop import moved

    return set(moved(state))


def _elected(state: ExecState) -> bool:
    """Whether the run's election already ran to an end that needs no re-run."""
    return bool(state.leaders) and state.leaders.startswith(DONE_PREFIXES)


def _reorders_done(path: StorePath) -> bool:
    return (path.parent / REORDERS_DONE).exists()


def _summary(checked: dict[str, Any]) -> dict[str, Any]:
    """The plan's summary.json (empty when the run has none)."""
    from kafka_runbooks import storage
    from kafka_runbooks.snapshot_contract import SUMMARY_FILE

    if not checked.get("plan_dir"):
        return {}
    summary = storage.locate(checked["plan_dir"]) / SUMMARY_FILE
    return json.loads(summary.read_text()) if summary.exists() else {}
