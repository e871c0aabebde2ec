"""Benchmark: trigger to first task for every manual DAG, on a real Airflow (issue #25: under 5 s).

    .venv/bin/python bench/trigger_latency.py [--port 24450] [--port-base 24000] [--rounds 2]
        [--airflow-home DIR] [--no-stack] [--setting KEY=VALUE ...]

Starts a local stack (its connections make the first tasks real; ``--no-stack``: connections to
nothing, the first tasks still start) and an ``airflow standalone`` as the end-to-end tests do
(:class:`kafka_runbooks_dev.localstack.AirflowLocal`, with its scheduler settings), waits until
every DAG is parsed and unpaused, then triggers each manual DAG through the REST API with a
dry-run conf (or its defaults, which its first task refuses before anything is done) one at a
time, ``--rounds`` times. Every figure is Airflow's own: the run's ``queued_at`` (set by the
API server at the trigger) to the first task instance's ``start_date`` (set when its process
reports running), split at the task's ``queued_when`` into the scheduler's part (run created ->
task queued) and the executor's (queued -> the task process running). Timestamps are only
compared with others from the same Airflow (one machine, one clock). The floor printed beside
each figure is the executor's part alone: what a task's process costs to start, which no
scheduler setting removes.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 5.0
MANUAL = {  # dag_id -> conf: a dry run, or the defaults (refused by the first task, nothing done)
    "kafka_broker_restart": {"dry_run": True},
    "kafka_failed_broker_reassignment": {"dry_run": True},
    "kafka_connect_restart": {},
    "kafka_reassignment_stop": {},
    "kafka_unclean_recovery": {},
    "kafka_broker_decommission": {},
    "kafka_rebalance": {},
    "kafka_log_dir_failure": {},
    "kafka_controller_replace": {},
}


def _at(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def first_task(airflow, dag_id: str, run_id: str, timeout: float = 120) -> dict:
    """The run's first task instance to start (by its own start_date), once one has started."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        started = [t for t in airflow.task_instances(dag_id, run_id) if t.get("start_date")]
        if started:
            return min(started, key=lambda t: _at(t["start_date"]))
        time.sleep(0.2)
    raise SystemExit(f"{dag_id}/{run_id}: no task started within {timeout:.0f}s")


def trigger(airflow, dag_id: str, conf: dict, tries: int = 5) -> dict:
    """POST a run; retried on the 500 'Database error' that airflow standalone on SQLite answers
    under load (seen here: "database is locked"): the run's queued_at is set by the write that
    succeeds, so a retry adds nothing to the figure."""
    from kafka_runbooks_dev.localstack.airflow import AirflowError

    body = {"logical_date": None, "conf": conf}
    for attempt in range(tries):
        try:
            return airflow.api("POST", f"/dags/{dag_id}/dagRuns", json=body)
        except AirflowError as exc:
            if exc.status != 500 or attempt == tries - 1:
                raise
            time.sleep(1)
    raise AssertionError("unreachable")


def measure(airflow, dag_id: str, conf: dict) -> tuple[float, float, float, str]:
    """(trigger -> first task running, scheduler part, executor part, task id), Airflow's clock."""
    run = trigger(airflow, dag_id, conf)
    ti = first_task(airflow, dag_id, run["dag_run_id"])
    run = airflow.dag_run(dag_id, run["dag_run_id"])
    queued_at, queued_when, start = _at(run["queued_at"]), _at(ti.get("queued_when")), _at(ti["start_date"])
    total = (start - queued_at).total_seconds()
    scheduler = (queued_when - queued_at).total_seconds() if queued_when else float("nan")
    executor = (start - queued_when).total_seconds() if queued_when else float("nan")
    return total, scheduler, executor, ti["task_id"]


def _airflow(args, connections: dict, home: Path):
    from kafka_runbooks_dev.localstack.airflow import AirflowLocal

    extra = {
        "KAFKA_RUNBOOKS_DATA_DIR": str(home / "kafka_runbooks"),
        "PYSPARK_PYTHON": sys.executable,
        "KAFKA_RUNBOOKS_METADATA_SWEEP_SCHEDULE": "none",
        "KAFKA_RUNBOOKS_FAILED_BROKER_SWEEP_SCHEDULE": "none",
        "KAFKA_RUNBOOKS_HEALTH_SCHEDULE": "none",
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "3600",
    }
    extra.update(dict(s.split("=", 1) for s in args.setting))
    return AirflowLocal(
        home,
        port=args.port,
        dags_folders=ROOT / "dags",
        plugins_folder=ROOT / "plugins",
        connections=connections,
        extra_env=extra,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=24450)
    parser.add_argument("--port-base", type=int, default=24000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--airflow-home", default=None)
    parser.add_argument("--no-stack", action="store_true")
    parser.add_argument("--setting", action="append", default=[], help="extra Airflow env KEY=VALUE")
    args = parser.parse_args()
    from kafka_runbooks_dev.localstack import LocalStack, Topology

    work = Path(tempfile.mkdtemp(prefix="kr-bench-trigger-"))
    stack = None
    if args.no_stack:
        connections = {"kafka_default": {"conn_type": "kafka", "extra": {"bootstrap.servers": "127.0.0.1:1"}}}
    else:
        stack = LocalStack(home=work / "stack", topology=Topology(port_base=args.port_base, connect=False))
        stack.start()
        connections = stack.airflow_connections(spark_master="local[1]")
    home = Path(args.airflow_home) if args.airflow_home else work / "airflow"
    airflow = _airflow(args, connections, home)
    try:
        t0 = time.monotonic()
        airflow.start(timeout=600)
        print(f"Airflow started in {time.monotonic() - t0:.0f}s at {airflow.base_url}")
        for dag_id in MANUAL:
            airflow.wait_for_dag(dag_id, timeout=300)
            airflow.unpause(dag_id)
        worst = 0.0
        print(f"{'dag':36} {'task':22} {'trigger->running':>16} {'scheduler':>10} {'floor (executor)':>17}")
        for _ in range(args.rounds):
            for dag_id, conf in MANUAL.items():
                total, scheduler, executor, task = measure(airflow, dag_id, conf)
                worst = max(worst, total)
                print(f"{dag_id:36} {task:22} {total:15.1f}s {scheduler:9.1f}s {executor:16.1f}s")
        verdict = "met" if worst < TARGET_S else "NOT met"
        print(f"worst trigger -> first task running: {worst:.1f}s (target < {TARGET_S:.0f}s: {verdict})")
    finally:
        airflow.stop()
        if stack is not None:
            stack.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
