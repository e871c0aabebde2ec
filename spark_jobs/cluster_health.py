"""Cluster health report from a Kafka cluster snapshot, as a self-contained PySpark job.

Usage::

    spark-submit spark_jobs/cluster_health.py --snapshot DIR|URL --output DIR|URL [--max-listed N]
                 [--min-replication-factor N]

The file imports only pyspark and the standard library so it can be shipped alone to any Spark
cluster (``spark-submit`` takes it as the application file; nothing else needs installing).

``--snapshot`` and ``--output`` are local folders or Hadoop URLs (``s3a://bucket/key``,
``file:///...``): every file is read and written through Hadoop's FileSystem (meta.json and
report.json by the driver), so with ``s3a://`` nothing lands on the driver's disk and the task
that reads the report can run on another machine.

Input, as written by the admin facade with pyarrow:

* ``<snapshot>/replicas.parquet``: one row per replica (topic, partition, replica, replica_index,
  replication_factor, leader, leader_epoch, is_leader, in_isr, in_elr, isr_size,
  min_insync_replicas, broker_alive, broker_rack, size_bytes, log_dir, taken_at_ms).
* ``<snapshot>/brokers.parquet``: one row per known broker (broker_id, host, port, rack, alive,
  fenced).
* ``<snapshot>/meta.json`` (optional): ``{"taken_at_ms", "cluster_id", "bootstrap_servers"}``.

Output:

* ``<output>/partitions.parquet``: a one-file parquet directory, one row per partition with its
  replicas, ISR and health flags (see ``partition_health``).
* ``<output>/report.json``: counts, capped lists of unhealthy partitions, the broker table (see
  ``build_report``), and the topics below the minimum replication factor (``replication``). The
  broker table carries each broker's bytes (``size_bytes``, null when unknown: see ``broker_load``)
  and its leader and replica counts. Whether replicas, preferred leaders, leaders now and bytes per
  live broker are within the rebalance's target spreads is judged from the broker table by
  ``kafka_runbooks.health`` (the rebalance's own rule units, one rule for each), not here.
  Written last, by the driver, whole (never half a file under its name), so its presence means
  the run finished.

Health flags, per partition (they are not exclusive: a partition is typically both
``under_replicated`` and ``at_min_isr``). "Leader alive" means the leader's broker is alive and not
fenced per brokers.parquet (falling back to ``broker_alive`` on the leader's replica row when the
leader id is missing from brokers.parquet; an id known to neither counts as dead).

* ``offline``: ``leader == -1`` or the leader is not alive. No one can produce or consume.
* ``under_min_isr``: online and ``isr_size < min_insync_replicas``. Producers with acks=all fail.
* ``at_min_isr``: online and ``isr_size == min_insync_replicas`` and
  ``replication_factor > min_insync_replicas``. One more lost replica and acks=all producers fail.
  Topics with RF == min ISR are excluded: there they are "at min" whenever they are fully healthy,
  so the flag would carry no signal.
* ``under_replicated``: online and ``isr_size < replication_factor``.
* ``min_isr_unknown``: online and ``min_insync_replicas`` null (DescribeConfigs did not answer for
  the topic). Neither ``under_min_isr`` nor ``at_min_isr`` can be judged there: both read false and
  this flag says so, so a report never shows "0 under min ISR" for partitions nobody could judge.

Offline partitions get none of the other flags: they need a different remedy (bring a replica back
or elect), and counting them twice would inflate the under-replicated numbers.

The computation is kept in pure DataFrame functions (``partition_health``, ``broker_load``,
``build_report``) so tests can call them directly; ``main`` does the I/O. Nothing collects all
partitions to the driver: only the capped lists and the broker table are collected.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

APP_NAME = "kafka-cluster-health"
DEFAULT_MAX_LISTED = 1000
# A broker is out of balance when its leader (or replica) count is more than this many
# percent away from the mean of the live brokers (Cruise Control's default balance
# thresholds are 10% too), rounded outwards to whole partitions.

# Order matters: it is the order of the report's keys.
FLAGS = ("offline", "under_replicated", "under_min_isr", "at_min_isr", "min_isr_unknown")

# The fields of each listed partition in report.json.
LISTED_FIELDS = (
    "topic",
    "partition",
    "leader",
    "replicas",
    "isr",
    "replication_factor",
    "min_insync_replicas",
)

BROKER_FIELDS = (
    "broker_id",
    "host",
    "port",
    "rack",
    "alive",
    "fenced",
    "replica_count",
    "leader_count",
    "preferred_leader_count",
    "size_bytes",
)

# The minimum replication factor a topic should have when the run does not set one: this many, or
# the live brokers when there are fewer (a topic cannot have more replicas than live brokers).
DEFAULT_MIN_REPLICATION_FACTOR = 3


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
REPORT_FILE = "report.json"  # the health job's report, written last: its presence means the run finished
PARTITIONS_FILE = "partitions.parquet"  # the health job's one-file parquet folder, one row per partition


class PlanImpossible(Exception):
    """No plan keeps the rules; the reason goes to (and comes back from) error.json."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _join(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name


