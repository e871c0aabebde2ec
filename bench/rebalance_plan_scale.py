"""Benchmark: the rebalance planner (Spark) on a synthetic cluster of a million partitions.

    .venv/bin/python bench/rebalance_plan_scale.py [--modes add-brokers,full] [--partitions 1000000]
        [--brokers 1000] [--racks 20] [--new 100] [--via connect|submit|connect,submit] [--port N]
        [--workdir DIR]

Issue #27's scale target: a million partitions on 1000 brokers planned in under 60 s on this
2-core machine. For each mode, writes a snapshot with the facade's own Parquet schemas (RF 3,
three racks per partition, partition sizes over four orders of magnitude), then runs
``spark_jobs/failed_broker_plan.py --rebalance`` the way the DAG does by default: the local
stack's ``spark_default`` is its long-lived Spark Connect server (``spark_connect``, issue #25),
so the task's own process runs the job over a new session on it (``run_over_connect``): Spark
reads the snapshot on the server, the plan is made and written in the task's process. The bench
starts one such server (``local[2]``, Spark's default driver memory) before the modes, as a
deployment runs it, and warms it with one small plan. ``--via submit`` (or ``connect,submit``,
side by side) also runs ``spark-submit --master local[2]``, a ``spark`` connection's way (the
compose file's cluster), JVM and session start included. It prints: wall time (the task's process
start to exit, or spark-submit's) beside the 60 s floor, peak memory (the task's process tree and,
over Connect, the server's), replica moves and leader moves beside their lower bounds, and the
spreads of replicas, preferred leaders and bytes before and after, re-derived here from the plan
files (not read from the planner's summary), and the load average at the end.

* ``add-brokers``: the replicas sit on brokers 1..brokers-new, evenly; the last ``--new`` brokers
  (spread over every rack) were just added and hold nothing.
* ``full``: every broker holds replicas, skewed: within each rack a broker's share grows linearly
  with its index, the last one holding about three times what the first holds.

The lower bound (computed here, independently of the planner's own): the fewest replica moves
for which every live broker ends within one window [lo, lo + target] of the same total. A move
takes one replica off one broker and puts it on another, so the moves are at least the replicas
above the window (they must leave) and at least the replicas missing below it (they must
arrive); in add-brokers only the new brokers receive and only the old ones give, so a window
that an old broker is already below, or a new broker above, cannot be reached. It counts
replica moves whatever the racks and disks allow: no plan can do with fewer. Leader moves
(reorders, no data) have the same bound over preferred leaderships.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from reassign_plan_scale import _rss_kib, _tree

from kafka_runbooks.balance_rules import spread_limit
from kafka_runbooks.failed_broker.plan import load_plan
from kafka_runbooks.snapshot import schemas

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "spark_jobs" / "failed_broker_plan.py"
FLOOR_S = 60.0  # issue #27: a million partitions on 1000 brokers in under a minute
PER_TOPIC = 100
RF = 3


def placement(partitions: int, brokers: int, racks: int, new: int, mode: str, rng) -> np.ndarray:
    """(partitions, RF) broker ids: three distinct racks per partition, the broker within its rack
    uniform among the old brokers (add-brokers) or weighted 1..3 by its index (full)."""
    r0 = rng.integers(0, racks, partitions)
    d1 = rng.integers(1, racks, partitions)
    d2 = 1 + (d1 - 1 + 1 + rng.integers(0, racks - 2, partitions)) % (racks - 1)
    rack_of = np.stack([r0, (r0 + d1) % racks, (r0 + d2) % racks], axis=1)
    per_rack = brokers // racks
    if mode == "add-brokers":
        index = rng.integers(0, per_rack - new // racks, (partitions, RF))
    else:
        weights = np.linspace(1.0, 3.0, per_rack)
        index = rng.choice(per_rack, size=(partitions, RF), p=weights / weights.sum())
    return (rack_of + 1 + racks * index).astype(np.int32)


def generate(path: Path, partitions: int, brokers: int, racks: int, new: int, mode: str, seed: int = 7):
    """Write a snapshot (every broker live, in rack (id - 1) % racks); returns the assignment."""
    rng = np.random.default_rng(seed)
    replicas = placement(partitions, brokers, racks, new, mode, rng)
    size = np.minimum(rng.lognormal(np.log(50e6), 2.0, partitions), 500e9).astype(np.int64)
    n = partitions * RF
    flat = replicas.reshape(n)
    leader = np.repeat(replicas[:, 0], RF)
    p_ids = np.arange(partitions)
    topics = np.array([f"topic-{t:05d}" for t in range(-(-partitions // PER_TOPIC))], dtype=object)
    rack_names = np.array([f"rack-{r}" for r in range(racks)], dtype=object)
    columns = {
        "taken_at_ms": pa.array(np.full(n, 1_700_000_000_000, dtype=np.int64)),
        "topic": pa.array(np.repeat(topics[p_ids // PER_TOPIC], RF), type=pa.string()),
        "partition": pa.array(np.repeat(p_ids % PER_TOPIC, RF).astype(np.int32)),
        "replica": pa.array(flat),
        "replica_index": pa.array(np.tile(np.arange(RF, dtype=np.int32), partitions)),
        "replication_factor": pa.array(np.full(n, RF, dtype=np.int32)),
        "leader": pa.array(leader),
        "leader_epoch": pa.array(np.zeros(n, dtype=np.int32)),
        "is_leader": pa.array(flat == leader),
        "in_isr": pa.array(np.ones(n, dtype=bool)),
        "in_elr": pa.array(np.zeros(n, dtype=bool)),
        "isr_size": pa.array(np.full(n, RF, dtype=np.int32)),
        "min_insync_replicas": pa.array(np.full(n, 2, dtype=np.int32)),
        "broker_alive": pa.array(np.ones(n, dtype=bool)),
        "broker_rack": pa.array(rack_names[(flat - 1) % racks], type=pa.string()),
        "size_bytes": pa.array(np.repeat(size, RF)),
        "log_dir": pa.array(np.full(n, "/var/lib/kafka/data", dtype=object), type=pa.string()),
    }
    replicas_schema, brokers_schema = schemas()
    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns, schema=replicas_schema), path / "replicas.parquet")
    rows = [
        {
            "broker_id": b,
            "host": f"broker-{b}",
            "port": 9092,
            "rack": f"rack-{(b - 1) % racks}",
            "alive": True,
        }
        | {"fenced": False}
        for b in range(1, brokers + 1)
    ]
    pq.write_table(pa.Table.from_pylist(rows, schema=brokers_schema), path / "brokers.parquet")
    (path / "meta.json").write_text(json.dumps({"taken_at_ms": 1_700_000_000_000, "cluster_id": "bench"}))
    return replicas, size


def lower_bound(counts: np.ndarray, limit: int, gives: np.ndarray, takes: np.ndarray) -> int | None:
    """The fewest unit moves that bring every count into one window [lo, lo + limit], the total kept,
    when only ``gives`` brokers may lose and only ``takes`` brokers may gain (see the module's
    docstring); None when no window is reachable."""
    n, total = len(counts), int(counts.sum())
    best = None
    for lo in range(max(0, -(-(total - n * limit) // n)), total // n + 1):
        hi = lo + limit
        if not n * lo <= total <= n * hi:
            continue
        if np.any(~takes & (counts < lo)) or np.any(~gives & (counts > hi)):
            continue  # a broker that may not gain is below the window, or one that may not lose above it
        need = max(int(np.maximum(counts - hi, 0).sum()), int(np.maximum(lo - counts, 0).sum()))
        best = need if best is None or need < best else best
    return best


CONNECT_TASK = """
import sys
from kafka_runbooks_airflow.spark_connect import run_over_connect, session_id
sys.exit(run_over_connect(sys.argv[1], sys.argv[4:], sys.argv[2], session_id("bench", sys.argv[3])))
"""


def submit_command(job_args: list[str], driver_memory: str, scratch: Path) -> tuple[list[str], dict]:
    """spark-submit --master local[2] of the planner (its own JVM and session), as a ``spark``
    connection runs it."""
    from kafka_runbooks_dev.local_spark import spark_submit_command

    return spark_submit_command(JOB, job_args, driver_memory=driver_memory, local_dir=scratch)


def connect_command(job_args: list[str], url: str) -> tuple[list[str], dict]:
    """A fresh Python process that runs the planner over the Connect server at ``url``, as the
    task does with a ``spark_connect`` connection (the stack's default): the plan is made in
    this process, Spark only reads the snapshot."""
    argv = [sys.executable, "-c", CONNECT_TASK, str(JOB), url, f"{time.time_ns()}", *job_args]
    return argv, dict(os.environ)


def run_job(cmd: list[str], env: dict, watched: list[int]) -> tuple[float, int, int, str]:
    """(wall seconds, peak RSS of the job's process tree, peak RSS of the ``watched`` trees (the
    Connect server), both in KiB, the job's last line) of one planner run."""
    peak, peak_watched = 0, 0
    started = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak, peak_watched
        while not stop.is_set():
            peak = max(peak, sum(_rss_kib(p) for p in _tree(proc.pid)))
            peak_watched = max(peak_watched, sum(_rss_kib(p) for w in watched for p in _tree(w)))
            stop.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = proc.communicate()
    wall = time.monotonic() - started
    stop.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"planning failed ({proc.returncode}):\n{stdout}\n{stderr[-4000:]}")
    return wall, peak, peak_watched, stdout.strip().splitlines()[-1]


