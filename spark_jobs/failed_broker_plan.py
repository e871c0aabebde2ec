"""Reassignment plan for brokers that are gone for good, as a self-contained PySpark job.

Usage::

    spark-submit spark_jobs/failed_broker_plan.py --snapshot DIR|URL --failed 4[,5...] --out DIR|URL
        [--receivers 1,2,3] [--max-partitions-per-chunk 50] [--max-bytes-per-chunk 1073741824] [--drain]
        [--drain-replicas topic:partition@broker,...]
    spark-submit spark_jobs/failed_broker_plan.py --snapshot DIR|URL --out DIR|URL --rebalance add-brokers|full
        [--new-brokers 4[,5...]] [--max-replica-spread 10%|N] [--max-leader-spread 10%|N] [--max-bytes-spread-percent 20]
        [--room 1=BYTES,...]
    spark-submit spark_jobs/failed_broker_plan.py --snapshot DIR|URL --out DIR|URL
        --rebalance replication-factor --replication-factor 3 --topics a,b [--room 1=BYTES,...]
        [--allow-replication-factor-decrease=true]

The file imports only pyspark and the standard library so it can be shipped alone to any Spark
cluster. Input is a snapshot written by the admin facade (``replicas.parquet``: one row per
replica with ``size_bytes``, ``broker_rack``, ``broker_alive``; ``brokers.parquet``; optional
``meta.json``). ``--snapshot`` and ``--out`` are local folders or Hadoop URLs (``s3a://bucket/key``,
``file:///...``): the driver reads meta.json and writes every output file through Hadoop's
FileSystem, as Spark reads the parquet files, so with ``s3a://`` the plan lands in the store for
the next task, whichever machine it runs on, and nothing on the driver's disk.

Spark does the cluster-wide part: per-broker replica counts and bytes, and picking out the
partitions that have a replica on a failed broker (plus those whose size has to be inferred).
Only those partitions, a few thousand even on a million-partition cluster, come back to the
driver, which chooses the new brokers with a greedy balancer: the choice needs the running load
of every receiver, a sequential thing that a shuffle cannot express cheaply.

Rules of the plan (``kafka_runbooks.failed_broker.plan.check_plan`` checks every one independently):

* Every replica on a failed broker gets a new broker from the receivers (default: every live,
  unfenced broker that is not failed). The replacement takes the failed replica's position, so the
  other replicas keep theirs and the preferred leader (first replica) stays where it was when it
  is alive. Nothing else moves; the replication factor is kept; no broker holds two replicas.
* Preferred leaders: when the failed replica was the preferred leader, the planner chooses which
  of the partition's target replicas goes first (it is moved to the front, the others keep their
  order), the one with the fewest preferred leaderships so far; a repair pass then hands a
  preferred leadership to another replica of the same partition with at least two fewer. This
  only reorders the list: no extra data moves, and leadership does not pile up on the broker that
  took the failed one's place.
* Racks: a replica's rack is its broker's rack. A broker killed on Kafka 4.x stays registered and
  fenced, rack known, so its rack counts like any other; a broker without a known rack (never
  registered, or unregistered) counts as a rack of its own, so the survivors are then pushed to a
  rack they do not cover yet. A partition never ends on fewer distinct racks than it had when a
  receiver exists that keeps the count: while it is short of its old count, only receivers in a
  new rack qualify.
* Balance: among qualifying receivers, the one with the fewest replicas moved to it so far, then
  the fewest bytes moved to it so far (each receiver copies under its own throttle, so the heal
  takes as long as the busiest receiver's bytes), then the fewest bytes, then the fewest replicas,
  then the lowest id; partitions largest first. A
  repair pass then moves replicas from a receiver to any qualifying one with at least two fewer,
  so moved replicas per receiver end within 1 of each other unless racks forbid it.
* Partition size is the largest ``size_bytes`` reported by any of its replicas (the failed
  broker's own replica usually reports none). A broker's bytes are the sizes it reported, with
  that partition size standing in for replicas it did not report.
* A partition with no live replica left outside the failed brokers cannot be re-replicated (no
  leader to copy from): it is left out of the plan and listed under ``not_moved``.
* ``--drain`` (the planned decommission, ``kafka_broker_decommission``): the ``--failed`` brokers
  are live brokers to empty, not dead ones. Every rule above holds, with two differences that
  come from their being alive: a drained broker is itself a source to copy from (a partition whose
  only live replica is on it is moved, not listed under ``not_moved``), and its in-sync replicas
  count as live ISR for the chunk order (they stay in the ISR until the move completes). A
  drained broker that is not alive is refused: that is the failed-broker heal's case.
* ``--drain-replicas topic:partition@broker,...`` (``kafka_log_dir_failure``): only these replicas of
  the ``--failed`` brokers move, the ones that sat in a failed log directory of a live broker; its
  replicas in healthy directories stay. Each named broker must be live and among ``--failed``. The
  named replicas are offline on their broker, so, as in a heal, they are no copy source and not
  live ISR: a partition with no live replica elsewhere is listed under ``not_moved``.
* ``--rebalance add-brokers|full`` (``kafka_rebalance``): no broker is failed; replicas move from the
  most loaded broker to the least loaded one (``add-brokers``: only onto ``--new-brokers``, which must
  be live), the smallest partition that keeps its racks and the receiver's disk room (``--room``:
  bytes each broker may gain under the ceiling; a broker missing from it gains nothing), until
  replicas per broker are within ``--max-replica-spread``; then preferred leaderships are handed,
  by reordering only, from the broker leading the most to another replica with two fewer, until
  within ``--max-leader-spread``. The rules are the shared units of the balance rules block
  (``kafka_runbooks.balance_rules``, copied verbatim below), which ``check_plan`` judges it with.
  The summary adds the spreads before/after against the targets, the moves' lower bounds, whether
  the target is reached and, if not, why; leader-only moves are listed in it (``leader_moves``), not
  in the chunks: they copy no data. A plan that brings nothing closer is impossible (error.json).
* ``--rebalance replication-factor --replication-factor N --topics a,b``: every partition of the named
  topics below N gains its missing replicas (shared units ``new_replicas`` in ``raise_order``): on a
  rack it lacks first, then the live broker with the fewest replicas, then the fewest bytes, within
  its ``--room``; the existing replicas keep their places (the preferred leader stays). A partition
  that no broker fits, or that cannot span ``racks_wanted`` racks within the room, a target above the
  live brokers, a named topic gone or above N is impossible, unless
  ``--allow-replication-factor-decrease=true``: then a partition above N drops replicas
  (``dropped_replicas``: out of the ISR first, never the preferred leader while another can go, the
  most racks kept, the most loaded broker), in name order after the raises, and one that would keep
  a replica out of the ISR (``kept_in_sync``) is impossible.
* Chunks, in order: partitions with the fewest live in-sync replicas left first (closest to going
  offline), then smallest first (more partitions healed per byte), then topic and partition. A
  chunk holds at most ``--max-partitions-per-chunk`` partitions and ``--max-bytes-per-chunk``
  bytes; a single partition larger than that gets a chunk of its own.

Output in ``--out``: ``plan.json`` (kafka-reassign-partitions' format, every moved partition's full
target replica list, in chunk order), ``chunks/0001.json``... (same format, one per chunk) and
``summary.json`` (written last: its presence means the run finished). An impossible plan (unknown
broker, a failed broker among the receivers, too few receivers to keep the replication factor...)
writes ``error.json`` ``{"error": reason}`` instead, and the job exits with code 2. A run first
removes a previous run's files (summary.json first); each file appears whole or not at all.
"""

from __future__ import annotations

import argparse
import gc
import heapq
import json
import os
import sys
import threading
import time
from bisect import bisect_left, insort
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import islice
from operator import itemgetter
from typing import Any

APP_NAME = "kafka-failed-broker-plan"
DEFAULT_MAX_PARTITIONS = 50
DEFAULT_MAX_BYTES = 1 << 30
EXIT_IMPOSSIBLE = 2
NOT_MOVED_LISTED = 1000
BROADCAST_KEYS_MAX = 500_000
CHUNK_WRITERS = 8  # chunk files written at once (see write_chunks)

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
        local = _driver_local(spark, url)
        if local is None:
            _HADOOP_FILES["write_text"](spark, url, text)
        else:
            _write_local(local, text)
        return
    _client_path(url).write_text(text)


def _driver_local(spark, url: str) -> str | None:
    """The driver's own path of a URL that Hadoop resolves to its local file system, else None.
    Hadoop's local file system forks ``chmod`` for each file it creates (without its native
    library): ~6 ms a file, and a million-partition rebalance writes ~6000 chunk files. A
    scheme-less path is local only when the default file system is (on a cluster it is HDFS)."""
    _, path, scheme = hadoop_fs(spark, url)
    return str(path.toUri().getPath()) if scheme == "file" else None


def _write_local(path: str, text: str) -> None:
    """The contract's local write in Python: a hidden temporary name in the same folder, then a
    rename over the name (a reader sees the old file or the new one, never a part)."""
    folder, name = os.path.split(path)
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def remove(spark, url: str) -> bool:  # noqa: F811
    """Delete a file, or a folder with everything below it; False when nothing was there."""
    if not is_connect(spark):
        return _HADOOP_FILES["remove"](spark, url)
    fs, where = _client_fs(url)
    if not fs.exists(where):
        return False
    fs.rm(where, recursive=True)
    return True


OUTPUT_FILES = (SUMMARY_FILE, PLAN_FILE, ERROR_FILE)  # summary first: see clear_output


# ---------------------------------------------------------------------------------------------
# Inputs, as the driver sees them after the Spark part.


@dataclass
class BrokerInfo:
    broker_id: int
    rack: str | None
    alive: bool  # registered and not fenced
    known: bool  # listed in brokers.parquet (not only named in assignments)
    replicas: int = 0
    bytes: int = 0
    leaders: int = 0  # preferred leaderships (first replica of a partition)


