"""What the roll reads of the KRaft quorum: the roller's quorum readings in a class of their
own, so the state machine only decides.

Every reading is taken from one DescribeQuorum answer and compared only within it: the
leader's own clock for caught-up times, the same metadata log for offsets; never the
worker's clock. A leader the answer does not name stays unknown (None), never a guess.
"""

from __future__ import annotations

from kafka_runbooks.evidence import QuorumView
from kafka_runbooks.model import Quorum


class QuorumReadings:
    """The quorum facts a controller's restart is decided on, through the roll's admin client
    and restart back end."""

    def __init__(self, admin, backend) -> None:
        self.admin = admin
        self.backend = backend

    def describe(self) -> Quorum:
        """One DescribeQuorum answer."""
        return self.admin.describe_quorum()

    def readiness(self, node_id: int, running: bool | None, past_offset: int | None) -> tuple[bool, dict]:
        """A controller is ready when the evidence room judges it caught up in one answer (its fetch
        and catch-up within the cluster's fetch timeout, by the leader's clock) and, after a restart,
        fetching past ``past_offset`` (DescribeQuorum keeps the old process's caught-up time for a
        while after it is gone)."""
        quorum = self.describe()
        member = next((v for v in quorum.voters if v.node_id == node_id), None)
        judged = QuorumView(quorum).voter(node_id)
        caught_up = judged is not None and judged.caught_up
        progressed = past_offset is None or (member is not None and member.log_end_offset > past_offset)
        facts = {
            "process_running": running,
            "caught_up_in_quorum": caught_up,
            "why": judged.why if judged else "not a voter",
            "lag_ms_by_leader_clock": judged.caught_up_ms_ago if judged else None,
            "log_end_offset": None if member is None else member.log_end_offset,
            "must_fetch_past_offset": past_offset,
            "quorum_leader": quorum.leader_id,
        }
        return bool(caught_up and progressed and running is not False), facts

    def voters_down(self, quorum: Quorum, node_id: int) -> frozenset[int]:
        """Other voters whose process the back end says is not running (None: cannot tell, so
        not counted here; the caught-up rule judges them)."""
        return frozenset(
            v.node_id
            for v in quorum.voters
            if v.node_id != node_id and self.backend.is_running(v.node_id) is False
        )

    def leader_log_end(self) -> tuple[int | None, int | None]:
        """(the leader's log end offset, the leader's id); the offset is None when the answer
        names no leader or the leader reports none."""
        quorum = self.describe()
        leader = quorum.leader
        if leader is None or leader.log_end_offset < 0:
            return None, quorum.leader_id
        return leader.log_end_offset, quorum.leader_id

    def leader_id(self) -> int | None:
        """The controller leading the quorum now; None when the answer names none."""
        leader = self.describe().leader_id
        return leader if leader is not None and leader >= 0 else None
