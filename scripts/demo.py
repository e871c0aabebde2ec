"""`make demo` / `make stop`: the local Kafka stack plus Airflow with this project's DAGs.

python scripts/demo.py start   # start (or keep) the stack and Airflow, print how to log in
python scripts/demo.py stop    # stop Airflow, then the stack (data kept under .stack/)
python scripts/demo.py status
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from kafka_runbooks_dev import alertmanager, prometheus
from kafka_runbooks_dev.demo_alerting import DemoAlerting
from kafka_runbooks_dev.localstack import LocalStack
from kafka_runbooks_dev.localstack.airflow import AirflowLocal

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_STACK = ROOT / ".stack" / "demo"
# the default stack's Airflow home and data dir (where they always were); another stack's are in it
AIRFLOW_HOME = ROOT / ".stack" / "airflow-demo"
DATA_DIR = ROOT / ".stack" / "data"
HEALTH_DAG = "kafka_cluster_health"
FIRST_RUN_WAIT_S = 60.0  # for the run Airflow starts when the sweep is unpaused (seen: within a second)


def stack_home() -> Path:
    """``$KR_STACK_DIR`` (as for ``kstack``), else ``.stack/demo``."""
    return Path(os.environ.get("KR_STACK_DIR") or DEFAULT_STACK).resolve()


@dataclass(frozen=True)
class DemoFolders:
    """Where one demo writes: its Kafka stack, its Airflow's home (database, logs, generated
    password) and the runbooks' data dir (reports, run states, leases)."""

    stack: Path
    airflow_home: Path
    data_dir: Path


def demo_folders(stack: Path) -> DemoFolders:
    """The demo's folders for the stack folder ``stack``: the default stack keeps
    ``.stack/airflow-demo`` and ``.stack/data``; another one (``KR_STACK_DIR``) has them inside it
    (``airflow/``, ``data/``), so a second demo in another folder shares no Airflow database, no
    lease and no run state with the first, and ``kstack destroy`` of its folder removes them too."""
    stack = Path(stack).resolve()
    if stack == DEFAULT_STACK.resolve():
        return DemoFolders(stack, AIRFLOW_HOME, DATA_DIR)
    return DemoFolders(stack, stack / "airflow", stack / "data")


def alerting_for(stack: LocalStack) -> DemoAlerting:
    """The demo's Prometheus, Alertmanager and on-call receivers, on the stack's port base."""
    return DemoAlerting(stack.home, stack.topology.port_base)


def airflow_for(stack: LocalStack, port: int, alerting: bool = True) -> AirflowLocal:
    """The demo's Airflow for ``stack``: its home and data dir follow the stack's folder; it takes
    alerts from the demo's Alertmanager and tells the demo's on-call receivers (``alerting``: off
    for ``stop`` and ``status``, which must not make the alerting's secrets)."""
    folders = demo_folders(stack.home)
    side = alerting_for(stack) if alerting else None
    return AirflowLocal(
        folders.airflow_home,
        port=port,
        dags_folders=[ROOT / "dags"],
        plugins_folder=ROOT / "plugins",
        connections={**stack.airflow_connections(), **(side.airflow_connections() if side else {})},
        extra_env={
            **(side.airflow_env() if side else {}),
            "KAFKA_RUNBOOKS_DATA_DIR": str(folders.data_dir),
            # kafka_controller_replace runs Kafka's kafka-metadata-quorum from the stack's own jars
            "KAFKA_RUNBOOKS_KAFKA_LIBS": str(stack.lib_dir),
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        },
    )


def something_to_look_at(stack: LocalStack, airflow: AirflowLocal) -> str:
    """Topics with data and a first health report, so the Kafka page is not empty (issue #24.6).

    The health DAG is unpaused now (its 5-minute sweep then keeps the report fresh); returns the
    id of the run that writes the first report (:func:`first_health_run`)."""
    from kafka_runbooks_dev.localstack.incidents import create_demo_topics

    for t in create_demo_topics(stack):
        print(f"  topic {t.topic}: {t.partitions} partitions, {t.records} records", flush=True)
    return first_health_run(airflow)


