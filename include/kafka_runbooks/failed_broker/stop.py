"""Stop a running reassignment cleanly, the way Cruise Control's ``stop_proposal_execution``
and Strimzi's ``strimzi.io/rebalance: stop`` do: not a kill that leaves the copy running.

A stop is asked for with a **stop request** (a small JSON file per Kafka connection in
the runbook's state directory, written by the ``kafka_reassignment_stop`` DAG). The
executing task reads it before every step and, when it applies to its run (same
connection, asked after the run started), stops:

- cancels exactly the reassignments its run submitted and still sees in flight towards
  the run's own target (AlterPartitionReassignments with a null target); a reassignment
  that someone else started, or re-targeted, is left alone and named;
- takes its replication throttle off (broker rates back to what they were, its
  ``partition:broker`` items out of the topics' throttled-replica lists);
- puts each cancelled partition's replicas back in their order before the move once the cancel is
  confirmed: Kafka's cancel restores the replica set, not its order, so the preferred leader would
  change silently (a reorder copies no data; a partition not back on its origin's replicas, or whose
  origin is unknown, is reported and left as the cancel left it);
- marks the state file stopped (the moving chunk becomes ``stopped``, the request is
  recorded): a stopped state is final. Clearing the task does not resume it, and a new
  run never adopts what was stopped (it is no longer "ours in flight"; anything a failed
  cancel left in flight is refused as foreign until it is cancelled, e.g. by stopping
  again). A new run plans afresh from what the cluster holds.

When no task is executing (worker dead, run killed), the stop DAG does the same itself
from the state files. Either way the result is read back from the cluster: none of the
run's reassignments in flight, none of its throttle configs set, the restored orders in place.
No preferred-leader election is run for a cancelled partition: the reorder keeps its leader, and
with the order back its preferred leader is the one before the run again.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_runbooks import decisions, retries, storage
from kafka_runbooks.evidence import ClusterTimeouts, settle_period_s
from kafka_runbooks.failed_broker import progress, throttle
from kafka_runbooks.failed_broker.execute import (
    DONE,
    MOVING,
    PENDING,
    ExecState,
    key,
    load_state,
    split,
    target_of,
)
from kafka_runbooks.failed_broker.replica_order import OrderCheck, order_check, replicas_of
from kafka_runbooks.paths import safe_name
from kafka_runbooks.storage import StorePath

if TYPE_CHECKING:
    from kafka_runbooks.admin import ClusterAdmin

STOPPED = "stopped"  # status of a chunk whose reassignments were cancelled by a stop


@dataclass
class StopRequest:
    """An operator's request to stop the reassignment running on one Kafka connection."""

    kafka_config_id: str
    by: str
    reason: str
    requested_at_ms: int
    request_id: str = ""
    acknowledged: dict[str, int] = field(default_factory=dict)  # run id -> when its task stopped

    @property
    def text(self) -> str:
        """The request as one sentence for logs and decision records."""
        return f"stopped by {self.by}: {self.reason}"

    def applies_to(self, kafka_config_id: str, run_started_ms: int | None) -> bool:
        """Same cluster, and asked while the run was already going: an old request never stops a
        run started after it (the runbook started again on purpose)."""
        return self.kafka_config_id == kafka_config_id and (
            run_started_ms is None or self.requested_at_ms >= run_started_ms
        )


def request_path(state_root: StorePath | Path, kafka_config_id: str) -> StorePath:
    """``reassign/<dag>/stop/<connection>.json`` in the data store: one request per cluster."""
    return storage.locate(state_root) / "stop" / f"{safe_name(kafka_config_id)}.json"


def write_request(path: StorePath | Path, request: StopRequest) -> None:
    """Write the request whole, in the data store, where every worker's executing task reads it."""
    storage.locate(path).write_text(json.dumps(asdict(request), indent=1, sort_keys=True))


def read_request(path: StorePath | Path) -> StopRequest | None:
    """The stop request, or None when there is none or the file is not one (not JSON, or fields a
    :class:`StopRequest` does not have)."""
    try:
        raw = json.loads(storage.locate(path).read_text())
    except (OSError, ValueError):
        return None
    try:
        return StopRequest(**raw)
    except TypeError:
        return None


