"""The runbooks on a distributed Airflow: CeleryExecutor, Redis, PostgreSQL, two Celery workers
whose local folders differ, and the runbooks' state only in a real object store (S3Proxy).

The module's fixtures start all of it once and stop it when the module ends (it runs in the
e2e tests' lane after them, once their Airflow has stopped: never two Airflows beside each
other on the same two cores).

Everything is real and local (devtools/kafka_runbooks_dev/localstack/celery.py): a private
PostgreSQL (the metadata DB; Airflow refuses Celery on SQLite), a private redis-server (the
Celery broker), S3Proxy (``KAFKA_RUNBOOKS_DATA_URL=s3://...`` on every component and worker),
Airflow's components, and workers ``a`` and ``b``, each with its own ``KAFKA_RUNBOOKS_DATA_DIR``,
log folder and hostname. Ports: ``KR_CELERY_PORT_BASE`` (default 28200: PostgreSQL +0, Redis +1,
S3Proxy +2, api-server +10, log servers +11..+14, Spark Connect +20); folder: ``KR_CELERY_TEST_HOME`` (default
``.stack/celery-test``). The Kafka stack is the session's (``kafka_stack``, tests/conftest.py).

1. The Connect sweep: worker a restarts a failed task; worker b, which never saw a's disk,
   counts on from a's count: the count came from the object store.
2. A failed broker healed by ``kafka_failed_broker_reassignment`` on worker b: snapshot, Spark
   plan on a Spark Connect server that reads and writes the bucket over ``s3a://`` (started
   beside Airflow: a deployment's long-running Spark, warmed by one small job while the sweep
   runs), approval, chunks under a throttle; worker b is SIGKILLed in the
   middle of a poke while a chunk copies; the task is failed by the scheduler (its heartbeat
   stopped), the cleanup takes the throttle off on worker a, the cleared task resumes on
   worker a from the state in the object store, submits nothing twice, and the run verifies.

Worker starts cost ~10-16 s each here, so the module starts only worker a, and each test
leaves the one worker the next needs: the sweep ends on b alone, the heal starts on b alone.
Each test still sets its own workers (a start or stop of one already so is free).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from kafka_runbooks.approval import APPROVE_OPTION
from kafka_runbooks_dev import spark_connect as connect_server
from kafka_runbooks_dev.localstack.celery import (
    API_OFFSET,
    PG_OFFSET,
    REDIS_OFFSET,
    S3PROXY_OFFSET,
    AirflowCelery,
    LocalPostgres,
    LocalRedis,
    port_base,
)
from kafka_runbooks_dev.localstack.s3proxy import S3Proxy
from tests.connect_helpers import file_sink, task_failed, unique_name
from tests.helpers import create_topic, produce, unique_topic, wait_until

pytestmark = pytest.mark.timeout(1800)

ROOT = Path(__file__).resolve().parents[2]
HOME = Path(os.environ.get("KR_CELERY_TEST_HOME") or ROOT / ".stack" / "celery-test").resolve()
START_TIMEOUT_S = float(os.environ.get("KR_AIRFLOW_TEST_START_TIMEOUT", "600"))
AUTO = "kafka_connect_autorestart"
REASSIGN = "kafka_failed_broker_reassignment"
RESTART = "kafka_broker_restart"
DEAD = 4
# a task whose worker died is failed after this (Airflow's default: 300 s; 30 s here before):
# its supervisor heartbeats every second here (below), so this is 20 missed heartbeats, and the
# other worker's start (~10-16 s under load) fits inside it
HEARTBEAT_TIMEOUT_S = 20
PREFIX = "fleet"  # the runbooks' keys live under s3://<bucket>/fleet/
STATE_KEY = "state/connect_autorestart/kafka_connect_default.json"
REPORT_KEY = "reports/connect_autorestart/by_connection/kafka_default.json"


@pytest.fixture(scope="module")
def celery_home() -> Iterator[Path]:
    """The test's folder, wiped at the start; a concurrent session using it fails this one."""
    HOME.parent.mkdir(parents=True, exist_ok=True)
    with open(HOME.with_name(HOME.name + ".lock"), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pytest.fail(f"another test session is using {HOME}; set KR_CELERY_TEST_HOME")
        # whatever an interrupted session left running there
        LocalPostgres(HOME / "postgres", port_base() + PG_OFFSET).stop()
        LocalRedis(HOME / "redis", port_base() + REDIS_OFFSET).stop()
        S3Proxy(HOME / "s3proxy", port_base() + S3PROXY_OFFSET).stop()
        shutil.rmtree(HOME, ignore_errors=True)
        HOME.mkdir(parents=True)
        yield HOME


@pytest.fixture(scope="module")
def postgres(celery_home) -> Iterator[LocalPostgres]:
    pg = LocalPostgres(celery_home / "postgres", port_base() + PG_OFFSET)
    try:
        yield pg.start()
    finally:
        pg.stop()


@pytest.fixture(scope="module")
def redis(celery_home) -> Iterator[LocalRedis]:
    server = LocalRedis(celery_home / "redis", port_base() + REDIS_OFFSET)
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture(scope="module")
def celery_store_spawned(celery_home) -> Iterator[S3Proxy]:
    """S3Proxy 4.1.0 (filesystem back end; honours conditional writes, so leases and fences hold),
    its JVM spawned and not waited for: nothing of Airflow's start (PostgreSQL, the DB migration,
    the components, worker a) reads the store, so the two starts overlap instead of Airflow's
    waiting for S3Proxy's. ``celery_airflow`` waits for it before any test runs."""
    proxy = S3Proxy(celery_home / "s3proxy", port_base() + S3PROXY_OFFSET)
    try:
        proxy.spawn()
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture(scope="module")
def celery_store(celery_store_spawned) -> S3Proxy:
    """S3Proxy answering, its bucket made (``start`` finds the spawned JVM and waits for it)."""
    return celery_store_spawned.start(timeout_s=START_TIMEOUT_S)


CONNECT_OFFSET = 20  # from the Celery port base


@pytest.fixture(scope="module")
def celery_spark(celery_home, celery_store_spawned) -> Iterator[connect_server.ConnectServer]:
    """A Spark Connect server with the bucket's S3A settings and keys, as a deployment runs one
    beside Airflow. Started here and waited for only after Airflow has started, so the two
    start-ups overlap. (spark-submit through the runbooks' operator, on the same store, is
    tests/spark/test_jobs_on_s3a.py.)"""
    saved = dict(os.environ)
    # the server's settings and keys come from the store's (the JVM spawned above: no thread reads
    # os.environ while it is swapped here)
    os.environ.update(celery_store_spawned.env(PREFIX))
    try:
        server = connect_server.spawn(port_base() + CONNECT_OFFSET, celery_home / "spark-connect.log")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    try:
        yield server
    finally:
        server.stop()


# One small parquet round trip over s3a, as a deployment's long-running server has long served:
# the first job on a fresh server pays the JVM's warm-up (class loading, JIT, S3A's client), and
# the heal's plan is that first job otherwise (~29 s where a warm session runs it in a few).
WARM_UP = """
import sys
from pyspark.sql import SparkSession, functions as F
spark = SparkSession.builder.remote(sys.argv[1]).create()
try:
    rows = spark.range(1000).selectExpr("id % 7 AS k", "id AS v")
    rows.write.mode("overwrite").parquet(sys.argv[2])
    spark.read.parquet(sys.argv[2]).groupBy("k").agg(F.sum("v")).collect()
finally:
    spark.stop()
"""


def _warm_up(server: connect_server.ConnectServer, store: S3Proxy, log: Path) -> subprocess.Popen:
    """Run the warm-up job in the background (it overlaps the Connect sweep, which needs no
    Spark), outside the bucket's runbook prefix: the tests' listings never see it."""
    path = f"s3a://{store.bucket}/warm-up/rows"
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-c", WARM_UP, server.url, path], stdout=out, stderr=subprocess.STDOUT
        )


