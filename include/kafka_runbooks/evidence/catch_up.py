"""Is this KRaft voter (or observer) caught up now? One DescribeQuorum answer, the leader's clock.

Kafka's leader fills every timestamp of its DescribeQuorum answer with its own clock, and its
own entry with "now": the only clock both ends of an age are on. A member is **caught up** when,
in the same answer, the leader saw it fetch and saw it caught up (its fetch offset at the
leader's log end) within ``controller.quorum.fetch.timeout.ms``, the time after which Kafka
itself gives up on a silent voter. A member whose last fetch is older is **not caught up**,
whatever its ``lastCaughtUpTimestamp`` says (a voter killed 6 s ago keeps a caught-up time
6 s old). A member without either time, or an answer without the leader's own entry, is
**unknown**: never counted as caught up. The leader itself answers, so it is caught up.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafka_runbooks.evidence.clock import Stamp, quorum_leader_clock
from kafka_runbooks.model import Quorum, QuorumMember

CAUGHT_UP = "caught up"
NOT_CAUGHT_UP = "not caught up"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class CatchUp:
    """One member's catch-up, judged on one answer."""

    node_id: int
    state: str
    why: str
    fetch_ms_ago: int | None = None  # by the leader's clock; None: unknown
    caught_up_ms_ago: int | None = None
    log_end_offset: int | None = None
    limit_ms: int | None = None  # the cluster's controller.quorum.fetch.timeout.ms judged by

    @property
    def fetching(self) -> bool | None:
        """Whether the leader saw it fetch within the limit; None: unknown (no time, or no limit)."""
        if self.fetch_ms_ago is None or self.limit_ms is None:
            return None
        return self.fetch_ms_ago <= self.limit_ms

    @property
    def silent(self) -> bool:
        """Judged not fetching: no fetch within the limit (an unknown fetch is not "silent")."""
        return self.fetching is False

    @property
    def caught_up(self) -> bool:
        """Only a judged "caught up" counts (unknown never does)."""
        return self.state == CAUGHT_UP

    def as_dict(self) -> dict:
        """JSON-ready, for decision records and reports."""
        return dict(self.__dict__)