def first_health_run(airflow: AirflowLocal) -> str:
    """Unpause the health sweep and return the run Airflow starts for it; a manual run only when
    none comes.

    Unpausing the scheduled sweep (catchup off) makes Airflow start the run of its latest
    schedule at once (seen: within a second of the unpause). The manual run the demo used to trigger
    beside it queued behind it (``max_active_runs=1``), analysed the cluster a second time on
    the newcomer's machine, and was the run the demo named while the other one filled the page.
    A manual run when the DAG has no schedule (``KAFKA_RUNBOOKS_HEALTH_SCHEDULE=none``), is
    unpaused already (a second ``make demo``), or no run comes within FIRST_RUN_WAIT_S."""
    dag = airflow.dag(HEALTH_DAG)
    if dag is None or not dag["is_paused"] or dag.get("next_dagrun_run_after") is None:
        return airflow.trigger(HEALTH_DAG, {})
    before = _latest_health_run(airflow)["total_entries"]
    airflow.unpause(HEALTH_DAG)
    deadline = time.monotonic() + FIRST_RUN_WAIT_S
    while time.monotonic() < deadline:
        runs = _latest_health_run(airflow)
        if runs["total_entries"] > before:
            return runs["dag_runs"][0]["dag_run_id"]
        time.sleep(1)
    return airflow.trigger(HEALTH_DAG, {})


def _latest_health_run(airflow: AirflowLocal) -> dict:
    """The health DAG's newest run and how many it has (Airflow's own listing)."""
    return airflow.api("GET", f"/dags/{HEALTH_DAG}/dagRuns", params={"order_by": "-id", "limit": 1})


@dataclass(frozen=True)
class WarmUp:
    """What the warm-up analysis counted, and how long it took."""

    partitions: int
    seconds: float


def warm_up_spark(stack: LocalStack, spark_url: str) -> WarmUp:
    """Run the health analysis once on the demo's own cluster, in the new Spark Connect server.

    A fresh server's first job pays for its JVM's warm-up (class loading, JIT, query code
    generation): measured here under load, 43 s for the first health job on 90 partitions, 14 s
    and 10 s for the next two; in ``make demo`` the first report's analysis took 142 s of the
    189 s a newcomer waited for the Kafka page (bench/first_health_run.py). Paid here, while
    Airflow starts, the first report's run finds a warm server. Read-only: a snapshot of the
    cluster into the stack's folder (not the data store: the page shows only the runs' reports),
    removed afterwards."""
    from kafka_runbooks.admin import ClusterAdmin
    from kafka_runbooks.snapshot import write_snapshot
    from kafka_runbooks_airflow.spark_connect import run_over_connect, spark_job_path

    started = time.monotonic()
    folder = stack.home / "spark-warm-up"
    admin = ClusterAdmin(stack.airflow_connections()["kafka_default"]["extra"])
    try:
        snapshot = write_snapshot(admin.read_state(include_log_dirs=True), folder / "snapshot")
    finally:
        admin.close()
    argv = ["--snapshot", str(snapshot), "--output", str(folder / "health")]
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the job's summary line names the scratch folder
            run_over_connect(spark_job_path("cluster_health.py"), argv, spark_url, str(uuid.uuid4()))
        report = json.loads((folder / "health" / "report.json").read_text())
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return WarmUp(partitions=report["partitions"], seconds=time.monotonic() - started)


def say_warm_up(stack: LocalStack, spark_url: str) -> None:
    """Warm the server up and say how long it took; a failure only makes the first report slower
    (its own run then pays the warm-up), so it is said and the demo goes on."""
    try:
        warm = warm_up_spark(stack, spark_url)
        print(
            f"  Spark warmed up: a first health analysis of {warm.partitions} partitions in {warm.seconds:.0f}s",
            flush=True,
        )
    except Exception as exc:
        print(
            f"  Spark warm-up failed ({type(exc).__name__}: {exc}); the first report will take longer",
            flush=True,
        )