# Stores where a file written with FileSystem.create is seen whole or not at all: the object is
# uploaded when the stream closes. Every other file system (a local folder, HDFS...) shows a file
# as it grows, so there a write goes to a temporary name in the same folder and is renamed.
WHOLE_ON_CLOSE = ("s3a", "s3", "gs")
WRITE_SLICE = 1 << 20  # bytes per py4j call: one message per MiB rather than one huge one
_HADOOP: dict[Any, dict[str, Any]] = {}  # per Spark session: see _hadoop


def _hadoop(spark) -> dict[str, Any]:
    """Hadoop's Path class, its configuration, a token for temporary names and the file systems
    by folder, looked up once per session.

    Each py4j call is a round trip to the JVM (a class name costs one per dot) and the plan job
    writes one file per chunk, thousands for a large cluster: looked up per file, they took
    longer than the plan itself. Writer threads share it (two racing first lookups only make
    two entries, each with its own token, so temporary names stay unique).
    """
    found = _HADOOP.get(spark)
    if found is None:
        jvm = spark._jvm
        found = _HADOOP[spark] = {
            "Path": jvm.org.apache.hadoop.fs.Path,
            "conf": spark._jsc.hadoopConfiguration(),
            "token": jvm.java.util.UUID.randomUUID().toString(),
            "names": iter(range(1 << 62)),  # next() on it is atomic: writer threads get their own names
            "fs": {},
        }
    return found


def hadoop_fs(spark, url: str) -> tuple[Any, Any, str]:
    """(FileSystem, Path, scheme) of a local path or a Hadoop URL (``s3a://bucket/key``, ``file:///...``).

    The driver reads and writes its small files through the same Hadoop FileSystem as Spark's
    parquet reads and writes (same configuration, same connectors), so one code path serves a
    local folder and an object store; the next task may run on another machine. A local folder
    goes through the raw local file system: the checksummed one would add a ``.name.crc`` beside
    every file and rename the pair in two steps.
    """
    hadoop = _hadoop(spark)
    path = hadoop["Path"](url)
    folder = url.rstrip("/").rpartition("/")[0]  # one file system for every file of a folder
    found = hadoop["fs"].get(folder)
    if found is None:
        fs = path.getFileSystem(hadoop["conf"])
        scheme = fs.getUri().getScheme()
        found = hadoop["fs"][folder] = (fs.getRawFileSystem() if scheme == "file" else fs, scheme)
    return found[0], path, found[1]


def exists(spark, url: str) -> bool:
    """Whether a file or folder (on an object store: any key below the prefix) is there."""
    fs, path, _ = hadoop_fs(spark, url)
    return bool(fs.exists(path))


def read_text(spark, url: str) -> str | None:
    """A small file's UTF-8 text, or None when there is no such file."""
    fs, path, _ = hadoop_fs(spark, url)
    if not fs.exists(path):
        return None
    stream = fs.open(path)
    try:
        return bytes(stream.readAllBytes()).decode("utf-8")
    finally:
        stream.close()


def write_text(spark, url: str, text: str) -> None:
    """Replace a file with ``text``; a reader sees the old file, the new one, or none: never a part.

    On an object store (``WHOLE_ON_CLOSE``) the object appears when the stream closes. Elsewhere the
    text goes to a hidden temporary name in the same folder first (unique to this driver), then is
    renamed over the name; where a rename does not replace (HDFS) the old file is deleted first, so
    for a moment there is no file, never half of one.
    """
    fs, path, scheme = hadoop_fs(spark, url)
    data = text.encode("utf-8")
    if scheme in WHOLE_ON_CLOSE:
        _write_stream(fs.create(path, True), data)
        return
    hadoop = _hadoop(spark)
    folder, slash, name = url.rstrip("/").rpartition("/")
    tmp = hadoop["Path"](f"{folder}{slash}.{name}.{hadoop['token']}-{next(hadoop['names'])}.tmp")
    try:
        _write_stream(fs.create(tmp, True), data)
        if not fs.rename(tmp, path):
            fs.delete(path, False)
            if not fs.rename(tmp, path):
                raise OSError(f"could not rename {tmp.toString()} to {url}")
    except BaseException:
        fs.delete(tmp, False)  # nothing left behind when the write failed half-way
        raise