def applied(replicas: np.ndarray, out: Path) -> tuple[np.ndarray, dict]:
    """The assignment after the plan: plan.json's targets, then the summary's leader-only moves."""
    after = replicas.copy()
    plan = load_plan(out)
    row = {}
    for t in plan.partitions:
        row[t.key] = t.replicas
    for m in plan.summary["leader_moves"]:
        row[(m["topic"], m["partition"])] = tuple(m["to"])
    for (topic, partition), target in row.items():
        after[int(topic.split("-")[1]) * PER_TOPIC + partition] = target
    return after, plan.summary


def per_broker(assignment: np.ndarray, size: np.ndarray, brokers: int) -> dict[str, np.ndarray]:
    """Replicas, preferred leaders and bytes per broker id 1..brokers."""
    flat = assignment.reshape(-1)
    return {
        "replicas": np.bincount(flat, minlength=brokers + 1)[1:],
        "leaders": np.bincount(assignment[:, 0], minlength=brokers + 1)[1:],
        "bytes": np.bincount(flat, weights=np.repeat(size, RF).astype(float), minlength=brokers + 1)[1:],
    }


def spread_text(values: np.ndarray, unit: float = 1) -> str:
    low, high = values.min() / unit, values.max() / unit
    digits = 0 if unit == 1 else 1
    return f"{low:.{digits}f}..{high:.{digits}f} (spread {high - low:.{digits}f})"


