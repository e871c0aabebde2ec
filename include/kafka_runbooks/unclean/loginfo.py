"""Each replica's log end offset and newest written epoch, asked of the broker that hosts it.

Kafka has no GetReplicaLogInfo RPC yet (KIP-966/KIP "unclean recovery tool"). What
Kafka 4.3.1 answers from a replica that is not the leader (checked on the local stack
with logs that diverged through real leader changes):

- ListOffsets(replica_id=-2, LATEST): the replica's own log end offset. Its epoch field
  is the partition's *current* epoch from metadata, the same for every replica.
- ListOffsets(replica_id=-2, MAX_TIMESTAMP): the record with the largest timestamp in
  that replica's own log and the epoch its batch was written in. That is the epoch of
  the replica's last record unless a later leader wrote records with older timestamps
  (clock skew), so it is a lower bound of the last written epoch, exact in practice.
- OffsetsForLeaderEpoch (the exact last epoch) is answered only by the partition's
  leader: NOT_LEADER_OR_FOLLOWER from every replica of an offline partition, whatever
  the replica id sent.

Every broker gets its two requests (a partition may appear once per request) for all
its replicas at once, all brokers in parallel, asked again until every answer is in or
``recovery_duration_ms`` has passed; a broker that has not answered by then is not a
candidate.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.model import Broker, PartitionState

log = logging.getLogger(__name__)

# Per-partition answers worth asking again: the broker is still loading or catching up
# with metadata (UNKNOWN_TOPIC_OR_PARTITION 3, LEADER_NOT_AVAILABLE 5,
# NOT_LEADER_OR_FOLLOWER 6, REPLICA_NOT_AVAILABLE 9, KAFKA_STORAGE_ERROR 56,
# OFFSET_NOT_AVAILABLE 78).
RETRIABLE_CODES = frozenset({3, 5, 6, 9, 56, 78})
RETRY_BACKOFF_S = 0.25


@dataclass(frozen=True)
class ReplicaLogInfo:
    broker_id: int
    topic: str
    partition: int
    log_end_offset: int | None = None
    newest_epoch: int | None = None  # epoch of its newest record by timestamp; None = unknown
    error: str | None = None  # why this replica has no answer (then it is no candidate)

    @property
    def answered(self) -> bool:
        """Whether the replica's broker answered with a log end offset; otherwise the replica is unknown,
        not empty."""
        return self.error is None and self.log_end_offset is not None


@dataclass
class GatherResult:
    infos: dict[tuple[str, int, int], ReplicaLogInfo] = field(default_factory=dict)
    unanswered_brokers: dict[int, str] = field(default_factory=dict)  # broker -> why
    requests_sent: int = 0
    rounds: int = 0
    elapsed_s: float = 0.0

    def for_partition(self, topic: str, partition: int, replicas: tuple[int, ...]) -> list[ReplicaLogInfo]:
        """Each replica's log info in assignment order; a replica never asked is marked ``not asked``
        (unknown)."""
        return [
            self.infos.get((topic, partition, b), ReplicaLogInfo(b, topic, partition, error="not asked"))
            for b in replicas
        ]


def _error_name(code: int) -> str:
    from kafka import errors

    return errors.for_code(code).__name__


def gather(
    admin: ClusterAdmin,
    partitions: list[PartitionState],
    brokers: dict[int, Broker],
    duration_ms: int,
    batch: int | None = None,
) -> GatherResult:
    """Ask every live broker hosting a replica of ``partitions`` for its log end offsets.

    Rounds until every answer is in or ``duration_ms`` has passed: a broker still loading its
    logs answers later, and one that never answers must be named, not taken for an empty log.
    """
    started = time.monotonic()
    deadline = started + duration_ms / 1000
    result = GatherResult()
    pending = _askable(partitions, brokers, result)
    last_error: dict[int, str] = {}
    last_partition_error: dict[tuple[str, int, int], str] = {}
    while pending:
        remaining_ms = int((deadline - time.monotonic()) * 1000)
        if remaining_ms <= 0:
            break
        result.rounds += 1
        answers, sent = admin.list_replica_log_ends(pending, timeout_ms=remaining_ms, batch=batch)
        result.requests_sent += sent
        still: dict[int, list[tuple[str, int]]] = {}
        for broker_id, answer in answers.items():
            if isinstance(answer, Exception):
                last_error[broker_id] = f"{type(answer).__name__}: {answer}"
                still[broker_id] = pending[broker_id]
                continue
            _take_answer(broker_id, answer, pending[broker_id], result, last_partition_error, still)
        pending = still
        if pending:
            time.sleep(max(0.0, min(RETRY_BACKOFF_S, deadline - time.monotonic())))
    _give_up(pending, duration_ms, last_error, last_partition_error, result)
    result.elapsed_s = time.monotonic() - started
    return result


def _askable(
    partitions: list[PartitionState], brokers: dict[int, Broker], result: GatherResult
) -> dict[int, list[tuple[str, int]]]:
    """broker -> the replicas to ask it about. A replica on a broker that is down or fenced is no
    candidate (it cannot lead): it gets its reason in ``result`` and is never asked."""
    pending: dict[int, list[tuple[str, int]]] = {}
    for p in partitions:
        for b in p.replicas:
            broker = brokers.get(b)
            if broker is None or not broker.alive:
                result.infos[(p.topic, p.partition, b)] = ReplicaLogInfo(
                    b, p.topic, p.partition, error="broker not registered (down)"
                )
            elif not broker.available:
                result.infos[(p.topic, p.partition, b)] = ReplicaLogInfo(
                    b, p.topic, p.partition, error="broker fenced: cannot lead"
                )
            else:
                pending.setdefault(b, []).append((p.topic, p.partition))
    return pending


def _take_answer(
    broker_id: int,
    answer: list,
    asked: list[tuple[str, int]],
    result: GatherResult,
    last_partition_error: dict[tuple[str, int, int], str],
    still: dict[int, list[tuple[str, int]]],
) -> None:
    """One broker's answer: offsets into ``result``; a retriable error, or a replica it left out
    of its answer, back into ``still`` to ask again; any other error is final for that replica."""
    seen = set()
    for topic, partition, code, offset, epoch in answer:
        key = (topic, partition)
        seen.add(key)
        if code == 0 and offset is not None and offset >= 0:
            result.infos[(topic, partition, broker_id)] = ReplicaLogInfo(
                broker_id, topic, partition, log_end_offset=offset, newest_epoch=epoch
            )
        elif code in RETRIABLE_CODES:
            last_partition_error[(topic, partition, broker_id)] = _error_name(code)
            still.setdefault(broker_id, []).append(key)
        else:
            result.infos[(topic, partition, broker_id)] = ReplicaLogInfo(
                broker_id, topic, partition, error=_error_name(code) if code else "no offset"
            )
    missing = sorted(set(asked) - seen)
    if missing:
        still.setdefault(broker_id, []).extend(missing)


def _give_up(
    pending: dict[int, list[tuple[str, int]]],
    duration_ms: int,
    last_error: dict[int, str],
    last_partition_error: dict[tuple[str, int, int], str],
    result: GatherResult,
) -> None:
    """What is still unanswered at the deadline stays unknown: each replica gets the last error
    seen for it, and a broker whose requests failed is named among the unanswered brokers."""
    for broker_id, keys in pending.items():
        why = last_error.get(broker_id)
        if why is not None:
            reason = f"no answer within {duration_ms} ms ({why})"
            result.unanswered_brokers[broker_id] = reason
        for topic, partition in keys:
            detail = why or last_partition_error.get((topic, partition, broker_id), "no answer")
            result.infos[(topic, partition, broker_id)] = ReplicaLogInfo(
                broker_id, topic, partition, error=f"no answer within {duration_ms} ms ({detail})"
            )
