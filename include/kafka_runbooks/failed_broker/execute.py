"""Execute a reassignment plan chunk by chunk: a resumable state machine.

Each call of :meth:`ChunkExecutor.step` advances the run a little and returns whether
every chunk is done; the state (which chunk, what was submitted, which throttle configs
are set) lives in a JSON file written after every change, so a killed task, a cleared
run or a new run picks up where the last one stopped and nothing moves twice:

- before a chunk starts: stop if a failed broker came back (the replicas need not move
  any more), refuse if a reassignment this run did not start is in flight, drop every
  partition already where the plan wants it, adopt one already in flight to exactly the
  plan's target (a task killed after submitting), skip one that changed since the plan;
- set the throttle (recorded first), submit the rest, then poll: partitions and bytes
  done, rate, time left; the chunk is done when every partition has its target replicas,
  all of them in the ISR, and no reassignment in flight;
- remove the throttle once no chunk of the run moves any more, record, go on.

Chunks overlap when the executor is given ``receiver_slots`` (the runbook's sensor does): the
next chunk starts as soon as one of its receivers (a broker it adds replicas to) has fewer than
that many of this run's replicas being added to it, not when the whole chunk before it finished.
The throttle is a rate per broker, so a receiver that has nothing left to fetch wastes its share
while the slowest partition of the chunk finishes; the heal's floor is the busiest receiver's
bytes / throttle, and it is only reached when that receiver always has the next replica waiting
(:func:`next_to_start`). The overlapping chunk's throttle items are recorded before they are added
to the run's one throttle, which comes off when the last moving chunk is verified. A failed
broker that came back starts no further chunk; the run stops once the moving ones are done.

Only one process acts for a run at a time, and the state file says which: whoever acts
(a poke of the executing task, the cleanup task, a stop) first **claims** the state, which
bumps its ``fence``, and every later write checks that the fence is still its own
(:func:`claim`, :func:`fenced_checkpoint`). A task Airflow has marked failed or cleared
keeps running until its supervisor notices and kills it (Airflow 3.3.2: the next heartbeat,
then SIGTERM, which only calls ``on_kill``, then SIGKILL 5 s later); its next write fails
with :class:`Superseded` before it sets a throttle or submits anything, because both are
recorded before they are done. Before the newer attempt claims (it is only queued), the
executor's ``still_current`` asks Airflow right before each submission whether this try is still
``running`` (:mod:`kafka_runbooks.task_state`): a cleared try (``restarting``) or one marked
failed submits nothing.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kafka_runbooks import decisions, fence, storage
from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.errors import RunbookFailed
from kafka_runbooks.failed_broker import progress, throttle
from kafka_runbooks.fence import Superseded  # noqa: F401  (callers catch it from here; not a ReassignError: a superseded process takes nothing off)
from kafka_runbooks.snapshot_contract import SUMMARY_FILE
from kafka_runbooks.storage import Store, StorePath
from kafka_runbooks.task_state import StillCurrent, require_running

PENDING, MOVING, DONE = "pending", "moving", "done"


class ReassignError(RunbookFailed):
    """The run cannot go on; the message says why. Throttles are removed before it is raised."""


class ReassignStopped(ReassignError):
    """Stopped on purpose before the next chunk (e.g. a failed broker came back)."""


def key(topic: str, partition: int) -> str:
    """``topic:partition``: one string per partition, so the state file's JSON can key by it."""
    return f"{topic}:{partition}"


def split(k: str) -> tuple[str, int]:
    """The inverse of :func:`key`: (topic, partition) again, for the admin calls that take pairs."""
    topic, _, partition = k.rpartition(":")
    return topic, int(partition)