def acknowledge(path: StorePath | Path, run_id: str, now_ms: int) -> None:
    """The executing task says it stopped (the stop DAG then need not do it itself)."""
    request = read_request(path)
    if request is None:
        return
    request.acknowledged[run_id] = now_ms
    write_request(path, request)


def owned(state: ExecState) -> dict[str, list[int]]:
    """Partitions this state submitted and has not seen finish, stopped ones included (a cancel
    that failed is retried by the next stop)."""
    return {k: c.targets[k] for c in state.chunks if c.status in (MOVING, STOPPED) for k in c.moving}


def stopped_on_purpose(states: list[StorePath | Path]) -> str | None:
    """How a run was stopped on purpose by an operator (``stopped by <user>: <reason>``), read from its
    state files (``states``: the ones it may have), or None when none records an operator's stop (never
    executed, finished, failed, or stopped by the executor itself because a failed broker came back).
    A state that cannot be read is unknown, not "not stopped": said so instead."""
    for where in states:
        path = storage.locate(where)
        try:
            if not path.exists():
                continue
            state = load_state(path)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            return f"perhaps stopped on purpose (unknown: its state {path} could not be read: {exc})"
        if state.stopped and state.stop_request:
            return state.stopped
    return None


def needs_stopping(state: ExecState) -> bool:
    """Something of this state may be on the cluster: a chunk moving (or stopped) or a throttle."""
    return not state.finished and (state.throttle is not None or bool(owned(state)))


def stop(
    admin,
    state: ExecState,
    request: StopRequest,
    checkpoint,
    logger: logging.Logger | None = None,
) -> dict[str, Any]:
    """Cancel this state's reassignments in flight, take its throttle off, mark it stopped, and put
    the cancelled partitions back in their replica order before the move (:func:`restore_order`).

    Idempotent: a second stop cancels whatever is still in flight and finds no throttle.
    Returns what was done and what is left (for the read-back and the caller's record).
    """
    from kafka_runbooks.failed_broker.execute import ChunkExecutor

    ours = owned(state)
    inflight = {key(t, p): v for (t, p), v in admin.list_reassignments().items()}
    cancel = sorted(
        k for k, target in ours.items() if k in inflight and target_of(inflight[k]) == set(target)
    )
    retargeted = {k: inflight[k] for k in ours if k in inflight and k not in cancel}
    record = _mark_stopped(state, request, checkpoint)
    errors: dict[str, str] = {}
    cancelled_now: set[str] = set()
    if cancel:
        answer = admin.alter_partition_reassignments({split(k): None for k in cancel})
        errors = {key(*tp): e for tp, e in answer.items() if e and e != "NoReassignmentInProgressError"}
        cancelled_now = {key(*tp) for tp, e in answer.items() if not e}
    _record_cancel(state, request, cancel, errors, retargeted, logger)
    live = {b.broker_id for b in admin.describe_brokers().values() if b.available}
    left = ChunkExecutor(admin, logger=logger, checkpoint=checkpoint).remove_throttle(state, live)
    settle(state, replicas_now(admin, state), cancelled_now)
    state.stop_request = {**state.stop_request, "settled": True}  # what landed is known: moved() holds
    checkpoint(state)
    order = restore_order(admin, state, logger)
    checkpoint(state)
    return {
        "cancelled": cancel,
        "errors": errors,
        "throttle": record,
        "throttle_left": left,
        "order": asdict(order),
    }


def _mark_stopped(state: ExecState, request: StopRequest, checkpoint) -> dict | None:
    """Make the state final and save it before anything is cancelled: a crash mid-stop leaves a
    state that is already final. Returns the throttle it holds (JSON, kept with the stop), or the
    one an earlier stop took off, so that the read-back verifies it again."""
    record = state.throttle.as_dict() if state.throttle else None  # JSON, kept with the stop
    if state.stop_request and state.stop_request.get("throttle_removed") and record is None:
        record = state.stop_request["throttle_removed"]  # an earlier stop took it off: verify that again
    state.stopped = request.text
    state.stop_request = {**asdict(request), "throttle_removed": record}
    for chunk in state.chunks:
        if chunk.status == MOVING:
            chunk.status = STOPPED
    checkpoint(state)
    return record


