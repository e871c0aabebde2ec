"""The snapshot contract between the runbooks and the Spark jobs: one place for its names.

The snapshot folder (written by ``kafka_runbooks.snapshot``), the failed-broker plan
folder (written by ``spark_jobs/failed_broker_plan.py``, read by
``kafka_runbooks.failed_broker.plan``) and the health job's output (read by the health DAG's
``publish_report``) are named here, with the snapshot's columns and their
Arrow types, ``PlanImpossible``, the loading of a snapshot into Spark and the driver's
small-file I/O (``read_text``, ``write_text``, ``exists``, ``remove``).

A snapshot and a job's output are a local folder or a Hadoop URL (``s3a://bucket/key``): the
jobs read and write every file through Hadoop's FileSystem, the parquet files through Spark
and the small JSON files from the driver over py4j (``hadoop_fs``), so one code path serves
both and, on an object store, the next Airflow task finds the files whatever machine it runs
on. A written file appears whole or not at all (see ``write_text``).

The Spark jobs are submitted as single files (no ``--py-files``), so each carries a
verbatim copy of the block between the two marker lines below;
``tests/unit/kafka_runbooks/test_snapshot_contract.py`` fails when a copy differs from this
one (its message says how to copy it back), when a job names a snapshot file by a literal
and when a job opens a driver-local file itself. Nothing in the block imports anything:
it uses ``json`` and ``typing.Any``, which every job imports, and ``spark`` is the caller's
session (its JVM gives the Hadoop classes).
"""

from __future__ import annotations

import json
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

BEGIN = "# --- snapshot contract: begin"
END = "# --- snapshot contract: end ---"


def block(source: str) -> str:
    """The contract block of a source text, marker lines included ("" when it has none)."""
    start = source.find(BEGIN)
    stop = source.find(END)
    if start < 0 or stop < start:
        return ""
    return source[start : stop + len(END)]
