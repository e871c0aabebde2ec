"""Both Spark jobs over a real Spark Connect server give what the classic run gives.

The DAGs run the jobs' ``run(spark, argv)`` in the task against a long-lived Connect server
(``kafka_runbooks_airflow.spark_connect.run_over_connect``): no py4j there, so the jobs' small files go
through the data store on the client while the server reads and writes the parquet files. Each
test runs the same job on the same snapshot in the classic session the other Spark tests share
and over Connect, and compares every output. A server that is not there fails the task with its
URL in the error, after bounded retries, instead of hanging.

The module's tests share one server (``spark_connect`` below), started once on the S3Proxy store
and logging at INFO: a server start is a JVM and a SparkSession (~20 s here, more on a loaded
machine), and the last test kills it in the middle of a job.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kafka_runbooks.failed_broker.plan import PlanImpossible, load_plan
from kafka_runbooks_airflow.spark_connect import (
    SparkConnectUnavailable,
    run_over_connect,
    session_id,
    spark_job_path,
)
from tests.spark.test_jobs_on_s3a import (
    HEALTH_FLAGS,
    PARTITIONS,
    PLAN_FLAGS,
    cluster_with_a_dead_broker,
    local_json_files,
)

ROOT = Path(__file__).resolve().parents[2]
HEALTH = spark_job_path("cluster_health.py")
PLAN = spark_job_path("failed_broker_plan.py")


@pytest.fixture(scope="module")
def spark_connect(s3proxy, tmp_path_factory):
    """The module's one Connect server (test port base + 4), started on the S3Proxy store (its S3A
    settings, jars and keys) at INFO, whose log names each operation's session: the local-folder
    tests run on it as on the session's server, the s3:// test needs the store, and the last
    test kills it mid-job. One JVM start instead of two, and no server idling after the module."""
    from kafka_runbooks import storage
    from kafka_runbooks_dev import spark_connect as connect_server

    port = int(os.environ.get("KR_TEST_PORT_BASE", "29000")) + connect_server.PORT_OFFSET + 2
    log = tmp_path_factory.mktemp("spark-connect") / "connect.log"
    scratch = tmp_path_factory.mktemp("spark-connect-scratch")
    with pytest.MonkeyPatch.context() as env:  # the store's settings, for the server's start only
        for key, value in s3proxy.env("jobs-over-connect").items():
            env.setenv(key, value)
        server = connect_server.start(
            port, log, store_url=storage.data_url(), conf={"spark.log.level": "INFO"}, local_dir=scratch
        )
    try:
        yield server
    finally:
        server.stop()
        remove_scratch(scratch, log)


def remove_scratch(scratch: Path, log: Path) -> None:
    """Remove what the server (killed by the last test, so it could not clean up) left in its
    scratch folder; every folder its log says it created was there, none in ``/tmp``."""
    import shutil

    created = re.findall(r"Created local directory at (\S+)", log.read_text(errors="replace"))
    shutil.rmtree(scratch)
    assert created, "the server's log names no local directory (is it at INFO?)"
    outside = [path for path in created if scratch not in Path(path).parents]
    assert not outside, f"the Spark Connect server kept scratch outside {scratch}: {outside}"


def over_connect(server, application: str, args: list[str], name: str) -> int:
    return run_over_connect(application, args, server.url, session_id("tests", name))


def test_cluster_health_over_connect_matches_the_classic_run(
    dead_broker_classic, spark_connect, make_snapshot, tmp_path
):
    flags = ["--snapshot", str(dead_broker_classic.snapshot), *HEALTH_FLAGS]
    classic, remote = dead_broker_classic.health, tmp_path / "connect"

    assert over_connect(spark_connect, HEALTH, [*flags, "--output", str(remote)], "health") == 0

    report = json.loads((remote / "report.json").read_text())
    assert report == json.loads((classic / "report.json").read_text())
    assert report["cluster_id"] == make_snapshot.cluster_id  # meta.json read on the client
    assert report["counts"]["offline"] == 1 and report["counts"]["under_replicated"] == PARTITIONS // 2
    rows = pq.read_table(remote / "partitions.parquet").to_pylist()
    assert rows == pq.read_table(classic / "partitions.parquet").to_pylist()
    assert sorted(p.name for p in remote.iterdir()) == ["partitions.parquet", "report.json"]


def test_failed_broker_plan_over_connect_matches_the_classic_run(
    dead_broker_classic, spark_connect, tmp_path
):
    snapshot = dead_broker_classic.snapshot
    flags = ["--snapshot", str(snapshot), *PLAN_FLAGS]
    classic, remote = dead_broker_classic.plan, tmp_path / "connect"

    assert over_connect(spark_connect, PLAN, [*flags, "--out", str(remote)], "plan") == 0

    written = local_json_files(remote)
    assert len([name for name in written if name.startswith("chunks/")]) > 1
    assert written == local_json_files(classic)  # summary, plan and every chunk

    # A run that cannot plan replaces the previous run's files with error.json, exit code 2.
    impossible = ["--snapshot", str(snapshot), "--failed", "42", "--out", str(remote)]
    assert over_connect(spark_connect, PLAN, impossible, "plan-impossible") == 2
    assert sorted(str(p.relative_to(remote)) for p in remote.rglob("*")) == ["error.json"]
    assert "[42] unknown" in json.loads((remote / "error.json").read_text())["error"]


def test_a_server_that_is_not_there_fails_naming_it(make_snapshot, monkeypatch, tmp_path):
    """Nothing listens on the port: the job fails with the server's URL, never hangs. With two
    quick retries: that the client's own bounded retries (~16 s) end is the unit test's
    (tests/unit/kafka_runbooks_airflow/operators/test_spark.py, through the task's operator)."""
    import socket

    quick_retries(monkeypatch)
    with socket.socket() as probe:  # a port that was free a moment ago, and nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"sc://127.0.0.1:{port}"
    snapshot = make_snapshot(*cluster_with_a_dead_broker())
    args = ["--snapshot", str(snapshot), "--output", str(tmp_path / "out")]

    with pytest.raises(SparkConnectUnavailable, match=f"Spark Connect server {url} did not answer"):
        run_over_connect(HEALTH, args, url, session_id("tests", "nobody"))
    assert not Path(tmp_path / "out").exists()


def quick_retries(monkeypatch) -> None:
    """Two quick retries (0.1 + 0.2 s) instead of the task's ~20 s before a job gives up on a
    server that is gone: what is checked is that it gives up naming the server and never hangs;
    that the task's own bounded retries end is the unit test's (see the test above)."""
    from kafka_runbooks_airflow import spark_connect as glue

    quick = {**glue.CONNECT_RETRIES, "max_retries": 2, "initial_backoff": 100, "max_backoff": 200}
    monkeypatch.setattr(glue, "CONNECT_RETRIES", quick)


def test_the_local_stacks_spark_default_runs_the_job_on_its_connect_server(
    spark_connect, make_snapshot, monkeypatch, tmp_path
):
    """The stack's Airflow connection names its running server (spark-submit while none runs), and
    SparkJobOperator runs the job there through that connection, as the DAG's task does."""
    import pendulum
    from airflow.sdk import DAG

    from kafka_runbooks_airflow.operators.spark import SparkJobOperator
    from kafka_runbooks_dev import spark_connect as connect_server
    from kafka_runbooks_dev.localstack import LocalStack

    stack = LocalStack(home=tmp_path / "stack")
    assert stack.airflow_connections(spark_master="local[2]")["spark_default"] == {
        "conn_type": "spark",
        "host": "local[2]",
    }
    (tmp_path / "stack").mkdir(exist_ok=True)
    record = {"pid": spark_connect.process.pid, "port": spark_connect.port}  # as start_recorded writes it
    (tmp_path / "stack" / connect_server.RECORD).write_text(json.dumps(record))
    conn = stack.airflow_connections()["spark_default"]
    assert conn == {"conn_type": "spark_connect", "host": "127.0.0.1", "port": spark_connect.port}

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(conn))
    snapshot = make_snapshot(*cluster_with_a_dead_broker())
    with DAG("d", schedule=None, start_date=pendulum.datetime(2026, 1, 1)):
        task = SparkJobOperator(
            task_id="analyse_health",
            application=HEALTH,
            conn_id="spark_default",
            application_args=["--snapshot", str(snapshot), "--output", str(tmp_path / "out")],
        )

    class TaskInstance:
        dag_id, run_id, task_id, map_index, try_number = "d", "manual__1", "analyse_health", -1, 1

    task.execute({"ti": TaskInstance()})
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["partitions"] == PARTITIONS + 1 and report["counts"]["offline"] == 1


