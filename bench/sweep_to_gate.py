"""Benchmark: the failed-broker sweep's detection to its approval gate (issue #25: under 30 s).

    .venv/bin/python bench/sweep_to_gate.py [--port 24450] [--port-base 24000] [--setting KEY=VALUE ...]

Starts a local stack, its Spark Connect server and an ``airflow standalone`` as the end-to-end
tests do, writes a few RF 3 topics, kills broker 4 and triggers ``kafka_failed_broker_sweep``
with ``failure_threshold_minutes`` 0 (due at first sight). Measured by Airflow's own timestamps
only (one clock): the sweep run's ``queued_at`` to the start of the reassignment run's
``approval_gate`` task, which then waits for an answer (awaiting_input). The floor printed
beside it is the sum of the durations of the tasks on that path (the sweep's, then the
reassignment run's up to the gate, each from its own start_date to end_date): what the work
itself takes; the rest is Airflow scheduling the next task or run.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trigger_latency import _airflow, _at, trigger  # noqa: E402  (the same Airflow, timestamps, retry)

ROOT = Path(__file__).resolve().parents[1]
SWEEP, REASSIGN, GATE = "kafka_failed_broker_sweep", "kafka_failed_broker_reassignment", "approval_gate"
TARGET_S = 30.0
DEAD = 4


def _busy(tis: list[dict], until=None) -> float:
    """Seconds the given task instances ran (start_date -> end_date; up to ``until`` if unfinished)."""
    total = 0.0
    for ti in tis:
        start, end = _at(ti.get("start_date")), _at(ti.get("end_date")) or until
        if start and end and end > start:
            total += (end - start).total_seconds()
    return total


def _gate_waiting(airflow, run_id: str, timeout: float = 600) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ti = airflow.task_instance(REASSIGN, run_id, GATE)
        if ti["state"] == "awaiting_input":
            return ti
        if ti["state"] in ("failed", "upstream_failed", "skipped"):
            states = airflow._ti_states(REASSIGN, run_id)
            for task_id in (t for t, state in states.items() if state == "failed"):
                print(f"--- {task_id} (failed), the end of its log:")
                print("\n".join(airflow.task_log_text(REASSIGN, run_id, task_id).splitlines()[-25:]))
            raise SystemExit(f"the gate of {run_id} is {ti['state']}: {states}")
        time.sleep(0.5)
    raise SystemExit(f"the gate of {run_id} did not wait for an answer within {timeout:.0f}s")


def _new_run(airflow, before: set[str], timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = airflow.api("GET", f"/dags/{REASSIGN}/dagRuns", params={"limit": 100})["dag_runs"]
        new = [r["dag_run_id"] for r in runs if r["dag_run_id"] not in before]
        if new:
            return new[0]
        time.sleep(0.5)
    raise SystemExit("the sweep started no reassignment run")


def _fill(stack, admin) -> None:
    from reassign_heal import fill

    from kafka_runbooks_dev.helpers import create_topic, unique_topic

    for _ in range(3):
        topic = unique_topic("sweep-bench")
        create_topic(stack.bootstrap_servers, topic, 6, 3)
        fill(stack.bootstrap_servers, topic, 500, 2000)


def measure(airflow, stack, admin) -> None:
    from kafka_runbooks_dev.helpers import wait_until

    stack.kill(f"broker-{DEAD}")
    wait_until(lambda: not (b := admin.describe_brokers().get(DEAD)) or b.fenced, 60, 1, "broker 4 fenced")
    before = {r["dag_run_id"] for r in airflow.api("GET", f"/dags/{REASSIGN}/dagRuns")["dag_runs"]}
    conf = {"failure_threshold_minutes": 0, "alert_after_minutes": 0}
    sweep = trigger(airflow, SWEEP, conf)
    run_id = _new_run(airflow, before)
    gate = _gate_waiting(airflow, run_id)
    queued_at, gate_start = _at(sweep["queued_at"]), _at(gate["start_date"])
    total = (gate_start - queued_at).total_seconds()
    sweep_work = _busy(airflow.task_instances(SWEEP, sweep["dag_run_id"]))
    path = [t for t in airflow.task_instances(REASSIGN, run_id) if t["task_id"] != GATE]
    work = sweep_work + _busy(path, until=gate_start)
    print(
        f"sweep start -> gate waiting: {total:.1f}s (target < {TARGET_S:.0f}s: "
        f"{'met' if total < TARGET_S else 'NOT met'})"
    )
    print(f"floor (the tasks' own durations on the path): {work:.1f}s; scheduling: {total - work:.1f}s")
    for ti in sorted(path, key=lambda t: t.get("start_date") or ""):
        print(f"  {ti['task_id']:28} {ti['state'] or '-':>10} {_busy([ti], until=gate_start):6.1f}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=24450)
    parser.add_argument("--port-base", type=int, default=24000)
    parser.add_argument("--setting", action="append", default=[], help="extra Airflow env KEY=VALUE")
    parser.add_argument("--spark-submit", action="store_true", help="no Connect server: spark-submit plans")
    args = parser.parse_args()
    from kafka_runbooks.admin import ClusterAdmin
    from kafka_runbooks_dev import spark_connect
    from kafka_runbooks_dev.localstack import LocalStack, Topology

    work = Path(tempfile.mkdtemp(prefix="kr-bench-sweep-"))
    stack = LocalStack(home=work / "stack", topology=Topology(port_base=args.port_base, connect=False))
    stack.start()
    airflow = None
    try:
        if not args.spark_submit:
            port = args.port_base + spark_connect.PORT_OFFSET
            spark_connect.start_recorded(stack.home, port, store_url=str(work))
        airflow = _airflow(args, stack.airflow_connections(spark_master="local[1]"), work / "airflow")
        airflow.start(timeout=600)
        for dag_id in (SWEEP, REASSIGN):
            airflow.wait_for_dag(dag_id, timeout=300)
            airflow.unpause(dag_id)
        with ClusterAdmin({"bootstrap.servers": stack.bootstrap_servers}, timeout_s=15) as admin:
            _fill(stack, admin)
            measure(airflow, stack, admin)
    finally:
        if airflow is not None:
            airflow.stop()
        spark_connect.stop_recorded(stack.home)
        stack.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
