"""Turning the cluster-health report (written by ``spark_jobs/cluster_health.py``) into findings:
unhealthy partitions by category, and leader or replica imbalance beyond the report's threshold."""

from __future__ import annotations

import logging

from kafka_runbooks import decisions
from kafka_runbooks.log_dirs import OFFLINE
from kafka_runbooks.log_dirs import UNKNOWN as DIRS_UNKNOWN

CATEGORIES = ("offline", "under_min_isr", "at_min_isr", "under_replicated")
WHY = {
    "offline": "no leader: producers and consumers of these partitions are down",
    "under_min_isr": "ISR below min.insync.replicas: acks=all producers are rejected",
    "at_min_isr": "ISR at min.insync.replicas: one more replica lost and acks=all writes stop",
    "under_replicated": "ISR smaller than the replica set: redundancy is reduced",
}


def log_findings(report: dict, logger: logging.Logger | None = None) -> list[decisions.DecisionRecord]:
    """One decision record per category with partitions in it, or one saying all is healthy."""
    counts = report.get("counts", {})
    records = []
    for category in CATEGORIES:
        n = int(counts.get(category, 0))
        if not n:
            continue
        listed = [f"{p['topic']}-{p['partition']}" for p in report.get(category, [])]
        records.append(
            decisions.record(
                "health",
                f"{n} partition(s) {category.replace('_', ' ')}",
                WHY[category],
                observed={"count": n, "partitions": listed[:50], "truncated": len(listed) < n},
                action="reported only (this sweep never changes the cluster)",
                logger=logger,
                level=logging.WARNING,
            )
        )
    records.extend(_imbalance_findings(report, logger))
    records.extend(quorum_findings(report.get("quorum"), logger))
    records.extend(log_dir_findings(report.get("log_dirs"), logger))
    if not records:
        records.append(
            decisions.record(
                "health",
                "healthy",
                "every partition has a leader and a full ISR",
                observed={"partitions": report.get("partitions"), "brokers": len(report.get("brokers", []))},
                logger=logger,
            )
        )
    return records


def _imbalance_findings(report: dict, logger: logging.Logger | None) -> list[decisions.DecisionRecord]:
    """One WARNING record per kind (leaders, replicas) that is out of balance, with the threshold."""
    out = []
    for what, figures in (report.get("imbalance") or {}).items():
        if not figures or not figures.get("imbalanced"):
            continue
        per_broker = {
            b["broker_id"]: b.get("leader_count" if what == "leaders" else "replica_count")
            for b in report.get("brokers", [])
            if b.get("alive") and not b.get("fenced")
        }
        out.append(
            decisions.record(
                "health",
                f"{what} imbalanced: {figures['min']} to {figures['max']} per broker (mean {figures['mean']})",
                f"broker(s) {figures['over']} above {figures['upper']} and {figures['under']} below "
                f"{figures['lower']}: more than {figures['threshold_pct']:g}% from the mean"
                + (
                    "; leadership goes back to the preferred leaders (auto.leader.rebalance.enable or "
                    "kafka-leader-election --election-type PREFERRED)"
                    if what == "leaders"
                    else "; a reassignment evens it out"
                ),
                observed={"per_broker": per_broker, **figures},
                action="reported only (this sweep never changes the cluster)",
                logger=logger,
                level=logging.WARNING,
            )
        )
    return out


def quorum_findings(quorum: dict | None, logger: logging.Logger | None) -> list[decisions.DecisionRecord]:
    """A WARNING when the KRaft quorum has no spare voter, or when that cannot be told."""
    if not quorum or quorum.get("has_spare") is True:
        return []
    if quorum.get("error"):
        summary, why = "quorum unknown", f"DescribeQuorum was not read: {quorum['error']}"
    elif quorum["has_spare"] is False:
        summary = (
            f"quorum has no spare voter: {len(quorum['caught_up_voters'])} of {len(quorum['voters'])} "
            f"caught up, {quorum['majority']} needed"
        )
        why = "one more lost voter stops every metadata change (no leader can be elected)"
    else:
        summary = f"quorum spare unknown: voter(s) {quorum['unknown_voters']} in an unknown state"
        why = "a voter whose state cannot be read is never counted as caught up"
    observed = {
        k: quorum.get(k)
        for k in ("leader_id", "leader_epoch", "caught_up_voters", "not_caught_up_voters", "unknown_voters")
    }
    observed["voters"] = {v["node_id"]: v["state"] for v in quorum.get("voters", [])}
    return [
        decisions.record(
            "health",
            summary,
            why,
            observed=observed,
            action="reported only (this sweep never changes the cluster)",
            logger=logger,
            level=logging.WARNING,
        )
    ]


def log_dir_findings(log_dirs: dict | None, logger: logging.Logger | None) -> list[decisions.DecisionRecord]:
    """A WARNING per broker with offline log directories, and one naming brokers whose
    directories are unknown (never read as "none offline")."""
    out = []
    for b in (log_dirs or {}).get("brokers", []):
        if b["state"] != OFFLINE:
            continue
        out.append(
            decisions.record(
                "health",
                f"broker {b['broker_id']}: {len(b['offline_dirs'])} log dir(s) offline, "
                f"{len(b['partitions'])} replica(s) in them",
                "the broker lives, but its replicas in a failed directory are offline on it: those "
                "partitions run under-replicated (offline where no other replica is in sync)",
                subject=str(b["broker_id"]),
                observed={
                    "offline_dirs": b["offline_dirs"],
                    "partitions": b["partitions"][:50],
                    "truncated": len(b["partitions"]) > 50,
                    "decided_by": b.get("decided_by"),
                    "metadata_offline": b.get("metadata_offline", [])[:50],
                },
                action="reported only (this sweep never changes the cluster)",
                logger=logger,
                level=logging.WARNING,
            )
        )
    unknown = [b for b in (log_dirs or {}).get("brokers", []) if b["state"] == DIRS_UNKNOWN]
    if unknown:
        out.append(
            decisions.record(
                "health",
                f"log dirs unknown on broker(s) {[b['broker_id'] for b in unknown]}",
                "a broker that did not answer DescribeLogDirs may have offline directories",
                observed={str(b["broker_id"]): b.get("reason") for b in unknown},
                action="reported only (this sweep never changes the cluster)",
                logger=logger,
                level=logging.WARNING,
            )
        )
    return out
