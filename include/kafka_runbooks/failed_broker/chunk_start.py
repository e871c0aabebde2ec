"""Starting one chunk: decided from what the cluster holds now, then throttled, then submitted.

Before anything is set or submitted: stop if a failed broker came back, refuse while a
reassignment this run did not start is in flight, refuse a drain's chunk whose partitions changed
since the approved plan (:func:`stale_moves`), then sort each partition into skipped, adopted (in
flight to exactly the plan's target: a task killed after submitting) or to submit. The submission's
intent is recorded before AlterPartitionReassignments goes out, and Airflow is asked right before
it whether this try still runs.
"""

from __future__ import annotations

import logging
from typing import Any

from kafka_runbooks.failed_broker.chunk_state import (
    DONE,
    MOVING,
    ChunkState,
    ChunkWork,
    ExecState,
    ReassignError,
    ReassignStopped,
    key,
    split,
    target_of,
)
from kafka_runbooks.failed_broker.chunk_throttle import ChunkThrottle


def adopted_origin(
    k: str, inflight: dict[str, list[int]], recorded: dict[str, list[int]], unknown: list[str]
) -> list[int]:
    """The replicas before an adopted move: in their order as this run recorded them before it
    submitted, else the in-flight replicas minus those being added, whose ORDER is not known (the
    controller lists the target's first): then ``k`` is added to ``unknown``."""
    kept = [b for b in inflight["replicas"] if b not in inflight["adding"]]
    if k in recorded and sorted(recorded[k]) == sorted(kept):
        return list(recorded[k])
    unknown.append(k)
    return kept


def stale_moves(chunk: ChunkState, partitions: dict[str, Any], inflight: dict[str, dict]) -> dict[str, str]:
    """The chunk's partitions that someone else changed after the plan was made (and approved):
    ``{key: what they hold now and what the plan moves them from}``.

    A partition is as planned when it holds the plan's ``from``, is already on its target, is in
    flight (the foreign check has passed: to exactly the plan's target), or holds its target plus
    replicas of its ``from`` (a finished move whose old replica this broker's metadata still
    lists). Anything else is not what the approval was for. Gone partitions are skipped as before;
    one without a planned ``from`` cannot be told and is not refused."""
    out = {}
    for k, target in chunk.targets.items():
        p, planned = partitions.get(k), chunk.planned_from.get(k)
        if p is None or planned is None or k in inflight:
            continue
        now, to, was = set(p.replicas), set(target), set(planned)
        if now in (was, to) or to < now <= to | was:
            continue
        out[k] = f"replicas now {list(p.replicas)}, the approved plan moves them from {planned} to {target}"
    return out


