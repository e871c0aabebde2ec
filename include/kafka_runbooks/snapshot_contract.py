"""The snapshot contract between the runbooks and the Spark jobs: one place for its names.

The snapshot folder (written by ``kafka_runbooks.snapshot``) and the failed-broker plan
folder (written by ``spark_jobs/failed_broker_plan.py``, read by
``kafka_runbooks.failed_broker.plan``) are named here, with the snapshot's columns and their
Arrow types, ``PlanImpossible`` and the loading of a snapshot into Spark.

The Spark jobs are submitted as single files (no ``--py-files``), so each carries a
verbatim copy of the block between the two marker lines below;
``tests/unit/test_snapshot_contract.py`` fails when a copy differs from this one (its
message says how to copy it back) and when a job names a snapshot file by a literal.
Nothing in the block imports anything but the standard library: ``spark`` is the
caller's session.
"""

from __future__ import annotations

import json
import os
from typing import Any

# --- snapshot contract: begin (copied verbatim from include/kafka_runbooks/snapshot_contract.py) ---
REPLICAS_FILE = "replicas.parquet"  # one row per replica
BROKERS_FILE = "brokers.parquet"  # one row per broker the cluster knows of, dead ones included
META_FILE = "meta.json"  # when and from where the snapshot was taken (optional for the jobs)
REPLICA_COLUMNS = (
    ("taken_at_ms", "int64"),
    ("topic", "string"),
    ("partition", "int32"),
    ("replica", "int32"),
    ("replica_index", "int32"),
    ("replication_factor", "int32"),
    ("leader", "int32"),
    ("leader_epoch", "int32"),
    ("is_leader", "bool"),
    ("in_isr", "bool"),
    ("in_elr", "bool"),
    ("isr_size", "int32"),
    ("min_insync_replicas", "int32"),
    ("broker_alive", "bool"),
    ("broker_rack", "string"),
    ("size_bytes", "int64"),
    ("log_dir", "string"),
)
BROKER_COLUMNS = (
    ("broker_id", "int32"),
    ("host", "string"),
    ("port", "int32"),
    ("rack", "string"),
    ("alive", "bool"),
    ("fenced", "bool"),
)
PLAN_FILE = "plan.json"  # every moved partition's target, kafka-reassign-partitions' format
CHUNKS_DIR = "chunks"  # chunks/0001.json ...: the same format, one file per chunk
SUMMARY_FILE = "summary.json"  # written last: its presence means the planning job finished
ERROR_FILE = "error.json"  # {"error": reason} instead of a plan, when no plan keeps the rules


class PlanImpossible(Exception):
    """No plan keeps the rules; the reason goes to (and comes back from) error.json."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _join(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name


def load_snapshot(spark, snapshot: str) -> tuple[Any, Any, dict[str, Any]]:
    """(replicas, brokers, meta) of a snapshot folder; meta is {} when meta.json is absent.

    The parquet files go through Spark so any Hadoop filesystem works; meta.json is read by the
    driver from its local filesystem.
    """
    replicas = spark.read.parquet(_join(snapshot, REPLICAS_FILE))
    brokers = spark.read.parquet(_join(snapshot, BROKERS_FILE))
    meta: dict[str, Any] = {}
    meta_path = _join(snapshot, META_FILE)
    if os.path.isfile(meta_path):
        with open(meta_path, encoding="utf-8") as f:
            meta = json.load(f)
    return replicas, brokers, meta


# --- snapshot contract: end ---

BEGIN = "# --- snapshot contract: begin"
END = "# --- snapshot contract: end ---"


def block(source: str) -> str:
    """The contract block of a source text, marker lines included ("" when it has none)."""
    start = source.find(BEGIN)
    stop = source.find(END)
    if start < 0 or stop < start:
        return ""
    return source[start : stop + len(END)]