def start_alerting(stack: LocalStack, airflow: AirflowLocal) -> list[str]:
    """Start the alerting beside the stack; the lines that say where it is (or why it is off)."""
    if not (prometheus.available() and alertmanager.available()):
        return [
            "Alerting:   off: prometheus and prometheus-alertmanager are not installed "
            "(Debian's packages; `bash scripts/bootstrap.sh --alerting` installs them)"
        ]
    alerting = alerting_for(stack)
    alerting.start(stack.topology, airflow.base_url)
    return alerting.where()


def stop(stack: LocalStack, airflow: AirflowLocal) -> int:
    """Say what is being stopped while it happens (brokers shut down cleanly: up to a minute or two)."""
    started = time.monotonic()
    print("stopping the alerting (Prometheus, Alertmanager, the on-call receivers)...", flush=True)
    alerting_for(stack).stop()
    print(f"stopping Airflow ({airflow.home})...", flush=True)
    airflow.stop()
    running = [s.name for s in stack.status() if s.running]
    print(
        f"stopping the Kafka stack in {stack.home}: {', '.join(running) or 'nothing running'} "
        "(controlled shutdown of each broker, then the controllers)...",
        flush=True,
    )
    stack.stop()
    print(
        f"demo stopped in {time.monotonic() - started:.0f}s "
        f"(data kept under {stack.home}; `kstack --home {stack.home} destroy` deletes it)"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["start", "stop", "status"])
    parser.add_argument("--port", type=int, default=int(os.environ.get("KR_AIRFLOW_PORT", "8080")))
    args = parser.parse_args(argv)
    stack = LocalStack(home=stack_home())
    airflow = airflow_for(stack, args.port, alerting=False)

    if args.command == "stop":
        return stop(stack, airflow)
    if args.command == "status":
        for s in stack.status():
            print(f"{s.name:<18} {'running' if s.running else 'stopped'}")
        print(f"airflow            {'running' if airflow.is_healthy() else 'stopped'}")
        return 0

    started = time.monotonic()
    print("starting the Kafka stack (3 controllers, 4 brokers, 1 Connect worker)...", flush=True)
    stack.start()
    stack_ready = time.monotonic() - started
    print(f"  ready in {stack_ready:.0f}s; starting the Spark Connect server...", flush=True)
    spark_url = stack.start_spark_connect()  # analyses run in it: seconds, not a spark-submit each
    airflow = airflow_for(stack, args.port)  # its spark_default names the running server
    print(f"  {spark_url}; starting Airflow on port {args.port}...", flush=True)
    airflow.spawn()  # Airflow comes up while the Spark server warms up (see warm_up_spark)
    say_warm_up(stack, spark_url)
    airflow.wait_started(timeout=600)  # minutes on a loaded machine
    airflow.wait_for_dag(HEALTH_DAG, timeout=120)
    first_report = something_to_look_at(stack, airflow)
    alerting = start_alerting(stack, airflow)
    errors = airflow.import_errors()
    print(f"  ready in {time.monotonic() - started:.0f}s in all")
    print()
    print(f"Kafka:      {stack.bootstrap_servers}")
    print(f"Connect:    {stack.connect_url}")
    print(f"Spark:      {spark_url} (Spark Connect: spark_default; `make stop` stops it)")
    print(f"Airflow UI: {airflow.base_url}   user: admin   password: {airflow.password}")
    print(f"Kafka page: {airflow.base_url}/plugin/kafka   (the 'Kafka' entry of the UI's navigation)")
    print(
        f"Ports:      {args.port} (UI/API, 127.0.0.1; KR_AIRFLOW_PORT changes it), {args.port + 1} and "
        f"{args.port + 2} (Airflow's log servers, on all interfaces)"
    )
    print(f"Stack:      {stack.home} (KR_STACK_DIR)")
    for line in alerting:
        print(line)
    print(f"Folders:    {airflow.home} (Airflow's home), {demo_folders(stack.home).data_dir} (runbook data)")
    print()
    print(f"First health report: run {first_report} of kafka_cluster_health (on the Kafka page when done).")
    print(
        "Cause an incident per runbook: README, 'Quick start: try each runbook'; `make stop` ends the demo."
    )
    if errors:
        print(f"\nDAG import errors: {errors}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