class ChunkStart(ChunkWork):
    """Starts one chunk (``start``): the checks before it, the sorting of its partitions, its
    throttle (through ``throttles``) and its submission."""

    def __init__(self, throttles: ChunkThrottle, **work: Any) -> None:
        super().__init__(**work)
        self.throttles = throttles

    def start(self, state: ExecState, chunk: ChunkState) -> None:
        """Start one chunk from what the cluster holds now, not from what the plan assumed: a killed
        task, a broker back, a foreign reassignment or a partition already moved are all decided
        afresh here, before any throttle is set or anything submitted (in that order)."""
        live, partitions, inflight = self._cluster(list(chunk.targets))
        recorded = chunk.origin  # what a killed task recorded before it submitted: the order kept
        chunk.moving, chunk.origin, chunk.skipped = [], {}, {}  # not started: decide afresh
        chunk.origin_order_unknown = []
        self._stop_if_failed_back(state, chunk, live)
        self._refuse_foreign(state, chunk, inflight)
        if state.drain:
            self._refuse_stale(chunk, partitions, inflight)
        submit = self._sort_partitions(state, chunk, live, partitions, inflight, recorded)
        if chunk.skipped:
            self._record(
                "drop from the chunk",
                "nothing moves twice: these partitions are already where the plan wants them, or "
                "changed since the plan",
                subject=f"chunk {chunk.index}",
                observed={"skipped": chunk.skipped},
            )
        if not submit and not chunk.moving:
            chunk.status = DONE
            chunk.finished_ms = int(self.clock() * 1000)
            self.checkpoint(state)
            self._record("chunk done", "nothing left to move in it", subject=f"chunk {chunk.index}")
            return
        if submit:
            self._require_answering(chunk, submit, partitions)
        self.throttles.set_throttle(state, chunk, live)
        if submit:
            self._submit(state, chunk, submit, partitions)
        chunk.status = MOVING
        chunk.started_ms = chunk.started_ms or int(self.clock() * 1000)
        self.checkpoint(state)

    def _stop_if_failed_back(self, state: ExecState, chunk: ChunkState, live: set[int]) -> None:
        """A failed broker that is available again needs none of its replicas moved: stop before the
        chunk (recorded first, so a resumed run stops too). A drain's brokers are live on purpose."""
        back = [] if state.drain else [b for b in state.failed_brokers if b in live]
        if not back:
            return
        state.stopped = f"failed broker(s) {back} came back before chunk {chunk.index}"
        self.checkpoint(state)
        self._record(
            "stop before the next chunk",
            f"broker(s) {back} are available again: their replicas need not move any more; "
            f"chunks {chunk.index}..{state.chunks[-1].index} are not started (run the runbook again "
            "if the broker fails again)",
            subject=f"chunk {chunk.index}",
            observed={"live": sorted(live)},
            level=logging.WARNING,
        )
        raise ReassignStopped(state.stopped)

    def _refuse_foreign(self, state: ExecState, chunk: ChunkState, inflight: dict[str, dict]) -> None:
        """Refuse while a reassignment this run did not start is in flight: two at once would fight
        over the same brokers. Ours are this chunk's targets or what the run already submitted."""
        ours = state.in_flight_targets()
        foreign = {
            k: v
            for k, v in inflight.items()
            if not (
                (k in chunk.targets and target_of(v) == set(chunk.targets[k]))
                or (k in ours and target_of(v) == set(ours[k]))
            )
        }
        if not foreign:
            return
        shown = dict(list(foreign.items())[:20])
        self._record(
            "refuse",
            f"{len(foreign)} reassignment(s) this run did not start are in flight; two reassignments "
            "at once would fight over the same brokers. Let them finish or cancel them first",
            subject=f"chunk {chunk.index}",
            observed={"foreign": shown},
            level=logging.ERROR,
        )
        raise ReassignError(f"reassignments not started by this run are in flight: {shown}")

    def _refuse_stale(self, chunk: ChunkState, partitions: dict, inflight: dict[str, dict]) -> None:
        """A planned operation (a drain: decommission, rebalance) refuses a chunk whose partitions
        someone else changed after the gate (``stale_moves``), before any throttle or submission:
        its moves were approved from replicas the cluster no longer holds, and submitting the
        target would undo the other change. The heal keeps its own rule (a partition without a
        failed broker is skipped): there the target only replaces the dead broker."""
        stale = stale_moves(chunk, partitions, inflight)
        if not stale:
            return
        shown = dict(list(stale.items())[:20])
        self._record(
            "refuse: the plan is stale",
            f"{len(stale)} partition(s) of chunk {chunk.index} changed since the plan was approved; nothing "
            "of the chunk is submitted. Plan again (a new run plans from what the cluster holds now), or put "
            "them back and clear the task",
            subject=f"chunk {chunk.index}",
            observed={"stale": shown},
            level=logging.ERROR,
        )
        raise ReassignError(f"the plan is stale: {shown}")

    def _sort_partitions(
        self,
        state: ExecState,
        chunk: ChunkState,
        live: set[int],
        partitions: dict,
        inflight: dict[str, dict],
        recorded: dict[str, list[int]],
    ) -> dict[str, list[int]]:
        """Each partition of the chunk is skipped, adopted (already moving to the plan's target) or to
        be submitted; returns those to submit. Nothing moves twice, and nothing moves onto a broker
        that is not available."""
        submit: dict[str, list[int]] = {}
        for k, target in chunk.targets.items():
            p = partitions.get(k)
            if p is None:
                chunk.skipped[k] = "the topic or partition no longer exists"
            elif k in inflight:
                chunk.moving.append(k)
                chunk.origin[k] = adopted_origin(k, inflight[k], recorded, chunk.origin_order_unknown)
                self._record(
                    "adopt",
                    f"{k} is already being reassigned to exactly the plan's target {target} (a task killed "
                    "after submitting it): wait for it instead of submitting again",
                    subject=f"chunk {chunk.index}",
                )
            elif set(p.replicas) == set(target):
                chunk.skipped[k] = f"already on its target replicas {list(p.replicas)}"
            elif (
                set(target) < set(p.replicas)
                and set(p.replicas) - set(target) <= set(state.failed_brokers)
                and set(p.replicas) != set(chunk.planned_from.get(k, ()))
            ):
                # the controller finished it a moment ago; this broker's metadata still lists the old
                # replica (a partition still on exactly its planned ``from`` is a lowering not yet
                # submitted: it is submitted below)
                chunk.moving.append(k)
                chunk.origin[k] = [b for b in p.replicas if b in state.failed_brokers or b in target]
            elif not set(state.failed_brokers) & set(p.replicas):
                chunk.skipped[k] = f"changed since the plan: replicas now {list(p.replicas)}, none failed"
            else:
                missing = [b for b in target if b not in live and b not in p.replicas]
                if missing:
                    raise ReassignError(f"{k}: target broker(s) {missing} are not available")
                submit[k] = target
                chunk.origin[k] = list(p.replicas)
        return submit

    def _require_answering(self, chunk: ChunkState, submit: dict[str, list[int]], partitions) -> None:
        """Before any throttle or submission: each broker that will receive a replica answers a
        request on its own listener, and a removal that adds no replica keeps only replicas in the
        ISR that answer. A broker killed a moment ago stays registered, unfenced and in its ISRs
        until its session times out: new replicas on it would never copy (the chunk would wait
        under its throttle), and the controller would complete a removal at once, leaving the
        partition on a dead replica. Nothing is set or submitted otherwise."""
        receivers = {b for k, t in submit.items() for b in t if b not in partitions[k].replicas}
        removals = {k: t for k, t in submit.items() if set(t) < set(partitions[k].replicas)}
        kept = {b for t in removals.values() for b in t}
        answers = {b: self.admin.broker_answers(b) for b in sorted(receivers | kept)}
        silent = {b: why for b, why in answers.items() if why is not None}
        lagging = {k: [b for b in t if b not in partitions[k].isr] for k, t in removals.items()}
        lagging = {k: v for k, v in lagging.items() if v}
        if not silent and not lagging:
            return
        self._record(
            "refuse the chunk",
            "nothing set, nothing submitted: a receiver does not answer, or a removal would keep a replica "
            "out of the ISR or not answering",
            level=logging.ERROR,
            subject=f"chunk {chunk.index}",
            observed={"not_answering": silent, "kept_out_of_isr": lagging},
        )
        raise ReassignError(
            f"chunk {chunk.index} not started: "
            + "; ".join(
                [f"broker {b} does not answer itself ({why})" for b, why in silent.items()]
                + [f"{k}: kept replica(s) {v} not in the ISR" for k, v in lagging.items()]
            )
        )

    def _submit(self, state, chunk, submit, partitions) -> None:
        pairs = {split(k): v for k, v in submit.items()}
        # Record the intent first: if the task dies mid-request, the next step adopts what got in.
        adopted = bool(chunk.moving)
        chunk.moving.extend(submit)
        if not adopted:  # new replicas start empty: the rate counts from this submission
            chunk.copied_at_start = 0
            chunk.started_ms = int(self.clock() * 1000)
        self.checkpoint(state)
        self._require_running(f"AlterPartitionReassignments for {len(submit)} partition(s)", chunk)
        errors = {key(*tp): e for tp, e in self.admin.alter_partition_reassignments(pairs).items() if e}
        self._record(
            "submit" if not errors else "submit (partly refused)",
            "every partition checked: the failed broker is still named, the receivers are available, "
            "no foreign reassignment is in flight",
            subject=f"chunk {chunk.index}",
            observed={
                "partitions": len(submit),
                "bytes": sum(chunk.bytes.get(k, 0) for k in submit),
                "moves": {
                    k: {"from": list(partitions[k].replicas), "to": v} for k, v in list(submit.items())[:50]
                },
                "errors": errors,
            },
            action=f"AlterPartitionReassignments for {len(submit)} partition(s)",
        )
        if errors:
            raise ReassignError(f"the controller refused the reassignment of {errors}")