def report(mode: str, replicas: np.ndarray, size: np.ndarray, brokers: int, new: int, out: Path, spreads):
    """Print the plan's figures beside the bounds, re-derived from the plan files."""
    after, summary = applied(replicas, out)
    before_counts, after_counts = per_broker(replicas, size, brokers), per_broker(after, size, brokers)
    ids = np.arange(1, brokers + 1)
    is_new = ids > brokers - new if mode == "add-brokers" else np.zeros(brokers, dtype=bool)
    gives, takes = (~is_new, is_new) if mode == "add-brokers" else (np.ones(brokers, bool),) * 2
    moved = after != replicas
    replica_moves = int(
        sum(len(set(a) - set(b)) for a, b in zip(after[moved.any(axis=1)], replicas[moved.any(axis=1)]))
    )
    incoming = np.bincount(
        [b for a, r in zip(after[moved.any(axis=1)], replicas[moved.any(axis=1)]) for b in set(a) - set(r)],
        minlength=brokers + 1,
    )[1:]
    leader_changes = int((after[:, 0] != replicas[:, 0]).sum())
    limits = {
        what: spread_limit(text, before_counts[what].mean())
        for what, text in zip(("replicas", "leaders"), spreads)
    }
    bound = lower_bound(before_counts["replicas"], limits["replicas"], gives, takes)
    leader_bound = lower_bound(
        before_counts["leaders"], limits["leaders"], np.ones(brokers, bool), np.ones(brokers, bool)
    )
    print(
        f"    replica moves {replica_moves} (lower bound {bound}; the planner's own bound "
        f"{summary['spread']['replicas']['lower_bound_moves']}), {summary['bytes_copied'] / 1e12:.1f} TB to copy, "
        f"max incoming per broker {incoming.max()}"
    )
    print(
        f"    leader changes {leader_changes} (lower bound {leader_bound}), of which "
        f"{len(summary['leader_moves'])} leader-only moves (a reorder, no data)"
    )
    for what, unit in (("replicas", 1), ("leaders", 1), ("bytes", 1e12)):
        target = (
            f" target {limits[what]} ({spreads[0 if what == 'replicas' else 1]})"
            if what in limits
            else f" target {(summary['spread']['bytes'].get('limit') or 0) / unit:.1f} (20% of the mean)"
        )
        print(
            f"    {what}{' (TB)' if unit != 1 else ''} per broker before {spread_text(before_counts[what], unit)}, "
            f"after {spread_text(after_counts[what], unit)}{target}"
        )
    print(f"    reached: {summary['reached']}{'' if summary['reached'] else ' - ' + str(summary['why_not'])}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", default="add-brokers,full")
    parser.add_argument("--partitions", type=int, default=1_000_000)
    parser.add_argument("--brokers", type=int, default=1000)
    parser.add_argument("--racks", type=int, default=20)
    parser.add_argument("--new", type=int, default=100, help="add-brokers: the brokers just added (empty)")
    parser.add_argument("--max-replica-spread", default="10%")
    parser.add_argument("--max-leader-spread", default="10%")
    parser.add_argument(
        "--via",
        default="connect",
        help="connect (the stack's default spark_default: a long-lived Spark Connect server, the plan "
        "made in the task's process), submit (spark-submit --master local[2]), or both: connect,submit",
    )
    parser.add_argument(
        "--port", type=int, default=None, help="the Connect server's port (default: base + 2)"
    )
    parser.add_argument(
        "--driver-memory", default="1g", help="spark-submit --driver-memory (Spark's default)"
    )
    parser.add_argument(
        "--workdir", default=None, help="where snapshots and plans go (default: a temp dir, removed)"
    )
    args = parser.parse_args()
    if args.new % args.racks or args.brokers % args.racks:
        raise SystemExit(
            "--brokers and --new must be multiples of --racks (the new brokers spread over every rack)"
        )
    return args