@pytest.fixture(scope="module")
def celery_airflow(
    celery_home, celery_store_spawned, celery_spark, postgres, redis, airflow_connections
) -> Iterator[AirflowCelery]:
    """Airflow on Celery, started while S3Proxy's and Spark Connect's JVMs start (both spawned
    first: the fixtures above), then both waited for: every test finds all of it up."""
    store = celery_store_spawned
    airflow = AirflowCelery(
        celery_home / "airflow",
        port=port_base() + API_OFFSET,
        dags_folders=[ROOT / "dags"],
        plugins_folder=ROOT / "plugins",
        # the fleet's analyses run on its Spark Connect server, which reaches the bucket over s3a
        connections={
            **airflow_connections,
            "spark_default": {"conn_type": "spark_connect", "host": "127.0.0.1", "port": celery_spark.port},
        },
        sql_alchemy_conn=postgres.url,
        broker_url=redis.url,
        workers=("a", "b"),
        extra_env={
            **store.env(PREFIX),
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "KAFKA_RUNBOOKS_POKE_INTERVAL_S": "15",
            "KAFKA_RUNBOOKS_VERIFY_SETTLE_S": "5",  # 15 s by default (tests/e2e/conftest.py)
            "KAFKA_RUNBOOKS_ELECTION_SETTLE_S": "3",
            "KAFKA_RUNBOOKS_METADATA_SWEEP_SCHEDULE": "none",
            "KAFKA_RUNBOOKS_FAILED_BROKER_SWEEP_SCHEDULE": "none",
            "KAFKA_RUNBOOKS_HEALTH_SCHEDULE": "none",
            "KAFKA_RUNBOOKS_CONNECT_AUTORESTART_SCHEDULE": "none",  # the test's runs queued behind it
            # no test changes a DAG file: parse each once, not again and again beside the tests
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "3600",
            # a task whose worker was killed is failed soon (its heartbeat stops)
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT_S),
            # ... found by a check every 10 s by default: up to 10 s after the timeout
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "2",
            # a supervisor heartbeats (and notices its task process's exit) every 5 s by default:
            # a parked gate was reported up to 5 s late (as in tests/e2e/conftest.py)
            "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
            # the scheduler's idle loop sleeps 1 s by default: ~1 s per task hand-off (as in
            # tests/e2e/conftest.py)
            "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.2",
        },
    )
    started, warm = time.monotonic(), None
    try:
        airflow.start(timeout=START_TIMEOUT_S, workers=("a",))  # the first test's; b when asked
        store.start(timeout_s=START_TIMEOUT_S)  # finds its JVM running: waits, makes the bucket
        connect_server.wait_answering(celery_spark, START_TIMEOUT_S)
        print(
            f"\nCelery Airflow, S3Proxy and Spark started in {time.monotonic() - started:.1f}s at "
            f"{airflow.base_url}"
        )
        warm = _warm_up(celery_spark, store, celery_home / "spark-warm-up.log")
        yield airflow
    finally:
        airflow.stop(timeout=0)  # thrown away (the next run wipes its folder): killed, not wound down
        if warm is not None and warm.poll() is None:  # long done unless the server hung
            warm.kill()
            warm.wait(30)