def _demo():
    """scripts/demo.py as a module (it is a script, not a package's)."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("demo_script", ROOT / "scripts" / "demo.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_demos_warm_up_runs_the_health_analysis_on_the_stack_and_leaves_nothing(
    local_stack, spark_connect, admin
):
    """`make demo` warms its new Spark Connect server up before the first report's run needs it.

    A fresh server's first health analysis pays for the JVM's warm-up: in ``make demo`` on the
    loaded machine it took 142 s of the 189 s a newcomer waited for the Kafka page
    (bench/first_health_run.py). ``scripts/demo.py`` runs the same analysis once on the demo's
    own cluster while Airflow starts. Its failure is only said (the demo goes on, slower), so
    this test is what notices a warm-up that stopped working: on the real session stack and a
    real Connect server (the module's: a server of the session's own for this one test cost a
    JVM and a SparkSession start, and idled through the rest of the lane), it runs, counts the
    cluster's partitions as the health job does, and leaves nothing behind in the stack's
    folder. The module's tests run together (tests/spark/conftest.py), so the stack starts
    here, right before the last Spark tests that read it."""
    before = len(admin.read_state(include_log_dirs=False).partitions)
    warm = _demo().warm_up_spark(local_stack, spark_connect.url)
    after = len(admin.read_state(include_log_dirs=False).partitions)

    # the stack may have started right before this test: its Connect worker can still be
    # creating its internal topics (loaded suite of Nov 27: 25 partitions read before the
    # warm-up, 30 counted by it, once the status topic's 5 existed). The warm-up counts what the
    # cluster held while it ran: between the two reads, never nothing.
    assert 0 < before <= warm.partitions <= after, (before, warm.partitions, after)
    assert not (local_stack.home / "spark-warm-up").exists()


def kill_mid_job(server, log: Path, args: list[str], name: str) -> None:
    """The server dies (SIGKILL) once it runs the job's first operation (its INFO log names the
    session): the job fails with the server's URL after the bounded retries, never hangs."""
    import threading

    from tests.helpers import wait_until

    sid = session_id("tests", "killed", name)
    outcome: dict = {}

    def job() -> None:
        try:
            outcome["code"] = run_over_connect(HEALTH, args, server.url, sid)
        except Exception as exc:  # noqa: BLE001 (the test looks at what it was)
            outcome["error"] = exc

    runner = threading.Thread(target=job, daemon=True)
    try:
        runner.start()
        wait_until(lambda: sid in log.read_text(errors="replace"), 300, 0.2, "the job's first operation")
    finally:
        server.kill()
    wait_until(lambda: not runner.is_alive(), 300, 0.5, "the job to give up on the dead server")
    assert isinstance(outcome.get("error"), SparkConnectUnavailable), outcome
    assert f"Spark Connect server {server.url} did not answer" in str(outcome["error"])


