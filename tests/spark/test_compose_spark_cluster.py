"""The compose stack's Spark path, run for real without Docker: a Spark standalone master
and worker started with docker-compose.yaml's own command lines (addresses moved to
loopback), checked with its own health-check code, and the health job submitted to them
through the compose's ``spark_default`` connection and the Spark provider's hook, in
client mode, as airflow-scheduler does. The pyspark here is requirements.txt's pin, the
one docker/spark/Dockerfile installs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import wait_until
from tests.spark.test_jobs_on_s3a import scratch_and_quick_jit
from tests.unit.test_docker_compose import load_compose

ROOT = Path(__file__).resolve().parents[2]
JOB_PATH = ROOT / "spark_jobs" / "cluster_health.py"
LOOPBACK = "127.0.0.1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def _compose() -> dict:
    return load_compose()


def _localise(argv: list[str], ports: dict[str, int]) -> list[str]:
    """Compose host names -> loopback, compose ports -> free ones."""
    out = []
    for arg in argv:
        for name in ("spark-master", "spark-worker"):
            arg = arg.replace(name, LOOPBACK)
        for old, new in ports.items():
            arg = arg.replace(old, str(new))
        out.append(arg)
    return out


def _health(service: dict, ports: dict[str, int]) -> bool:
    """Run the service's compose health check (a python3 -c command) against the local one."""
    test = service["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python3", "-c"], test
    code = test[3]
    for old, new in ports.items():
        code = code.replace(f"localhost:{old}", f"localhost:{new}")
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    services = _compose()["services"]
    ports = {"7077": _free_port(), "8080": _free_port(), "8081": _free_port()}
    work = tmp_path_factory.mktemp("spark-work")
    scratch = tmp_path_factory.mktemp("spark-cluster-scratch")
    bin_dir = Path(sys.executable).parent
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "SPARK_LOCAL_HOSTNAME": LOOPBACK,
        "SPARK_WORKER_DIR": str(work),
        "PYSPARK_PYTHON": sys.executable,
        # every JVM here (master, worker, its executors, the driver) keeps its scratch in the
        # module's folder, removed below, and starts with the suite's quick JIT
        **scratch_and_quick_jit(scratch),
    }
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    procs = []
    try:
        for name in ("spark-master", "spark-worker"):
            argv = _localise(services[name]["command"], ports)
            log = open(work / f"{name}.log", "wb")  # noqa: SIM115 (owned by the child)
            procs.append(
                subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            )
            log.close()
            wait_until(
                lambda n=name: _health(services[n], ports), timeout=120, interval=1, what=f"{name} healthy"
            )
        yield {"ports": ports, "env": env, "work": work}
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        shutil.rmtree(scratch)


def test_health_checks_say_unhealthy_when_nothing_listens():
    services = _compose()["services"]
    ports = {"8080": _free_port(), "8081": _free_port()}
    assert not _health(services["spark-master"], ports)
    assert not _health(services["spark-worker"], ports)


def test_the_worker_registers_with_the_master(cluster):
    import urllib.request

    state = json.load(
        urllib.request.urlopen(f"http://{LOOPBACK}:{cluster['ports']['8080']}/json/", timeout=5)
    )
    assert state["status"] == "ALIVE"
    assert [w["state"] for w in state["workers"]] == ["ALIVE"]


def test_health_job_runs_on_the_cluster_through_spark_default(cluster, make_snapshot, monkeypatch, tmp_path):
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    conn = json.loads(
        _compose()["services"]["airflow-scheduler"]["environment"]["AIRFLOW_CONN_SPARK_DEFAULT"]
    )
    conn["host"] = conn["host"].replace("spark-master", LOOPBACK)
    conn["port"] = cluster["ports"]["7077"]
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(conn))
    for key in ("PATH", "SPARK_LOCAL_HOSTNAME", "PYSPARK_PYTHON", "SPARK_LOCAL_DIRS", "JAVA_TOOL_OPTIONS"):
        monkeypatch.setenv(key, cluster["env"][key])

    brokers = [
        {"id": 1, "rack": "rack-a"},
        {"id": 2, "rack": "rack-b"},
        {"id": 3, "rack": "rack-a", "alive": False},
    ]
    parts = [
        {"topic": "orders", "partition": p, "replicas": (1, 2, 3), "isr": (1, 2), "leader": 1}
        for p in range(3)
    ]
    snapshot = make_snapshot(brokers, parts)
    output = tmp_path / "health"
    hook = SparkSubmitHook(
        conn_id="spark_default",
        name="kafka-cluster-health",
        conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
        application_args=["--snapshot", str(snapshot), "--output", str(output), "--max-listed", "10"],
    )
    assert hook._connection["master"] == f"spark://{LOOPBACK}:{cluster['ports']['7077']}"
    hook.submit(str(JOB_PATH))

    report = json.loads((output / "report.json").read_text())
    assert report["partitions"] == 3
    assert report["counts"] == {
        "offline": 0,
        "under_replicated": 3,
        "under_min_isr": 0,
        "at_min_isr": 3,
        "min_isr_unknown": 0,
    }
    # The executors ran on the worker, not in the driver: the worker kept their logs.
    assert list(cluster["work"].glob("app-*/*/stderr")), "no executor ran on the standalone worker"