class QuorumView:
    """One DescribeQuorum answer, judged with the cluster's fetch timeout."""

    def __init__(self, quorum: Quorum, fetch_timeout_ms: int | None = None) -> None:
        self.quorum = quorum
        # the cluster's own limit, read beside the answer by the admin facade unless given
        self.fetch_timeout_ms = fetch_timeout_ms if fetch_timeout_ms is not None else quorum.fetch_timeout_ms

    @property
    def has_leader(self) -> bool:
        """Whether the answer names a leader whose own entry it carries."""
        return self.quorum.leader_id >= 0 and self._leader_entry() is not None

    def _leader_entry(self) -> QuorumMember | None:
        return next((v for v in self.quorum.voters if v.node_id == self.quorum.leader_id), None)

    @property
    def now(self) -> Stamp:
        """The leader's "now" in this answer (its own entry's last fetch), on its clock."""
        me = self._leader_entry()
        ms = (
            None
            if me is None
            else (me.last_fetch_ms if me.last_fetch_ms is not None else me.last_caught_up_ms)
        )
        return Stamp(ms, quorum_leader_clock(self.quorum.leader_id))

    def _age(self, ms: int | None) -> int | None:
        now = self.now.ms
        return None if now is None or ms is None else max(0, now - ms)

    def judge(self, member: QuorumMember) -> CatchUp:
        """The member's catch-up in this answer (see the module's rule)."""
        end = member.log_end_offset if member.log_end_offset >= 0 else None
        if member.node_id == self.quorum.leader_id:
            leading = "it leads the quorum (its own answer)"
            return CatchUp(member.node_id, CAUGHT_UP, leading, 0, 0, end, self.fetch_timeout_ms)
        fetch, caught = self._age(member.last_fetch_ms), self._age(member.last_caught_up_ms)
        limit = self.fetch_timeout_ms
        if limit is None:
            why = "controller.quorum.fetch.timeout.ms was not read from the cluster"
            return CatchUp(member.node_id, UNKNOWN, why, fetch, caught, end, limit)
        if self.now.ms is None:
            return CatchUp(
                member.node_id, UNKNOWN, "the answer has no leader's time", fetch, caught, end, limit
            )
        if fetch is None or caught is None:
            why = "the leader reports no " + ("fetch" if fetch is None else "caught-up") + " time for it"
            return CatchUp(member.node_id, UNKNOWN, why, fetch, caught, end, limit)
        if fetch > limit:
            why = (
                f"no fetch for {fetch} ms by the leader's clock (controller.quorum.fetch.timeout.ms={limit})"
            )
            return CatchUp(member.node_id, NOT_CAUGHT_UP, why, fetch, caught, end, limit)
        if caught > limit:
            why = f"fetching, but last caught up {caught} ms ago by the leader's clock (limit {limit} ms)"
            return CatchUp(member.node_id, NOT_CAUGHT_UP, why, fetch, caught, end, limit)
        why = f"fetched {fetch} ms and caught up {caught} ms ago by the leader's clock (limit {limit} ms)"
        return CatchUp(member.node_id, CAUGHT_UP, why, fetch, caught, end, limit)

    def voter(self, node_id: int) -> CatchUp | None:
        """A voter's catch-up; None when ``node_id`` is not a voter."""
        member = next((v for v in self.quorum.voters if v.node_id == node_id), None)
        return None if member is None else self.judge(member)

    def observer(self, node_id: int) -> CatchUp | None:
        """An observer's catch-up (a broker, or a controller that does not vote); None if not one."""
        member = next((o for o in self.quorum.observers if o.node_id == node_id), None)
        return None if member is None else self.judge(member)

    def voters(self) -> dict[int, CatchUp]:
        """Every voter's catch-up, by node id."""
        return {v.node_id: self.judge(v) for v in sorted(self.quorum.voters, key=lambda v: v.node_id)}

    def caught_up_voters(self) -> set[int]:
        """The voters judged caught up (none without a leader)."""
        if not self.has_leader:
            return set()
        return {n for n, c in self.voters().items() if c.caught_up}

    def unknown_voters(self) -> tuple[int, ...]:
        """Voters whose catch-up this answer cannot tell."""
        return tuple(n for n, c in self.voters().items() if c.state == UNKNOWN)

    def fetching(self, node_id: int) -> CatchUp | None:
        """A broker's (or any member's) metadata fetches: its judgement as voter or observer; None when
        the answer lists it as neither (an observer silent for 5 minutes, or after a leader change)."""
        return self.voter(node_id) or self.observer(node_id)


@dataclass(frozen=True)
class FetchMark:
    """Where one member's metadata fetches stood in one answer: the quorum's leader epoch and its
    last fetch by that leader's clock. Two marks compare only within one epoch: a new leader knows
    only the fetches made to it."""

    epoch: int
    fetch_ms: int | None

    @staticmethod
    def of(quorum: Quorum, node_id: int) -> FetchMark:
        """The mark of ``node_id`` (voter or observer) in this answer; no fetch time: None."""
        member = next((m for m in (*quorum.voters, *quorum.observers) if m.node_id == node_id), None)
        return FetchMark(quorum.leader_epoch, None if member is None else member.last_fetch_ms)

    def fetched_since(self, epoch: int | None, last_fetch_ms: int | None) -> bool:
        """Whether this answer shows a fetch newer than the one seen at (``epoch``, ``last_fetch_ms``):
        the member's process ran in between. No earlier mark (``epoch`` None) or no fetch now: no
        evidence, False. A new leader epoch keeps only fetches made to the new leader, so any fetch
        it reports is newer; in the same epoch, a later time on the same clock is a new fetch."""
        if epoch is None or self.fetch_ms is None:
            return False
        if self.epoch != epoch:
            return True
        return last_fetch_ms is None or self.fetch_ms > last_fetch_ms