def _write_stream(stream, data: bytes) -> None:
    try:
        for start in range(0, len(data), WRITE_SLICE):
            stream.write(data[start : start + WRITE_SLICE])
    finally:
        stream.close()


def remove(spark, url: str) -> bool:
    """Delete a file, or a folder with everything below it; False when nothing was there."""
    fs, path, _ = hadoop_fs(spark, url)
    return bool(fs.delete(path, True))


def load_snapshot(spark, snapshot: str) -> tuple[Any, Any, dict[str, Any]]:
    """(replicas, brokers, meta) of a snapshot folder or URL; meta is {} when meta.json is absent.

    Everything goes through Hadoop's FileSystem (the parquet files through Spark, meta.json
    through ``read_text`` on the driver), so a local folder and ``s3a://`` read the same way.
    """
    replicas = spark.read.parquet(_join(snapshot, REPLICAS_FILE))
    brokers = spark.read.parquet(_join(snapshot, BROKERS_FILE))
    text = read_text(spark, _join(snapshot, META_FILE))
    meta: dict[str, Any] = json.loads(text) if text is not None else {}
    return replicas, brokers, meta


# --- snapshot contract: end ---


# --- files: Hadoop's FileSystem over classic Spark, the client's data store over Spark Connect ---
# The contract's file functions reach Hadoop through py4j (``spark._jvm``), which a Spark Connect
# client does not have: there the driver runs on the Connect server and this code in the client
# (an Airflow task). So the small files (meta.json, the report, the plan, its chunks) go through
# the project's data store on the client side, at the same place the server reads and writes the
# parquet files (a local folder, or s3:// which the server names s3a://). The names below replace
# the contract's, so the contract's own callers (load_snapshot) take the same seam.
_HADOOP_FILES = {"exists": exists, "read_text": read_text, "write_text": write_text, "remove": remove}


def is_connect(spark) -> bool:
    """Whether ``spark`` is a Spark Connect session (pyspark's own class for it), not a classic one."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _client_path(url: str):
    """The data store's path of a job URL, on the client (s3a:// is the store's s3://)."""
    from kafka_runbooks import storage  # only over Connect: the client is the runbooks' worker

    if url.startswith(("s3a://", "s3n://")):
        url = "s3://" + url.split("://", 1)[1]
    return storage.locate(url)


def _client_fs(url: str):
    """(fsspec file system, its path) of a job URL in the data store, listings fresh: s3fs's
    listing cache can be stale across processes, and a run must see the previous run's files."""
    path = _client_path(url)
    fs = path.store.fs
    fs.invalidate_cache()
    return fs, path.store.path(path.key)


def exists(spark, url: str) -> bool:  # noqa: F811 (the seam replaces the contract's)
    """Whether a file or folder (on an object store: any key below the prefix) is there."""
    if not is_connect(spark):
        return _HADOOP_FILES["exists"](spark, url)
    fs, where = _client_fs(url)
    return bool(fs.exists(where))


def read_text(spark, url: str) -> str | None:  # noqa: F811
    """A small file's UTF-8 text, or None when there is no such file."""
    if not is_connect(spark):
        return _HADOOP_FILES["read_text"](spark, url)
    path = _client_path(url)
    return path.store.read_text(path.key)


def write_text(spark, url: str, text: str) -> None:  # noqa: F811
    """Replace a file with ``text``, whole or not at all (the store writes whole on both sides)."""
    if not is_connect(spark):
        _HADOOP_FILES["write_text"](spark, url, text)
        return
    _client_path(url).write_text(text)


def remove(spark, url: str) -> bool:  # noqa: F811
    """Delete a file, or a folder with everything below it; False when nothing was there."""
    if not is_connect(spark):
        return _HADOOP_FILES["remove"](spark, url)
    fs, where = _client_fs(url)
    if not fs.exists(where):
        return False
    fs.rm(where, recursive=True)
    return True