@dataclass
class Affected:
    """A partition with at least one replica on a failed broker, replicas in assignment order."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    sizes: tuple[int | None, ...]  # size_bytes each replica reported (None: not reported)
    in_isr: tuple[bool, ...]
    alive: tuple[bool, ...]
    size: int  # max reported size, 0 when none reported


@dataclass
class Inputs:
    brokers: dict[int, BrokerInfo]
    affected: list[Affected]
    meta: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Spark part.


def load_inputs(spark, snapshot: str, failed: set[int] | None) -> Inputs:
    """Broker table with per-broker counts and bytes, and the partitions touched by ``failed``.

    Three scans of replicas.parquet: per-broker aggregates; the keys of partitions that have a
    failed replica or an unreported size; those partitions' rows (a broadcast semi-join, no
    shuffle of the big side) grouped per partition. Only the affected partitions and the
    per-broker rows are collected. ``failed`` None (a rebalance): every partition, read flat by
    ``every_partition`` after the per-broker aggregates.
    """
    replicas, brokers_df, meta = load_snapshot(spark, snapshot)
    brokers = broker_table(replicas, brokers_df)
    if failed is None:  # every partition (a rebalance may move any replica): no keys, no join
        return Inputs(brokers=brokers, affected=every_partition(replicas, brokers), meta=meta)
    affected = touched_partitions(replicas, brokers, failed)
    for p in affected:
        for b, size in zip(p.replicas, p.sizes):
            if size is None:
                brokers[b].bytes += p.size
    return Inputs(brokers=brokers, affected=affected, meta=meta)


def broker_table(replicas, brokers_df) -> dict[int, BrokerInfo]:
    """Every broker the cluster registers, plus every broker an assignment names.

    A broker named only in assignments is dead as far as the cluster knows: it stays in the
    table (its replicas must move) with ``known`` False. Counts, leaders and reported
    bytes come from one aggregate over the replica rows.
    """
    from pyspark.sql import functions as F

    brokers: dict[int, BrokerInfo] = {}
    for row in brokers_df.select("broker_id", "rack", "alive", "fenced").collect():
        alive = bool(row["alive"]) and not bool(row["fenced"])
        brokers[int(row["broker_id"])] = BrokerInfo(int(row["broker_id"]), row["rack"], alive, True)

    per_broker = replicas.groupBy("replica").agg(
        F.count(F.lit(1)).alias("replicas"),
        F.coalesce(F.sum("size_bytes"), F.lit(0)).alias("reported"),
        F.max("broker_rack").alias("rack"),
        F.max(F.col("broker_alive").cast("int")).alias("alive"),
        F.sum((F.col("replica_index") == 0).cast("int")).alias("leaders"),
    )
    for row in per_broker.collect():
        b = int(row["replica"])
        info = brokers.get(b)
        if info is None:  # named in assignments only: dead as far as the cluster knows
            info = brokers[b] = BrokerInfo(b, row["rack"], bool(row["alive"]), False)
        info.replicas = int(row["replicas"])
        info.bytes = int(row["reported"])
        info.leaders = int(row["leaders"] or 0)
    return brokers


def touched_partitions(replicas, brokers: dict[int, BrokerInfo], failed: set[int]) -> list[Affected]:
    """The partitions with a replica on ``failed`` (collected), and the unreported sizes of the rest.

    A partition is touched when it has a failed replica or a replica whose size was not
    reported; only the keys are scanned first, so the rows grouped per partition are those of
    the touched partitions only. The untouched ones' unreported replicas are added to
    ``brokers`` here, while the grouped rows are cached.
    """
    from pyspark.sql import functions as F

    is_failed = F.col("replica").isin(sorted(failed)) if failed else F.lit(False)
    cached_keys = (
        replicas.where(is_failed | F.col("size_bytes").isNull())
        .select("topic", "partition")
        .distinct()
        .persist()
    )
    # Usually a few thousand keys: broadcast them so the big side is filtered without a shuffle.
    # A snapshot taken without log dirs has every size missing: then a plain join.
    keys = F.broadcast(cached_keys) if cached_keys.count() <= BROADCAST_KEYS_MAX else cached_keys
    touched = (
        replicas.join(keys, ["topic", "partition"], "left_semi")
        .groupBy("topic", "partition")
        .agg(
            F.sort_array(F.collect_list(_replica_entry())).alias("entries"),
            F.coalesce(F.max("size_bytes"), F.lit(0)).alias("size"),
            F.max(is_failed.cast("int")).alias("affected"),
        )
        .persist()
    )
    try:
        affected = [_affected(row) for row in touched.where(F.col("affected") == 1).collect()]
        _fill_unreported(touched, brokers)
    finally:
        touched.unpersist()
        cached_keys.unpersist()
    return affected


def _replica_entry():
    """One replica of a partition, sorted by its index in the assignment (the leader first)."""
    from pyspark.sql import functions as F

    return F.struct(
        F.col("replica_index"),
        F.col("replica"),
        F.col("size_bytes"),
        F.coalesce(F.col("in_isr"), F.lit(False)).alias("in_isr"),
        F.coalesce(F.col("broker_alive"), F.lit(False)).alias("broker_alive"),
    )


def _affected(row) -> Affected:
    """A touched partition's row as the planner reads it: per-replica tuples in assignment order."""
    entries = row["entries"]
    return Affected(
        topic=row["topic"],
        partition=int(row["partition"]),
        replicas=tuple(int(e["replica"]) for e in entries),
        sizes=tuple(e["size_bytes"] for e in entries),
        in_isr=tuple(bool(e["in_isr"]) for e in entries),
        alive=tuple(bool(e["broker_alive"]) for e in entries),
        size=int(row["size"]),
    )


def _fill_unreported(touched, brokers: dict[int, BrokerInfo]) -> None:
    """Unreported replicas of untouched partitions (a log dir that did not answer) count at
    the partition's size; the affected ones are filled in on the driver by ``load_inputs``."""
    from pyspark.sql import functions as F

    fill = (
        touched.where(F.col("affected") == 0)
        .select(F.explode("entries").alias("e"), "size")
        .where(F.col("e.size_bytes").isNull())
        .groupBy(F.col("e.replica").alias("replica"))
        .agg(F.sum("size").alias("fill"))
    )
    for row in fill.collect():
        brokers[int(row["replica"])].bytes += int(row["fill"] or 0)


def every_partition(replicas, brokers: dict[int, BrokerInfo]) -> list[Affected]:
    """Every partition with its replicas in assignment order, from the flat replica rows (one scan,
    no grouping in Spark): as Arrow when pyarrow is there, else collected rows. A million
    partitions grouped per partition in Spark and collected as nested rows took ~3x as long as the
    flat columns through Arrow. Unreported sizes count at the partition's size, as for the
    affected partitions of a heal."""
    columns = ("topic", "partition", "replica_index", "replica", "size_bytes", "in_isr", "broker_alive")
    flat = replicas.select(*columns)
    try:
        table = flat.toArrow()
        rows = zip(*(table.column(c).to_pylist() for c in columns))
    except ImportError:  # no pyarrow on this driver
        rows = (tuple(row) for row in flat.collect())
    grouped: dict[tuple[str, int], list[tuple]] = {}
    for topic, partition, index, replica, size, in_isr, alive in rows:
        grouped.setdefault((topic, partition), []).append((index, replica, size, bool(in_isr), bool(alive)))
    affected = []
    for (topic, partition), entries in grouped.items():
        entries.sort(key=lambda e: (e[0], e[1]))
        sizes = tuple(e[2] for e in entries)
        size = max((s for s in sizes if s is not None), default=0)
        replica_ids = tuple(e[1] for e in entries)
        for b, reported in zip(replica_ids, sizes):
            if reported is None:
                brokers[b].bytes += size
        in_isr, alive = tuple(e[3] for e in entries), tuple(e[4] for e in entries)
        affected.append(Affected(topic, int(partition), replica_ids, sizes, in_isr, alive, size))
    return affected


# --- balance rules: begin (copied verbatim from include/kafka_runbooks/balance_rules.py) ---


def rack_of(racks, broker):
    """A broker's rack for counting racks; no known rack counts as a rack of its own."""
    rack = racks.get(broker)
    return ("rack", rack) if rack is not None else ("broker", broker)


def distinct_racks(racks, brokers):
    """How many racks the brokers span."""
    return len({rack_of(racks, b) for b in brokers})


def racks_kept(racks, old, new):
    """A partition's target spans at least as many racks as its current replicas."""
    return distinct_racks(racks, new) >= distinct_racks(racks, old)


def spread_limit(text, mean):
    """The largest allowed spread: ``"2"`` is a count, ``"10%"`` a share of the mean per broker
    (rounded down, at least 1); None for anything else (the caller refuses it in its own words:
    this block imports nothing, not even the library's errors)."""
    value = str(text).strip()
    percent = value.endswith("%")
    number = value[:-1].strip() if percent else value
    try:
        amount = float(number)
    except ValueError:
        return None
    if amount != amount or amount < 0 or (not percent and amount != int(amount)):
        return None
    if not percent:
        return int(amount)
    return max(1, int(amount * mean / 100.0))


def spread(counts, brokers):
    """Most minus least of ``counts`` over ``brokers`` (0 without brokers)."""
    values = [counts.get(b, 0) for b in brokers]
    return max(values) - min(values) if values else 0