@dataclass
class ChunkState:
    index: int
    targets: dict[str, list[int]]
    bytes: dict[str, int] = field(default_factory=dict)
    status: str = PENDING
    moving: list[str] = field(default_factory=list)
    origin: dict[str, list[int]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    started_ms: int | None = None
    finished_ms: int | None = None
    copied_at_start: int | None = None
    # in flight before this run first looked (a killed run's submission): the copy rate counts
    # from that look. Its own flag, since nothing may have been copied yet when it was adopted
    adopted: bool = False
    # a stopped chunk's partitions that the cluster showed on their target replicas after the stop
    # (they finished before the cancel reached them): moved, not cancelled
    completed: list[str] = field(default_factory=list)
    # the brokers the chunk adds replicas to (the plan's "to" minus "from"); empty: not known (a
    # state written before they were recorded), and a chunk whose receivers are unknown never
    # overlaps another
    receivers: list[int] = field(default_factory=list)
    # each partition's replicas when it was planned (the plan's "from"): what the approval was for.
    # A drain refuses the chunk when the cluster holds something else (stale_moves); a partition
    # missing here (a state written before they were recorded) cannot be told stale
    planned_from: dict[str, list[int]] = field(default_factory=dict)
    # adopted partitions whose origin is known as a SET only (the in-flight replicas minus those being
    # added, target first): a stop never "restores" a guessed replica order for them
    origin_order_unknown: list[str] = field(default_factory=list)

    @property
    def planned_bytes(self) -> int:
        """Bytes the chunk copies, from the plan's sizes (a partition without a size counts 0)."""
        return sum(self.bytes.get(k, 0) for k in self.targets)


@dataclass
class ExecState:
    """Everything the executor needs to resume: written to the state file after each change."""

    run_id: str
    failed_brokers: list[int]
    throttle_bytes_per_sec: int
    chunks: list[ChunkState]
    throttle: throttle.ThrottleRecord | None = None
    finished: bool = False
    stopped: str | None = None
    stop_request: dict[str, Any] | None = None  # an operator's stop (reassign/stop.py): final
    fence: int = 0  # bumped by every claim: only the latest claimant may write (and act)
    claimed_by: str | None = None
    # after a stop or a failure that moved replicas: whether their preferred leaders were elected
    leaders: str | None = None
    # a decommission: failed_brokers are live brokers being drained, so their being live stops nothing
    drain: bool = False

    def to_json(self) -> str:
        """The execution state as the fenced state file keeps it (read back by :meth:`from_json`)."""
        raw = asdict(self)
        raw["throttle"] = None if self.throttle is None else self.throttle.as_dict()
        return json.dumps(raw, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ExecState:
        """Read the state file written by :meth:`to_json`."""
        raw = json.loads(text)
        raw["chunks"] = [ChunkState(**c) for c in raw["chunks"]]
        if raw.get("throttle") is not None:
            raw["throttle"] = throttle.ThrottleRecord.from_dict(raw["throttle"])
        return cls(**raw)

    def in_flight_targets(self) -> dict[str, list[int]]:
        """Partitions this run submitted and has not seen finish: exactly what it owns."""
        return {k: c.targets[k] for c in self.chunks if c.status == MOVING for k in c.moving}


StateAt = Path | tuple[Store, str]
"""Where a run's state lives: a local file, or a key in the data store (``(store, key)``)."""


def _located(where: StateAt) -> tuple[Store, str]:
    """A local file is a key of the store at its folder: one compare-and-set for both."""
    if isinstance(where, tuple):
        return where
    path = Path(where)
    return storage.store(str(path.parent)), path.name


def load_state(where: StateAt) -> ExecState:
    """The run's state as last written; a missing one fails the run (there is nothing to resume)."""
    store, key = _located(where)
    text = store.read_text(key)
    if text is None:
        raise RunbookFailed(f"no execution state at {store.url_of(key)}")
    return ExecState.from_json(text)


def state_exists(where: StateAt) -> bool:
    """Whether a run has written its state yet: a run that never started has nothing to clean up."""
    store, key = _located(where)
    return store.exists(key)


def save_state(where: StateAt, state: ExecState) -> None:
    """Write the state whole (unfenced: the run's first write, or a test)."""
    store, key = _located(where)
    store.write_text(key, state.to_json())


def claim(where: StateAt, who: str) -> ExecState:
    """Take the run's state over for ``who``: a new fence; every earlier claimant's next write fails."""
    store, key = _located(where)
    text, _ = fence.claim(store, key, who)
    return ExecState.from_json(text)


def fenced_checkpoint(
    where: StateAt, fence_id: int, halted: Callable[[], str | None] = lambda: None
) -> Callable[[ExecState], None]:
    """A checkpoint that writes only while ``fence_id`` is the state's latest claim and nothing
    (``halted``: e.g. the task's on_kill) told this process to stop; else :class:`Superseded`."""
    store, key = _located(where)

    def save(state: ExecState) -> None:
        """Write ``state`` only under this run's fence (else Superseded) and stamp the fence it was written
        with."""
        fence.write_fenced(store, key, fence_id, state.to_json(), halted)
        state.fence = fence_id

    return save


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


def chunks_from_plan_dir(plan_dir: StorePath | Path | str) -> list[ChunkState]:
    """The plan's ordered chunks (kafka-reassign-partitions' JSON) with each move's bytes."""
    plan_dir = storage.locate(plan_dir)
    summary = json.loads((plan_dir / SUMMARY_FILE).read_text())
    moves = summary.get("moves", [])
    sizes = {key(m["topic"], m["partition"]): int(m.get("bytes") or 0) for m in moves}
    adding = {key(m["topic"], m["partition"]): _added(m) for m in moves}
    origins = {key(m["topic"], m["partition"]): [int(b) for b in m["from"]] for m in moves if "from" in m}
    out = []
    for entry in sorted(summary["chunks"], key=lambda c: c["index"]):
        body = json.loads((plan_dir / entry["file"]).read_text())
        targets = {key(p["topic"], p["partition"]): list(p["replicas"]) for p in body["partitions"]}
        out.append(
            ChunkState(
                index=int(entry["index"]),
                targets=targets,
                bytes={k: sizes.get(k, 0) for k in targets},
                receivers=_receivers(targets, adding),
                planned_from={k: origins[k] for k in targets if k in origins},
            )
        )
    return out


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


def _added(move: dict) -> list[int] | None:
    """The brokers one planned move adds a replica to; None when the plan does not say where from."""
    if "from" not in move or "to" not in move:
        return None
    return [int(b) for b in move["to"] if b not in move["from"]]


def _receivers(targets: dict[str, list[int]], adding: dict[str, list[int] | None]) -> list[int]:
    """The brokers a chunk adds replicas to; empty (unknown) when any of its moves lacks its origin."""
    found: set[int] = set()
    for k in targets:
        added = adding.get(k)
        if added is None:
            return []
        found.update(added)
    return sorted(found)


def next_to_start(state: ExecState, adding: Counter, slots: int, ceiling: int) -> ChunkState | None:
    """The chunk to start now, or None: the scheduling rule of the heal.

    The first pending chunk (chunks keep the plan's order: least redundancy left first) starts
    when nothing of the run moves, as always; while others move, only with ``slots`` > 0 and when
    one of its receivers has room: fewer than ``slots`` of this run's replicas being added to it
    (``adding``: receiver -> replicas of the moving chunks not yet in place). With two slots the
    next replica already waits when one finishes, so the busiest receiver never idles between
    polls. A chunk none of whose receivers has room, one that would add to a receiver that
    already has ``ceiling`` replicas coming (the busiest receiver sets the pace: piling more on
    it finishes nothing sooner and leaves more to cancel on a stop), and one whose receivers
    are unknown wait.
    """
    pending = next((c for c in state.chunks if c.status == PENDING), None)
    if pending is None:
        return None
    if not any(c.status == MOVING for c in state.chunks):
        return pending
    if slots <= 0 or not pending.receivers:
        return None
    if any(adding.get(r, 0) >= ceiling for r in pending.receivers):
        return None
    return pending if any(adding.get(r, 0) < slots for r in pending.receivers) else None


def target_of(inflight: dict[str, list[int]]) -> set[int]:
    """The replica set a reassignment in flight is heading for (its replicas minus removing)."""
    return set(inflight["replicas"]) - set(inflight["removing"])


RECEIVER_SLOTS = 2  # the runbook's: one replica copying per receiver and the next one waiting
RECEIVER_CEILING = 5  # Cruise Control's default per-broker concurrency for replica moves


def _throttle_addition(
    current: throttle.ThrottleRecord, wanted: throttle.ThrottleRecord
) -> throttle.ThrottleRecord | None:
    """What ``wanted`` sets that ``current`` does not (None: nothing): new brokers, new items."""
    brokers = {b: {} for b in wanted.brokers if b not in current.brokers}
    topics = {}
    for name, entry in wanted.topics.items():
        have = current.topics.get(name, throttle.TopicThrottle())
        leader = [i for i in entry.leader if i not in have.leader]
        follower = [i for i in entry.follower if i not in have.follower]
        if leader or follower:
            topics[name] = throttle.TopicThrottle(leader, follower)
    if not brokers and not topics:
        return None
    return throttle.ThrottleRecord(rate=current.rate, brokers=brokers, topics=topics)


def _throttle_union(
    current: throttle.ThrottleRecord, addition: throttle.ThrottleRecord
) -> throttle.ThrottleRecord:
    """The run's one throttle record after an overlapping chunk added to it."""
    topics = {n: throttle.TopicThrottle(list(e.leader), list(e.follower)) for n, e in current.topics.items()}
    for name, entry in addition.topics.items():
        have = topics.setdefault(name, throttle.TopicThrottle())
        have.leader = sorted({*have.leader, *entry.leader})
        have.follower = sorted({*have.follower, *entry.follower})
    return dataclasses.replace(
        current, brokers={**current.brokers, **addition.brokers}, topics=dict(sorted(topics.items()))
    )


class ChunkExecutor:
    """Advance an :class:`ExecState` against the cluster (``admin`` is a ClusterAdmin).

    ``receiver_slots`` 0: each chunk starts when the one before is verified (and its throttle
    off); > 0: chunks overlap by :func:`next_to_start`. ``still_current``: asked right before
    each reassignment or throttle submitted (the Airflow task passes one that asks Airflow);
    None: no Airflow to ask (a bench, a test on the cluster alone).
    """

    def __init__(
        self,
        admin: ClusterAdmin,
        logger: logging.Logger | None = None,
        checkpoint: Callable[[ExecState], None] | None = None,
        clock: Callable[[], float] = time.time,
        progress_every_s: float = 10.0,
        progress_file: Path | None = None,
        receiver_slots: int = 0,
        receiver_ceiling: int = RECEIVER_CEILING,
        still_current: StillCurrent | None = None,
    ) -> None:
        self.admin = admin
        self.still_current = still_current
        self.receiver_slots = receiver_slots
        self.receiver_ceiling = receiver_ceiling
        self.progress_file = progress_file  # progress.json for the UI page; None: log only
        self.log = logger
        self.checkpoint = checkpoint or (lambda s: None)
        self.clock = clock
        self.progress_every_s = progress_every_s
        self._last_progress = 0.0

    # -- reads -----------------------------------------------------------------------
    def _cluster(self, keys: list[str]):
        brokers = self.admin.describe_brokers()
        topics = sorted({split(k)[0] for k in keys})
        existing = set(self.admin.list_topics())
        parts = self.admin.describe_partitions([t for t in topics if t in existing])
        partitions = {key(p.topic, p.partition): p for p in parts}
        inflight = {key(t, p): v for (t, p), v in self.admin.list_reassignments().items()}
        live = {b.broker_id for b in brokers.values() if b.available}
        return live, partitions, inflight

    def _record(self, decision: str, reason: str, level=logging.INFO, **kw) -> None:
        decisions.record("execute", decision, reason, logger=self.log, level=level, **kw)

    def _require_running(self, action: str, chunk: ChunkState) -> None:
        """Right before ``action`` goes to Kafka: Airflow must say this try still runs (a cleared
        or failed try that its supervisor has not killed yet submits nothing)."""
        if self.still_current is not None:
            require_running(self.still_current, action, subject=f"chunk {chunk.index}", logger=self.log)

    # -- the state machine -----------------------------------------------------------
    def step(self, state: ExecState) -> bool:
        """Advance the run a little; True once every chunk is done. Small steps, each checkpointed,
        so whoever picks the run up after a kill resumes exactly there and nothing moves twice."""
        if state.finished:
            return True
        if state.stop_request:  # stopped by an operator: final, a new run plans afresh
            raise ReassignStopped(
                f"{state.stopped}; this run does not go on after a stop: trigger a new run, it plans "
                "from what the cluster holds now"
            )
        chunk = next((c for c in state.chunks if c.status != DONE), None)
        if chunk is None:
            state.finished = True
            self.checkpoint(state)
            progress.write(self.progress_file, progress.finished(state, self.clock()))
            self._record(
                "every chunk done",
                f"{len(state.chunks)} chunk(s) executed and verified",
                observed={"moved": sum(len(c.moving) for c in state.chunks)},
            )
            return True
        try:
            started = chunk.status == PENDING
            if started:
                self._start(state, chunk)
            live, adding = self._poll_moving(state)
            if not started and live is not None and (state.drain or not set(state.failed_brokers) & live):
                self._start_overlapping(state, adding)
        except ReassignError:
            self.remove_throttle(state)
            raise
        return False

    def _poll_moving(self, state: ExecState) -> tuple[set[int] | None, Counter]:
        """Poll every moving chunk in order; (live brokers as last read, receiver -> replicas still
        being added to it). ``live`` is None when nothing moved."""
        live, adding = None, Counter()
        for chunk in [c for c in state.chunks if c.status == MOVING]:
            live, waiting = self._poll(state, chunk)
            for k in waiting:
                adding.update(b for b in chunk.targets[k] if b not in chunk.origin.get(k, []))
        return live, adding

    def _start_overlapping(self, state: ExecState, adding: Counter) -> None:
        """Start the next chunk while others move when one of its receivers has room (at most one
        per step: its partitions count in the next poll). A failed broker back starts nothing:
        the run stops when the moving chunks are done (``_start`` says so)."""
        chunk = next_to_start(state, adding, self.receiver_slots, self.receiver_ceiling)
        if chunk is None or not any(c.status == MOVING for c in state.chunks):
            return
        self._record(
            "start the next chunk",
            f"a receiver of chunk {chunk.index} has room: fewer than {self.receiver_slots} of this run's "
            "replicas are being added to it, so it would idle under its throttle until the chunks "
            "before finish",
            subject=f"chunk {chunk.index}",
            observed={"adding_per_receiver": dict(sorted(adding.items())), "receivers": chunk.receivers},
        )
        self._start(state, chunk)

    def _start(self, state: ExecState, chunk: ChunkState) -> None:
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
        self._set_throttle(state, chunk, live)
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

    def _set_throttle(self, state: ExecState, chunk: ChunkState, live: set[int]) -> None:
        """Throttle the chunk's moves. While other chunks move, the run's record grows by what this
        chunk adds (brokers not yet rated, replicas not yet listed): recorded whole, then only the
        addition is set, so the brokers' previous rates stay the ones found before the run's own."""
        moves = [
            (*split(k), tuple(chunk.origin.get(k, [])), tuple(chunk.targets[k]))
            for k in chunk.moving + [k for k in chunk.targets if k in chunk.origin and k not in chunk.moving]
        ]
        wanted = throttle.throttle_plan(moves, live, state.throttle_bytes_per_sec)
        addition = wanted if state.throttle is None else _throttle_addition(state.throttle, wanted)
        if addition is None:
            return
        throttle.read_previous_rates(self.admin, addition)
        state.throttle = addition if state.throttle is None else _throttle_union(state.throttle, addition)
        self.checkpoint(state)  # written before it is set: whoever cleans up knows what to take off
        self._require_running("set the replication throttle", chunk)
        throttle.apply(self.admin, addition, logger=self.log)

    def remove_throttle(self, state: ExecState, live: set[int] | None = None) -> dict[str, str]:
        """Take the run's throttle off; what could not be removed stays in the state (for the next
        cleanup and the read-back) and is returned."""
        if state.throttle is None:
            return {}
        self.checkpoint(state)  # still ours? a superseded process takes nothing off: the claimant does
        left = throttle.remove(self.admin, state.throttle, live=live, logger=self.log)
        state.throttle = None if not left else dataclasses.replace(state.throttle, left=left)
        self.checkpoint(state)
        return left

    def _poll(self, state: ExecState, chunk: ChunkState) -> tuple[set[int], list[str]]:
        """Check one moving chunk; (live brokers, its partitions not yet in place). Verified: done,
        and the throttle comes off when no other chunk of the run still moves."""
        live, partitions, inflight = self._cluster(chunk.moving)
        subject = f"chunk {chunk.index}"
        if state.throttle is None and any(k in inflight for k in chunk.moving):
            # cleaned up after a kill while the copy went on: throttle it again
            self._set_throttle(state, chunk, live)
        done, waiting = [], []
        for k in chunk.moving:
            target = set(chunk.targets[k])
            p = partitions.get(k)
            if k in inflight:
                waiting.append(k)
            elif p is None:
                chunk.skipped[k] = "the topic was deleted while it moved"
                done.append(k)
            elif set(p.replicas) != target and target < set(p.replicas):
                waiting.append(k)  # done at the controller; this broker's metadata not yet updated
            elif set(p.replicas) != target:
                raise ReassignError(
                    f"the reassignment of {k} ended with replicas {list(p.replicas)}, not the plan's "
                    f"{chunk.targets[k]} (cancelled by someone else?)"
                )
            elif set(p.isr) != target:
                waiting.append(k)  # replicas in place, the ISR not yet full
            else:
                done.append(k)
        if all(c.status == DONE for c in state.chunks[: state.chunks.index(chunk)]):
            self._progress(state, chunk, done, waiting, live)  # the earliest moving chunk speaks for the run
        if waiting:
            return live, waiting
        self._record(
            "chunk verified",
            "every partition of the chunk has its target replicas, all in the ISR, no reassignment in flight",
            subject=subject,
            observed={"partitions": len(done)},
        )
        if not any(c.status == MOVING and c is not chunk for c in state.chunks):
            left = self.remove_throttle(state, live)
            if left:
                raise ReassignError(f"the throttle could not be removed from {left}")
        chunk.status = DONE
        chunk.finished_ms = int(self.clock() * 1000)
        self.checkpoint(state)
        return live, []

    def _progress(self, state, chunk, done, waiting, live) -> None:
        now = self.clock()
        if waiting and now - self._last_progress < self.progress_every_s:
            return
        self._last_progress = now
        total = sum(chunk.bytes.get(k, 0) for k in chunk.moving)
        copied = sum(chunk.bytes.get(k, 0) for k in done)
        receivers = sorted(
            {b for k in waiting for b in chunk.targets[k] if b not in chunk.origin.get(k, []) and b in live}
        )
        if waiting and receivers:
            sizes, _ = self.admin.describe_log_dirs(receivers)
            got = {(r.broker_id, key(r.topic, r.partition)): r.size_bytes for r in sizes}
            for k in waiting:
                adding = [b for b in chunk.targets[k] if b not in chunk.origin.get(k, [])]
                copied += min(chunk.bytes.get(k, 0), min((got.get((b, k), 0) for b in adding), default=0))
        if chunk.copied_at_start is None:  # adopted after a kill: its bytes were copied before
            chunk.copied_at_start = copied
            chunk.adopted = True
            chunk.started_ms = int(now * 1000)
            self.checkpoint(state)
        figures = progress.measure(state, chunk, done, copied, now)
        progress.write(self.progress_file, figures)
        self._record(
            "progress",
            figures.line(),
            subject=f"chunk {chunk.index}",
            observed={
                **{k: v for k, v in figures.as_dict().items() if k != "line"},
                "chunk_partitions_done": len(done),
                "chunk_partitions": len(chunk.moving),
                "chunk_bytes_done": copied,
                "chunk_bytes": total,
                "waiting": waiting[:20],
            },
        )
