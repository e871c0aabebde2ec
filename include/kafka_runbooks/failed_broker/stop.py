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
- marks the state file stopped (the moving chunk becomes ``stopped``, the request is
  recorded): a stopped state is final. Clearing the task does not resume it, and a new
  run never adopts what was stopped (it is no longer "ours in flight"; anything a failed
  cancel left in flight is refused as foreign until it is cancelled, e.g. by stopping
  again). A new run plans afresh from what the cluster holds.

When no task is executing (worker dead, run killed), the stop DAG does the same itself
from the state files. Either way the result is read back from the cluster: none of the
run's reassignments in flight, none of its throttle configs set.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_runbooks import decisions, storage
from kafka_runbooks.failed_broker import throttle
from kafka_runbooks.failed_broker.execute import MOVING, ExecState, key, split, target_of
from kafka_runbooks.paths import safe_name
from kafka_runbooks.storage import StorePath

if TYPE_CHECKING:
    from kafka_runbooks.admin import ClusterAdmin

STOPPED = "stopped"  # status of a chunk whose reassignments were cancelled by a stop


@dataclass
class StopRequest:
    """An operator's request to stop the reassignment running on one Kafka connection."""

    kafka_conn_id: str
    by: str
    reason: str
    requested_at_ms: int
    request_id: str = ""
    acknowledged: dict[str, int] = field(default_factory=dict)  # run id -> when its task stopped

    @property
    def text(self) -> str:
        return f"stopped by {self.by}: {self.reason}"

    def applies_to(self, kafka_conn_id: str, run_started_ms: int | None) -> bool:
        """Same cluster, and asked while the run was already going: an old request never stops a
        run started after it (the runbook started again on purpose)."""
        return self.kafka_conn_id == kafka_conn_id and (
            run_started_ms is None or self.requested_at_ms >= run_started_ms
        )


def request_path(state_root: StorePath | Path, kafka_conn_id: str) -> StorePath:
    """``reassign/<dag>/stop/<connection>.json`` in the data store: one request per cluster."""
    return storage.locate(state_root) / "stop" / f"{safe_name(kafka_conn_id)}.json"


def write_request(path: StorePath | Path, request: StopRequest) -> None:
    storage.locate(path).write_text(json.dumps(asdict(request), indent=1, sort_keys=True))


def read_request(path: StorePath | Path) -> StopRequest | None:
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
    """Cancel this state's reassignments in flight, take its throttle off, mark it stopped.

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
    # recorded before anything is cancelled: a crash mid-stop leaves a state that is already final
    record = state.throttle.as_dict() if state.throttle else None  # JSON, kept with the stop
    if state.stop_request and state.stop_request.get("throttle_removed") and record is None:
        record = state.stop_request["throttle_removed"]  # an earlier stop took it off: verify that again
    state.stopped = request.text
    state.stop_request = {**asdict(request), "throttle_removed": record}
    for chunk in state.chunks:
        if chunk.status == MOVING:
            chunk.status = STOPPED
    checkpoint(state)
    errors: dict[str, str] = {}
    if cancel:
        answer = admin.alter_partition_reassignments({split(k): None for k in cancel})
        errors = {key(*tp): e for tp, e in answer.items() if e and e != "NoReassignmentInProgressError"}
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
    live = {b.broker_id for b in admin.describe_brokers().values() if b.available}
    left = ChunkExecutor(admin, logger=logger, checkpoint=checkpoint).remove_throttle(state, live)
    return {"cancelled": cancel, "errors": errors, "throttle": record, "throttle_left": left}


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


def verify_stopped(
    admin,
    stopped: dict[str, tuple[ExecState, dict[str, Any] | None]],
    settle_s: float = 5.0,
    timeout_s: float = 60.0,
    sleep=time.sleep,
    clock=time.monotonic,
) -> dict[str, Any]:
    """Read back until none of these runs' reassignments is in flight and none of their throttles
    is set, and still so after ``settle_s``; returns what is left (empty: stopped)."""

    def left() -> dict[str, Any]:
        inflight = {key(t, p): v for (t, p), v in admin.list_reassignments().items()}
        live = {b.broker_id for b in admin.describe_brokers().values() if b.available}
        out: dict[str, Any] = {}
        for run_id, (state, record) in stopped.items():
            moving = sorted(
                k for k, t in owned(state).items() if k in inflight and target_of(inflight[k]) == set(t)
            )
            throttles = our_throttles_left(admin, record, live)
            if moving or throttles:
                out[run_id] = {"in_flight": moving[:50], "throttles": throttles}
        return out

    deadline = clock() + timeout_s
    while True:
        found = left()
        if not found:
            sleep(settle_s)
            found = left()
            if not found:
                return {}
        if clock() >= deadline:
            return found
        sleep(1.0)


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
