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
- remove the throttle once no chunk of the run moves any more, record, go on;
- after every poll, ask the receivers of the moves still waiting for their own answer: a silent
  one is said every poll, starts no further chunk, and past the cluster's session timeout plus a
  bound ends the run with a decision (its moves cancelled, their order put back: ``chunk_silence``).

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

import json
import logging
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from kafka_runbooks import fence, storage
from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.errors import RunbookFailed
from kafka_runbooks.failed_broker import progress
from kafka_runbooks.failed_broker.chunk_poll import ChunkPoll
from kafka_runbooks.failed_broker.chunk_silence import SILENT_BOUND_S, ReceiverWatch

# The run's state and the start's rules live in chunk_state and chunk_start; their names are still
# imported from here by the glue, the sensor, the runbooks, the bench and the tests (the state file
# holds them by value, never by path).
from kafka_runbooks.failed_broker.chunk_start import ChunkStart, adopted_origin, stale_moves  # noqa: F401
from kafka_runbooks.failed_broker.chunk_state import (  # noqa: F401
    DONE,
    MOVING,
    PENDING,
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
from kafka_runbooks.fence import Superseded  # noqa: F401  (callers catch it from here; not a ReassignError: a superseded process takes nothing off)
from kafka_runbooks.snapshot_contract import SUMMARY_FILE
from kafka_runbooks.storage import Store, StorePath
from kafka_runbooks.task_state import StillCurrent

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


RECEIVER_SLOTS = 2  # the runbook's: one replica copying per receiver and the next one waiting
RECEIVER_CEILING = 5  # Cruise Control's default per-broker concurrency for replica moves


class ChunkExecutor(ChunkWork):
    """Advance an :class:`ExecState` against the cluster (``admin`` is a ClusterAdmin).

    ``receiver_slots`` 0: each chunk starts when the one before is verified (and its throttle
    off); > 0: chunks overlap by :func:`next_to_start`. ``still_current``: asked right before
    each reassignment or throttle submitted (the Airflow task passes one that asks Airflow);
    None: no Airflow to ask (a bench, a test on the cluster alone).

    The step loop and the overlap rule are here; a chunk is started by :class:`ChunkStart`,
    polled by :class:`ChunkPoll`, and the run's throttle kept by :class:`ChunkThrottle`. Their
    checkpoint goes through this executor's, so every part writes under the same fence. The receivers
    of the moves still waiting are watched by :class:`ReceiverWatch` (``silent_bound_s``: how long
    past the cluster's session timeout a silent one is waited for).
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
        silent_bound_s: float = SILENT_BOUND_S,
        clock_name: str | None = None,
    ) -> None:
        super().__init__(admin, logger, checkpoint, clock, still_current, clock_name)
        self.receiver_slots = receiver_slots
        self.receiver_ceiling = receiver_ceiling
        self.progress_file = progress_file  # progress.json for the UI page; None: log only
        work = {
            "admin": admin,
            "logger": logger,
            "checkpoint": lambda s: self.checkpoint(s),
            "clock": clock,
            "still_current": still_current,
            "clock_name": self.clock_name,
        }
        self.throttles = ChunkThrottle(**work)
        self.starter = ChunkStart(self.throttles, **work)
        self.watch = ChunkPoll(self.throttles, progress_every_s, progress_file, **work)
        self.silence = ReceiverWatch(silent_bound_s, **work)

    def remove_throttle(self, state: ExecState, live: set[int] | None = None) -> dict[str, str]:
        """Take the run's throttle off (:meth:`ChunkThrottle.remove_throttle`): the cleanup task and
        a stop take it off through the executor."""
        return self.throttles.remove_throttle(state, live)

    # -- the state machine -----------------------------------------------------------
    def step(self, state: ExecState) -> bool:
        """Advance the run a little; True once every chunk is done. Small steps, each checkpointed,
        so whoever picks the run up after a kill resumes exactly there and nothing moves twice."""
        if state.finished:
            return True
        chunk = next((c for c in state.chunks if c.status != DONE), None)
        if chunk is None:  # done, even when a stop came after the last chunk: nothing was stopped
            return self._finish(state)
        if state.stop_request:  # stopped by an operator: final, a new run plans afresh
            raise ReassignStopped(
                f"{state.stopped}; this run does not go on after a stop: trigger a new run, it plans "
                "from what the cluster holds now"
            )
        try:
            if state.gave_up:  # final: finish a cancel it recorded, go no further
                self.silence.cancel_recorded(state)
                raise ReassignStopped(f"{state.gave_up}; this run does not go on after that decision")
            started = chunk.status == PENDING
            if started:
                self.starter.start(state, chunk)
            live, adding, waiting = self._poll_moving(state)
            self.silence.check(state, waiting)  # a receiver silent past its limit ends the run here
            moving_on = live is not None and (state.drain or not set(state.failed_brokers) & live)
            if not started and moving_on and not state.silent:  # nothing more onto a silent receiver
                self._start_overlapping(state, adding)
        except ReassignError:
            if state.gave_up:
                progress.write(self.progress_file, progress.given_up(state, self.clock()))
            self.remove_throttle(state)
            raise
        return False

    def _finish(self, state: ExecState) -> bool:
        """Every chunk is done: the run finished, and says so. A stop that reached the state after
        the last chunk finished (every stopped chunk read back on its targets) stopped nothing: the
        run's work is complete and its verification runs, so it is recorded as a late stop."""
        late = f"; the stop ({state.stopped}) came after the last chunk: nothing was stopped"
        late = late if state.stop_request and state.stopped else ""
        if late:  # kept as history in the request; the run itself is not a stopped one
            state.stop_request = {**state.stop_request, "after_the_last_chunk": True}
            state.stopped = None
        state.finished = True
        self.checkpoint(state)
        progress.write(self.progress_file, progress.finished(state, self.clock()))
        self._record(
            "every chunk done",
            f"{len(state.chunks)} chunk(s) executed and verified{late}",
            observed={"moved": sum(len(c.moving) for c in state.chunks)},
        )
        return True

    def _poll_moving(self, state: ExecState) -> tuple[set[int] | None, Counter, dict[int, list[str]]]:
        """Poll every moving chunk in order; (live brokers as last read, receiver -> replicas still
        being added to it, chunk index -> its partitions not yet in place). ``live`` is None when
        nothing moved."""
        live, adding, waiting_in = None, Counter(), {}
        for chunk in [c for c in state.chunks if c.status == MOVING]:
            live, waiting = self.watch.poll(state, chunk)
            waiting_in[chunk.index] = waiting
            for k in waiting:
                adding.update(b for b in chunk.targets[k] if b not in chunk.origin.get(k, []))
        return live, adding, waiting_in

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
        self.starter.start(state, chunk)