@pytest.fixture
def topic(kafka_stack) -> str:
    name = unique_topic("celery-e2e")
    create_topic(kafka_stack.bootstrap_servers, name, 2, 3)
    return name


def _store(proxy: S3Proxy):
    from kafka_runbooks.storage import Store, storage_options

    return Store(proxy.url(PREFIX), options={**storage_options("s3://x"), **proxy.storage_options()})


def _files(folder: Path) -> list[str]:
    return (
        sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
        if folder.exists()
        else []
    )


def _report(airflow: AirflowCelery, run_id: str) -> dict:
    """The sweep report of the run's one cluster group (its XCom)."""
    import json
    from urllib.parse import quote

    xcom = airflow.api(
        "GET",
        f"/dags/{AUTO}/dagRuns/{quote(run_id, safe='')}/taskInstances/cluster.sweep/xcomEntries/return_value",
        params={"deserialize": "true", "stringify": "false", "map_index": 0},
    )
    value = xcom["value"]
    return json.loads(value) if isinstance(value, str) else value


def _row(report: dict, name: str) -> dict:
    cluster = next(c for c in report["clusters"] if c["cluster"] == "kafka_connect_default")
    return next(r for r in cluster["connectors"] if r["name"] == name)


def _sweep_on(airflow: AirflowCelery, worker: str, conf: dict) -> tuple[str, dict]:
    """Trigger a sweep; it must succeed with every task on ``worker``; its report row."""
    run_id = airflow.trigger(AUTO, conf)
    state = airflow.wait_for_run(AUTO, run_id, timeout=600)
    tis = airflow.task_instances(AUTO, run_id)
    where = {(ti["task_id"], ti["map_index"]): (ti["state"], ti["hostname"]) for ti in tis}
    assert state == "success", f"{run_id} ended {state}: {where}"
    hostname = airflow.workers[worker].hostname
    assert {h for _, h in where.values()} == {hostname}, f"not all on worker {worker} ({hostname}): {where}"
    return run_id, _report(airflow, run_id)


