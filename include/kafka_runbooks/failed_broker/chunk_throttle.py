"""The run's one replication throttle: set for each chunk that starts, taken off once no chunk moves.

The throttle items are recorded in the state before they are set (whoever cleans up after a kill
knows what to take off), and while other chunks move, only what the starting chunk adds is set, so
the brokers' previous rates stay the ones found before the run's own. A process whose claim was
taken over takes nothing off: the checkpoint before the removal fails first.
"""

from __future__ import annotations

import dataclasses

from kafka_runbooks.failed_broker import throttle
from kafka_runbooks.failed_broker.chunk_state import ChunkState, ChunkWork, ExecState, split


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


class ChunkThrottle(ChunkWork):
    """Sets the throttle of a starting chunk (after Airflow says this try still runs) and takes the
    run's throttle off."""

    def set_throttle(self, state: ExecState, chunk: ChunkState, live: set[int]) -> None:
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
        """Take the run's throttle off; what could not be removed (a broker not live or not answering
        itself) stays in the state, and only that, for the next cleanup and the read-back; returned."""
        if state.throttle is None:
            return {}
        self.checkpoint(state)  # still ours? a superseded process takes nothing off: the claimant does
        left = throttle.remove(self.admin, state.throttle, live=live, logger=self.log)
        state.throttle = throttle.remaining(state.throttle, left)  # a silent broker's, until it answers
        self.checkpoint(state)
        return left
