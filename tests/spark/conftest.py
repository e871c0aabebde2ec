"""Fixtures for the Spark job tests: one local Spark session, and synthetic snapshot folders.

Snapshots are written with pyarrow using exactly the admin facade's schema, so the tests also
cover how Spark reads those types (int32/int64/bool/nullable strings).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kafka_runbooks.snapshot import schemas

# The admin facade's own schemas: the Spark tests read exactly what a snapshot holds.
REPLICAS_SCHEMA, BROKERS_SCHEMA = schemas()

TAKEN_AT_MS = 1_700_000_000_000
CLUSTER_ID = "test-cluster-id"


@dataclass(frozen=True)
class Broker:
    id: int
    alive: bool = True
    rack: str | None = None
    fenced: bool = False


@dataclass(frozen=True)
class Part:
    """One partition as the controller would report it. leader=-1 means no leader."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    min_isr: int = 2
    leader_epoch: int = 0
    elr: tuple[int, ...] = field(default=())


def replica_size(partition: int, broker_id: int) -> int:
    """Deterministic size so tests can compute expected per-broker totals."""
    return 1000 * (partition + 1) + broker_id


def _as_broker(spec: Broker | int | Mapping) -> Broker:
    if isinstance(spec, Broker):
        return spec
    if isinstance(spec, int):
        return Broker(spec)
    return Broker(**spec)


def _as_part(spec: Part | Mapping) -> Part:
    if isinstance(spec, Part):
        return spec
    spec = dict(spec)
    for key in ("replicas", "isr", "elr"):
        if key in spec:
            spec[key] = tuple(spec[key])
    return Part(**spec)


def write_snapshot(
    root: Path,
    brokers: Iterable[Broker | int | Mapping],
    partitions: Iterable[Part | Mapping],
    *,
    taken_at_ms: int = TAKEN_AT_MS,
    meta: Mapping | None = None,
    write_meta: bool = True,
) -> Path:
    """Write replicas.parquet, brokers.parquet and (optionally) meta.json under root.

    brokers: Broker, an alive broker's id, or a mapping of Broker fields ({"id": 3, "alive": False}).
    partitions: Part or a mapping of Part fields. Broker ids used in assignments but not listed in
    brokers are written as dead replicas (and are absent from brokers.parquet).

    Dead brokers report no size (size_bytes null), like the real facade. Replica rows are written
    in reverse assignment order so tests notice if the job relies on file order.
    """
    brokers = [_as_broker(b) for b in brokers]
    partitions = [_as_part(p) for p in partitions]
    by_id = {b.id: b for b in brokers}
    rows = []
    for p in partitions:
        for index, broker_id in enumerate(p.replicas):
            broker = by_id.get(broker_id, Broker(broker_id, alive=False))
            alive = broker.alive and not broker.fenced
            rows.append(
                {
                    "taken_at_ms": taken_at_ms,
                    "topic": p.topic,
                    "partition": p.partition,
                    "replica": broker_id,
                    "replica_index": index,
                    "replication_factor": len(p.replicas),
                    "leader": p.leader,
                    "leader_epoch": p.leader_epoch,
                    "is_leader": broker_id == p.leader,
                    "in_isr": broker_id in p.isr,
                    "in_elr": broker_id in p.elr,
                    "isr_size": len(p.isr),
                    "min_insync_replicas": p.min_isr,
                    "broker_alive": alive,
                    "broker_rack": broker.rack,
                    "size_bytes": replica_size(p.partition, broker_id) if alive else None,
                    "log_dir": f"/var/lib/kafka/data-{broker_id}" if alive else None,
                }
            )
    rows.reverse()
    root.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=REPLICAS_SCHEMA), root / "replicas.parquet")
    broker_rows = [
        {
            "broker_id": b.id,
            "host": f"broker-{b.id}.test" if b.alive else None,
            "port": 9092 if b.alive else None,
            "rack": b.rack,
            "alive": b.alive,
            "fenced": b.fenced,
        }
        for b in brokers
    ]
    pq.write_table(pa.Table.from_pylist(broker_rows, schema=BROKERS_SCHEMA), root / "brokers.parquet")
    if write_meta:
        content = {"taken_at_ms": taken_at_ms, "cluster_id": CLUSTER_ID, "bootstrap_servers": "x:9092"}
        content.update(meta or {})
        (root / "meta.json").write_text(json.dumps(content))
    return root


class SnapshotMaker:
    """Callable fixture object: make_snapshot(brokers, partitions, **kw) -> a fresh snapshot folder.

    A fixture rather than importable helpers: test folders have no __init__.py, so `import conftest`
    would be ambiguous across folders. The constants tests need for expectations hang off it.
    """

    cluster_id = CLUSTER_ID
    taken_at_ms = TAKEN_AT_MS
    replica_size = staticmethod(replica_size)

    def __init__(self, base: Path) -> None:
        self._base = base
        self._count = 0

    def __call__(self, brokers, partitions, **kwargs) -> Path:
        self._count += 1
        return write_snapshot(self._base / f"snapshot-{self._count}", brokers, partitions, **kwargs)


@pytest.fixture
def make_snapshot(tmp_path: Path) -> SnapshotMaker:
    return SnapshotMaker(tmp_path)


