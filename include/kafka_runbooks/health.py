"""Turning the cluster-health report (written by ``spark_jobs/cluster_health.py``) into findings."""

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