def _seconds_since(iso: str) -> float:
    when = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return (datetime.now(timezone.utc) - when).total_seconds()


def test_connect_sweep_through_celery_keeps_its_state_only_in_the_object_store(
    celery_airflow, celery_store, connect, topic, tmp_path
):
    airflow = celery_airflow
    airflow.wait_for_dag(AUTO, timeout=180)
    store = _store(celery_store)
    name = unique_name("celery-auto")
    file_sink(connect, name, tmp_path / name / "out.txt", topic)  # fails: its folder does not exist
    connect.created.append(name)
    connect.wait_for(name, task_failed)
    fast = {"minute_seconds": 1}  # a policy minute is a second: restarts at 0, 2, 6, ... s
    try:
        # 1. only worker a serves: it restarts the failed task and records the restart
        airflow.start_worker("a")
        airflow.stop_worker("b")
        first, report = _sweep_on(airflow, "a", fast)
        row = _row(report, name)
        assert row["restart_count"] >= 1 and row["last_restart_at"], row
        assert "DECISION connect-autorestart" in airflow.task_log_text(
            AUTO, first, "cluster.sweep", map_index=0
        )
        assert store.exists(STATE_KEY), store.list()

        # 2. only worker b serves, which has never seen a's disk; once the next restart is due
        # (2 policy minutes per restart so far), b restarts again and counts on from a's count:
        # the count came from the object store
        airflow.start_worker("b")
        airflow.stop_worker("a")
        due = 2 * row["restart_count"]
        # a's restart is answered RESTARTING, then UNASSIGNED/RUNNING, and only then FAILED again:
        # b's sweep acts on a task Connect reports failed, so wait for that answer, not for time
        connect.wait_for(name, task_failed)
        wait_until(lambda: _seconds_since(row["last_restart_at"]) > due + 0.5, due + 30, 0.2, "restart due")
        second, report = _sweep_on(airflow, "b", fast)
        row2 = _row(report, name)
        assert row2["restart_count"] == row["restart_count"] + 1, (row, row2)
        assert row2["total_restarts"] == row["total_restarts"] + 1, (row, row2)
        b_log = airflow.worker_task_log("b", AUTO, second, "cluster.sweep", map_index=0)
        assert any("DECISION connect-autorestart" in str(r.get("event")) for r in b_log), b_log[-10:]
    finally:  # worker b alone is left running: the heal's first worker
        mask, paused = {"update_mask": "is_paused"}, {"is_paused": True}
        airflow.api("PATCH", f"/dags/{AUTO}", params=mask, json=paused)

    # the state and the report are objects in the bucket ...
    keys = store.list()
    assert STATE_KEY in keys and REPORT_KEY in keys, keys
    on_disk = celery_store.data_dir / celery_store.bucket / PREFIX
    assert (on_disk / STATE_KEY).is_file()  # S3Proxy's own files: really in the object store
    # ... and no runbook wrote anything to a local data folder: not the workers', not the components'
    for worker in airflow.workers.values():
        assert _files(worker.data_dir) == [], f"worker {worker.name} wrote to {worker.data_dir}"
    components_dir = airflow.home / "kafka_runbooks"
    assert _files(components_dir) == [], f"a component wrote to {components_dir}"


# ---------------------------------------------------------------- a heal that loses its worker


def _log_text(airflow: AirflowCelery, worker: str, task_id: str, run_id: str, try_number: int = 1) -> str:
    records = airflow.worker_task_log(worker, REASSIGN, run_id, task_id, try_number)
    return "\n".join(str(r.get("event", "")) for r in records)


