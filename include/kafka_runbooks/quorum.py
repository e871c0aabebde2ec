"""The KRaft quorum in the health report: leader, voters with their lag, observers, and whether
the quorum has a spare voter.

Everything is read from one DescribeQuorum answer, in its own terms: a voter's lag in offsets is
the leader's log end offset minus the voter's, and its last-caught-up age is measured on the
LEADER's clock (the leader's own entry in the same answer is "now"), never against the worker's.

A voter is caught up when the leader saw it caught up within ``max_lag_ms`` (Kafka's own notion:
``lastCaughtUpTimestamp``); one whose state cannot be read (no caught-up time, or an answer
without the leader's own time) is "unknown" and never counted as caught up. The quorum has a
spare when more voters are caught up than a majority needs: with 3 voters and one gone, the
next failure stops every metadata change.
"""

from __future__ import annotations

from typing import Any

from kafka_runbooks.model import Quorum, QuorumMember

CAUGHT_UP = "caught up"
NOT_CAUGHT_UP = "not caught up"
UNKNOWN = "unknown"
MAX_LAG_MS = 10_000  # as the rolling restart's caught-up check


def majority(voters: int) -> int:
    """Votes a Raft quorum of ``voters`` needs to commit or elect: more than half."""
    return voters // 2 + 1


def voter_state(quorum: Quorum, node_id: int, max_lag_ms: int = MAX_LAG_MS) -> str:
    """Caught up, not caught up, or unknown (never guessed caught up)."""
    lag = quorum.lag_ms(node_id)
    if lag is None:
        return UNKNOWN
    return CAUGHT_UP if lag <= max_lag_ms else NOT_CAUGHT_UP


def _member(quorum: Quorum, m: QuorumMember, leader_end: int | None, now: int | None) -> dict[str, Any]:
    """One voter's or observer's offsets and times, relative to the leader's own entry."""
    end = m.log_end_offset if m.log_end_offset >= 0 else None
    return {
        "node_id": m.node_id,
        "host": quorum.hosts.get(m.node_id),
        "log_end_offset": end,
        "lag_offsets": None if leader_end is None or end is None else max(0, leader_end - end),
        "last_fetch_ms_ago": None
        if now is None or m.last_fetch_ms is None
        else max(0, now - m.last_fetch_ms),
    }


def spare(caught_up: int, unknown: int, voters: int) -> bool | None:
    """True: more voters caught up than a majority needs; False: not even if every unknown voter
    were caught up; None: it depends on voters whose state is unknown."""
    if caught_up > majority(voters):
        return True
    if caught_up + unknown <= majority(voters):
        return False
    return None


def quorum_report(
    quorum: Quorum | None, error: str | None = None, max_lag_ms: int = MAX_LAG_MS
) -> dict[str, Any]:
    """The report's quorum section (JSON-ready). ``quorum`` None: DescribeQuorum could not be
    read, and every answer in the section is unknown (``error`` says why)."""
    if quorum is None:
        return {"state": UNKNOWN, "error": error or "DescribeQuorum not read", "has_spare": None}
    leader = quorum.leader
    leader_end = leader.log_end_offset if leader and leader.log_end_offset >= 0 else None
    now = quorum.leader_now_ms
    voters = []
    for v in quorum.voters:
        row = _member(quorum, v, leader_end, now)
        row["leader"] = v.node_id == quorum.leader_id
        row["caught_up_ms_ago"] = quorum.lag_ms(v.node_id)
        row["state"] = voter_state(quorum, v.node_id, max_lag_ms)
        # KIP-853 (DescribeQuorum v2): what remove-controller needs to name a dead voter; None before v2
        row["directory_id"] = v.directory_id
        voters.append(row)
    caught_up = [v["node_id"] for v in voters if v["state"] == CAUGHT_UP]
    unknown = [v["node_id"] for v in voters if v["state"] == UNKNOWN]
    return {
        "leader_id": quorum.leader_id if quorum.leader_id >= 0 else None,
        "leader_epoch": quorum.leader_epoch,
        "high_watermark": quorum.high_watermark,
        "max_lag_ms": max_lag_ms,
        "voters": voters,
        "observers": [_member(quorum, o, leader_end, now) for o in quorum.observers],
        "majority": majority(len(voters)),
        "caught_up_voters": caught_up,
        "not_caught_up_voters": [v["node_id"] for v in voters if v["state"] == NOT_CAUGHT_UP],
        "unknown_voters": unknown,
        "has_spare": spare(len(caught_up), len(unknown), len(voters)),
    }
