"""Both Spark jobs end to end on the data store: ``--snapshot s3a://…`` and ``--out s3a://…``.

On a Celery or Kubernetes deployment the task after a Spark job runs on another worker, so
the job's outputs must be in the store, not on the driver's disk. Each test uploads one
synthetic snapshot to a real S3Proxy, runs the job through ``spark-submit`` (Hadoop's S3A
connector, the settings ``storage.spark_conf`` gives) with the driver's home and working
folder an empty folder (the plan as a runbook's task submits it: the runbooks' Spark operator
on a ``spark`` connection, through the Airflow provider's SparkSubmitHook), reads what it wrote back through ``kafka_runbooks.storage.Store`` and
compares it with what the same job writes to a local folder for the same snapshot. A job
that still wrote with ``open()`` would leave its files under ``./s3a:/…`` in that folder and
none in the store: both are checked. The wall time of each run is printed (s3a vs local).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kafka_runbooks import storage
from kafka_runbooks.failed_broker.plan import check_plan, load_plan, read_snapshot_rows
from kafka_runbooks_dev.local_spark import LOOPBACK_CONF, ensure_s3a_jars, spark_submit_command
from kafka_runbooks_dev.localstack.s3proxy import CREDENTIAL

JOBS = Path(__file__).resolve().parents[2] / "spark_jobs"
DEAD = 6
RACKS = {1: "a", 2: "b", 3: "c", 4: "a", 5: "b", DEAD: "c"}
PARTITIONS = 120
CHUNK = "8"  # partitions per chunk: the plan is several chunk files, not one
HEALTH_FLAGS = ["--max-listed", "5"]
PLAN_FLAGS = ["--failed", str(DEAD), "--max-partitions-per-chunk", CHUNK]


def rotated(n: int, rf: int, p: int) -> list[int]:
    return [(p + i) % n + 1 for i in range(rf)]


def cluster_with_a_dead_broker() -> tuple[list[dict], list[dict]]:
    """(brokers, partitions): six brokers on three racks, broker 6 dead; half the partitions
    had a replica on it (under-replicated, one of them offline), every one RF 3, min ISR 2."""
    brokers = [{"id": b, "rack": rack, "alive": b != DEAD} for b, rack in RACKS.items()]
    parts = []
    for p in range(PARTITIONS):
        replicas = rotated(len(RACKS), 3, p)
        isr = [b for b in replicas if b != DEAD]
        parts.append(
            {
                "topic": "orders",
                "partition": p,
                "replicas": replicas,
                "isr": isr,
                "leader": isr[0],
                "min_isr": 2,
            }
        )
    parts.append(
        {"topic": "audit", "partition": 0, "replicas": [DEAD], "isr": [DEAD], "leader": -1, "min_isr": 1}
    )
    return brokers, parts


class OnTheStore:
    """The data store of one test (S3Proxy), and spark-submit runs of a job on it or locally."""

    def __init__(self, s3proxy, monkeypatch, tmp_path: Path) -> None:
        for key, value in s3proxy.env(f"jobs-s3a/{tmp_path.name}").items():
            monkeypatch.setenv(key, value)
        storage._STORES.clear()
        self.store = storage.store()
        self.tmp = tmp_path
        self.jars = [str(j) for j in ensure_s3a_jars()]
        # On the driver's class path, as a Spark image carries them: in spark.jars a local[2]
        # executor copies all 658 MB of them into its scratch first (the task's run does, below).
        self.conf = {**storage.spark_conf(), "spark.driver.extraClassPath": ":".join(self.jars)}

    def upload_snapshot(self, local: Path, key: str) -> str:
        self.store.upload_dir(local, key)
        return self.url(key)

    def url(self, key: str) -> str:
        return storage.s3a_url(self.store.url_of(key))

    def run(self, job: str, args: list[str], where: str) -> tuple[subprocess.CompletedProcess, float, Path]:
        """(process, seconds, driver home) of one spark-submit; the driver's home and working
        folder is a fresh empty folder, so anything it writes locally shows up there."""
        home = self.tmp / f"driver-{where}-{job.removesuffix('.py')}"
        home.mkdir()
        scratch = self.tmp / f"scratch-{where}-{job.removesuffix('.py')}"
        argv, env = spark_submit_command(
            JOBS / job, args, master="local[2]", conf=self.conf, local_dir=scratch
        )
        assert CREDENTIAL not in " ".join(argv), "the store's secret on the command line"
        env["HOME"] = str(home)
        started = time.monotonic()
        proc = subprocess.run(argv, env=env, cwd=home, capture_output=True, text=True, timeout=900)
        return proc, time.monotonic() - started, home

    def submit_as_a_task(self, job: str, args: list[str], monkeypatch) -> tuple[list[list[str]], float, Path]:
        """(the commands started, seconds, driver home) of ``job`` run as a runbook's task runs it:
        :class:`SparkJobOperator` on a ``spark`` connection (local[2]), which turns the store's URLs
        into ``s3a://``, adds its Spark settings, the jars of ``KAFKA_RUNBOOKS_SPARK_JARS`` and the
        keys (into the driver's environment), and hands it to the provider's spark-submit."""
        import sys

        import pendulum
        from airflow.sdk import DAG

        from kafka_runbooks_airflow.operators.spark import JARS_ENV, SparkJobOperator

        home = self.tmp / f"driver-task-{job.removesuffix('.py')}"
        home.mkdir()
        conn = {"conn_type": "spark", "host": "local[2]"}
        monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(conn))
        monkeypatch.setenv(JARS_ENV, ",".join(self.jars))
        monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
        for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
            monkeypatch.setenv(name, sys.executable)
        for name, value in scratch_and_quick_jit(self.tmp / "scratch-task").items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.chdir(home)
        started_commands: list[list[str]] = []
        real_popen = subprocess.Popen

        def popen(argv, *a, **kw):  # the real spark-submit, its command line recorded
            started_commands.append([str(x) for x in argv])
            return real_popen(argv, *a, **kw)

        monkeypatch.setattr(subprocess, "Popen", popen)
        with DAG("jobs_on_s3a", schedule=None, start_date=pendulum.datetime(2026, 1, 1)):
            task = SparkJobOperator(
                task_id="plan",
                application=str(JOBS / job),
                conn_id="spark_default",
                conf=dict(LOOPBACK_CONF),
                # a task names the store's objects s3://… (the operator makes them s3a://)
                application_args=[a.replace("s3a://", "s3://", 1) for a in args],
            )
        started = time.monotonic()
        task.execute({})
        return started_commands, time.monotonic() - started, home

    def json_files(self, prefix: str) -> dict[str, object]:
        """Every JSON file under ``prefix``, by its name relative to it, read through the Store."""
        keys = [k for k in self.store.list(prefix) if k.endswith(".json")]
        return {k[len(prefix) + 1 :]: json.loads(self.store.read_text(k)) for k in keys}


def scratch_and_quick_jit(scratch: Path) -> dict[str, str]:
    """Environment for a spark-submit the test does not build (the provider's hook builds it):
    the JVMs' scratch in ``scratch`` (not ``/tmp``, where a killed JVM leaves it) and the suite's
    quick JIT (``$KR_SPARK_DRIVER_JVM_OPTIONS``), through ``JAVA_TOOL_OPTIONS``, which every JVM
    reads, so the task's Spark settings stay exactly the operator's."""
    scratch.mkdir(parents=True, exist_ok=True)
    java = f"{os.environ.get('KR_SPARK_DRIVER_JVM_OPTIONS', '')} -Djava.io.tmpdir={scratch}".strip()
    return {"SPARK_LOCAL_DIRS": str(scratch), "JAVA_TOOL_OPTIONS": java}


def local_json_files(folder: Path) -> dict[str, object]:
    return {
        str(p.relative_to(folder)): json.loads(p.read_text())
        for p in sorted(folder.rglob("*.json"))
        if not p.name.startswith(".")
    }


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def report_times(capsys, job: str, local_s: float, s3a_s: float) -> None:
    with capsys.disabled():
        print(
            f"\n{job}: local {local_s:.1f} s (in a running session), s3a {s3a_s:.1f} s "
            "(spark-submit wall time, local[2], JVM start included)"
        )


@pytest.fixture
def on_the_store(s3proxy, monkeypatch, tmp_path):
    """The test's store; afterwards the scratch of its spark-submits goes (a JVM that did not exit
    cleanly, one timed out by the test, leaves 658 MB of copied jars there)."""
    import shutil

    yield OnTheStore(s3proxy, monkeypatch, tmp_path)
    for scratch in tmp_path.glob("scratch-*"):
        shutil.rmtree(scratch)


def test_cluster_health_reads_and_writes_the_store(on_the_store, dead_broker_classic, make_snapshot, capsys):
    local_snapshot, local_out = dead_broker_classic.snapshot, dead_broker_classic.health
    snapshot = on_the_store.upload_snapshot(local_snapshot, "snapshots/health")
    flags = HEALTH_FLAGS
    local_s = dead_broker_classic.health_s

    assert sorted(p.name for p in local_out.iterdir()) == [
        "partitions.parquet",
        "report.json",
    ]  # no temp, no .crc
    out = on_the_store.url("health/out")
    proc, s3a_s, home = on_the_store.run(
        "cluster_health.py", ["--snapshot", snapshot, "--output", out, *flags], "s3a"
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report_times(capsys, "cluster_health", local_s, s3a_s)
    assert f"{out}/report.json: {PARTITIONS + 1} partitions" in proc.stdout
    assert files_under(home) == [], "the job wrote to the driver's disk"

    written = on_the_store.json_files("health/out")
    assert list(written) == ["report.json"]
    report = written["report.json"]
    assert report == json.loads((local_out / "report.json").read_text())
    assert report["cluster_id"] == make_snapshot.cluster_id  # meta.json was read from the store
    assert report["counts"]["offline"] == 1 and report["counts"]["under_replicated"] == PARTITIONS // 2

    parquet = [k for k in on_the_store.store.list("health/out/partitions.parquet") if k.endswith(".parquet")]
    assert len(parquet) == 1
    rows = pq.read_table(io.BytesIO(on_the_store.store.read_bytes(parquet[0]))).to_pylist()
    assert rows == pq.read_table(local_out / "partitions.parquet").to_pylist()
    assert not [k for k in on_the_store.store.list("health") if ".tmp" in k]


def test_failed_broker_plan_reads_and_writes_the_store(
    on_the_store, dead_broker_classic, make_snapshot, capsys, monkeypatch
):
    local_snapshot, local_out = dead_broker_classic.snapshot, dead_broker_classic.plan
    snapshot = on_the_store.upload_snapshot(local_snapshot, "snapshots/plan")
    flags = PLAN_FLAGS
    local_s = dead_broker_classic.plan_s

    assert sorted(p.name for p in local_out.iterdir()) == [
        "chunks",
        "plan.json",
        "summary.json",
    ]  # no temp, no .crc
    assert all(p.name.endswith(".json") and p.name[0] != "." for p in (local_out / "chunks").iterdir())
    out = on_the_store.url("plan/out")
    commands, s3a_s, home = on_the_store.submit_as_a_task(
        "failed_broker_plan.py", ["--snapshot", snapshot, "--out", out, *flags], monkeypatch
    )
    report_times(capsys, "failed_broker_plan", local_s, s3a_s)
    [submit] = [c for c in commands if Path(c[0]).name == "spark-submit"]
    assert snapshot in submit and out in submit, submit  # s3a:// URLs, from the task's s3:// ones
    assert CREDENTIAL not in " ".join(submit), "the store's secret on the command line"
    assert files_under(home) == [], "the job wrote to the driver's disk"

    written = on_the_store.json_files("plan/out")
    local = local_json_files(local_out)
    assert sorted(written) == sorted(local)
    assert len([name for name in written if name.startswith("chunks/")]) > 1
    assert written.pop("summary.json") | {"snapshot": None} == local.pop("summary.json") | {"snapshot": None}
    assert written == local  # plan.json and every chunk, byte for byte as JSON
    assert not [k for k in on_the_store.store.list("plan") if ".tmp" in k]

    # What the next task does with it: the plan, loaded from the store, keeps every rule.
    plan = load_plan(on_the_store.store.download_dir("plan/out", on_the_store.tmp / "downloaded"))
    assert plan.summary["snapshot"] == snapshot and plan.summary["cluster_id"] == make_snapshot.cluster_id
    assert plan.chunk_count > 1 and check_plan(plan, *read_snapshot_rows(local_snapshot)) == []
    assert plan.partitions == load_plan(local_out).partitions
