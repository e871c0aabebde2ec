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

from kafka_runbooks.localstack import LocalStack
from kafka_runbooks.localstack.airflow import AirflowLocal

ROOT = Path(__file__).resolve().parents[1]
STACK_HOME = ROOT / ".stack" / "demo"
AIRFLOW_HOME = ROOT / ".stack" / "airflow-demo"
DATA_DIR = ROOT / ".stack" / "data"


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["start", "stop", "status"])
    parser.add_argument("--port", type=int, default=int(os.environ.get("KR_AIRFLOW_PORT", "8080")))
    args = parser.parse_args(argv)
    stack = LocalStack(home=STACK_HOME)
    airflow = airflow_for(stack, args.port)

    if args.command == "stop":
        airflow.stop()
        stack.stop()
        print("demo stopped (data kept under .stack/; `kstack destroy` deletes it)")
        return 0
    if args.command == "status":
        for s in stack.status():
            print(f"{s.name:<18} {'running' if s.running else 'stopped'}")
        print(f"airflow            {'running' if airflow.is_healthy() else 'stopped'}")
        return 0

    started = time.monotonic()
    print("starting the Kafka stack (3 controllers, 4 brokers, 1 Connect worker)...", flush=True)
    stack.start()
    stack_ready = time.monotonic() - started
    print(f"  ready in {stack_ready:.0f}s; starting Airflow on port {args.port}...", flush=True)
    airflow.start()
    airflow.wait_for_dag("kafka_cluster_health", timeout=120)
    errors = airflow.import_errors()
    print(f"  ready in {time.monotonic() - started:.0f}s in all")
    print()
    print(f"Kafka:      {stack.bootstrap_servers}")
    print(f"Connect:    {stack.connect_url}")
    print(f"Airflow UI: {airflow.base_url}   user: admin   password: {airflow.password}")
    print()
    print("DAGs are created paused: unpause kafka_cluster_health for the 5-minute sweep, or")
    print("trigger it from the UI. Break things with `.venv/bin/kstack kill 3`; `make stop` ends the demo.")
    if errors:
        print(f"\nDAG import errors: {errors}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