def _ordered_ids(condition: Column | None = None) -> Column:
    """Broker ids of the group's replicas in assignment order (replica_index), optionally filtered.

    collect_list order is not deterministic after a shuffle, so sort (index, id) structs and
    keep the ids.
    """
    entry = F.struct(F.col("replica_index"), F.col("replica"))
    if condition is not None:
        entry = F.when(condition, entry)  # nulls are dropped by collect_list
    return F.transform(F.sort_array(F.collect_list(entry)), lambda e: e["replica"])


def partition_health(replicas: DataFrame, brokers: DataFrame) -> DataFrame:
    """One row per (topic, partition) with its assignment, ISR and boolean health flags.

    Partition-level columns (leader, epoch, RF, ISR size, min ISR) are repeated on every replica
    row; max() picks them deterministically. Flags are never null: a min-ISR rule Spark cannot
    decide (the topic's min.insync.replicas unread) reads false and sets ``min_isr_unknown``.
    """
    joined = _with_leader_broker(_per_partition(replicas), brokers)
    leader_alive = (F.col("leader") >= 0) & F.coalesce(
        F.col("_leader_broker_alive"), F.col("_leader_row_alive") == 1, F.lit(False)
    )
    online = F.col("leader_alive")
    isr_size, rf, min_isr = F.col("isr_size"), F.col("replication_factor"), F.col("min_insync_replicas")

    def flag(condition: Column) -> Column:
        """A flag that is never null: a condition Spark cannot decide (a null input) reads as False."""
        return F.coalesce(condition, F.lit(False))

    return (
        joined.withColumn("leader_alive", flag(leader_alive))
        .withColumn("offline", ~online)
        .withColumn("under_replicated", flag(online & (isr_size < rf)))
        .withColumn("under_min_isr", flag(online & (isr_size < min_isr)))
        .withColumn("at_min_isr", flag(online & (isr_size == min_isr) & (rf > min_isr)))
        .withColumn("min_isr_unknown", flag(online & min_isr.isNull()))
        .select(
            "topic",
            "partition",
            "leader",
            "leader_epoch",
            "replication_factor",
            "min_insync_replicas",
            "isr_size",
            "replicas",
            "isr",
            "elr",
            "leader_alive",
            *FLAGS,
            "taken_at_ms",
        )
    )


def _per_partition(replicas: DataFrame) -> DataFrame:
    """The replica rows grouped per partition: its columns, its replicas, ISR and ELR in
    assignment order, and whether the leader's own replica row says its broker is alive."""
    return replicas.groupBy("topic", "partition").agg(
        F.max("taken_at_ms").alias("taken_at_ms"),
        F.max("leader").alias("leader"),
        F.max("leader_epoch").alias("leader_epoch"),
        F.max("replication_factor").alias("replication_factor"),
        F.max("min_insync_replicas").alias("min_insync_replicas"),
        F.max("isr_size").alias("isr_size"),
        _ordered_ids().alias("replicas"),
        _ordered_ids(F.col("in_isr")).alias("isr"),
        _ordered_ids(F.col("in_elr")).alias("elr"),
        F.max(F.when(F.col("replica") == F.col("leader"), F.col("broker_alive").cast("int"))).alias(
            "_leader_row_alive"
        ),
    )


def _with_leader_broker(per_partition: DataFrame, brokers: DataFrame) -> DataFrame:
    """Each partition with its leader's broker row (alive and not fenced), when the broker table
    has one. The table is small (one row per broker): broadcast it rather than shuffle partitions."""
    leader_brokers = brokers.select(
        F.col("broker_id").alias("_leader_id"),
        (F.col("alive") & ~F.coalesce(F.col("fenced"), F.lit(False))).alias("_leader_broker_alive"),
    )
    return per_partition.join(
        F.broadcast(leader_brokers), per_partition["leader"] == leader_brokers["_leader_id"], "left"
    )


