"""`make demo` / `make stop`: the local Kafka stack plus Airflow with this project's DAGs.

python scripts/demo.py start   # start (or keep) the stack and Airflow, print how to log in
python scripts/demo.py stop    # stop Airflow, then the stack (data kept under .stack/)
python scripts/demo.py status
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from kafka_runbooks_dev.localstack import LocalStack
from kafka_runbooks_dev.localstack.airflow import AirflowLocal

ROOT = Path(__file__).resolve().parents[1]
AIRFLOW_HOME = ROOT / ".stack" / "airflow-demo"
DATA_DIR = ROOT / ".stack" / "data"


def stack_home() -> Path:
    """``$KR_STACK_DIR`` (as for ``kstack``), else ``.stack/demo``."""
    return Path(os.environ.get("KR_STACK_DIR") or ROOT / ".stack" / "demo").resolve()


def airflow_for(stack: LocalStack, port: int) -> AirflowLocal:
    return AirflowLocal(
        AIRFLOW_HOME,
        port=port,
        dags_folders=[ROOT / "dags"],
        plugins_folder=ROOT / "plugins",
        connections=stack.airflow_connections(),
        extra_env={
            "KAFKA_RUNBOOKS_DATA_DIR": str(DATA_DIR),
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        },
    )


def something_to_look_at(stack: LocalStack, airflow: AirflowLocal) -> str:
    """Topics with data and a first health report, so the Kafka page is not empty (issue #24.6).

    The health DAG is triggered once now, which also unpauses it (its 5-minute sweep then keeps
    the report fresh); returns that run's id."""
    from kafka_runbooks_dev.localstack.incidents import create_demo_topics

    for t in create_demo_topics(stack):
        print(f"  topic {t.topic}: {t.partitions} partitions, {t.records} records", flush=True)
    return airflow.trigger("kafka_cluster_health", {})


def stop(stack: LocalStack, airflow: AirflowLocal) -> int:
    """Say what is being stopped while it happens (brokers shut down cleanly: up to a minute or two)."""
    started = time.monotonic()
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
    airflow = airflow_for(stack, args.port)

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
    airflow.start()
    airflow.wait_for_dag("kafka_cluster_health", timeout=120)
    first_report = something_to_look_at(stack, airflow)
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
