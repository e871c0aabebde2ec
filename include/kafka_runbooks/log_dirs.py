"""Offline log directories: which directory of which live broker failed, and which replicas sat in it.

A broker keeps running when one of its log directories fails (an I/O error in it: Kafka marks
the directory offline, KIP-112; in KRaft the controller learns it, KIP-858), and every replica
in that directory goes offline on that broker only. The failed-broker sweep never fires (the
broker is alive), so the health sweep reads each live broker's DescribeLogDirs answer, where a
failed directory answers with an error code (KAFKA_STORAGE_ERROR) and lists no partitions.

Which partitions sat in a failed directory is therefore decided from the same answer and the
metadata: the broker's replicas (metadata) that are in none of its healthy directories. With one
failed directory they are its replicas; with several they sat in one of them. A broker that did
not answer stays "unknown", never "no offline directories".
"""

from __future__ import annotations

from typing import Any

from kafka_runbooks.model import ClusterState, LogDir, LogDirReplica

KAFKA_STORAGE_ERROR = 56
ERROR_NAMES = {KAFKA_STORAGE_ERROR: "KAFKA_STORAGE_ERROR", 57: "LOG_DIR_NOT_FOUND"}

OK = "ok"
OFFLINE = "offline dirs"
UNKNOWN = "unknown"


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
    """One broker's directories: "ok", "offline dirs" (with the replicas that sat in them) or
    "unknown" (it was not asked, or did not answer), with the reason."""
    broker = state.brokers.get(broker_id)
    dirs = state.log_dir_states.get(broker_id)
    if dirs is None:
        reason = state.log_dir_errors.get(broker_id) or (
            "not registered: not asked" if broker is None or not broker.alive else "log dirs not read"
        )
        return {"broker_id": broker_id, "state": UNKNOWN, "reason": reason}
    offline = [d for d in dirs if not d.online]
    out: dict[str, Any] = {
        "broker_id": broker_id,
        "state": OFFLINE if offline else OK,
        "online_dirs": sorted(d.path for d in dirs if d.online),
        "offline_dirs": [{"path": d.path, "error": error_name(d.error_code)} for d in offline],
        "partitions": [],
    }
    if offline:
        healthy = {(r.topic, r.partition) for d in dirs if d.online for r in d.replicas}
        out["partitions"] = sorted(
            p.name
            for p in state.partitions
            if broker_id in p.replicas and (p.topic, p.partition) not in healthy
        )
        out["decided_by"] = (
            "the broker's replicas in the metadata that none of its healthy directories lists"
            + ("" if len(offline) == 1 else f" (they sat in one of its {len(offline)} failed directories)")
        )
    # the controller's view (KIP-858): replicas the metadata names offline on this broker
    out["metadata_offline"] = sorted(p.name for p in state.partitions if broker_id in p.offline_replicas)
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