def _record_cancel(
    state: ExecState,
    request: StopRequest,
    cancel: list[str],
    errors: dict[str, str],
    retargeted: dict[str, dict],
    logger: logging.Logger | None,
) -> None:
    """The stop's decision record: what was cancelled, and what was left alone because someone
    else re-targeted it (a stop cancels only what this run submitted)."""
    decisions.record(
        "stop",
        "cancel the reassignments this run started" if cancel else "nothing of this run in flight to cancel",
        f"{request.text}; only what this run submitted is cancelled (the controller puts the partitions "
        "back on their replicas before the move); the chunks not started stay unstarted",
        subject=f"run {state.run_id}",
        observed={
            "cancelled": cancel[:100],
            "errors": errors,
            "left_alone_retargeted_by_someone_else": dict(list(retargeted.items())[:20]),
            "chunks_not_started": [c.index for c in state.chunks if c.status == "pending"],
        },
        action=f"AlterPartitionReassignments with a null target for {len(cancel)} partition(s)"
        if cancel
        else None,
        logger=logger,
        level=logging.WARNING,
    )


def replicas_now(admin, state: ExecState) -> dict[str, list[int]]:
    """The replicas the cluster names now for the partitions of the state's stopped chunks."""
    return replicas_of(admin, [k for c in state.chunks if c.status == STOPPED for k in c.moving])


def cancelled(state: ExecState) -> list[str]:
    """The stopped chunks' partitions that did not finish before the stop (see :func:`settle`)."""
    return sorted(
        k for c in state.chunks if c.status == STOPPED for k in c.moving if k not in set(c.completed)
    )


def known_origins(state: ExecState) -> dict[str, list[int]]:
    """The stopped chunks' partitions' replicas before the move, in order, where the order is known
    (an adopted move's may be known as a set only: not a basis for reordering)."""
    return {
        k: list(c.origin[k])
        for c in state.chunks
        if c.status == STOPPED
        for k in c.moving
        if k in c.origin and k not in c.origin_order_unknown
    }


def read_order(
    admin, state: ExecState, wait_s: float = 15.0, sleep=time.sleep, clock=time.monotonic
) -> OrderCheck:
    """:func:`order_check` of the state's cancelled partitions, re-read (ListPartitionReassignments and
    the metadata) until it is settled or ``wait_s`` has passed: the last read then, as it is."""
    keys = cancelled(state)
    origins = known_origins(state)
    targets = {k: set(c.targets[k]) for c in state.chunks if c.status == STOPPED for k in c.moving}

    def read() -> OrderCheck:
        """One read of the cancelled partitions' order and who moves them now."""
        inflight = {key(t, p): v for (t, p), v in admin.list_reassignments().items()}
        theirs = {k for k in keys if k in inflight and target_of(inflight[k]) != targets.get(k)}
        return order_check(keys, origins, replicas_of(admin, keys), set(inflight), theirs)

    check, _ = retries.poll_until(
        read, lambda c: c.settled, timeout_s=wait_s, interval_s=1.0, clock=clock, sleep=sleep
    )
    return check


def settle(state: ExecState, replicas: dict[str, list[int]], cancelled: set[str]) -> None:
    """What a stop really ended, from the cluster: a stopped chunk's partition already on its target
    replicas (and not among those whose reassignment this stop cancelled) finished before the stop:
    it is moved, not cancelled; a stopped chunk whose every partition is so is done. Nothing else
    counts as done: a partition whose replicas are unknown (not read) stays not completed."""
    failed = set(state.failed_brokers)
    for chunk in state.chunks:
        if chunk.status != STOPPED:
            continue
        chunk.completed = sorted(
            k
            for k in chunk.moving
            if k not in cancelled and k in replicas and _on_target(replicas[k], chunk.targets[k], failed)
        )
        if chunk.moving and len(chunk.completed) == len(chunk.moving):
            chunk.status = DONE


def _on_target(replicas: list[int], target: list[int], failed: set[int]) -> bool:
    """On its target, or finished at the controller with this broker's metadata still naming the
    failed replica (ListPartitionReassignments can be ahead of the metadata): a cancelled move is back
    on its old replicas, which lack a receiver of the target."""
    now, want = set(replicas), set(target)
    return now == want or (want < now and now - want <= failed)