def _hosts(airflow: AirflowCelery, run_id: str) -> dict[str, str]:
    names = {w.hostname: name for name, w in airflow.workers.items()}
    return {
        ti["task_id"]: names.get(ti["hostname"], ti["hostname"])
        for ti in airflow.task_instances(REASSIGN, run_id)
    }


def _try_host(airflow: AirflowCelery, run_id: str, task_id: str, try_number: int) -> str:
    from urllib.parse import quote

    path = f"/dags/{REASSIGN}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task_id}/tries/{try_number}"
    host = airflow.api("GET", path)["hostname"]
    return next((name for name, w in airflow.workers.items() if w.hostname == host), host)


@pytest.fixture
def bulky_topic(restore_stack) -> str:
    """Two partitions with a replica on broker 4, ~4 MB each: past the first fetch (1 MB a
    partition, unthrottled) they copy for a minute or more at 50 kB/s, so the worker is killed
    while a chunk is still moving."""
    bs = restore_stack.bootstrap_servers
    name = unique_topic("celery-heal")
    create_topic(bs, name, assignment={0: [DEAD, 1, 2], 1: [3, DEAD, 1]})
    assert produce(bs, name, 20000, size=400) == 20000
    return name


KILLED, TAKEOVER = "b", "a"  # the heal's workers: b (the sweep left it running) dies, a takes over


