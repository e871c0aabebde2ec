"""Benchmark: Spark's fixed cost per analysis, over a running Spark Connect server vs spark-submit.

    .venv/bin/python bench/spark_fixed_cost.py [--partitions 82] [--runs 3] [--port 19002]

Writes one small synthetic snapshot (the facade's own Parquet schemas) and runs the health job
(``spark_jobs/cluster_health.py``) on it three ways:

* the analysis itself: ``run(spark, argv)`` in a classic session that is already warm (after one
  warm-up run): what the job costs when nothing has to start;
* over Spark Connect as a task does it: a fresh Python process that imports pyspark and the
  plugin, then opens a NEW session on the running server (``run_over_connect``), runs the job
  and closes the session. The time to the first result is measured from the session's opening
  (a task process has imported its operator before ``execute``); the process's whole wall time,
  imports included, is printed beneath it;
* ``spark-submit --master local[2]``, as the DAGs do today: JVM, SparkSession, Python workers.

On a loaded machine every figure grows: the load average is printed with them.

Fixed cost = time to first result minus the analysis, printed per way with the median over
``--runs`` and the floor the issue sets (under 3 s per analysis over Connect). The server's own
start is paid once per deployment and printed apart.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "spark_jobs" / "cluster_health.py"
FLOOR_S = 3.0


def write_small_snapshot(folder: Path, partitions: int) -> Path:
    """``partitions`` partitions, RF 3 over 4 brokers, broker 4 dead: flags to compute, not only zeros."""
    from kafka_runbooks.model import Broker, ClusterState, PartitionState
    from kafka_runbooks.snapshot import write_snapshot

    brokers = {b: Broker(broker_id=b, rack=f"r{b % 3}", fenced=b == 4) for b in range(1, 5)}
    parts = []
    for p in range(partitions):
        replicas = tuple((p + i) % 4 + 1 for i in range(3))
        isr = tuple(b for b in replicas if b != 4)
        parts.append(PartitionState("bench", p, isr[0], 1, replicas, isr))
    state = ClusterState(cluster_id="bench", brokers=brokers, quorum=None, partitions=parts)
    return Path(write_snapshot(state, folder / "snapshot", "localhost:9092"))


def analysis_seconds(snapshot: Path, out: Path, runs: int) -> list[float]:
    """The job in a warm classic local[2] session: one warm-up, then ``runs`` timed runs."""
    from pyspark.sql import SparkSession

    sys.path.insert(0, str(JOB.parent))
    import cluster_health

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    args = ["--snapshot", str(snapshot), "--output", str(out)]
    try:
        cluster_health.run(spark, args)
        times = []
        for _ in range(runs):
            started = time.monotonic()
            cluster_health.run(spark, args)
            times.append(time.monotonic() - started)
        return times
    finally:
        spark.stop()


CONNECT_TASK = """
import sys, time
from kafka_runbooks_airflow.spark_connect import run_over_connect, session_id
started = time.monotonic()
code = run_over_connect(sys.argv[1], sys.argv[4:], sys.argv[2], session_id("bench", sys.argv[3]))
print(f"IN_TASK_S={time.monotonic() - started:.3f}")
sys.exit(code)
"""


def connect_seconds(url: str, snapshot: Path, out: Path, runs: int) -> tuple[list[float], list[float]]:
    """(process wall times, in-task times) of a fresh Python process that runs the job over
    Connect, as a task would: the in-task time starts once pyspark and the plugin are imported
    (an Airflow task process has imported its operator before ``execute``), and covers the new
    session, the job and closing the session."""
    walls, in_task = [], []
    for run in range(runs):
        started = time.monotonic()
        argv = [sys.executable, "-c", CONNECT_TASK, str(JOB), url, f"run-{run}-{time.time_ns()}"]
        proc = subprocess.run(
            [*argv, "--snapshot", str(snapshot), "--output", str(out)], capture_output=True, text=True
        )
        walls.append(time.monotonic() - started)
        if proc.returncode != 0:
            raise RuntimeError(f"the job failed over Connect:\n{proc.stderr[-3000:]}")
        in_task.append(float(proc.stdout.rsplit("IN_TASK_S=", 1)[1].split()[0]))
    return walls, in_task


def submit_seconds(snapshot: Path, out: Path, runs: int) -> list[float]:
    from kafka_runbooks_dev.local_spark import spark_submit_command

    times = []
    for _ in range(runs):
        argv, env = spark_submit_command(JOB, ["--snapshot", str(snapshot), "--output", str(out)])
        started = time.monotonic()
        proc = subprocess.run(argv, env=env, capture_output=True, text=True)
        times.append(time.monotonic() - started)
        if proc.returncode != 0:
            raise RuntimeError(f"spark-submit failed:\n{proc.stderr[-3000:]}")
    return times


def line(label: str, total: list[float], analysis: float, floor: float | None) -> str:
    median = statistics.median(total)
    fixed = median - analysis
    target = f"   floor {floor:.1f} s: {'met' if fixed < floor else 'NOT met'}" if floor else ""
    runs = ", ".join(f"{t:.1f}" for t in total)
    return f"{label:<14} first result {median:6.1f} s (runs {runs})  fixed cost {fixed:6.1f} s{target}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=82)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--port", type=int, default=None, help="Connect server port (default: stack base + 2)"
    )
    args = parser.parse_args()
    from kafka_runbooks_dev import spark_connect

    port = args.port or spark_connect.default_port()
    with tempfile.TemporaryDirectory(prefix="spark-fixed-cost-") as tmp:
        work = Path(tmp)
        snapshot = write_small_snapshot(work, args.partitions)
        analysis = statistics.median(analysis_seconds(snapshot, work / "warm", args.runs))
        started = time.monotonic()
        server = spark_connect.start(port, work / "connect.log", store_url=str(work))
        server_start = time.monotonic() - started
        try:
            # a long-lived server's first analysis warms its JIT and code generation once, like the
            # classic session's warm-up run: reported apart, not in the median
            _, first = connect_seconds(server.url, snapshot, work / "connect", 1)
            process_walls, over_connect = connect_seconds(server.url, snapshot, work / "connect", args.runs)
        finally:
            server.stop()
        submitted = submit_seconds(snapshot, work / "submit", args.runs)
    print(f"health job on {args.partitions} partitions; median of {args.runs} runs")
    print(f"{'analysis':<14} {analysis:6.1f} s in a warm session (the job's own work)")
    print(line("spark connect", over_connect, analysis, FLOOR_S))
    print(
        line("  + imports", process_walls, analysis, None)
        + "  (a fresh process: Python, pyspark, the plugin)"
    )
    print(line("spark-submit", submitted, analysis, None))
    print(f"{'server start':<14} {server_start:6.1f} s, once per deployment (not per analysis)")
    print(f"{'first analysis':<14} {first[0]:6.1f} s over Connect after the server started (warm-up, once)")
    print(
        f"load average while measured: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()