def restore_order(
    admin, state: ExecState, logger: logging.Logger | None = None, wait_s: float = 15.0
) -> OrderCheck:
    """Put each cancelled partition back in its origin's replica ORDER once its cancel is confirmed
    (nothing in flight, the origin's replica set back): a reorder-only reassignment copies no data
    and keeps the leader, and without it the stop would silently change the preferred leader. What
    the stop vouches for (put back or already in order) is kept in ``state.stop_request`` for
    :func:`verify_stopped` to read back in order; the rest is reported, never guessed."""
    if not cancelled(state):
        return OrderCheck()
    check = read_order(admin, state, wait_s=wait_s)
    errors: dict[str, str] = {}
    if check.reorder:
        answer = admin.reorder_replicas({split(k): v for k, v in check.reorder.items()})
        errors = {key(*tp): e for tp, e in answer.items() if e}
    vouched = {k: v for k, v in check.reorder.items() if k not in errors}
    origins = known_origins(state)
    vouched.update({k: origins[k] for k in check.in_order})
    if state.stop_request is not None:
        state.stop_request["replica_order"] = vouched
    _record_order(state, check, errors, logger)
    return check


def _record_order(
    state: ExecState, check: OrderCheck, errors: dict[str, str], logger: logging.Logger | None
) -> None:
    """The decision record of the order restore: what was put back, and what was not and why."""
    done = len(check.reorder) - len(errors)
    decisions.record(
        "stop",
        f"restored replica order of {done} partition(s)" if check.reorder else "no replica order to restore",
        "Kafka's cancel restores the replica set, not its order, and the first replica is the preferred "
        "leader: a reorder-only reassignment (no data copied, the leader kept) puts the order before the "
        "move back, once nothing is in flight for the partition. A partition not on its origin's "
        "replicas (its move finished, or someone else moved it), whose origin this run did not record, "
        "or whose cancel is not confirmed (still in flight) is left as the cancel left it and named here",
        subject=f"run {state.run_id}",
        observed={
            "restored": dict(list(check.reorder.items())[:50]),
            "errors": errors,
            "already_in_order": len(check.in_order),
            "not_on_origin_replicas_left_as_is": dict(list(check.set_differs.items())[:50]),
            "origin_unknown": check.origin_unknown[:50],
            "cancel_not_confirmed_still_in_flight": check.unknown[:50],
            "left_alone_retargeted_by_someone_else": check.left_alone[:50],
            "topic_gone": check.gone[:50],
        },
        action=f"AlterPartitionReassignments to the origin order for {len(check.reorder)} partition(s)"
        if check.reorder
        else None,
        logger=logger,
        level=logging.WARNING
        if errors or check.set_differs or check.origin_unknown or check.unknown
        else logging.INFO,
    )


def moved(state: ExecState) -> list[str]:
    """Partitions this run put on their target replicas: its done chunks' moves (not the ones a chunk
    dropped as already in place or changed) and the stopped chunks' completed ones."""
    out = [k for c in state.chunks if c.status == DONE for k in c.moving if k not in c.skipped]
    return sorted(set(out) | {k for c in state.chunks if c.status == STOPPED for k in c.completed})


@dataclass(frozen=True)
class Ending:
    """The honest end of a stopped run: what moved, what was cancelled, what never started, leaders."""

    stopped: str
    chunks_done: int
    chunks: int
    completed: list[str]
    cancelled: list[str]
    not_started: list[str]
    leaders: str

    @property
    def complete(self) -> bool:
        """Every chunk was done before the stop took effect: nothing was cancelled, nothing is left
        unstarted, so the stop stopped nothing and the run's work stands complete."""
        return self.chunks_done == self.chunks and not self.cancelled and not self.not_started

    def line(self) -> str:
        """The run's end as one log line, from these same counts: chunks done, partitions moved,
        cancelled and never started, leaders. A stop that came after the last chunk says so."""
        counts = (
            f"{self.chunks_done} of {self.chunks} chunk(s) done; {len(self.completed)} partition(s) moved, "
            f"{len(self.cancelled)} cancelled (back on their replicas before the move), "
            f"{len(self.not_started)} never started; {self.leaders}"
        )
        if not self.chunks:  # e.g. the adopted moves of an earlier run, when none were in flight
            return "no moves here: none were adopted or planned"
        if self.complete:
            return f"NOTHING TO STOP ({self.stopped}): the work was already complete: {counts}"
        return f"STOPPED ({self.stopped}): {counts}"


