"""Cluster snapshots on disk, as Parquet, for the Spark jobs.

``replicas.parquet`` has one row per replica (the unit every cluster-wide analysis
groups by), ``brokers.parquet`` one row per broker the cluster knows of, dead ones
included, and ``meta.json`` says when and from where the snapshot was taken. The names,
columns and types are the Spark jobs' contract, in ``kafka_runbooks.snapshot_contract``.
"""

from __future__ import annotations

import json
from pathlib import Path

from kafka_runbooks.log_dirs import log_dirs_report
from kafka_runbooks.model import ClusterState
from kafka_runbooks.quorum import quorum_report
from kafka_runbooks.snapshot_contract import (
    BROKER_COLUMNS,
    BROKERS_FILE,
    META_FILE,
    REPLICA_COLUMNS,
    REPLICAS_FILE,
)
from kafka_runbooks.storage import StorePath

__all__ = [
    "BROKERS_FILE",
    "META_FILE",
    "REPLICAS_FILE",
    "broker_rows",
    "replica_rows",
    "schemas",
    "store_snapshot",
    "write_snapshot",
]


def replica_rows(state: ClusterState) -> list[dict]:
    """One row per assigned replica for the snapshot's Parquet file; a replica no log dir reported has size
    and log dir None (unknown), never 0."""
    sizes = {(r.broker_id, r.topic, r.partition): r for r in state.log_dirs if not r.is_future}
    rows = []
    for p in state.partitions:
        for index, replica in enumerate(p.replicas):
            broker = state.brokers.get(replica)
            size = sizes.get((replica, p.topic, p.partition))
            rows.append(
                {
                    "taken_at_ms": state.taken_at_ms,
                    "topic": p.topic,
                    "partition": p.partition,
                    "replica": replica,
                    "replica_index": index,
                    "replication_factor": p.replication_factor,
                    "leader": p.leader,
                    "leader_epoch": p.leader_epoch,
                    "is_leader": replica == p.leader,
                    "in_isr": replica in p.isr,
                    "in_elr": replica in p.elr,
                    "isr_size": len(p.isr),
                    "min_insync_replicas": p.min_insync_replicas,
                    "broker_alive": bool(broker and broker.available),
                    "broker_rack": broker.rack if broker else None,
                    "size_bytes": size.size_bytes if size else None,
                    "log_dir": size.log_dir if size else None,
                }
            )
    return rows


def broker_rows(state: ClusterState) -> list[dict]:
    """One row per registered broker for the snapshot's brokers file (``alive``: registered and unfenced)."""
    return [
        {
            "broker_id": b.broker_id,
            "host": b.host,
            "port": b.port,
            "rack": b.rack,
            "alive": b.available,
            "fenced": b.fenced,
        }
        for b in state.brokers.values()
    ]


def schemas():
    """The Parquet schemas of ``replicas.parquet`` and ``brokers.parquet`` (the Spark jobs' contract)."""
    import pyarrow as pa

    replicas = pa.schema([(name, pa.type_for_alias(kind)) for name, kind in REPLICA_COLUMNS])
    brokers = pa.schema([(name, pa.type_for_alias(kind)) for name, kind in BROKER_COLUMNS])
    return replicas, brokers


def write_snapshot(state: ClusterState, directory: Path | str, bootstrap_servers: str | None = None) -> Path:
    """Write the snapshot to a local folder: the replicas and brokers as Parquet (what the Spark planner
    reads) and a meta JSON; the folder."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    replicas_schema, brokers_schema = schemas()
    pq.write_table(pa.Table.from_pylist(replica_rows(state), schema=replicas_schema), out / REPLICAS_FILE)
    pq.write_table(pa.Table.from_pylist(broker_rows(state), schema=brokers_schema), out / BROKERS_FILE)
    meta = {
        "taken_at_ms": state.taken_at_ms,
        "cluster_id": state.cluster_id,
        "bootstrap_servers": bootstrap_servers,
        "active_controller": state.active_controller,
        "partitions": len(state.partitions),
        "brokers": len(state.brokers),
        "log_dir_errors": {str(k): v for k, v in state.log_dir_errors.items()},
        # small sections the health report carries as they are (the Spark job does not read them)
        "quorum": quorum_report(state.quorum),
        "log_dirs": log_dirs_report(state),
        "features": state.features.as_dict() if state.features is not None else {"unknown": "not read"},
    }
    (out / META_FILE).write_text(json.dumps(meta, indent=2))
    return out


def store_snapshot(state: ClusterState, where: StorePath, bootstrap_servers: str | None = None) -> StorePath:
    """Write the snapshot to a folder of the data store, where the Spark job and the tasks after
    it read it from whichever worker they run on.

    Parquet is written by pyarrow to local files: on a local store straight into the folder, on
    an object store into a temporary folder first, then each file uploaded whole.
    """
    import tempfile

    if where.store.is_local:
        write_snapshot(state, where.store.local_path(where.key), bootstrap_servers)
        return where
    with tempfile.TemporaryDirectory(prefix="kafka-snapshot-") as scratch:
        write_snapshot(state, scratch, bootstrap_servers)
        where.store.upload_dir(scratch, where.key)
    return where