def broker_load(replicas: DataFrame, brokers: DataFrame) -> DataFrame:
    """One row per broker of brokers.parquet with its replica count, leader count, preferred leader
    count (first in the replica list: what leadership converges to, the rebalance's unit) and bytes on disk.

    Left join from brokers, so idle brokers show up with zero counts. size_bytes is the sum of the
    sizes the broker reported for its replicas (what the rebalance's planner sums): 0 with no
    replicas, null when any of its replicas has no size (a dead broker, a failed log dir, a replica
    its DescribeLogDirs answer did not list): unknown, never a partial sum, never 0. The bytes
    spread is judged from it by ``kafka_runbooks.health`` with the planner's rule units.
    """
    per_broker = replicas.groupBy(F.col("replica").alias("_replica_broker")).agg(
        F.count(F.lit(1)).alias("_replicas"),
        F.sum(F.col("is_leader").cast("int")).alias("_leaders"),
        F.sum((F.col("replica_index") == 0).cast("int")).alias("_preferred"),
        F.sum("size_bytes").alias("_size_bytes"),
        F.max(F.col("size_bytes").isNull().cast("int")).alias("_size_unknown"),
    )
    joined = brokers.join(per_broker, brokers["broker_id"] == per_broker["_replica_broker"], "left")
    replica_count = F.coalesce(F.col("_replicas"), F.lit(0)).cast("long")
    return joined.select(
        "broker_id",
        "host",
        "port",
        "rack",
        "alive",
        "fenced",
        replica_count.alias("replica_count"),
        F.coalesce(F.col("_leaders"), F.lit(0)).cast("long").alias("leader_count"),
        F.coalesce(F.col("_preferred"), F.lit(0)).cast("long").alias("preferred_leader_count"),
        F.when(replica_count == 0, F.lit(0).cast("long"))
        .when(F.col("_size_unknown") == 1, F.lit(None).cast("long"))
        .otherwise(F.col("_size_bytes"))
        .alias("size_bytes"),
    )


def build_report(
    partitions: DataFrame,
    brokers: DataFrame,
    *,
    max_listed: int = DEFAULT_MAX_LISTED,
    meta: dict[str, Any] | None = None,
    min_replication_factor: int | None = None,
) -> dict[str, Any]:
    """The report.json content from ``partition_health`` and ``broker_load`` results.

    One aggregation job for the counts, then one capped job per flag (limit max_listed + 1 tells
    whether the list was truncated without counting twice), then the broker table. Callers should
    persist ``partitions`` since it is scanned several times.
    """
    if max_listed < 0:
        raise ValueError(f"max_listed must be >= 0, got {max_listed}")
    meta = meta or {}
    totals = partitions.agg(
        F.count(F.lit(1)).alias("partitions"),
        F.max("taken_at_ms").alias("taken_at_ms"),
        *(F.sum(F.col(flag).cast("long")).alias(flag) for flag in FLAGS),
    ).first()

    taken_at_ms = meta.get("taken_at_ms")
    report: dict[str, Any] = {
        "cluster_id": meta.get("cluster_id"),
        "taken_at_ms": totals["taken_at_ms"] if taken_at_ms is None else taken_at_ms,
        "partitions": totals["partitions"],
        "max_listed": max_listed,
        "counts": {flag: totals[flag] or 0 for flag in FLAGS},
        "truncated": {},
    }
    for flag in FLAGS:
        report[flag], report["truncated"][flag] = _listed(partitions, flag, max_listed)
    report["brokers"] = [
        row.asDict(recursive=True) for row in brokers.orderBy("broker_id").select(*BROKER_FIELDS).collect()
    ]
    report["replication"] = replication(partitions, report["brokers"], min_replication_factor, max_listed)
    return report


def _listed(partitions: DataFrame, flag: str, max_listed: int) -> tuple[list[dict], bool]:
    """The first ``max_listed`` partitions with ``flag`` and whether there were more: one row past
    the cap says so without a second count."""
    rows = (
        partitions.where(F.col(flag))
        .orderBy("topic", "partition")
        .select(*LISTED_FIELDS)
        .limit(max_listed + 1)
        .collect()
    )
    return [row.asDict(recursive=True) for row in rows[:max_listed]], len(rows) > max_listed


def replication(
    partitions: DataFrame, brokers: list[dict[str, Any]], minimum: int | None, max_listed: int
) -> dict[str, Any]:
    """Topics whose replication factor is below the minimum, lowest first (capped at ``max_listed``).

    A topic's factor is its smallest partition's (a partition being reassigned lists more replicas
    for a while, never fewer). ``minimum`` None: ``DEFAULT_MIN_REPLICATION_FACTOR``, or the live
    brokers (alive, not fenced) when there are fewer: more replicas than live brokers cannot be placed.
    """
    live = sum(1 for b in brokers if b.get("alive") and not b.get("fenced"))
    rule = "setting"
    if minimum is None:
        minimum = min(DEFAULT_MIN_REPLICATION_FACTOR, live)
        rule = f"min({DEFAULT_MIN_REPLICATION_FACTOR}, live brokers)"
    topics = partitions.groupBy("topic").agg(
        F.min("replication_factor").alias("replication_factor"), F.count(F.lit(1)).alias("partitions")
    )
    below = topics.where(F.col("replication_factor") < F.lit(minimum))
    rows = below.orderBy("replication_factor", "topic").limit(max_listed + 1).collect()
    return {
        "minimum": minimum,
        "minimum_from": rule,
        "live_brokers": live,
        "topics": topics.count(),
        "below_minimum": below.count(),
        "listed": [row.asDict() for row in rows[:max_listed]],
        "truncated": len(rows) > max_listed,
    }