def stop_headline(results: Iterable[Mapping[str, Any]]) -> str:
    """The headline of a Stop over a run's states, from the same results as their lines (each the
    ``complete`` of its :class:`Ending`, or ``taken_over`` when the running task claimed the state
    first): 'Stopped' only when one of them had work left that the stop cancelled or kept from
    starting."""
    results = list(results)
    if not results:
        return "Stopped before the first move: nothing was moving yet"
    if any("taken_over" in r for r in results):
        return "Stop handed to the running task: it ends the run and its log says how"
    if all(r.get("complete") for r in results):
        return "Nothing to stop: the run's work was already complete"
    return "Stopped"


def ending(state: ExecState) -> Ending:
    """The ending of a stopped state, as the chunks were settled against the cluster (:func:`settle`)."""
    return Ending(
        stopped=state.stopped or "stopped",
        chunks_done=sum(1 for c in state.chunks if c.status == DONE),
        chunks=len(state.chunks),
        completed=moved(state),
        cancelled=cancelled(state),
        not_started=sorted(k for c in state.chunks if c.status == PENDING for k in c.targets),
        leaders=leaders_text(state),
    )


def leaders_text(state: ExecState) -> str:
    """Whether leadership was re-balanced: known only once the election ran (``state.leaders``)."""
    if state.leaders:
        return state.leaders
    if not moved(state):
        return "leaders: nothing moved, no election needed"
    return (
        f"leaders NOT re-balanced yet: the preferred-leader election of the {len(moved(state))} moved "
        "partition(s) runs in the run's remove_throttles task"
    )


def our_throttles_left(admin: ClusterAdmin, record: dict[str, Any] | None, live: set[int]) -> dict[str, Any]:
    """What of ``record`` (a throttle this run set) is still on the cluster: broker rates not back
    to what they were, and this run's ``partition:broker`` items still in a topic's list.
    Another tool's throttle on the same brokers or topics is not ours and not reported."""
    if not record:
        return {}
    found: dict[str, Any] = {}
    for broker, entry in record.get("brokers", {}).items():
        if int(broker) not in live:
            continue
        now = admin.describe_config_values("broker", [broker], throttle.BROKER_KEYS)[broker]
        previous = entry.get("previous") or {}
        wrong = {k: now.get(k) for k in throttle.BROKER_KEYS if now.get(k) != previous.get(k)}
        if wrong:
            found[f"broker {broker}"] = wrong
    topics = list(record.get("topics", {}))
    current = admin.describe_config_values("topic", topics, throttle.TOPIC_KEYS) if topics else {}
    for topic in topics:
        ours = set(record["topics"][topic].get("leader", [])) | set(
            record["topics"][topic].get("follower", [])
        )
        items = {
            i.strip()
            for k in throttle.TOPIC_KEYS
            for i in (current.get(topic, {}).get(k) or "").split(",")
            if i.strip()
        }
        if items & ours:
            found[f"topic {topic}"] = sorted(items & ours)
    return found


def out_of_order(admin, state: ExecState, inflight: set[str]) -> dict[str, Any]:
    """Of the partitions whose order the stop put back or found in order, those the cluster does not
    show on exactly their origin's replicas in order (or shows in flight again): their replicas now,
    ``None`` when in flight. A partition gone with its topic has no order to keep."""
    order = (state.stop_request or {}).get("replica_order") or {}
    if not order:
        return {}
    now = replicas_of(admin, list(order))
    return {
        k: None if k in inflight else now[k]
        for k, origin in sorted(order.items())
        if k in inflight or (k in now and now[k] != origin)
    }