def job_arguments(args: argparse.Namespace, mode: str) -> list[str]:
    """The planner's arguments for ``mode``, as the rebalance DAG passes them."""
    job_args = ["--rebalance", mode, "--max-replica-spread", args.max_replica_spread]
    job_args += ["--max-leader-spread", args.max_leader_spread]
    job_args += ["--max-bytes-spread-percent", "20"]  # the DAG's default bytes target
    if mode == "add-brokers":
        first_new = args.brokers - args.new + 1
        job_args += ["--new-brokers", ",".join(str(b) for b in range(first_new, args.brokers + 1))]
    return job_args


def bench_mode(args: argparse.Namespace, work: Path, mode: str, server) -> None:
    """Generate ``mode``'s snapshot, plan it each way asked for, print the figures of each."""
    snapshot = work / f"snapshot-{mode}"
    t0 = time.monotonic()
    replicas, size = generate(snapshot, args.partitions, args.brokers, args.racks, args.new, mode)
    print(
        f"{mode}: {args.partitions} partitions (RF {RF}), {args.brokers} brokers in {args.racks} racks"
        f"{f', {args.new} new' if mode == 'add-brokers' else ''}: generated in {time.monotonic() - t0:.1f}s"
    )
    for via in args.via.split(","):
        out = work / f"plan-{mode}-{via}"
        job_args = ["--snapshot", str(snapshot), "--out", str(out), *job_arguments(args, mode)]
        if via == "connect":
            cmd, env = connect_command(job_args, server.url)
            watched = [server.process.pid]
        else:
            cmd, env = submit_command(job_args, args.driver_memory, work / "submit-scratch")
            watched = []
        wall, peak_kib, server_kib, line = run_job(cmd, env, watched)
        verdict = "within" if wall < FLOOR_S else "NOT within"
        memory = f"peak RSS {peak_kib / 1024:.0f} MiB" + (
            f" (the task's process; the Connect server's {server_kib / 1024:.0f} MiB)" if watched else ""
        )
        print(f"  {via}: planned in {wall:.1f}s wall ({verdict} the {FLOOR_S:.0f}s target), {memory}")
        print(f"    job: {line}")
        report(
            mode,
            replicas,
            size,
            args.brokers,
            args.new if mode == "add-brokers" else 0,
            out,
            spreads_of(args),
        )
        shutil.rmtree(out, ignore_errors=True)


def spreads_of(args: argparse.Namespace) -> tuple[str, str]:
    return args.max_replica_spread, args.max_leader_spread


def start_server(args: argparse.Namespace, work: Path):
    """The long-lived Connect server the stack runs (local[2], Spark's default driver memory),
    started once, as a deployment does; warmed by one small plan, as earlier analyses warm it."""
    from kafka_runbooks_dev import spark_connect

    port = args.port or spark_connect.default_port()
    if spark_connect.answers(port):  # start() would take the one already there for its own
        raise SystemExit(f"port {port} is taken (a stack's Connect server?): pass --port")
    started = time.monotonic()
    server = spark_connect.start(
        port,
        work / "connect.log",
        store_url=str(work),
        local_dir=work / "connect-scratch",
    )
    print(
        f"Spark Connect server {server.url} started in {time.monotonic() - started:.1f}s (once per deployment)"
    )
    small = work / "snapshot-warm-up"
    generate(small, 3000, 30, 3, 3, "add-brokers")
    job_args = ["--snapshot", str(small), "--out", str(work / "plan-warm-up"), "--rebalance", "full"]
    run_job(*connect_command(job_args, server.url), [])
    return server


def main() -> None:
    args = parse_args()
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="bench-rebalance-"))
    print(
        "lower bound = the fewest replica moves (leader changes) that put every broker within one window "
        "as wide as the target, the total kept: the replicas above it must leave, those missing below it "
        "must arrive (add-brokers: only new brokers receive); whatever racks and disks allow"
    )
    server = None
    try:
        server = start_server(args, work) if "connect" in args.via.split(",") else None
        for mode in args.modes.split(","):
            bench_mode(args, work, mode, server)
        print(
            f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores"
        )
    finally:
        if server is not None:
            server.stop()
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