def test_a_heal_whose_worker_is_killed_mid_poke_resumes_on_the_other_worker(
    celery_airflow, celery_store, restore_stack, admin, bulky_topic
):
    from kafka_runbooks.failed_broker.throttle import leftover_throttles
    from kafka_runbooks.paths import safe_name

    airflow = celery_airflow
    store = _store(celery_store)
    airflow.wait_for_dag(REASSIGN, timeout=180)
    airflow.unpause(REASSIGN)
    airflow.start_worker(KILLED)  # alone, it runs everything until it dies
    airflow.stop_worker(TAKEOVER)
    restore_stack.kill(f"broker-{DEAD}")
    wait_until(lambda: not (b := admin.describe_brokers().get(DEAD)) or b.fenced, 60, 1, "broker 4 fenced")
    # one chunk, whatever else the stack keeps on broker 4: on a fresh stack its 50 offsets
    # partitions made a first chunk, the worker died copying those, and the bulky topic's chunk
    # then copied after the resume at the throttle (66 s); in one chunk it is what copies at the
    # kill, and the cleanup's removal of the throttle lets it finish before the resume
    conf = {"failed_brokers": str(DEAD), "throttle_bytes_per_sec": 50_000, "max_partitions_per_chunk": 500}
    run = airflow.trigger(REASSIGN, conf)
    state_key = f"reassign/{REASSIGN}/{safe_name(run)}/exec-state.json"

    # the reassignment holds its cluster's lease (an object in the bucket) from acquire_lease on:
    # a restart of the same cluster is refused, naming it (on_lease_held=fail; the two-cluster
    # case is tests/e2e/test_fleet.py); checked while the Spark plan runs
    wait_until(
        lambda: airflow.task_instance(REASSIGN, run, "acquire_lease")["state"] == "success",
        600,
        1,
        "the reassignment's lease",
    )
    airflow.wait_for_dag(RESTART, timeout=180)
    airflow.unpause(RESTART)
    restart = airflow.trigger(
        RESTART, {"node_ids": "1", "reason": "lease test: never approved", "on_lease_held": "fail"}
    )
    assert airflow.wait_for_run(RESTART, restart, timeout=600) == "failed"
    assert airflow.task_instance(RESTART, restart, "acquire_lease")["state"] == "failed"
    lease = json.loads(store.read_text("state/leases/kafka_default.json"))
    assert (lease["dag_id"], lease["run_id"]) == (REASSIGN, run)

    airflow.wait_for_approval(REASSIGN, run, "approval_gate", timeout=600)
    airflow.answer(REASSIGN, run, "approval_gate", [APPROVE_OPTION])

    # kill the worker in the middle of a poke of execute_chunks, while a chunk copies under its throttle
    first_seen: dict[int, float] = {}

    def copying_mid_poke():
        text = store.read_text(state_key)
        ti = airflow.task_instance(REASSIGN, run, "execute_chunks")
        if not text or ti["state"] != "running":
            return None
        state, now = json.loads(text), time.monotonic()
        for chunk in state["chunks"]:
            copying = chunk["status"] == "moving" and state["throttle"]
            if copying and now - first_seen.setdefault(chunk["index"], now) >= 3:
                return state
        return None

    moving = wait_until(copying_mid_poke, 900, 0.3, "execute_chunks mid-poke while a chunk copies")
    airflow.kill_worker(KILLED)
    started_before_kill = [c["index"] for c in moving["chunks"] if c["status"] != "pending"]
    submitted_before_kill = {k for c in moving["chunks"] for k in c["moving"]}
    airflow.start_worker(TAKEOVER)  # its start overlaps the heartbeat timeout

    # the scheduler fails the task whose heartbeat stopped; the cleanup runs on the other worker
    assert airflow.wait_for_run(REASSIGN, run, timeout=HEARTBEAT_TIMEOUT_S + 600) == "failed"
    hosts = _hosts(airflow, run)
    assert hosts["plan_reassignment"] == KILLED and hosts["remove_throttles"] == TAKEOVER, hosts
    assert airflow.task_instance(REASSIGN, run, "remove_throttles")["state"] == "success"
    assert json.loads(store.read_text(state_key))["throttle"] is None
    assert leftover_throttles(admin, [1, 2, 3], [bulky_topic]) == {}

    # clear the killed task: its attempt on the other worker resumes from the state in the object store
    airflow.api(
        "POST",
        f"/dags/{REASSIGN}/clearTaskInstances",
        json={
            "dry_run": False,
            "dag_run_id": run,
            "task_ids": ["execute_chunks"],
            "include_downstream": True,
            "only_failed": False,
            "reset_dag_runs": True,
        },
    )
    wait_until(lambda: airflow.dag_run(REASSIGN, run)["state"] != "failed", 60, 1, "the run re-queued")
    state = airflow.wait_for_run(REASSIGN, run, timeout=900)
    resumed = _log_text(airflow, TAKEOVER, "execute_chunks", run, try_number=2)
    verify_log = _log_text(airflow, TAKEOVER, "verify_result", run)
    assert state == "success", (
        f"{airflow.task_instances(REASSIGN, run)}\n{resumed[-3000:]}\n{verify_log[-2000:]}"
    )
    assert _try_host(airflow, run, "execute_chunks", 1) == KILLED
    assert _try_host(airflow, run, "execute_chunks", 2) == TAKEOVER
    assert "DECISION verify: healed" in verify_log, verify_log[-3000:]
    # nothing submitted twice: the resumed attempt adopted what the killed worker had in flight
    final = json.loads(store.read_text(state_key))
    assert final["finished"] and final["throttle"] is None
    assert started_before_kill
    assert [i for i in started_before_kill if f"[chunk {i}]: submit" in resumed] == [], resumed[-3000:]
    assert {k for c in final["chunks"] if c["index"] in started_before_kill for k in c["moving"]} == (
        submitted_before_kill
    )
    # the cluster: nothing on broker 4, full ISR, no throttle left
    parts = admin.describe_partitions()
    assert [p.name for p in parts if DEAD in p.replicas] == []
    assert [p.name for p in parts if set(p.isr) != set(p.replicas)] == []
    assert leftover_throttles(admin, [1, 2, 3], sorted({p.topic for p in parts})) == {}
    # the run's snapshot, plan and state are objects in the bucket; no worker wrote a local file
    keys = store.list(f"reassign/{REASSIGN}/{safe_name(run)}")
    assert {"exec-state.json", "adopt-state.json", "progress.json", "plan/summary.json"} <= {
        k.split(f"{safe_name(run)}/", 1)[1] for k in keys
    }, keys
    assert any(k.endswith("replicas.parquet") for k in store.list(f"snapshots/{REASSIGN}")), store.list()
    for worker in airflow.workers.values():
        assert _files(worker.data_dir) == [], f"worker {worker.name} wrote to {worker.data_dir}"
