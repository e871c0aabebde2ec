"""The KRaft quorum in the health report: leader, voters with their lag, observers, and whether
the quorum has a spare voter.

Everything is read from one DescribeQuorum answer, in its own terms, and judged by the evidence
room (:class:`kafka_runbooks.evidence.QuorumView`): a voter's lag in offsets is the leader's log
end offset minus the voter's; its fetch and caught-up ages are on the LEADER's clock; it is caught
up only while both are within the cluster's ``controller.quorum.fetch.timeout.ms``. One whose state
cannot be read is "unknown" and never counted as caught up. The quorum has a spare when more
voters are caught up than a majority needs: with 3 voters and one gone, the next failure stops
every metadata change.
"""

from __future__ import annotations

from typing import Any

from kafka_runbooks.evidence import CAUGHT_UP, NOT_CAUGHT_UP, UNKNOWN, CatchUp, QuorumView
from kafka_runbooks.model import Quorum

__all__ = ["CAUGHT_UP", "NOT_CAUGHT_UP", "UNKNOWN", "majority", "quorum_report", "spare"]


def majority(voters: int) -> int:
    """Votes a Raft quorum of ``voters`` needs to commit or elect: more than half."""
    return voters // 2 + 1


def _member(quorum: Quorum, judged: CatchUp, leader_end: int | None) -> dict[str, Any]:
    """One voter's or observer's offsets and times, relative to the leader's own entry."""
    end = judged.log_end_offset
    return {
        "node_id": judged.node_id,
        "host": quorum.hosts.get(judged.node_id),
        "log_end_offset": end,
        "lag_offsets": None if leader_end is None or end is None else max(0, leader_end - end),
        "last_fetch_ms_ago": judged.fetch_ms_ago,
    }


def spare(caught_up: int, unknown: int, voters: int) -> bool | None:
    """True: more voters caught up than a majority needs; False: not even if every unknown voter
    were caught up; None: it depends on voters whose state is unknown."""
    if caught_up > majority(voters):
        return True
    if caught_up + unknown <= majority(voters):
        return False
    return None


def quorum_report(quorum: Quorum | None, error: str | None = None) -> dict[str, Any]:
    """The report's quorum section (JSON-ready). ``quorum`` None: DescribeQuorum could not be
    read, and every answer in the section is unknown (``error`` says why)."""
    if quorum is None:
        return {"state": UNKNOWN, "error": error or "DescribeQuorum not read", "has_spare": None}
    view = QuorumView(quorum)
    leader = quorum.leader
    leader_end = leader.log_end_offset if leader and leader.log_end_offset >= 0 else None
    voters = []
    for node_id, judged in view.voters().items():
        row = _member(quorum, judged, leader_end)
        row["leader"] = node_id == quorum.leader_id
        row["caught_up_ms_ago"] = judged.caught_up_ms_ago
        row["state"] = judged.state
        row["why"] = judged.why
        # KIP-853 (DescribeQuorum v2): what remove-controller needs to name a dead voter; None before v2
        row["directory_id"] = next(v.directory_id for v in quorum.voters if v.node_id == node_id)
        voters.append(row)
    caught_up = [v["node_id"] for v in voters if v["state"] == CAUGHT_UP]
    unknown = [v["node_id"] for v in voters if v["state"] == UNKNOWN]
    observers = [view.judge(o) for o in sorted(quorum.observers, key=lambda o: o.node_id)]
    return {
        "leader_id": quorum.leader_id if quorum.leader_id >= 0 else None,
        "leader_epoch": quorum.leader_epoch,
        "high_watermark": quorum.high_watermark,
        "fetch_timeout_ms": view.fetch_timeout_ms,
        "leader_now": view.now.isoformat(),
        "voters": voters,
        "observers": [_member(quorum, o, leader_end) for o in observers],
        "majority": majority(len(voters)),
        "caught_up_voters": caught_up,
        "not_caught_up_voters": [v["node_id"] for v in voters if v["state"] == NOT_CAUGHT_UP],
        "unknown_voters": unknown,
        "has_spare": spare(len(caught_up), len(unknown), len(voters)),
    }
