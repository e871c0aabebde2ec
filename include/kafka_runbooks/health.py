"""Turning the cluster-health report (written by ``spark_jobs/cluster_health.py``) into findings:
unhealthy partitions by category, and leader or replica imbalance beyond the report's threshold."""

from __future__ import annotations

import logging

from kafka_runbooks import decisions

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
