"""A chunked reassignment's state and what every part of its executor shares.

The state (:class:`ExecState`, one :class:`ChunkState` per chunk, the statuses) is what the run's
state file holds, written after every change so a killed task or a cleared run resumes exactly
there. :class:`ChunkWork` is what the executor's parts (``chunk_start``, ``chunk_throttle``,
``chunk_poll`` and ``execute.ChunkExecutor`` itself) share: the admin client, the checkpoint, the
clock, the decision records and Airflow's task-state check before anything goes to Kafka, so each
part reads, records and asks the same way.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from kafka_runbooks import decisions
from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.errors import RunbookFailed
from kafka_runbooks.evidence.silence import host_clock
from kafka_runbooks.failed_broker import throttle
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
    # moves the run cancelled because a receiver stopped answering (partition -> why), recorded before
    # the cancel; a partition leaves ``moving`` once its cancel is confirmed (chunk_silence)
    cancelled: dict[str, str] = field(default_factory=dict)

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
    # receivers with moves in flight that do not answer themselves: broker -> its spell of silence
    # (evidence.silence.Silence.as_dict), kept across pokes
    silent: dict[str, dict[str, Any]] = field(default_factory=dict)
    # the executor ended the run on a decision (a receiver silent past its limit): final, a new run
    # re-plans on the live brokers
    gave_up: str | None = None
    # the cluster the run was planned on (DescribeCluster's id): a state under the same connection id
    # but of another cluster (rebuilt, repointed) is never stopped, adopted or cleaned up on this one;
    # None: an older state file, counted for any
    cluster_id: str | None = None

    def of_another_cluster(self, cluster_id: str | None) -> bool:
        """Whether this run was planned on a cluster other than ``cluster_id`` (unknown: no)."""
        return bool(self.cluster_id and cluster_id and self.cluster_id != cluster_id)

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
        """Partitions this run submitted and has not seen finish: exactly what it owns (a move it
        decided to cancel is not one a new run may adopt)."""
        return {
            k: c.targets[k]
            for c in self.chunks
            if c.status == MOVING
            for k in c.moving
            if k not in c.cancelled
        }


def target_of(inflight: dict[str, list[int]]) -> set[int]:
    """The replica set a reassignment in flight is heading for (its replicas minus removing)."""
    return set(inflight["replicas"]) - set(inflight["removing"])


class ChunkWork:
    """What every part of the executor shares: the cluster it reads and moves (``admin``), the
    checkpoint it writes after each change, the clock (``clock_name``: whose clock it is, kept with a
    time that outlives the process), the decision records and ``still_current`` (asked right before
    each reassignment or throttle submitted; None: no Airflow to ask)."""

    def __init__(
        self,
        admin: ClusterAdmin,
        logger: logging.Logger | None = None,
        checkpoint: Callable[[ExecState], None] | None = None,
        clock: Callable[[], float] = time.time,
        still_current: StillCurrent | None = None,
        clock_name: str | None = None,
    ) -> None:
        self.admin = admin
        self.still_current = still_current
        self.log = logger
        self.checkpoint = checkpoint or (lambda s: None)
        self.clock = clock
        self.clock_name = clock_name or host_clock()

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