def verify_stopped(
    admin,
    stopped: dict[str, tuple[ExecState, dict[str, Any] | None]],
    settle_s: float = 5.0,
    timeout_s: float = 60.0,
    sleep=time.sleep,
    clock=time.monotonic,
    timeouts: ClusterTimeouts | None = None,
    ask: Callable[[], dict[int, str]] | None = None,
) -> dict[str, Any]:
    """Read back until none of these runs' reassignments is in flight, none of their throttles is set
    and every partition whose order the stop put back (or found in order) shows its origin's replicas
    in order, and still so after the settle period (one broker's metadata can lag); returns what is left
    (empty: stopped). With the cluster's ``timeouts`` the settle is never shorter than
    ``broker.session.timeout.ms``; with ``ask`` (``{broker: why}``: the silent nodes the read relies
    on) its last read asks them, a silent one left as ``not_answering``."""
    settle_s = settle_s if timeouts is None else settle_period_s(settle_s, timeouts)
    timeout_s = max(timeout_s, 2 * settle_s)  # time to hold it twice

    def left() -> dict[str, Any]:
        """One read: per run, its reassignments still in flight (to its own targets) and its throttles
        still set."""
        inflight = {key(t, p): v for (t, p), v in admin.list_reassignments().items()}
        live = {b.broker_id for b in admin.describe_brokers().values() if b.available}
        out: dict[str, Any] = {}
        for run_id, (state, record) in stopped.items():
            moving = sorted(
                k for k, t in owned(state).items() if k in inflight and target_of(inflight[k]) == set(t)
            )
            throttles = our_throttles_left(admin, record, live)
            order = out_of_order(admin, state, set(inflight))
            if moving or throttles or order:
                out[run_id] = {"in_flight": moving[:50], "throttles": throttles, "order": order}
        return out

    def settled() -> dict[str, Any]:
        """One read; when it finds nothing left, the read a settle period later is the one that counts,
        and then the nodes it relies on are asked themselves."""
        found = left()
        if found:
            return found
        sleep(settle_s)
        found = left()
        silent = ask() if ask is not None and not found else {}
        return found or ({"not_answering": {str(b): why for b, why in silent.items()}} if silent else {})

    found, _ = retries.poll_until(
        settled, lambda found: not found, timeout_s=timeout_s, interval_s=1.0, clock=clock, sleep=sleep
    )
    return found


def to_stop(
    states: dict[str, ExecState], inflight: dict[str, dict[str, list[int]]], request_id: str
) -> dict[str, ExecState]:
    """The states a stop acts on: a throttle set or a chunk moving (a run going on, or killed
    mid-chunk); a stopped one whose cancel left something in flight (retried); and the ones
    the executing task already stopped for this very request (read back again)."""
    out = {}
    for name, state in states.items():
        if state.finished:
            continue
        stopped_here = bool(state.stop_request) and state.stop_request.get("request_id") == request_id
        still = any(k in inflight and target_of(inflight[k]) == set(t) for k, t in owned(state).items())
        moving = any(c.status == MOVING for c in state.chunks)
        if state.throttle is not None or moving or still or stopped_here:
            out[name] = state
    return out


def final_progress(state: ExecState, now: float) -> progress.Progress:
    """The closing figures of a stopped run, with whether its leaders were re-balanced (yet)."""
    figures = progress.finished(state, now)
    return dataclasses.replace(figures, leaders=leaders_text(state)) if state.stopped else figures


def stop_until_clean(
    admin,
    state: ExecState,
    request: StopRequest,
    checkpoint,
    logger=None,
    tries: int = 3,
    settle_s: float = 2.0,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Stop, read back, and stop again while the read-back finds the run's moves in flight or its
    throttle set: a task that recorded a submission or a throttle just before this stop claimed the
    state may still send it after the first cancel (it cannot send anything it had not recorded: its
    next fenced write fails). Returns (what the last stop did, what is left: empty when clean)."""
    done = stop(admin, state, request, checkpoint, logger=logger)
    record = done["throttle"]
    left = verify_stopped(admin, {state.run_id: (state, record)}, settle_s=settle_s, timeout_s=settle_s * 2)
    for _ in range(tries - 1):
        if not left:
            break
        if left[state.run_id].get("throttles") and state.throttle is None and record:
            state.throttle = throttle.ThrottleRecord.from_dict(record)  # set again after we took it off
        done = stop(admin, state, request, checkpoint, logger=logger)
        record = done["throttle"] or record
        left = verify_stopped(
            admin, {state.run_id: (state, record)}, settle_s=settle_s, timeout_s=settle_s * 2
        )
    return done, left