def moves_lower_bound(values, limit):
    """The fewest unit moves that bring every value into one window of width ``limit``, the total
    kept: for each feasible window ``[lo, lo + limit]``, the larger of the units above it and the
    units missing below it; the best window. No rack or disk rule can make a plan need fewer.
    None when no window holds the total (``limit`` 0 and a total that does not divide evenly):
    no number of moves reaches that target."""
    values = list(values)
    if not values:
        return 0
    n, total = len(values), sum(values)
    best = None
    for lo in range(max(0, -(-(total - n * limit) // n)), total // n + 1):
        hi = lo + limit
        if not n * lo <= total <= n * hi:
            continue
        above = sum(v - hi for v in values if v > hi)
        below = sum(lo - v for v in values if v < lo)
        need = max(above, below)
        best = need if best is None or need < best else best
    return best


def bytes_spread_limit(percent, sizes, brokers):
    """The largest allowed bytes spread (most minus least bytes per broker): ``percent`` of the mean
    bytes per broker of ``brokers``, rounded down (Cruise Control's DiskUsageDistributionGoal keeps
    each broker's disk usage within a threshold around the mean the same way). None when
    ``percent`` is not a number >= 0, or when a broker's bytes are unknown (None or missing in
    ``sizes``: its log dirs did not answer): no limit is judged from a mean that is not known."""
    try:
        amount = float(str(percent).strip().removesuffix("%").strip())
    except ValueError:
        return None
    values = [sizes.get(b) for b in brokers]
    if amount != amount or amount < 0 or any(v is None for v in values):
        return None
    return int(amount * (sum(values) / len(values) if values else 0) / 100.0)


def within_bytes_spread(sizes, brokers, limit):
    """Bytes per broker within the spread: True or False, or None when it cannot be judged (a
    broker's bytes unknown, or no limit): unknown is never taken as within, nor as 0 bytes."""
    values = [sizes.get(b) for b in brokers]
    if limit is None or any(v is None for v in values):
        return None
    return (max(values) - min(values) if values else 0) <= limit


def fits(room, broker, gained):
    """A broker may gain ``gained`` bytes: no room map means no disk rule was asked for; a broker
    missing from it has unknown room, which is no room."""
    if room is None:
        return True
    if broker not in room:
        return gained <= 0
    return gained <= room[broker]


def racks_wanted(racks, current, pool, rf):
    """How many racks a partition raised to ``rf`` replicas spans at best: its own, plus one per
    added replica while ``pool`` (the brokers that may take one) offers a rack it lacks."""
    have = {rack_of(racks, b) for b in current}
    lacking = {rack_of(racks, b) for b in pool if b not in current} - have
    return len(have) + min(max(0, rf - len(current)), len(lacking))


def raise_order(size, topic, partition):
    """The order partitions get their new replicas in: largest first (bytes even out best when
    the big ones are placed while the choice is widest), then by name."""
    return (-size, topic, partition)


def new_replicas(racks, current, pool, rf, load, room, gained, size):
    """The brokers a partition of ``size`` bytes gains to reach ``rf`` replicas, one by one: a
    broker of ``pool`` that is not a replica yet and fits its disk room, on a rack the partition
    lacks first, then the fewest replicas, then the fewest bytes (``load``: broker -> [replicas,
    bytes]; it and ``gained`` are updated with each pick), then the lowest id. None when no broker
    fits a replica still missing (too few brokers, or no room)."""
    chosen = []
    target = list(current)
    while len(target) < rf:
        have = {rack_of(racks, b) for b in target}
        fit = [b for b in pool if b not in target and fits(room, b, gained.get(b, 0) + size)]
        if not fit:
            return None
        best = min(fit, key=lambda b: (rack_of(racks, b) in have, load[b][0], load[b][1], b))
        chosen.append(best)
        target.append(best)
        load[best][0] += 1
        load[best][1] += size
        gained[best] = gained.get(best, 0) + size
    return chosen


def dropped_replicas(racks, current, isr, rf, load, size):
    """The replicas a partition of ``size`` bytes drops to come down to ``rf``, one by one: one out
    of the ISR first (it holds nothing the others lack), then not the preferred leader (the first
    replica: leadership stays where it was balanced), then one whose removal keeps the most racks,
    then the most replicas, then the most bytes (``load``: broker -> [replicas, bytes], updated
    with each drop), then the highest id. The kept replicas keep their order."""
    dropped = []
    kept = list(current)
    while len(kept) > rf:
        first = kept[0]

        def cost(b, kept=kept, first=first):
            """Sort key of a candidate to drop; the smallest is dropped (the order the function's docstring
            gives)."""
            rest = [k for k in kept if k != b]
            lost = distinct_racks(racks, kept) - distinct_racks(racks, rest)
            return (b in isr, b == first, lost, -load[b][0], -load[b][1], -b)

        worst = min(kept, key=cost)
        dropped.append(worst)
        kept.remove(worst)
        load[worst][0] -= 1
        load[worst][1] -= size
    return dropped


def kept_in_sync(current, dropped, isr):
    """Every replica a lowered partition keeps is in its ISR: otherwise the lowering would keep a
    replica that lacks acknowledged messages (or drop the only in-sync one) and is refused."""
    return all(b in isr for b in current if b not in dropped)


# --- balance rules: end ---


# ---------------------------------------------------------------------------------------------
# Driver part: validation, assignment, chunks. Pure Python, testable without Spark.


def rack_key(broker: BrokerInfo | None, broker_id: int) -> tuple:
    """A broker's rack for counting distinct racks; no rack known means a rack of its own."""
    if broker is not None and broker.rack is not None:
        return ("rack", broker.rack)
    return ("broker", broker_id)


def choose_receivers(
    brokers: dict[int, BrokerInfo], failed: list[int], receivers: list[int] | None, drain: bool = False
) -> list[int]:
    """The receivers to use, or PlanImpossible saying what is wrong with the brokers asked for."""
    if not failed:
        raise PlanImpossible("no failed broker given")
    unknown = [b for b in failed if b not in brokers]
    if unknown:
        raise PlanImpossible(
            f"failed broker(s) {unknown} unknown to the snapshot (not registered, no replicas)"
        )
    gone = [b for b in failed if drain and not (brokers[b].alive and brokers[b].known)]
    if gone:
        raise PlanImpossible(
            f"broker(s) {gone} to drain are not live and registered (a dead broker is healed, not drained)"
        )
    if receivers is None:
        chosen = sorted(b for b, info in brokers.items() if info.alive and b not in failed)
    else:
        overlap = sorted(set(receivers) & set(failed))
        if overlap:
            raise PlanImpossible(f"receivers include failed broker(s) {overlap}")
        unknown = sorted(b for b in receivers if b not in brokers)
        if unknown:
            raise PlanImpossible(f"receiver(s) {unknown} unknown to the snapshot")
        dead = sorted(b for b in receivers if not brokers[b].alive)
        if dead:
            raise PlanImpossible(f"receiver(s) {dead} not alive (or fenced)")
        chosen = sorted(set(receivers))
    return chosen


class Balancer:
    """Running load of the receivers, grouped by rack so a rack-constrained pick stays cheap.

    Each rack has a heap of (moved, moved bytes, bytes, replicas, id) with lazy deletion; brokers without a rack
    share one heap (each of them is a rack of its own, so they always bring a new rack).
    """

    NO_RACK = ("none",)

    def __init__(self, brokers: dict[int, BrokerInfo], receivers: list[int]) -> None:
        self.brokers = brokers
        self.moved = {b: 0 for b in receivers}
        self.moved_bytes = {b: 0 for b in receivers}
        self.groups: dict[tuple, list] = {}
        self.group_of: dict[int, tuple] = {}
        for b in receivers:
            group = ("rack", brokers[b].rack) if brokers[b].rack is not None else self.NO_RACK
            self.group_of[b] = group
            heapq.heappush(self.groups.setdefault(group, []), self.key(b))

    def key(self, b: int) -> tuple:
        """Heap entry of receiver ``b``: fewest moved replicas, then moved bytes, then bytes and replicas
        held, then id; an entry that no longer equals it is stale."""
        info = self.brokers[b]
        return (self.moved[b], self.moved_bytes[b], info.bytes, info.replicas, b)

    def _best_in(self, group: tuple, exclude: set[int]) -> tuple | None:
        heap = self.groups[group]
        skipped = []
        best = None
        while heap:
            entry = heap[0]
            b = entry[-1]
            if entry != self.key(b):  # stale
                heapq.heappop(heap)
                continue
            if b in exclude:
                skipped.append(heapq.heappop(heap))
                continue
            best = entry
            break
        for entry in skipped:
            heapq.heappush(heap, entry)
        return best

    def pick(self, exclude: set[int], avoid_racks: set[tuple] | None) -> int | None:
        """Least loaded receiver not in ``exclude``; with ``avoid_racks``, one outside those racks."""
        best = None
        for group in self.groups:
            if avoid_racks is not None and group != self.NO_RACK and group in avoid_racks:
                continue
            entry = self._best_in(group, exclude)
            if entry is not None and (best is None or entry < best):
                best = entry
        return None if best is None else best[-1]

    def take(self, b: int, size: int) -> None:
        """Receiver ``b`` gets a replica of ``size`` bytes: its load grows and its heap entry is renewed."""
        self.moved[b] += 1
        self.moved_bytes[b] += size
        self.brokers[b].replicas += 1
        self.brokers[b].bytes += size
        heapq.heappush(self.groups[self.group_of[b]], self.key(b))

    def give_back(self, b: int, size: int) -> None:
        """Undo :meth:`take` (a repair moved the replica elsewhere): its load shrinks and its heap entry is
        renewed."""
        self.moved[b] -= 1
        self.moved_bytes[b] -= size
        self.brokers[b].replicas -= 1
        self.brokers[b].bytes -= size
        heapq.heappush(self.groups[self.group_of[b]], self.key(b))


@dataclass
class Move:
    topic: str
    partition: int
    current: tuple[int, ...]
    target: list[int]
    size: int
    live_isr_left: int
    chunk: int = 0

    def leader_is_free(self, failed: set[int]) -> bool:
        """The failed replica was the preferred leader: any target replica may go first."""
        return self.current[0] in failed


def balance_leaders(moves: list[Move], brokers: dict[int, BrokerInfo], failed: set[int]) -> int:
    """Choose the first replica of every partition whose preferred leader failed; count changes.

    Greedy (the target replica with the fewest preferred leaderships so far, then one that is
    already in sync, i.e. not new, then the lowest id), then a repair pass that hands a preferred
    leadership to another replica of the same partition with at least two fewer, until none is
    left. Each handover lowers the sum of squared counts, so it ends. Only the order of a
    partition's target replicas changes: the chosen one goes first, the others keep theirs.
    """
    free = [m for m in moves if m.leader_is_free(failed)]
    base = {id(m): list(m.target) for m in free}  # each handover reorders from here, not from the last
    for m in free:
        brokers[m.current[0]].leaders -= 1
    for m in sorted(free, key=lambda m: (m.topic, m.partition)):
        old = set(m.current)
        chosen = min(m.target, key=lambda b: (brokers[b].leaders, b not in old, b))
        _lead(m, chosen, base[id(m)])
        brokers[chosen].leaders += 1
    changed = 0
    for _ in range(1000):
        moved_one = False
        for m in free:
            first = m.target[0]
            other = min(m.target[1:], key=lambda b: (brokers[b].leaders, b), default=None)
            if other is not None and brokers[other].leaders <= brokers[first].leaders - 2:
                brokers[first].leaders -= 1
                brokers[other].leaders += 1
                _lead(m, other, base[id(m)])
                changed += 1
                moved_one = True
        if not moved_one:
            break
    return changed


def _lead(m: Move, leader: int, base: list[int]) -> None:
    """Put ``leader`` first and the others in their ``base`` order (before any leader choice).

    Reordering from the last choice instead would let a second handover swap two survivors
    ([1, 3, 2] -> [3, 1, 2] -> [2, 3, 1]), which moves more than the failed replica."""
    m.target[:] = [leader] + [b for b in base if b != leader]


def assign(
    inputs: Inputs, failed: list[int], receivers: list[int], drain: bool = False
) -> tuple[list[Move], list[dict], Balancer]:
    """Choose a receiver for every failed replica; (moves, not_moved, balancer).

    ``drain``: the failed brokers are live (a decommission), so their own replicas are sources
    to copy from and their in-sync replicas count as live ISR. The largest partitions go first,
    while every receiver still has the most choice."""
    brokers = inputs.brokers
    failed_set = set(failed)
    balancer = Balancer(brokers, receivers)
    moves: list[Move] = []
    not_moved: list[dict] = []
    short: list[str] = []
    for p in sorted(inputs.affected, key=lambda a: (-a.size, a.topic, a.partition)):
        survivors = [b for b in p.replicas if b not in failed_set]
        if not any(brokers[b].alive for b in (p.replicas if drain else survivors)):
            not_moved.append(_without_source(p))
            continue
        target = _replace_failed(p, brokers, failed_set, balancer)
        if target is None:
            short.append(f"{p.topic}-{p.partition} {list(p.replicas)}")
            continue
        live_isr = _live_isr_left(p, brokers, failed_set, drain)
        moves.append(Move(p.topic, p.partition, p.replicas, target, p.size, live_isr))
    if short:
        raise PlanImpossible(
            f"cannot keep the replication factor of {len(short)} partition(s): too few eligible "
            f"receivers ({len(receivers)}: {receivers[:20]}) outside their replicas; "
            f"e.g. {', '.join(short[:5])}"
        )
    repair(moves, balancer, failed_set)
    balance_leaders(moves, brokers, failed_set)
    return moves, not_moved, balancer


def _without_source(p: Affected) -> dict:
    """A partition no live replica can be copied from: listed as not moved, never guessed at."""
    return {
        "topic": p.topic,
        "partition": p.partition,
        "replicas": list(p.replicas),
        "reason": "no live replica outside the failed brokers to copy from",
    }


def _live_isr_left(p: Affected, brokers: dict[int, BrokerInfo], failed: set[int], drain: bool) -> int:
    """In-sync replicas on live brokers that stay while the move runs: how close it is to offline."""
    return sum(
        1 for b, isr in zip(p.replicas, p.in_isr) if (drain or b not in failed) and isr and brokers[b].alive
    )


def _replace_failed(
    p: Affected, brokers: dict[int, BrokerInfo], failed: set[int], balancer: Balancer
) -> list[int] | None:
    """The partition's target: each failed replica replaced in its place (a preferred leader's
    slot stays first), on a rack the partition lost if one is free, else on any receiver; None
    when too few receivers are left outside its replicas. The failed broker loses the replica:
    what it counted is its reported size, else the partition's."""
    target = list(p.replicas)
    old_racks = len({rack_key(brokers[b], b) for b in p.replicas})
    members = {b for b in p.replicas if b not in failed}
    for i, b in enumerate(p.replicas):
        if b not in failed:
            continue
        racks = {rack_key(brokers[m], m) for m in members}
        chosen = None
        if len(racks) < old_racks:
            chosen = balancer.pick(members | failed, avoid_racks=racks)
        if chosen is None:
            chosen = balancer.pick(members | failed, avoid_racks=None)
        if chosen is None:
            return None
        target[i] = chosen
        members.add(chosen)
        balancer.take(chosen, p.size)
        brokers[b].replicas -= 1
        brokers[b].bytes -= p.size if p.sizes[i] is None else p.sizes[i]
    return target


def repair(moves: list[Move], balancer: Balancer, failed: set[int], max_rounds: int = 100) -> int:
    """Move replicas from a receiver to one with at least two fewer when racks allow; count moves.

    Greedy picks keep moved counts within 1 unless racks narrowed the choice for some partitions;
    this pass fixes what a later, less constrained pick could have balanced. Each move lowers the
    sum of squared counts, so it ends.
    """
    moved = balancer.moved
    if not moved:
        return 0
    slots = [(m, i) for m in moves for i, b in enumerate(m.current) if b in failed and m.target[i] != b]
    done = 0
    for _ in range(max_rounds):
        if max(moved.values()) - min(moved.values()) <= 1:
            break
        changed = _repair_round(slots, balancer, failed)
        done += changed
        if not changed:
            break
    return done


def _repair_round(slots: list[tuple[Move, int]], balancer: Balancer, failed: set[int]) -> int:
    """One pass over the moved replicas, those on the most loaded receivers first; how many moved
    again. Per rack, receivers stay sorted by moved count as counts change."""
    moved = balancer.moved
    low = min(moved.values())
    by_group: dict[tuple, list] = {}
    for b, n in moved.items():
        by_group.setdefault(balancer.group_of[b], []).append((n, b))
    for group in by_group.values():
        group.sort()
    changed = 0
    slots.sort(key=lambda s: -moved[s[0].target[s[1]]])
    for m, i in slots:
        r = m.target[i]
        if moved[r] < low + 2:
            continue
        s = _less_loaded(m, i, by_group, balancer.brokers, moved[r], failed)
        if s is None:
            continue
        for b, delta in ((r, -1), (s, +1)):
            group = by_group[balancer.group_of[b]]
            group.remove((moved[b], b))
            insort(group, (moved[b] + delta, b))
        balancer.give_back(r, m.size)
        balancer.take(s, m.size)
        m.target[i] = s
        changed += 1
        low = min(moved.values())
    return changed


def _less_loaded(
    m: Move, i: int, by_group: dict[tuple, list], brokers: dict[int, BrokerInfo], count: int, failed: set[int]
) -> int | None:
    """The receiver with the fewest moved replicas, at least two fewer than ``count``, that may
    take slot ``i`` of ``m`` without losing a rack; None when none may."""
    old = len({rack_key(brokers[b], b) for b in m.target})
    others = {rack_key(brokers[b], b) for j, b in enumerate(m.target) if j != i}
    best = None
    for name, group in by_group.items():
        # Every broker of a rack gives the same count; a broker without a rack adds one.
        if name != Balancer.NO_RACK and len(others | {name}) < old:
            continue
        for n, s in group:
            if n > count - 2 or (best is not None and n >= best[0]):
                break
            if s in m.target or s in failed:
                continue
            best = (n, s)
            break
    return None if best is None else best[1]


def make_chunks(moves: list[Move], max_partitions: int, max_bytes: int) -> list[list[Move]]:
    """Ordered chunks: least redundancy left first, then smallest; each within both limits."""
    ordered = sorted(moves, key=lambda m: (m.live_isr_left, m.size, m.topic, m.partition))
    chunks: list[list[Move]] = []
    current: list[Move] = []
    current_bytes = 0
    for m in ordered:
        if current and (len(current) >= max_partitions or current_bytes + m.size > max_bytes):
            chunks.append(current)
            current, current_bytes = [], 0
        current.append(m)
        current_bytes += m.size
    if current:
        chunks.append(current)
    for index, chunk in enumerate(chunks, start=1):
        for m in chunk:
            m.chunk = index
    return chunks


# ---------------------------------------------------------------------------------------------
# Rebalance (``--rebalance add-brokers|full``, kafka_rebalance): even out replicas and preferred
# leaderships per broker within a target spread, with the fewest moves the greedy finds.

REBALANCE_MODES = ("add-brokers", "full")


@dataclass
class Balance:
    """A rebalance's working state: every partition's target so far, and who may give and take."""

    brokers: dict[int, BrokerInfo]
    scope: list[int]  # the live brokers whose spread is judged
    sources: list[int]  # brokers replicas may leave
    receivers: list[int]  # brokers replicas (and preferred leaderships) may go to
    racks: dict[int, str | None]
    room: dict[int, int] | None  # bytes each broker may gain (None: no disk rule asked for)
    parts: dict[tuple[str, int], Affected]
    target: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    gained: dict[int, int] = field(default_factory=dict)  # bytes gained per broker so far
    moved: dict[int, int] = field(default_factory=dict)  # replicas moved to each receiver
    replica_moves: int = 0
    bytes_copied: int = 0

    def count(self, b: int) -> int:
        """Replicas broker ``b`` holds in the targets so far."""
        return self.brokers[b].replicas

    def leaders(self) -> dict[int, int]:
        """Preferred leaderships per broker in scope in the targets so far."""
        return {b: self.brokers[b].leaders for b in self.scope}


def _blocked(bal: Balance, key: tuple[str, int], s: int, d: int) -> str | None:
    """Why the replica of ``key`` on ``s`` may not go to ``d`` (None: it may)."""
    now = bal.target[key]
    if d in now:
        return "already a replica"
    new = [d if b == s else b for b in now]
    if not racks_kept(bal.racks, now, new):
        return "rack rule"
    if not fits(bal.room, d, bal.gained.get(d, 0) + bal.parts[key].size):
        return "disk room"
    return None


def _move_replica(bal: Balance, key: tuple[str, int], s: int, d: int) -> None:
    """The replica on ``s`` goes to ``d`` at the same position (a preferred leader's with it)."""
    p = bal.parts[key]
    now = bal.target[key]
    i = now.index(s)
    now[i] = d
    src_bytes = (
        p.size
        if s not in p.replicas or p.sizes[p.replicas.index(s)] is None
        else p.sizes[p.replicas.index(s)]
    )
    bal.brokers[s].replicas -= 1
    bal.brokers[s].bytes -= src_bytes
    bal.brokers[d].replicas += 1
    bal.brokers[d].bytes += p.size
    if i == 0:
        bal.brokers[s].leaders -= 1
        bal.brokers[d].leaders += 1
    bal.gained[d] = bal.gained.get(d, 0) + p.size
    bal.gained[s] = bal.gained.get(s, 0) - src_bytes
    bal.moved[d] = bal.moved.get(d, 0) + 1
    bal.replica_moves += 1
    bal.bytes_copied += p.size


def _candidate_lists(bal: Balance) -> dict[tuple[int, bool], list[tuple[str, int]]]:
    """(source, leads) -> the partitions whose replica on that source is (True) or is not (False)
    the preferred leader, by size then name. Built from (size, name, replicas) tuples sorted as
    they are (names are unique: the replicas are never compared) and one list per source and kind
    looked up, not created, per replica: with a key function and a new (source, kind) tuple per
    replica, the lists of a million partitions took ~8 s (the sort and the 3 million replicas)."""
    leads: dict[int, list] = {b: [] for b in bal.sources}
    follows: dict[int, list] = {b: [] for b in bal.sources}
    for _, key, replicas in sorted([(p.size, k, p.replicas) for k, p in bal.parts.items()]):
        got = leads.get(replicas[0])
        if got is not None:
            got.append(key)
        for b in replicas[1:]:
            got = follows.get(b)
            if got is not None:
                got.append(key)
    lists = {(b, True): keys for b, keys in leads.items() if keys}
    lists.update(((b, False), keys) for b, keys in follows.items() if keys)
    return lists


class Candidates:
    """Each source's original replicas, smallest partition first (cheapest to copy), split into
    the ones it is the preferred leader of and the others, with a cursor per (source, receiver,
    kind): a replica found blocked for a receiver (already there, rack rule, disk room) is not
    looked at again for it, since a receiver only gains. Without the cursors every pick re-read
    the blocked ones: most of the time of a 20,000-partition plan."""

    def __init__(self, bal: Balance) -> None:
        self.lists = _candidate_lists(bal)
        self.cursor: dict[tuple[int, int, bool], int] = {}
        self.untaken: dict[tuple[int, bool], int] = {}  # per (source, kind): everything before is taken
        self.taken: set[tuple[tuple[str, int], int]] = set()

    def first(self, bal: Balance, s: int, d: int, leads: bool) -> tuple[str, int] | None:
        """The smallest replica of ``s`` of this kind that may go to ``d`` now. Each receiver's
        cursor starts past the source's taken prefix: the replicas that other receivers took are
        read once per source, not once per receiver (1000 receivers re-read them otherwise)."""
        keys = self.lists.get((s, leads), [])
        j = self.untaken.get((s, leads), 0)
        while j < len(keys) and (keys[j], s) in self.taken:
            j += 1
        self.untaken[(s, leads)] = j
        i = max(self.cursor.get((s, d, leads), 0), j)
        while i < len(keys) and ((keys[i], s) in self.taken or _blocked(bal, keys[i], s, d) is not None):
            i += 1
        self.cursor[(s, d, leads)] = i
        return keys[i] if i < len(keys) else None

    def left(self, s: int) -> list[tuple[str, int]]:
        """The replicas of ``s`` not moved yet."""
        return [
            k for leads in (True, False) for k in self.lists.get((s, leads), []) if (k, s) not in self.taken
        ]


def _pick(bal: Balance, candidates: Candidates, s: int, d: int) -> tuple[str, int] | None:
    """The smallest partition whose replica on ``s`` may go to ``d``; a preferred leader's replica
    first while ``d`` leads at least two fewer than ``s`` (its leadership goes along, which the
    leader balance needs anyway), else a follower's first (no leadership changes for nothing)."""
    lead = bal.brokers[d].leaders <= bal.brokers[s].leaders - 2
    return candidates.first(bal, s, d, lead) or candidates.first(bal, s, d, not lead)


@contextmanager
def without_gc():
    """Python's cycle collector off while a rebalance loads and plans: it walks every live object
    each time enough new ones pile up, and a million partitions are millions of objects, none in a
    cycle (a third of a 200,000-partition plan's time went to it). Back on afterwards, as it was."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class Ranking:
    """Brokers in order of a count that changes by one at a time: a sorted list of (count, id)
    (``most_first``: (-count, id)) kept in step with each change by bisection. Sorting every
    broker for each move was most of a plan on 1000 brokers (a million partitions: ~300,000
    moves, each sorting the sources and the receivers)."""

    def __init__(self, counts: dict[int, int], most_first: bool = False) -> None:
        self.sign = -1 if most_first else 1
        self.counts = dict(counts)
        self.items = sorted((self.sign * c, b) for b, c in counts.items())

    def shift(self, b: int, delta: int) -> None:
        """Broker ``b``'s count changed by ``delta`` (a broker not ranked here is left alone)."""
        if b not in self.counts:
            return
        del self.items[bisect_left(self.items, (self.sign * self.counts[b], b))]
        self.counts[b] += delta
        insort(self.items, (self.sign * self.counts[b], b))

    def spread(self) -> int:
        """Most minus least (0 without brokers), as ``spread`` gives it."""
        return self.items[-1][0] - self.items[0][0] if self.items else 0

    def ids(self):
        """Broker ids in rank order (least first, or most first for ``most_first``)."""
        return (b for _, b in self.items)


def balance_replicas(bal: Balance, limit: int) -> str | None:
    """Move replicas from the most loaded source to the least loaded receiver (smallest partition
    that keeps racks and disk room) until the spread is within ``limit``; None when reached, else
    why it stops."""
    candidates = Candidates(bal)
    sources = Ranking({b: bal.count(b) for b in bal.sources}, most_first=True)
    receivers = Ranking({b: bal.count(b) for b in bal.receivers})
    # full: every broker in scope receives, so the receivers' ranking is the scope's too
    scope = (
        receivers if set(bal.receivers) == set(bal.scope) else Ranking({b: bal.count(b) for b in bal.scope})
    )
    rankings = (sources, receivers) if scope is receivers else (sources, receivers, scope)
    while scope.spread() > limit:
        moved = _move_one(bal, candidates, sources, receivers)
        if moved is None:
            return _why_stuck(bal, candidates)
        for ranking in rankings:
            ranking.shift(moved[0], -1)
            ranking.shift(moved[1], 1)
    return None


def _move_one(bal: Balance, candidates: Candidates, sources: Ranking, receivers: Ranking):
    """One replica from the most loaded source that has one to give to the least loaded receiver
    with at least two fewer that may take it; (source, receiver), or None when none may."""
    for s in sources.ids():
        for d in receivers.ids():
            if bal.count(s) - bal.count(d) < 2:
                break
            key = _pick(bal, candidates, s, d)
            if key is not None:
                candidates.taken.add((key, s))
                _move_replica(bal, key, s, d)
                return s, d
    return None


def _why_stuck(bal: Balance, candidates: Candidates) -> str:
    """Why no replica can move any more although the spread is above the target."""
    counts = {b: bal.count(b) for b in bal.scope}
    top = max(bal.sources, key=lambda b: (counts[b], -b))
    low = min(bal.receivers, key=lambda b: (counts[b], b))
    if counts[top] - counts[low] < 2:
        who = "the new brokers" if set(bal.receivers) != set(bal.scope) else "the receivers"
        return (
            f"the most loaded source, broker {top}, holds {counts[top]} replicas and the least loaded "
            f"receiver, broker {low}, {counts[low]}: replicas move only onto {who} {bal.receivers}, so the "
            "other brokers cannot be evened out among themselves"
        )
    reasons: dict[str, int] = {}
    for d in bal.receivers:
        if counts[top] - counts[d] < 2:
            continue
        for k in candidates.left(top):
            why = _blocked(bal, k, top, d) or "?"
            reasons[why] = reasons.get(why, 0) + 1
    said = ", ".join(f"{why}: {n}" for why, n in sorted(reasons.items())) or "no replica left to move"
    return (
        f"no replica of broker {top} ({counts[top]} replicas) may go to a broker with at least two fewer "
        f"(least loaded: broker {low} with {counts[low]}); refused moves by reason: {said}"
    )


def balance_leaders_within(bal: Balance, limit: int) -> str | None:
    """Hand preferred leaderships (the first replica) from the broker leading the most towards one
    with at least two fewer, only reordering (no data moves); None when within ``limit``, else why
    it stops. A handover goes straight to another replica of one of its partitions when one has
    two fewer, else along a chain (broker 1 hands a partition to 2, 2 one of its own to 3...) that
    ends at such a broker: with two replicas per partition the direct handover is often not there.
    Partitions already moving go first. Any live broker may take a leadership, in add-brokers too:
    a reorder moves no replica, and the old brokers' leaderships are often uneven among themselves."""
    led = _led(bal)
    ranking = Ranking(bal.leaders(), most_first=True)
    scope = set(bal.scope)
    read: dict[int, tuple[int, int]] = {}  # see _handover
    while ranking.spread() > limit:
        path = next(
            (p for s in ranking.ids() if (p := _handover(bal, led, ranking.counts, scope, s, read))), None
        )
        if path is None:
            top = next(ranking.ids())
            return (
                f"broker {top} is the preferred leader of {ranking.counts[top]} partitions and no chain of "
                "their replicas reaches a broker with at least two fewer preferred leaderships"
            )
        _forget_read(read, path, ranking)
        for k, u, v in path:
            t = bal.target[k]
            del led[u][bisect_left(led[u], (_unmoved(bal, k), k))]
            t[:] = [v] + [x for x in t if x != v]
            insort(led.setdefault(v, []), (_unmoved(bal, k), k))
            bal.brokers[u].leaders -= 1
            bal.brokers[v].leaders += 1
            ranking.shift(u, -1)
            ranking.shift(v, 1)
    return None


def _handover(bal: Balance, led, leads: dict[int, int], scope: set[int], s: int, read: dict):
    """``_leader_path`` from ``s``, its first level read first on its own: the first follower, in
    ``led``'s order, of a partition ``s`` leads that leads at least two fewer (``leads``: the
    preferred leaderships of the brokers in scope; ``s`` counts as its own partitions' leader, and
    a broker out of scope is not in it). That is the direct handover the breadth-first search
    returns first; the search itself runs only when there is none.

    ``read[s]`` = (i, fewer): the first i partitions of ``led[s]`` had no such follower when ``s``
    last looked, at that threshold; they are not read again while it holds (``_forget_read``
    says when not). Nearly every handover of a million-partition plan is direct, from the top, and
    re-read the same hundreds of partitions whose followers lead as many as the top: most of the
    leader pass."""
    fewer = leads[s] - 2
    entries, target = led.get(s, ()), bal.target
    start, seen_at = read.get(s, (0, fewer))
    for i in range(start if fewer <= seen_at else 0, len(entries)):
        for b in target[entries[i][1]]:
            n = leads.get(b)
            if n is not None and n <= fewer:
                read[s] = (i, fewer)
                return [(entries[i][1], s, b)]
    read[s] = (len(entries), fewer)
    return _leader_path(bal, led, scope, s)


def _forget_read(read: dict[int, tuple[int, int]], path, ranking: Ranking) -> None:
    """Before ``path`` is applied: which of ``_handover``'s read prefixes stay true. A partition
    read stays without a follower leading at most the threshold while no follower's count falls
    to it. A direct handover from a broker leading the most leaves it leading at least the new
    most minus one, above every later threshold (the most never grows: the receiver ends below
    it), so only the receiver's list changes (a partition comes in anywhere in its order): its
    prefix goes. Any other handover (a chain, or from below the top) forgets every prefix."""
    (_, u, v), top = path[0], ranking.counts[next(ranking.ids())]
    if len(path) > 1 or ranking.counts[u] != top:
        read.clear()
    else:
        read.pop(v, None)


def _unmoved(bal: Balance, k: tuple[str, int]) -> bool:
    """The partition's target is still its current assignment (partitions already moving go first)."""
    return list(bal.parts[k].replicas) == bal.target[k]


def _led(bal: Balance) -> dict[int, list[tuple[bool, tuple[str, int]]]]:
    """The partitions each broker is the first replica of, in the order a handover tries them
    (already moving first, then by name), kept sorted as they change hands: sorting a broker's
    thousand partitions for each handover was most of the leader pass on a million partitions.
    ``_unmoved`` inline: a call per partition was a third of this."""
    led: dict[int, list[tuple[bool, tuple[str, int]]]] = {}
    parts = bal.parts
    for k, t in bal.target.items():
        led.setdefault(t[0], []).append((list(parts[k].replicas) == t, k))
    for entries in led.values():
        entries.sort()
    return led


def _leader_path(bal: Balance, led, scope: set[int], s: int) -> list[tuple[tuple[str, int], int, int]] | None:
    """The shortest chain of handovers (partition, from, to) from ``s`` to a live broker leading at
    least two fewer (breadth first: a direct handover when there is one), or None."""
    from collections import deque

    most = bal.brokers[s].leaders
    prev: dict[int, tuple[int, tuple[str, int]] | None] = {s: None}
    queue = deque([s])
    while queue:
        u = queue.popleft()
        for _, k in led.get(u, ()):
            for b in bal.target[k][1:]:
                if b in prev or b not in scope:
                    continue
                prev[b] = (u, k)
                if bal.brokers[b].leaders <= most - 2:
                    path, v = [], b
                    while prev[v] is not None:
                        w, key = prev[v]
                        path.append((key, w, v))
                        v = w
                    return path[::-1]
                queue.append(b)
    return None


def _size_on(p: Affected, b: int) -> int:
    """Bytes a replica of ``p`` takes on broker ``b``: what ``b`` reported when it holds one today,
    else the partition's size (a new replica copies the whole log)."""
    if b in p.replicas:
        reported = p.sizes[p.replicas.index(b)]
        if reported is not None:
            return reported
    return p.size


def _added(p: Affected, t: list[int]) -> list[int]:
    """The brokers of target ``t`` that do not hold a replica of ``p`` today (what gets copied)."""
    return [b for b in t if b not in p.replicas]


def _shift(bal: Balance, key: tuple[str, int], s: int, d: int) -> None:
    """The bytes pass's move: the replica of ``key`` on ``s`` goes to ``d`` at the same position. A
    replica going back to a broker that holds it today undoes an earlier move (nothing is copied),
    so the move tallies are recounted from the partition's target rather than added up."""
    p, t = bal.parts[key], bal.target[key]
    was = _added(p, t)
    i = t.index(s)
    t[i] = d
    now = _added(p, t)
    out, into = _size_on(p, s), _size_on(p, d)
    bal.brokers[s].replicas -= 1
    bal.brokers[d].replicas += 1
    bal.brokers[s].bytes -= out
    bal.brokers[d].bytes += into
    if i == 0:
        bal.brokers[s].leaders -= 1
        bal.brokers[d].leaders += 1
    bal.gained[s] = bal.gained.get(s, 0) - out
    bal.gained[d] = bal.gained.get(d, 0) + into
    for b in was:
        bal.moved[b] -= 1
    for b in now:
        bal.moved[b] = bal.moved.get(b, 0) + 1
    bal.replica_moves += len(now) - len(was)
    bal.bytes_copied += p.size * (len(now) - len(was))


class Held:
    """The partitions each broker holds in the targets as (size, key), smallest first (equal sizes
    in any order), kept in step with each move. Built in the targets' own order, then each list
    sorted by size alone: reading the targets in size order instead (one global sort) took twice
    as long (scattered reads), and sorting on the whole tuples compares more."""

    def __init__(self, bal: Balance) -> None:
        self.by_size: dict[int, list[tuple[int, tuple[str, int]]]] = {}
        parts, lists = bal.parts, self.by_size
        for k, t in bal.target.items():
            entry = (parts[k].size, k)
            for b in t:
                if b not in lists:
                    lists[b] = []
                lists[b].append(entry)
        for entries in lists.values():
            entries.sort(key=itemgetter(0))
        self.sources, self.receivers = set(bal.sources), set(bal.receivers)

    def of(self, bal: Balance, b: int) -> list[tuple[int, tuple[str, int]]]:
        """Broker ``b``'s partitions as (size, key), smallest first."""
        return self.by_size.setdefault(b, [])

    def moved(self, bal: Balance, key: tuple[str, int], s: int, d: int) -> None:
        """The partition ``key`` left ``s`` for ``d`` (found among its equal sizes, placed before them)."""
        size = bal.parts[key].size
        held = self.by_size[s]
        i = bisect_left(held, (size,))
        while held[i][1] != key:
            i += 1
        del held[i]
        into = self.of(bal, d)
        into.insert(bisect_left(into, (size,)), (size, key))


BYTES_PAIRS = 4  # the most loaded broker against the 4 least, and the least against the 4 most
BYTES_NEAR = 8  # partitions looked at on each side of the ideal size, per pair
BYTES_TRIED = 12  # ways a pair is tried (the nearest to its ideal first): the pass's cost per step


def _near(held: list[tuple[int, tuple[str, int]]], size: float, n: int = BYTES_NEAR):
    """Up to ``n`` entries on each side of ``size`` in a size-sorted list, nearest first."""
    i = bisect_left(held, (size,))
    return sorted(held[max(0, i - n) : i + n], key=lambda e: abs(e[0] - size))


def _may(bal: Balance, held: Held, key: tuple[str, int], s: int, d: int) -> bool:
    """A replica may go from ``s`` to ``d``: a source to a receiver, or back to a broker that holds
    it today (undoing a planned move: no replica lands anywhere new)."""
    return (s in held.sources and d in held.receivers) or d in bal.parts[key].replicas


def _pair_steps(bal: Balance, held: Held, h: int, low: int, counts: Ranking, keep: int):
    """Ways to bring brokers ``h`` (more bytes) and ``low`` closer: one replica moved from ``h``
    (when the replica spread stays within ``keep``), or a large replica of ``h`` swapped for a
    small one of ``low`` (the counts stay); each as the (key, from, to) steps it takes."""
    gap = bal.brokers[h].bytes - bal.brokers[low].bytes
    counts.shift(h, -1)
    counts.shift(low, 1)
    count_ok = counts.spread() <= keep
    counts.shift(h, 1)
    counts.shift(low, -1)
    if count_ok:
        for _, k in _near(held.of(bal, h), gap / 2):
            if _may(bal, held, k, h, low) and _blocked(bal, k, h, low) is None:
                yield [(k, h, low)]
    for size_q, q in held.of(bal, low)[:BYTES_NEAR]:
        if not _may(bal, held, q, low, h) or _blocked(bal, q, low, h) is not None:
            continue
        for size_p, k in _near(held.of(bal, h), size_q + gap / 2, 2):
            if size_p > size_q and _may(bal, held, k, h, low) and _blocked(bal, k, h, low) is None:
                yield [(k, h, low), (q, low, h)]


def _bytes_step(bal: Balance, held: Held, ends: tuple[Ranking, Ranking], counts: Ranking, keep: int):
    """The step that brings a pair closest together: the source with the most bytes against the
    receivers with the fewest, then the receiver with the fewest against the sources with the most
    (``ends``: sources and receivers ranked by bytes; in add-brokers the new brokers are the
    receivers, so data goes to them even when an old broker holds the fewest bytes); each step must
    narrow its pair from both ends (so the sum of squares falls and the pass ends); fewer moves,
    then fewer bytes copied, break ties. None when no pair has one."""
    low = [b for _, b in ends[1].items[:BYTES_PAIRS]]
    high = [b for _, b in ends[0].items[-BYTES_PAIRS:]][::-1]
    for h, lo in [(high[0], b) for b in low] + [(b, low[0]) for b in high[1:]]:
        bh, bl = bal.brokers[h].bytes, bal.brokers[lo].bytes
        best = None
        for steps in islice(_pair_steps(bal, held, h, lo, counts, keep), BYTES_TRIED):
            dh = sum(_size_on(bal.parts[k], d) if d == h else -_size_on(bal.parts[k], s) for k, s, d in steps)
            dl = sum(
                _size_on(bal.parts[k], d) if d == lo else -_size_on(bal.parts[k], s) for k, s, d in steps
            )
            nh, nl = bh + dh, bl + dl
            if max(nh, nl) < bh and min(nh, nl) > bl:
                score = (abs(nh - nl), len(steps), sum(bal.parts[k].size for k, _, _ in steps))
                best = (score, steps) if best is None or score < best[0] else best
        if best is not None:
            return best[1]
    return None


def balance_bytes(bal: Balance, limit: int, replica_limit: int) -> str | None:
    """Bring bytes per broker within ``limit`` (most minus least) after the replica pass, keeping
    the replica spread within ``replica_limit`` (or where the replica pass left it), the racks and
    the disk room: move a replica from the broker with the most bytes to one with the fewest when
    the counts allow, else swap a large replica for a small one (add-brokers: only onto the new
    brokers, a swap handing back a replica the plan gave them). None when reached, else why."""
    sizes = Ranking({b: bal.brokers[b].bytes for b in bal.scope})
    if sizes.spread() <= limit:
        return None
    counts = Ranking({b: bal.count(b) for b in bal.scope})
    keep = max(replica_limit, counts.spread())
    held = Held(bal)
    ends = tuple(
        sizes if set(side) == set(bal.scope) else Ranking({b: bal.brokers[b].bytes for b in side})
        for side in (bal.sources, bal.receivers)
    )
    rankings = [sizes] + [r for r in ends if r is not sizes]
    for _ in range(BYTES_STEPS_PER_BROKER * len(bal.scope)):
        if sizes.spread() <= limit:
            return None
        steps = _bytes_step(bal, held, ends, counts, keep)
        if steps is None:
            return _why_bytes(bal, sizes, keep)
        for k, s, d in steps:
            was = (bal.brokers[s].bytes, bal.brokers[d].bytes)
            _shift(bal, k, s, d)
            held.moved(bal, k, s, d)
            for ranking in rankings:
                ranking.shift(s, bal.brokers[s].bytes - was[0])
                ranking.shift(d, bal.brokers[d].bytes - was[1])
            counts.shift(s, -1)
            counts.shift(d, 1)
    if sizes.spread() <= limit:
        return None
    return f"the bytes pass stopped after {BYTES_STEPS_PER_BROKER} steps per broker, bytes spread {sizes.spread()}"


BYTES_STEPS_PER_BROKER = 20


def _why_bytes(bal: Balance, sizes: Ranking, keep: int) -> str:
    """Why no move or swap narrows the bytes spread any more: add-brokers' rule when neither end is
    a new broker (the old brokers cannot be evened out among themselves), else the rules that
    refuse every way between the ends."""
    low, high = sizes.items[0][1], sizes.items[-1][1]
    said = (
        f"bytes per broker: broker {high} holds {bal.brokers[high].bytes} bytes (the most), broker {low} "
        f"{bal.brokers[low].bytes} (the fewest)"
    )
    new = set(bal.receivers)
    if new != set(bal.scope) and low not in new and high not in new:
        return (
            f"{said}: neither is a new broker, and add-brokers moves replicas only onto the {len(new)} new "
            "broker(s), so the other brokers' bytes cannot be evened out among themselves"
        )
    return (
        f"{said}, and no replica move or swap between the most and the least loaded keeps the replica "
        f"spread within {keep}, the racks and the disk room"
    )


def bytes_target(bal: Balance, text: str | None, replica_limit: int, bytes0: dict[int, int]):
    """The bytes pass and the summary's bytes spread: (why not reached or None, figure). No target
    asked (``text`` None): the spread is shown, not judged. A broker with a replica whose size its
    log dirs did not report has unknown bytes: the target is not judged and the plan says so."""
    unknown = sorted(
        {b for p in bal.parts.values() if None in p.sizes for b, z in zip(p.replicas, p.sizes) if z is None}
        & set(bal.scope)
    )
    known = {b: (None if b in unknown else n) for b, n in bytes0.items()}
    figure = {"target": text, "limit": None, "unknown": unknown, "before": spread(bytes0, bal.scope)}
    if text is None:
        return None, figure
    if unknown:
        figure["before"] = None
        return (
            f"bytes per broker unknown for broker(s) {unknown} (their log dirs reported no size for some "
            "replicas): the bytes target is not judged",
            figure,
        )
    figure["limit"] = bytes_spread_limit(text, known, bal.scope)
    if figure["limit"] is None:
        raise PlanImpossible(f"--max-bytes-spread-percent: a percentage of the mean >= 0, not {text!r}")
    why = balance_bytes(bal, figure["limit"], replica_limit)
    return why, figure


def rebalance_scope(
    brokers: dict[int, BrokerInfo], mode: str, new: list[int] | None
) -> tuple[list[int], list[int], list[int]]:
    """(scope, sources, receivers) of a rebalance, or PlanImpossible naming the brokers wrong."""
    if mode not in REBALANCE_MODES:
        raise PlanImpossible(f"--rebalance is one of {list(REBALANCE_MODES)}, not {mode!r}")
    down = sorted(b for b, info in brokers.items() if info.replicas and not info.alive)
    if down:
        raise PlanImpossible(
            f"broker(s) {down} hold replicas but are not live: heal them first (kafka_failed_broker_reassignment)"
        )
    scope = sorted(b for b, info in brokers.items() if info.alive and info.known)
    if mode == "full":
        if new:
            raise PlanImpossible("--new-brokers belongs to --rebalance add-brokers")
        return scope, scope, scope
    if not new:
        raise PlanImpossible("--rebalance add-brokers needs --new-brokers: the brokers just added")
    bad = sorted(b for b in new if b not in scope)
    if bad:
        raise PlanImpossible(f"new broker(s) {bad} are not live registered brokers (live: {scope})")
    return scope, [b for b in scope if b not in new], sorted(new)


def rebalance(
    inputs: Inputs, mode: str, new: list[int] | None, spreads: tuple[str, ...], room: dict[int, int] | None
) -> tuple[list[Move], list[dict], dict[str, Any]]:
    """Plan a rebalance: (replica moves, leader-only moves, the summary's rebalance figures).
    ``spreads``: the replica and leader targets, and optionally the bytes target (a percentage of
    the mean bytes per broker; absent or None: bytes are shown, not judged). The bytes pass runs
    between the replica pass and the leader pass, which only reorders."""
    brokers = inputs.brokers
    scope, sources, receivers = rebalance_scope(brokers, mode, new)
    parts = {(p.topic, p.partition): p for p in inputs.affected}
    bal = Balance(brokers, scope, sources, receivers, {b: i.rack for b, i in brokers.items()}, room, parts)
    bal.target = {k: list(p.replicas) for k, p in parts.items()}
    replicas0 = {b: brokers[b].replicas for b in scope}
    leaders0 = bal.leaders()
    bytes0 = {b: brokers[b].bytes for b in scope}
    limits = (
        _spread(spreads[0], "--max-replica-spread", replicas0),
        _spread(spreads[1], "--max-leader-spread", leaders0),
    )
    why = balance_replicas(bal, limits[0])
    why_bytes, bytes_figure = bytes_target(bal, (list(spreads) + [None])[2], limits[0], bytes0)
    why_leaders = balance_leaders_within(bal, limits[1])
    moves, leader_moves = [], []
    for k, t in sorted(bal.target.items()):
        p = parts[k]
        if list(p.replicas) == t:
            continue
        if set(p.replicas) == set(t):
            leader_moves.append({"topic": k[0], "partition": k[1], "from": list(p.replicas), "to": t})
            continue
        live_isr = sum(1 for b, isr in zip(p.replicas, p.in_isr) if isr and brokers[b].alive)
        moves.append(Move(k[0], k[1], p.replicas, t, p.size, live_isr))
    figures = _rebalance_figures(
        bal, mode, spreads, limits, (replicas0, leaders0, bytes0), (why, why_leaders, why_bytes)
    )
    after_bytes = figures["spread"]["bytes"]["after"] if bytes_figure["before"] is not None else None
    figures["spread"]["bytes"] = {**bytes_figure, "after": after_bytes}
    figures["leader_moves"] = leader_moves
    figures["leader_changes"] = sum(1 for k, t in bal.target.items() if t[0] != parts[k].replicas[0])
    if not moves and not leader_moves and not figures["reached"]:
        raise PlanImpossible(
            f"no move brings the cluster closer to the target: {why or why_leaders or why_bytes}"
        )
    return moves, leader_moves, figures


def _spread(text: str, what: str, counts: dict[int, int]) -> int:
    limit = spread_limit(text, sum(counts.values()) / max(len(counts), 1))
    if limit is None:
        raise PlanImpossible(f"{what}: a spread is a count ('2') or a percentage ('10%'), not {text!r}")
    return limit


def _rebalance_figures(bal, mode, spreads, limits, before, why) -> dict[str, Any]:
    """The spread before and after against the target, the lower bounds beside the moves."""
    replicas0, leaders0, bytes0 = before
    after = {b: bal.count(b) for b in bal.scope}
    leaders = bal.leaders()
    return {
        "rebalance": mode,
        "new_brokers": bal.receivers if mode == "add-brokers" else [],
        "scope": bal.scope,
        "sources": bal.sources,
        "room": None if bal.room is None else {str(b): n for b, n in sorted(bal.room.items())},
        "replica_moves": bal.replica_moves,
        "bytes_copied": bal.bytes_copied,
        "spread": {
            "replicas": {
                "target": spreads[0],
                "limit": limits[0],
                "before": spread(replicas0, bal.scope),
                "after": spread(after, bal.scope),
                "moves": bal.replica_moves,
                "lower_bound_moves": moves_lower_bound([replicas0[b] for b in bal.scope], limits[0]),
            },
            "leaders": {
                "target": spreads[1],
                "limit": limits[1],
                "before": spread(leaders0, bal.scope),
                "after": spread(leaders, bal.scope),
                "lower_bound_moves": moves_lower_bound([leaders0[b] for b in bal.scope], limits[1]),
            },
            "bytes": {
                "before": spread(bytes0, bal.scope),
                "after": spread({b: bal.brokers[b].bytes for b in bal.scope}, bal.scope),
            },
        },
        "reached": all(w is None for w in why),
        "why_not": "; ".join(w for w in why if w) or None,
    }


# ---------------------------------------------------------------------------------------------
# Replication factor (``--rebalance replication-factor``, kafka_rebalance): raise the named topics'
# partitions to ``--replication-factor`` with the shared units (``new_replicas`` in ``raise_order``,
# ``racks_wanted``), which ``check_plan`` replays on the snapshot; lower them only when asked
# (``dropped_replicas``, ``kept_in_sync``; the runbook checks min.insync.replicas before the gate).

RF_MODE = "replication-factor"


def _rf_scope(brokers: dict[int, BrokerInfo], rf: int) -> list[int]:
    """The live registered brokers new replicas may go to, or PlanImpossible: a broker holding
    replicas is down, or the target is above the live brokers."""
    down = sorted(b for b, info in brokers.items() if info.replicas and not info.alive)
    if down:
        raise PlanImpossible(
            f"broker(s) {down} hold replicas but are not live: heal them first (kafka_failed_broker_reassignment)"
        )
    scope = sorted(b for b, info in brokers.items() if info.alive and info.known)
    if rf > len(scope):
        raise PlanImpossible(
            f"replication factor {rf} is above the {len(scope)} live broker(s) {scope}: "
            "no partition can have more replicas than there are brokers"
        )
    return scope


def _rf_partitions(inputs: Inputs, topics: list[str], rf: int, lower: bool = False) -> list[Affected]:
    """The partitions of ``topics`` below ``rf`` (and above it when ``lower``), or PlanImpossible:
    a topic is gone, or one is above ``rf`` while lowering was not asked for."""
    named = set(topics)
    parts = [p for p in inputs.affected if p.topic in named]
    missing = sorted(named - {p.topic for p in parts})
    if missing:
        raise PlanImpossible(f"topic(s) {missing[:20]} are not in the snapshot: they changed since validate")
    above = sorted({p.topic for p in parts if len(p.replicas) > rf})
    if above and not lower:
        raise PlanImpossible(
            f"topic(s) {above[:20]} are above replication factor {rf}: lowering is not planned "
            "without --allow-replication-factor-decrease=true"
        )
    return [p for p in parts if len(p.replicas) != rf]


def raise_replication(
    inputs: Inputs, rf: int, topics: list[str], room: dict[int, int] | None, lower: bool = False
) -> tuple[list[Move], dict[str, Any]]:
    """Give every partition of ``topics`` below ``rf`` its missing replicas (``new_replicas``);
    (moves, the summary's figures). The existing replicas keep their places, so the preferred
    leader stays; a partition no broker fits, or short of the racks it could span, is impossible."""
    brokers = inputs.brokers
    scope = _rf_scope(brokers, rf)
    racks = {b: info.rack for b, info in brokers.items()}
    load = {b: [brokers[b].replicas, brokers[b].bytes] for b in scope}
    gained: dict[int, int] = {}
    moves, stuck = [], []
    parts = _rf_partitions(inputs, topics, rf, lower)
    for p in sorted(
        (p for p in parts if len(p.replicas) < rf), key=lambda p: raise_order(p.size, p.topic, p.partition)
    ):
        chosen = new_replicas(racks, p.replicas, scope, rf, load, room, gained, p.size)
        target = None if chosen is None else [*p.replicas, *chosen]
        if target is None or distinct_racks(racks, target) < racks_wanted(racks, p.replicas, scope, rf):
            stuck.append(f"{p.topic}-{p.partition} {list(p.replicas)}")
            continue
        for b in chosen:
            brokers[b].replicas += 1
            brokers[b].bytes += p.size
        live_isr = sum(1 for b, isr in zip(p.replicas, p.in_isr) if isr and brokers[b].alive)
        moves.append(Move(p.topic, p.partition, p.replicas, target, p.size, live_isr))
    if stuck:
        raise PlanImpossible(
            f"{len(stuck)} partition(s) cannot reach replication factor {rf} on racks they lack within the "
            f"disk room {room}: e.g. {', '.join(stuck[:5])}"
        )
    moves += lower_replication(brokers, parts, rf, racks, load)
    return moves, {**_rf_figures(moves, rf, topics, scope, room), "allow_replication_factor_decrease": lower}


def _count_drops(brokers: dict[int, BrokerInfo], p: Affected, dropped: list[int], target: list[int]) -> None:
    """The summary's per-broker figures after a lowering: each dropped replica leaves its broker's
    replicas and bytes; a dropped preferred leader (out of the ISR) hands it to the first kept one."""
    for b in dropped:  # the bytes the replica itself reported (the partition's size when it did not)
        own = p.sizes[p.replicas.index(b)]
        brokers[b].replicas -= 1
        brokers[b].bytes -= p.size if own is None else own
    if p.replicas[0] in dropped:
        brokers[p.replicas[0]].leaders -= 1
        brokers[target[0]].leaders += 1


def lower_replication(
    brokers: dict[int, BrokerInfo], parts: list[Affected], rf: int, racks, load
) -> list[Move]:
    """The partitions above ``rf`` lowered by ``dropped_replicas`` in name order on the load after
    the raises; PlanImpossible when one would keep a replica out of its ISR (``kept_in_sync``)."""
    moves, unsafe = [], []
    for p in sorted((p for p in parts if len(p.replicas) > rf), key=lambda p: (p.topic, p.partition)):
        isr = {b for b, in_isr in zip(p.replicas, p.in_isr) if in_isr}
        for b in p.replicas:
            load.setdefault(b, [0, 0])
        dropped = dropped_replicas(racks, p.replicas, isr, rf, load, p.size)
        if not kept_in_sync(p.replicas, dropped, isr):
            unsafe.append(f"{p.topic}-{p.partition} {list(p.replicas)}")
            continue
        target = [b for b in p.replicas if b not in dropped]
        _count_drops(brokers, p, dropped, target)
        moves.append(Move(p.topic, p.partition, p.replicas, target, p.size, len(target)))
    if unsafe:
        raise PlanImpossible(
            f"{len(unsafe)} partition(s) cannot be lowered to replication factor {rf} keeping only in-sync "
            f"replicas: e.g. {', '.join(unsafe[:5])}"
        )
    return moves


def _rf_figures(moves: list[Move], rf: int, topics: list[str], scope: list[int], room) -> dict[str, Any]:
    """The summary's replication-factor figures: what is raised and lowered, replicas added and
    removed, data to copy."""
    added = sum(max(0, len(m.target) - len(m.current)) for m in moves)
    removed = sum(max(0, len(m.current) - len(m.target)) for m in moves)
    raised: dict[str, int] = {}
    lowered: dict[str, int] = {}
    for m in moves:
        side = raised if len(m.target) > len(m.current) else lowered
        side[m.topic] = side.get(m.topic, 0) + 1
    return {
        "rebalance": RF_MODE,
        "replication_factor": rf,
        "topics": sorted(topics),
        "raised": dict(sorted(raised.items())),
        "lowered": dict(sorted(lowered.items())),
        "new_brokers": [],
        "scope": scope,
        "sources": scope,
        "room": None if room is None else {str(b): n for b, n in sorted(room.items())},
        "replica_moves": added + removed,
        "replicas_added": added,
        "replicas_removed": removed,
        "bytes_copied": sum(m.size * max(0, len(m.target) - len(m.current)) for m in moves),
        "leader_moves": [],
        "leader_changes": 0,
        "reached": True,
        "why_not": None,
    }


# ---------------------------------------------------------------------------------------------
# Output.


def _reassignment(moves: list[Move]) -> dict:
    """plan.json in kafka-reassign-partitions' own format, so an operator can apply it by hand."""
    return {
        "version": 1,
        "partitions": [
            {"topic": m.topic, "partition": m.partition, "replicas": list(m.target)} for m in moves
        ],
    }


LARGE_JSON_ITEMS = 1000  # a file listing more partitions or moves than this is written compact


def _write_json(spark, path: str, content: Any) -> None:
    """One output file, whole or not at all (``write_text``), through Hadoop's FileSystem; indented
    for a reader, compact once it lists more than ``LARGE_JSON_ITEMS`` partitions or moves: the
    indenting encoder is Python's own, ~5x slower than the compact one in C (about 3 s of a
    million-partition rebalance's summary and plan, files nobody reads by eye)."""
    lists = [v for v in content.values() if isinstance(v, list)] if isinstance(content, dict) else []
    large = any(len(v) > LARGE_JSON_ITEMS for v in lists)
    write_text(spark, path, json.dumps(content, indent=None if large else 1) + "\n")


def clear_output(spark, out: str) -> None:
    """Remove a previous run's files so a reader never mixes two runs.

    summary.json goes first: without it no reader takes what is left for a finished plan.
    """
    for name in OUTPUT_FILES:
        remove(spark, _join(out, name))
    remove(spark, _join(out, CHUNKS_DIR))


def write_chunks(spark, out: str, chunks: list[list[Move]]) -> list[dict]:
    """Write chunks/0001.json... ``CHUNK_WRITERS`` at a time; the summary's entry of each chunk.

    One file per chunk, and each write waits on its store (a PUT on S3, a fork of ``chmod`` by
    Hadoop's local file system without its native library): one after the other, a plan of
    thousands of chunks spent longer writing than planning. All of them are written before
    plan.json and summary.json, so the order readers rely on holds.
    """
    from concurrent.futures import ThreadPoolExecutor

    entries = []
    for index, chunk in enumerate(chunks, start=1):
        name = f"{CHUNKS_DIR}/{index:04d}.json"
        entries.append(
            {"index": index, "file": name, "partitions": len(chunk), "bytes": sum(m.size for m in chunk)}
        )

    def write(entry: dict, chunk: list[Move]) -> None:
        """Write one chunk's reassignment JSON to its file (run on a writer thread)."""
        _write_json(spark, _join(out, entry["file"]), _reassignment(chunk))

    with ThreadPoolExecutor(CHUNK_WRITERS) as pool:
        for done in [pool.submit(write, entry, chunk) for entry, chunk in zip(entries, chunks)]:
            done.result()  # the first failure stops the run before plan.json and summary.json
    return entries


def write_plan(
    spark,
    out: str,
    inputs: Inputs,
    failed: list[int],
    receivers: list[int],
    chunks: list[list[Move]],
    not_moved: list[dict],
    before: dict[int, tuple[int, int, int]],
    moved: dict[int, int],
    limits: tuple[int, int],
    snapshot: str,
    drain: bool = False,
    drain_replicas: list[tuple[str, int, int]] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict:
    """Write chunks, plan.json, then summary.json (last: its presence means a finished run);
    ``extra``: a mode's own figures (a rebalance's spreads, bounds and leader-only moves)."""
    ordered = [m for chunk in chunks for m in chunk]
    chunk_entries = write_chunks(spark, out, chunks)
    _write_json(spark, _join(out, PLAN_FILE), _reassignment(ordered))
    brokers = inputs.brokers
    summary = {
        **_what_moves(brokers, failed, receivers, ordered, drain, drain_replicas),
        "max_partitions_per_chunk": limits[0],
        "max_bytes_per_chunk": limits[1],
        "snapshot": snapshot,
        "cluster_id": inputs.meta.get("cluster_id"),
        "taken_at_ms": inputs.meta.get("taken_at_ms"),
        **_spread_after(brokers, failed, receivers, moved, ordered),
        "chunks": chunk_entries,
        "not_moved_count": len(not_moved),
        "not_moved": sorted(not_moved, key=lambda n: (n["topic"], n["partition"]))[:NOT_MOVED_LISTED],
        "per_broker": _per_broker(brokers, before),
        "moves": [
            {
                "topic": m.topic,
                "partition": m.partition,
                "from": list(m.current),
                "to": list(m.target),
                "bytes": m.size,
                "chunk": m.chunk,
            }
            for m in ordered
        ],
    }
    summary.update(extra or {})
    _write_json(spark, _join(out, SUMMARY_FILE), summary)
    return summary


def _what_moves(
    brokers: dict[int, BrokerInfo],
    failed: list[int],
    receivers: list[int],
    ordered: list[Move],
    drain: bool,
    drain_replicas: list[tuple[str, int, int]] | None,
) -> dict[str, Any]:
    """The summary's opening keys: whose replicas move, where to, how many and how big."""
    return {
        "failed_brokers": failed,
        "failed_alive": [b for b in failed if brokers[b].alive],
        "drain": drain,  # the failed brokers are live brokers being emptied (a decommission)
        # only these replicas of the failed (live) brokers move: a failed log dir's (kafka_log_dir_failure)
        "drain_replicas": [f"{t}:{p}@{b}" for t, p, b in drain_replicas] if drain_replicas else None,
        "receivers": receivers,
        "partitions": len(ordered),
        "bytes": sum(m.size for m in ordered),
        "replication_factor_kept": all(len(m.target) == len(m.current) for m in ordered),
    }


def _spread_after(
    brokers: dict[int, BrokerInfo], failed: list[int], receivers: list[int], moved: dict[int, int], ordered
) -> dict[str, Any]:
    """How evenly the receivers take the moved replicas, and the live brokers' preferred
    leaderships after the plan: what the gate shows an approver about the load it creates."""
    live_leaders = [info.leaders for b, info in sorted(brokers.items()) if info.alive and b not in failed]
    counts = [moved[b] for b in receivers]
    return {
        "moved_per_receiver": {str(b): moved[b] for b in receivers},
        "moved_min": min(counts) if counts else 0,
        "moved_max": max(counts) if counts else 0,
        "leaders_min": min(live_leaders) if live_leaders else 0,
        "leaders_max": max(live_leaders) if live_leaders else 0,
        "leaders_changed": sum(1 for m in ordered if m.target[0] != m.current[0]),
    }


def _per_broker(brokers: dict[int, BrokerInfo], before: dict[int, tuple[int, int, int]]) -> dict[str, dict]:
    """Each broker's replicas, bytes and preferred leaderships before and after the plan."""
    per_broker = {}
    for b in sorted(brokers):
        replicas_before, bytes_before, leaders_before = before[b]
        per_broker[str(b)] = {
            "replicas_before": replicas_before,
            "replicas_after": brokers[b].replicas,
            "bytes_before": bytes_before,
            "bytes_after": brokers[b].bytes,
            "leaders_before": leaders_before,
            "leaders_after": brokers[b].leaders,
            "rack": brokers[b].rack,
            "alive": brokers[b].alive,
            "registered": brokers[b].known,
        }
    return per_broker


# ---------------------------------------------------------------------------------------------
# Command line.


def _failed_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of a plan that moves the replicas of ``--failed`` (a heal, a drain, a log
    dir's selected replicas), before the rebalance's: the help lists them in that order."""
    parser.add_argument(
        "--failed", default=None, help="comma-separated ids of the failed brokers (not with --rebalance)"
    )
    parser.add_argument("--receivers", default=None, help="comma-separated ids (default: every live broker)")
    parser.add_argument("--max-partitions-per-chunk", default=str(DEFAULT_MAX_PARTITIONS))
    parser.add_argument("--max-bytes-per-chunk", default=str(DEFAULT_MAX_BYTES))
    parser.add_argument(
        "--drain",
        action="store_true",
        help="the --failed brokers are live brokers to empty (decommission), not dead ones",
    )
    parser.add_argument(
        "--drain-replicas",
        default=None,
        help="only these replicas of the --failed brokers move: topic:partition@broker, comma-separated",
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The job's command line (see the module's usage): one parser for every kind of plan, so a
    plan's arguments are checked the same way whichever runbook submits it."""
    parser = argparse.ArgumentParser(prog="failed_broker_plan.py", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--snapshot",
        required=True,
        help="snapshot folder or Hadoop URL (s3a://...) with replicas.parquet, ...",
    )
    _failed_arguments(parser)
    parser.add_argument(
        "--rebalance",
        default=None,
        help="add-brokers|full: even out replicas and preferred leaders per broker; replication-factor: "
        "raise --topics to --replication-factor (kafka_rebalance)",
    )
    parser.add_argument("--new-brokers", default=None, help="add-brokers: the new brokers, comma-separated")
    parser.add_argument(
        "--replication-factor", default=None, help="replication-factor: the target replication factor"
    )
    parser.add_argument(
        "--topics", default=None, help="replication-factor: the topics to raise, comma-separated"
    )
    parser.add_argument(
        "--allow-replication-factor-decrease",
        default="",
        help="replication-factor: 'true' lowers the --topics above the target (off by default)",
    )
    parser.add_argument(
        "--max-replica-spread", default="10%", help="count ('2') or percent of the mean ('10%%')"
    )
    parser.add_argument(
        "--max-leader-spread", default="10%", help="count ('2') or percent of the mean ('10%%')"
    )
    parser.add_argument(
        "--max-bytes-spread-percent",
        default=None,
        help="most minus least bytes per broker, percent of the mean (absent: bytes shown, not judged)",
    )
    parser.add_argument(
        "--room",
        default=None,
        help="bytes each broker may gain (disk ceiling): broker=bytes, comma-separated",
    )
    parser.add_argument(
        "--out", required=True, help="output folder or Hadoop URL (s3a://...) for the plan files"
    )
    return parser.parse_args(argv)


def _ids(text: str, what: str) -> list[int]:
    """Broker ids from a comma-separated argument; a bad or repeated id makes the plan impossible
    (error.json names it) rather than a traceback the runbook cannot show."""
    try:
        ids = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise PlanImpossible(f"{what} must be comma-separated broker ids, got {text!r}") from None
    if len(set(ids)) != len(ids):
        raise PlanImpossible(f"{what} name a broker twice: {text!r}")
    return ids


def _replica_selection(text: str | None, failed: list[int]) -> set[tuple[str, int, int]] | None:
    """``--drain-replicas`` as (topic, partition, broker) keys; None when not given. A topic name
    holds no ':', '@' or ',' (Kafka allows only letters, digits, '.', '_' and '-')."""
    if text is None:
        return None
    if len(failed) != 1:  # a selected partition's other failed replica would move too
        raise PlanImpossible(f"--drain-replicas works on one --failed broker, got {failed}")
    keys = set()
    for item in (x.strip() for x in text.split(",") if x.strip()):
        topic, colon, rest = item.rpartition(":")
        partition, at, broker = rest.partition("@")
        if not (topic and colon and at and partition.isdigit() and broker.isdigit()):
            raise PlanImpossible(f"--drain-replicas entries are topic:partition@broker, got {item!r}")
        if int(broker) not in failed:
            raise PlanImpossible(f"--drain-replicas names broker {broker}, which is not in --failed {failed}")
        keys.add((topic, int(partition), int(broker)))
    if not keys:
        raise PlanImpossible("--drain-replicas names no replica")
    return keys


def select_replicas(inputs: Inputs, selected: set[tuple[str, int, int]]) -> None:
    """Keep only the affected partitions whose replica on a failed broker is a selected one."""
    inputs.affected = [
        p for p in inputs.affected if any((p.topic, p.partition, b) in selected for b in p.replicas)
    ]


def _positive(text: str, what: str) -> int:
    """A chunk limit or a replication factor of at least 1: zero would plan empty chunks or
    partitions without a replica."""
    try:
        value = int(text)
    except ValueError:
        raise PlanImpossible(f"{what} must be an integer, got {text!r}") from None
    if value < 1:
        raise PlanImpossible(f"{what} must be at least 1, got {value}")
    return value


def get_spark():
    """A quiet session; the master comes from spark-submit, else local[*] for a plain `python` run."""
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.appName(APP_NAME)
        .config("spark.log.level", "WARN")
        .config("spark.ui.showConsoleProgress", "false")
    )
    if "PYSPARK_GATEWAY_PORT" not in os.environ and "--master" not in os.environ.get(
        "PYSPARK_SUBMIT_ARGS", ""
    ):
        builder = builder.master("local[*]")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if not spark.sparkContext.getConf().contains("spark.sql.shuffle.partitions"):
        spark.conf.set("spark.sql.shuffle.partitions", str(max(1, spark.sparkContext.defaultParallelism)))
    return spark


def _room(text: str | None) -> dict[int, int] | None:
    """``--room broker=bytes,...`` as a map; None when not given (no disk rule)."""
    if text is None:
        return None
    room = {}
    for item in (x.strip() for x in text.split(",") if x.strip()):
        broker, eq, amount = item.partition("=")
        if not (eq and broker.strip().isdigit() and amount.strip().lstrip("-").isdigit()):
            raise PlanImpossible(f"--room entries are broker=bytes, got {item!r}")
        room[int(broker)] = int(amount)
    return room


def same_brokers(args: argparse.Namespace, figures: dict[str, Any]) -> None:
    """``--failed`` / ``--receivers``, when given with ``--rebalance``, are the sources and receivers
    the runbook validated: the snapshot must give the same ones, or the cluster changed in between."""
    receivers = figures["new_brokers"] or figures["scope"]
    for flag, given, found in (
        ("--failed", args.failed, figures["sources"]),
        ("--receivers", args.receivers, receivers),
    ):
        if given and sorted(_ids(given, flag)) != sorted(found):
            raise PlanImpossible(
                f"{flag} {given} were validated, the snapshot gives {found}: the brokers changed since; run again"
            )


def _rebalance_line(out: str, mode: str, summary: dict[str, Any], seconds: float) -> str:
    """The run's one line: moves beside their lower bounds, the spreads against the targets."""
    s = summary["spread"]
    return (
        f"{out}: rebalance {mode}: {summary['replica_moves']} replica move(s) (lower bound "
        f"{s['replicas']['lower_bound_moves']}), {len(summary['leader_moves'])} leader-only move(s) (lower bound "
        f"{s['leaders']['lower_bound_moves']} leader changes, {summary['leader_changes']} planned), "
        f"{summary['bytes_copied']} bytes; replica spread {s['replicas']['before']} -> {s['replicas']['after']} "
        f"(target {s['replicas']['limit']}), leader spread {s['leaders']['before']} -> {s['leaders']['after']} "
        f"(target {s['leaders']['limit']}), bytes spread {s['bytes']['before']} -> {s['bytes']['after']} "
        f"(target {s['bytes'].get('limit')}); {'reached' if summary['reached'] else 'NOT reached: ' + summary['why_not']}; "
        f"{seconds:.1f}s"
    )


def run_rebalance(spark, args: argparse.Namespace, out: str, started: float) -> int:
    """``--rebalance``: plan, write the plan files (leader-only moves in the summary), or error.json."""
    try:
        new = _ids(args.new_brokers, "--new-brokers") if args.new_brokers else None
        limits = (
            _positive(args.max_partitions_per_chunk, "--max-partitions-per-chunk"),
            _positive(args.max_bytes_per_chunk, "--max-bytes-per-chunk"),
        )
        room = _room(args.room)
        if not exists(spark, args.snapshot):
            raise PlanImpossible(f"snapshot folder {args.snapshot} not found")
        inputs = load_inputs(spark, args.snapshot, None)
        before = {b: (info.replicas, info.bytes, info.leaders) for b, info in inputs.brokers.items()}
        moves, figures = _plan_mode(inputs, args, new, room)
        same_brokers(args, figures)
        chunks = make_chunks(moves, *limits)
        receivers = sorted(figures["new_brokers"] or figures["scope"])
        moved = {b: 0 for b in receivers}
        for m in moves:
            for b in set(m.target) - set(m.current):
                moved[b] += 1
        summary = write_plan(
            spark,
            out,
            inputs,
            figures["sources"],
            receivers,
            chunks,
            [],
            before,
            moved,
            limits,
            args.snapshot,
            extra=figures,
        )
    except PlanImpossible as exc:
        _write_json(spark, _join(out, ERROR_FILE), {"error": str(exc)})
        print(f"plan impossible: {exc}", file=sys.stderr)
        return EXIT_IMPOSSIBLE
    seconds = time.monotonic() - started
    print(
        _rf_line(out, summary, seconds)
        if args.rebalance == RF_MODE
        else _rebalance_line(out, args.rebalance, summary, seconds)
    )
    return 0


def _plan_mode(
    inputs: Inputs, args: argparse.Namespace, new: list[int] | None, room
) -> tuple[list[Move], dict]:
    """(replica moves, the summary's figures) of the mode asked for."""
    if args.rebalance == RF_MODE:
        rf = _positive(args.replication_factor or "", "--replication-factor")
        topics = [t.strip() for t in (args.topics or "").split(",") if t.strip()]
        if not topics:
            raise PlanImpossible("--rebalance replication-factor needs --topics: the topics to raise")
        lower = (args.allow_replication_factor_decrease or "").strip().lower() == "true"
        return raise_replication(inputs, rf, topics, room, lower)
    spreads = (args.max_replica_spread, args.max_leader_spread, args.max_bytes_spread_percent)
    moves, _, figures = rebalance(inputs, args.rebalance, new, spreads, room)
    return moves, figures


def _rf_line(out: str, summary: dict[str, Any], seconds: float) -> str:
    """The replication-factor run's one line: what is raised, replicas added, data to copy."""
    return (
        f"{out}: replication factor {summary['replication_factor']}: {summary['partitions']} partition(s) of "
        f"{len(summary['raised'])} topic(s) raised, {summary['replicas_added']} replica(s) added, "
        f"{summary['replicas_removed']} removed, "
        f"{summary['bytes_copied']} bytes to copy, {len(summary['chunks'])} chunk(s); {seconds:.1f}s"
    )


def run(spark, argv: list[str] | None = None) -> int:
    """Plan with an existing session; writes plan or error.json; returns the exit code."""
    args = parse_args(argv)
    out = args.out
    clear_output(spark, out)
    started = time.monotonic()
    if args.rebalance is not None:
        with without_gc():
            return run_rebalance(spark, args, out, started)
    try:
        summary, loaded = plan_failed(spark, args)
    except PlanImpossible as exc:
        _write_json(spark, _join(out, ERROR_FILE), {"error": str(exc)})
        print(f"plan impossible: {exc}", file=sys.stderr)
        return EXIT_IMPOSSIBLE
    finished = time.monotonic()
    print(
        f"{out}: {summary['partitions']} partitions, {summary['bytes']} bytes, {len(summary['chunks'])} chunks; "
        f"moved per receiver {summary['moved_min']}..{summary['moved_max']}; "
        f"preferred leaders per receiver {summary['leaders_min']}..{summary['leaders_max']}; "
        f"not moved {summary['not_moved_count']}; spark {loaded - started:.1f}s, plan {finished - loaded:.1f}s"
    )
    return 0


def plan_failed(spark, args: argparse.Namespace) -> tuple[dict, float]:
    """Move the replicas of ``--failed`` (a heal, a drain, or a log dir's selected replicas):
    (the summary written, when the snapshot was loaded). Raises PlanImpossible before writing
    a plan when an argument or the snapshot rules it out."""
    failed = _ids(args.failed or "", "--failed")
    if not failed:
        raise PlanImpossible("no failed broker given")
    receivers = None if args.receivers is None else _ids(args.receivers, "--receivers")
    limits = (
        _positive(args.max_partitions_per_chunk, "--max-partitions-per-chunk"),
        _positive(args.max_bytes_per_chunk, "--max-bytes-per-chunk"),
    )
    if not exists(spark, args.snapshot):
        raise PlanImpossible(f"snapshot folder {args.snapshot} not found")
    selected = _replica_selection(args.drain_replicas, failed)
    inputs = load_inputs(spark, args.snapshot, set(failed))
    loaded = time.monotonic()
    # a selection's brokers are live (checked like a drain's), its replicas offline (moved like a heal's)
    chosen = choose_receivers(inputs.brokers, failed, receivers, args.drain or selected is not None)
    if selected is not None:
        select_replicas(inputs, selected)
    before = {b: (info.replicas, info.bytes, info.leaders) for b, info in inputs.brokers.items()}
    moves, not_moved, balancer = assign(inputs, failed, chosen, args.drain and selected is None)
    chunks = make_chunks(moves, *limits)
    summary = write_plan(
        spark,
        out=args.out,
        inputs=inputs,
        failed=failed,
        receivers=chosen,
        chunks=chunks,
        not_moved=not_moved,
        before=before,
        moved=balancer.moved,
        limits=limits,
        snapshot=args.snapshot,
        drain=args.drain,
        drain_replicas=sorted(selected or ()),
    )
    return summary, loaded


def main(argv: list[str] | None = None) -> int:
    """spark-submit's entry: its own session, stopped however the plan ends."""
    spark = get_spark()
    try:
        return run(spark, argv)
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