def write_report(spark: SparkSession, report: dict[str, Any], output: str) -> str:
    """Write report.json whole (``write_text``: never half a file under the name); its path or URL.

    Through Hadoop's FileSystem like partitions.parquet, so an ``s3a://`` output holds both and
    the task that publishes the report can run on another machine than this driver.
    """
    path = _join(output, REPORT_FILE)
    write_text(spark, path, json.dumps(report, indent=2, sort_keys=False) + "\n")
    return path


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The job's command line (see the module's usage); its defaults are the report's."""
    parser = argparse.ArgumentParser(prog="cluster_health.py", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--snapshot",
        required=True,
        help="snapshot folder or Hadoop URL (s3a://...) with replicas.parquet, ...",
    )
    parser.add_argument(
        "--output",
        required=True,
        help="output folder or Hadoop URL (s3a://...) for partitions.parquet, report.json",
    )
    parser.add_argument(
        "--max-listed",
        type=int,
        default=DEFAULT_MAX_LISTED,
        help=f"max partitions listed per flag in report.json (default {DEFAULT_MAX_LISTED})",
    )
    parser.add_argument(
        "--min-replication-factor",
        type=int,
        default=None,
        help="list topics whose replication factor is below this (default: "
        f"{DEFAULT_MIN_REPLICATION_FACTOR}, or the live brokers when fewer)",
    )
    args = parser.parse_args(argv)
    if args.min_replication_factor is not None and args.min_replication_factor < 1:
        parser.error("--min-replication-factor must be >= 1")
    if args.max_listed < 0:
        parser.error("--max-listed must be >= 0")
    return args


def _under_spark_submit() -> bool:
    """spark-submit starts the JVM first and hands its gateway to Python via this variable."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def get_spark() -> SparkSession:
    """A quiet session; the master comes from spark-submit, else local[*] for a plain `python` run.

    A snapshot is small (one row per replica: a few million rows for the largest clusters), so
    unless spark.sql.shuffle.partitions was configured, use one shuffle partition per core instead
    of the default 200, whose empty tasks dominate the run time.
    """
    builder = (
        SparkSession.builder.appName(APP_NAME)
        .config("spark.log.level", "WARN")
        .config("spark.ui.showConsoleProgress", "false")
    )
    if not _under_spark_submit() and "--master" not in os.environ.get("PYSPARK_SUBMIT_ARGS", ""):
        builder = builder.master("local[*]")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if not spark.sparkContext.getConf().contains("spark.sql.shuffle.partitions"):
        spark.conf.set("spark.sql.shuffle.partitions", str(max(1, spark.sparkContext.defaultParallelism)))
    return spark


def run(spark: SparkSession, argv: list[str] | None = None) -> int:
    """Read the snapshot, compute, write partitions.parquet then report.json with an existing
    session (tests run it in theirs); returns the exit code."""
    args = parse_args(argv)
    replicas, brokers, meta = load_snapshot(spark, args.snapshot)
    partitions = partition_health(replicas, brokers).persist()
    report = build_report(
        partitions,
        broker_load(replicas, brokers),
        max_listed=args.max_listed,
        meta=meta,
        min_replication_factor=args.min_replication_factor,
    )
    # One file is plenty (one small row per partition); repartition rather than coalesce keeps
    # the aggregation itself parallel.
    (
        partitions.repartition(1)
        .sortWithinPartitions("topic", "partition")
        .write.mode("overwrite")
        .parquet(_join(args.output, PARTITIONS_FILE))
    )
    path = write_report(spark, report, args.output)
    partitions.unpersist()
    counts = ", ".join(f"{flag}={n}" for flag, n in report["counts"].items())
    print(f"{path}: {report['partitions']} partitions; {counts}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """spark-submit's entry: its own session, stopped however the report ends."""
    spark = get_spark()
    try:
        return run(spark, argv)
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
