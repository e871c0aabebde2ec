"""Benchmark: the failed-broker planning job (Spark) on synthetic snapshots of growing size.

    .venv/bin/python bench/reassign_plan_scale.py [--sizes 10000,100000,1000000] [--workdir DIR]

For each size, writes a snapshot with the facade's own Parquet schemas (RF 3, rack-aware
assignments, partition sizes spread over four orders of magnitude, a few brokers dead: no size,
no rack, as a real snapshot shows them), then runs ``spark_jobs/failed_broker_plan.py`` through
``spark-submit --master local[2]`` exactly as the DAG does. Prints, per size: generation time
(not part of the planning), planning wall time (spark-submit start to exit, JVM start included),
peak memory of the whole process tree (JVM + Python driver, sampled from /proc), and the balance
of the result: moved replicas per receiver (min/max), per-broker replica count and bytes spread
among live brokers before and after. Target: a million partitions planned in under a minute.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kafka_runbooks.failed_broker.plan import check_plan, load_plan, read_snapshot_rows
from kafka_runbooks.snapshot import schemas

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "spark_jobs" / "failed_broker_plan.py"
# partitions -> (brokers, racks, failed)
SHAPES = {10_000: (60, 6, 1), 100_000: (300, 10, 2), 1_000_000: (1000, 20, 3)}
PER_TOPIC = 100


def generate(
    path: Path, partitions: int, brokers: int, racks: int, failed: int, same_rack: bool = False, seed: int = 5
) -> list[int]:
    """Write a snapshot; returns the failed brokers (the first ids, in distinct racks or all in rack 0)."""
    rng = np.random.default_rng(seed)
    per_rack = brokers // racks
    r0 = rng.integers(0, racks, partitions)
    d1 = rng.integers(1, racks, partitions)
    d2 = 1 + (d1 - 1 + 1 + rng.integers(0, racks - 2, partitions)) % (racks - 1)
    rack_of = np.stack([r0, (r0 + d1) % racks, (r0 + d2) % racks], axis=1)
    replicas = (rack_of + 1 + racks * rng.integers(0, per_rack, (partitions, 3))).astype(np.int32)
    size = np.minimum(rng.lognormal(np.log(50e6), 2.0, partitions), 500e9).astype(np.int64)
    dead = [1 + i * racks for i in range(failed)] if same_rack else list(range(1, failed + 1))
    is_dead = np.isin(replicas, dead)
    # Leader: the first replica that is alive (the controller moved leadership off the dead one).
    first_alive = np.argmax(~is_dead, axis=1)
    leader = replicas[np.arange(partitions), first_alive]
    isr_size = 3 - is_dead.sum(axis=1)
    lag = rng.integers(0, 4096, (partitions, 3))
    lag[np.arange(partitions), first_alive] = 0
    replica_size = size[:, None] - lag

    n = partitions * 3
    topic_names = np.array([f"topic-{t:05d}" for t in range(-(-partitions // PER_TOPIC))], dtype=object)
    p_ids = np.arange(partitions)
    flat_dead = is_dead.reshape(n)
    flat_replica = replicas.reshape(n)
    rack_names = np.array([f"rack-{r}" for r in range(racks)], dtype=object)
    columns = {
        "taken_at_ms": pa.array(np.full(n, 1_700_000_000_000, dtype=np.int64)),
        "topic": pa.array(np.repeat(topic_names[p_ids // PER_TOPIC], 3), type=pa.string()),
        "partition": pa.array(np.repeat(p_ids % PER_TOPIC, 3).astype(np.int32)),
        "replica": pa.array(flat_replica),
        "replica_index": pa.array(np.tile(np.arange(3, dtype=np.int32), partitions)),
        "replication_factor": pa.array(np.full(n, 3, dtype=np.int32)),
        "leader": pa.array(np.repeat(leader, 3)),
        "leader_epoch": pa.array(np.repeat(is_dead.any(axis=1).astype(np.int32), 3)),
        "is_leader": pa.array(flat_replica == np.repeat(leader, 3)),
        "in_isr": pa.array(~flat_dead),
        "in_elr": pa.array(np.zeros(n, dtype=bool)),
        "isr_size": pa.array(np.repeat(isr_size, 3).astype(np.int32)),
        "min_insync_replicas": pa.array(np.full(n, 2, dtype=np.int32)),
        "broker_alive": pa.array(~flat_dead),
        "broker_rack": pa.array(rack_names[(flat_replica - 1) % racks], mask=flat_dead, type=pa.string()),
        "size_bytes": pa.array(replica_size.reshape(n), mask=flat_dead, type=pa.int64()),
        "log_dir": pa.array(
            np.full(n, "/var/lib/kafka/data", dtype=object), mask=flat_dead, type=pa.string()
        ),
    }
    replicas_schema, brokers_schema = schemas()
    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns, schema=replicas_schema), path / "replicas.parquet")
    broker_rows = [
        {
            "broker_id": b,
            "host": None if b in dead else f"broker-{b}",
            "port": None if b in dead else 9092,
            "rack": None if b in dead else f"rack-{(b - 1) % racks}",
            "alive": b not in dead,
            "fenced": False,
        }
        for b in range(1, brokers + 1)
    ]
    pq.write_table(pa.Table.from_pylist(broker_rows, schema=brokers_schema), path / "brokers.parquet")
    (path / "meta.json").write_text(json.dumps({"taken_at_ms": 1_700_000_000_000, "cluster_id": "bench"}))
    return dead


def _tree(root: int) -> list[int]:
    """root and all its descendants, from /proc (children files)."""
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            continue
    return pids


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_job(snapshot: Path, out: Path, failed: list[int], driver_memory: str) -> tuple[float, int, str]:
    """(wall seconds, peak RSS of the process tree in KiB, stdout) of one spark-submit."""
    from kafka_runbooks_dev.local_spark import spark_submit_command

    cmd, env = spark_submit_command(
        JOB,
        ["--snapshot", str(snapshot), "--failed", ",".join(map(str, failed)), "--out", str(out)],
        driver_memory=driver_memory,
    )
    peak = 0
    started = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, sum(_rss_kib(p) for p in _tree(proc.pid)))
            stop.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = proc.communicate()
    wall = time.monotonic() - started
    stop.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"planning failed ({proc.returncode}):\n{stdout}\n{stderr[-4000:]}")
    return wall, peak, stdout.strip()


def spread(values: list[int], unit: float = 1) -> str:
    low, high = min(values) / unit, max(values) / unit
    digits = 0 if unit == 1 else 1
    return f"{low:.{digits}f}..{high:.{digits}f} (spread {high - low:.{digits}f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--workdir", default=None, help="where snapshots go (default: a temp dir, removed)")
    parser.add_argument(
        "--driver-memory", default="1g", help="spark-submit --driver-memory (Spark's default: 1g)"
    )
    parser.add_argument("--check", action="store_true", help="also run check_plan on each result")
    parser.add_argument(
        "--shape",
        default=None,
        help="brokers,racks,failed for every size (default: 60,6,1 / 300,10,2 / 1000,20,3)",
    )
    parser.add_argument(
        "--same-rack", action="store_true", help="fail brokers of one rack (its receivers take everything)"
    )
    args = parser.parse_args()

    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="bench-plan-"))
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            if args.shape:
                brokers, racks, failed_count = (int(x) for x in args.shape.split(","))
            else:
                brokers, racks, failed_count = SHAPES.get(size, (max(6, size // 1000), 5, 1))
            snapshot = work / f"snapshot-{size}"
            t0 = time.monotonic()
            failed = generate(snapshot, size, brokers, racks, failed_count, args.same_rack)
            generated = time.monotonic() - t0
            wall, peak_kib, line = run_job(snapshot, work / f"plan-{size}", failed, args.driver_memory)
            plan = load_plan(work / f"plan-{size}")
            summary = plan.summary
            live = [v for b, v in summary["per_broker"].items() if int(b) not in failed and v["alive"]]
            print(
                f"{size:>9} partitions, {brokers} brokers in {racks} racks, failed {failed}: "
                f"generated in {generated:.1f}s; planned in {wall:.1f}s wall, peak RSS {peak_kib / 1024:.0f} MiB"
            )
            print(f"    job: {line.splitlines()[-1]}")
            print(
                f"    moved {summary['partitions']} partitions ({summary['bytes'] / 1e9:.1f} GB) in "
                f"{len(summary['chunks'])} chunks; moved replicas per receiver "
                f"{summary['moved_min']}..{summary['moved_max']}"
            )
            print(
                f"    live brokers' replicas before {spread([v['replicas_before'] for v in live])}, "
                f"after {spread([v['replicas_after'] for v in live])}"
            )
            print(
                f"    live brokers' preferred leaders before {spread([v['leaders_before'] for v in live])}, "
                f"after {spread([v['leaders_after'] for v in live])}; {summary['leaders_changed']} partitions "
                "get a new first replica (no data moves for that)"
            )
            gb_before = spread([v["bytes_before"] for v in live], 1e9)
            gb_after = spread([v["bytes_after"] for v in live], 1e9)
            print(f"    live brokers' GB before {gb_before}, after {gb_after}")
            if args.check:
                t0 = time.monotonic()
                violations = check_plan(plan, *read_snapshot_rows(snapshot))
                print(
                    f"    check_plan: {len(violations)} violations in {time.monotonic() - t0:.1f}s {violations[:3]}"
                )
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