@pytest.fixture(scope="package")
def spark(tmp_path_factory):
    """One quiet local[2] session for the Spark tests (startup costs ~8 s), stopped after the
    last of them: its JVM (~1 GB resident; ~0.006 cores idle) is not kept to the lane's end.

    Without whole-stage code generation and adaptive query execution: these tests are about the
    jobs' logic on a few hundred rows, where compiling each query's code and re-planning it after
    each shuffle cost more than the data (the Spark tests' in-process part took 168 s with them,
    126 s without, back to back); the spark-submit, Connect and cluster runs keep Spark's
    defaults and are compared with runs in this session.

    Its scratch (``spark-*``, ``blockmgr-*``, ``artifacts-*``, unpacked native libraries) is in a
    folder of its own, never ``/tmp``, checked from what the JVM itself reports and removed with
    the session: the JVM deletes its scratch only when it exits cleanly."""
    from pyspark.sql import SparkSession

    from kafka_runbooks_dev.local_spark import local_dir_settings

    # Python workers (if any) must be this interpreter, not whatever python3 is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    scratch = tmp_path_factory.mktemp("spark-scratch")
    java = {"spark.driver.extraJavaOptions": os.environ.get("KR_SPARK_DRIVER_JVM_OPTIONS", "")}
    _, java = local_dir_settings(scratch, java)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("tests-spark")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.log.level", "WARN")
        .config("spark.sql.codegen.wholeStage", "false")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.local.dir", str(scratch))
        .config("spark.driver.extraJavaOptions", java["spark.driver.extraJavaOptions"])
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    used = scratch_reported_by(session)
    yield session
    session.stop()
    shutil.rmtree(scratch)
    outside = [path for path in used if not inside(Path(path), scratch)]
    assert not outside, f"the session's JVM kept scratch outside {scratch}: {outside}"


def inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def scratch_reported_by(session) -> list[str]:
    """Where the session's JVM keeps its scratch, as it says: ``java.io.tmpdir``, the
    ``spark-*`` root of its files and the roots of its ``blockmgr-*`` folders."""
    from pyspark import SparkFiles

    jvm, conf = session.sparkContext._jvm, session.sparkContext._jsc.sc().conf()
    roots = jvm.org.apache.spark.util.Utils.getConfiguredLocalDirs(conf)
    return [
        jvm.java.lang.System.getProperty("java.io.tmpdir"),
        SparkFiles.getRootDirectory(),
        *(str(root) for root in roots),
    ]


@dataclass(frozen=True)
class ClassicRuns:
    """Both jobs' classic runs (in the shared session) on one snapshot, and their seconds."""

    snapshot: Path
    health: Path
    plan: Path
    health_s: float
    plan_s: float


@pytest.fixture(scope="package")
def dead_broker_classic(spark, tmp_path_factory) -> ClassicRuns:
    """The health report and the failed-broker plan of tests/spark/test_jobs_on_s3a.py's cluster
    with a dead broker, each run once in the shared session: the S3A and the Spark Connect tests
    compare their runs of the same jobs, flags and snapshot with these (each of them ran the same
    classic runs again, ~10 s a job here). Tests only read them."""
    import time

    from tests.spark.test_cluster_health import job as health
    from tests.spark.test_failed_broker_plan import job as plan
    from tests.spark.test_jobs_on_s3a import HEALTH_FLAGS, PLAN_FLAGS, cluster_with_a_dead_broker

    root = tmp_path_factory.mktemp("dead-broker-classic")
    snapshot = write_snapshot(root / "snapshot", *cluster_with_a_dead_broker())
    seconds = []
    for run, out, flags in (
        (health.run, ["--output", str(root / "health")], HEALTH_FLAGS),
        (plan.run, ["--out", str(root / "plan")], PLAN_FLAGS),
    ):
        started = time.monotonic()
        assert run(spark, ["--snapshot", str(snapshot), *out, *flags]) == 0
        seconds.append(time.monotonic() - started)
    return ClassicRuns(snapshot, root / "health", root / "plan", *seconds)


#: the fixtures that start (or use) the session's Kafka stack
STACK_FIXTURES = ("kafka_stack", "local_stack", "restore_stack", "admin", "kafka_config")
HERE = Path(__file__).resolve().parent


def _uses_the_stack(item: pytest.Item) -> bool:
    return HERE in Path(str(item.path)).resolve().parents and any(
        name in STACK_FIXTURES for name in getattr(item, "fixturenames", ())
    )


#: modules whose tests share a module-scoped server and run together, after the other Spark
#: tests that need no stack and before those that read it: test_jobs_over_connect's Connect
#: server also serves the demo's warm-up on the stack (its last test kills the server)
KEPT_WHOLE = ("test_jobs_over_connect.py",)


def _kept_whole(item: pytest.Item) -> bool:
    return Path(str(item.path)).name in KEPT_WHOLE


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The Spark tests that read the real stack run after the other Spark tests: the stack
    starts on its first use and would otherwise idle (seven JVMs) through minutes of Spark
    jobs before the integration tests; a module kept whole runs between the two, its own test
    on the stack included (one server start, not two); the order of the rest stays."""
    spark = [i for i, item in enumerate(items) if HERE in Path(str(item.path)).resolve().parents]
    if not spark:
        return
    block = [items[i] for i in spark]
    reordered = (
        [item for item in block if not _uses_the_stack(item) and not _kept_whole(item)]
        + [item for item in block if _kept_whole(item)]
        + [item for item in block if _uses_the_stack(item) and not _kept_whole(item)]
    )
    for index, item in zip(spark, reordered):
        items[index] = item
