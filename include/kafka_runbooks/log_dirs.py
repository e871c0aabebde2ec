"""Offline log directories: which directory of which live broker failed, and which replicas sat in it.

A broker keeps running when one of its log directories fails (an I/O error in it: Kafka marks
the directory offline, KIP-112; in KRaft the controller learns it, KIP-858), and every replica
in that directory goes offline on that broker only. The failed-broker sweep never fires (the
broker is alive), so the health sweep reads each live broker's DescribeLogDirs answer, where a
failed directory answers with an error code (KAFKA_STORAGE_ERROR) and lists no partitions.

Which replicas are offline on a failed directory is the evidence room's rule
(:mod:`kafka_runbooks.evidence.replica_dirs`), the same for the health report, the failed-broker
sweep and ``kafka_log_dir_failure``: the broker's replicas (metadata) whose current log (a future
log of an intra-broker move does not count) none of its online directories holds, and those the
controller's offline replicas name, even where the broker's answer lists them (the record says
both). With one failed directory they are its replicas; with several they sat in one of them. A
broker that did not answer stays "unknown", never "no offline directories".
"""

from __future__ import annotations

from typing import Any

from kafka_runbooks.evidence import judge_replica_dirs
from kafka_runbooks.model import ClusterState, LogDir, LogDirReplica

KAFKA_STORAGE_ERROR = 56
ERROR_NAMES = {KAFKA_STORAGE_ERROR: "KAFKA_STORAGE_ERROR", 57: "LOG_DIR_NOT_FOUND"}

OK = "ok"
OFFLINE = "offline dirs"
UNKNOWN = "unknown"
MAX_DISAGREEMENTS = 50
DECIDED_BY = (
    "the broker's replicas in the metadata whose current log (not a future one) none of its online "
    "directories holds, or that the controller's offline replicas name (the cluster's own word where "
    "the two disagree: kafka_runbooks.evidence.replica_dirs)"
)


def parse_describe_log_dirs(broker_id: int, results: list[dict[str, Any]]) -> tuple[LogDir, ...]:
    """One broker's DescribeLogDirs results (kafka-python's ``to_dict`` of each result) as LogDirs.

    Sizes are absent before v4 and -1 where the broker cannot tell: both are None here."""

    def size(value: Any) -> int | None:
        """A replica's size in bytes, or None when the broker reported none or a negative one (unknown,
        never 0)."""
        return value if isinstance(value, int) and value >= 0 else None

    return tuple(
        LogDir(
            broker_id=broker_id,
            path=d["log_dir"],
            error_code=d["error_code"],
            replicas=tuple(
                LogDirReplica(
                    broker_id=broker_id,
                    topic=t["name"],
                    partition=p["partition_index"],
                    size_bytes=p["partition_size"],
                    log_dir=d["log_dir"],
                    offset_lag=p.get("offset_lag", 0),
                    is_future=bool(p.get("is_future_key", False)),
                )
                for t in d.get("topics") or ()
                for p in t.get("partitions") or ()
            ),
            total_bytes=size(d.get("total_bytes")),
            usable_bytes=size(d.get("usable_bytes")),
        )
        for d in results
    )


def error_name(code: int) -> str:
    """Kafka's name of an error code (e.g. KAFKA_STORAGE_ERROR), or ``error code N`` for one not listed."""
    return ERROR_NAMES.get(code, f"error code {code}")


def broker_log_dirs(state: ClusterState, broker_id: int) -> dict[str, Any]:
    """One broker's directories: "ok", "offline dirs" (with the replicas offline on them, by the
    evidence room's rule) or "unknown" (it was not asked, or did not answer), with the reason."""
    broker = state.brokers.get(broker_id)
    dirs = state.log_dir_states.get(broker_id)
    judged = judge_replica_dirs(state, broker_id)
    if dirs is None or judged is None:
        reason = state.log_dir_errors.get(broker_id) or (
            "not registered: not asked" if broker is None or not broker.alive else "log dirs not read"
        )
        return {"broker_id": broker_id, "state": UNKNOWN, "reason": reason}
    offline = [d for d in dirs if not d.online]
    out: dict[str, Any] = {
        "broker_id": broker_id,
        "state": OFFLINE if offline or judged.offline else OK,
        "online_dirs": sorted(d.path for d in dirs if d.online),
        "offline_dirs": [{"path": d.path, "error": error_name(d.error_code)} for d in offline],
        "partitions": judged.offline_names,
        # the controller's view (KIP-858): replicas the metadata names offline on this broker
        "metadata_offline": list(judged.named_by_controller),
        "disagreements": judged.facts(MAX_DISAGREEMENTS)["disagreements"],
    }
    if offline or judged.offline:
        out["decided_by"] = DECIDED_BY + (
            "" if len(offline) < 2 else f" (they sat in one of its {len(offline)} failed directories)"
        )
    return out


def log_dirs_report(state: ClusterState) -> dict[str, Any]:
    """Every broker's directories, and the totals the health report shows."""
    brokers = [broker_log_dirs(state, b) for b in sorted(state.brokers)]
    return {
        "brokers": brokers,
        "offline_dirs": sum(len(b.get("offline_dirs", ())) for b in brokers),
        "partitions_in_offline_dirs": sum(len(b.get("partitions", ())) for b in brokers),
        "brokers_with_offline_dirs": [b["broker_id"] for b in brokers if b["state"] == OFFLINE],
        "unknown_brokers": [b["broker_id"] for b in brokers if b["state"] == UNKNOWN],
    }