def test_both_jobs_over_connect_on_s3proxy_match_the_classic_run(
    s3proxy, dead_broker_classic, spark_connect, monkeypatch, tmp_path
):
    """On an s3:// store (a real S3Proxy) the server reads and writes the parquet files over s3a://
    with the store's settings and keys, the client the small files through the store: the report
    and every plan file equal the classic run's on a local folder; a second plan that cannot be
    made replaces them in the store with error.json (exit code 2). Then the server is killed in
    the middle of a job: the job fails naming it, and writes no report (the module's last test:
    the server is the module's)."""
    from tests.spark.test_jobs_on_s3a import OnTheStore

    on_store = OnTheStore(s3proxy, monkeypatch, tmp_path)
    snapshot = on_store.upload_snapshot(dead_broker_classic.snapshot, "snapshots/connect")
    server = spark_connect  # at INFO its log names each operation's session
    try:
        health_flags, plan_flags = HEALTH_FLAGS, PLAN_FLAGS
        out = ["--output", on_store.url("connect/health")]
        assert (
            run_over_connect(
                HEALTH, ["--snapshot", snapshot, *out, *health_flags], server.url, session_id("s3", "h")
            )
            == 0
        )
        out = ["--out", on_store.url("connect/plan")]
        assert (
            run_over_connect(
                PLAN, ["--snapshot", snapshot, *out, *plan_flags], server.url, session_id("s3", "p")
            )
            == 0
        )
        written, classic = on_store.json_files("connect/plan"), local_json_files(dead_broker_classic.plan)
        # a second run that cannot plan replaces the first run's files in the store with error.json
        impossible = ["--snapshot", snapshot, *out, "--failed", "42"]
        assert run_over_connect(PLAN, impossible, server.url, session_id("s3", "p2")) == 2
        quick_retries(monkeypatch)  # the killed job's retries: ~20 s of back-off here before
        kill_mid_job(
            server,
            server.log_path,
            ["--snapshot", snapshot, "--output", on_store.url("killed")],
            tmp_path.name,
        )
    finally:
        server.stop()
    assert not on_store.store.list("killed")  # no report of the killed job

    assert on_store.json_files("connect/health") == {
        "report.json": json.loads((dead_broker_classic.health / "report.json").read_text())
    }
    assert written.pop("summary.json") | {"snapshot": None} == classic.pop("summary.json") | {
        "snapshot": None
    }
    assert written == classic and len(written) > 2
    assert [k for k in on_store.store.list("connect/health/partitions.parquet") if k.endswith(".parquet")]
    assert on_store.store.list("connect/plan") == ["connect/plan/error.json"]
    with pytest.raises(PlanImpossible, match=r"failed broker\(s\) \[42\] unknown"):
        load_plan(on_store.store.download_dir("connect/plan", tmp_path / "downloaded-again"))
