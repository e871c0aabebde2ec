"""Benchmark: healing a dead broker on the local stack, against the throttle's floor.

    .venv/bin/python bench/reassign_heal.py [--port-base 47600] [--stack-home DIR]
        [--topics 6] [--mb-per-topic 24] [--throttle 300000] [--max-partitions-per-chunk 6]
        [--receiver-slots 2]

Starts a fresh stack (or reuses ``--stack-home``), writes ``--topics`` topics (6
partitions, RF 2 and 3 alternating) holding ``--mb-per-topic`` MB each, kills broker 4,
plans with the real Spark job (``spark_jobs/failed_broker_plan.py``) and executes the
chunks exactly as ``kafka_failed_broker_reassignment`` does. Prints the time from the
start of the first chunk to full replication (every chunk verified: target replicas, full
ISR, throttle removed), the floor set by the bytes to move divided by the throttle, their
ratio, and the per-receiver floor (the busiest receiver's bytes / throttle: the throttle
is a rate per broker, so receivers copy in parallel). The target (issue #25) is a ratio to the
per-receiver floor of at most 1.1. ``--receiver-slots`` is the executor's overlap rule as the
runbook's sensor uses it (``execute.RECEIVER_SLOTS``); 0 measures one chunk at a time. Broker 4
is restarted at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEAD = 4


def fill(bootstrap: str, topic: str, count: int, size: int) -> None:
    """Write ``count`` messages of ``size`` bytes (acks=all), waiting when the queue is full."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
    payload = b"x" * size
    for i in range(count):
        while True:
            try:
                producer.produce(topic, payload, key=str(i).encode())
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    producer.flush(120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port-base", type=int, default=47600)
    parser.add_argument("--stack-home", default=None, help="reuse a running stack (not stopped at the end)")
    parser.add_argument("--topics", type=int, default=6)
    parser.add_argument("--mb-per-topic", type=float, default=24)
    parser.add_argument("--throttle", type=int, default=300_000, help="bytes/s per broker")
    parser.add_argument("--max-partitions-per-chunk", type=int, default=6)
    from kafka_runbooks.failed_broker.execute import RECEIVER_SLOTS

    parser.add_argument("--receiver-slots", type=int, default=RECEIVER_SLOTS, help="0: one chunk at a time")
    args = parser.parse_args()

    from kafka_runbooks.admin import ClusterAdmin
    from kafka_runbooks.failed_broker.execute import ChunkExecutor, ExecState, chunks_from_plan_dir
    from kafka_runbooks.snapshot import write_snapshot
    from kafka_runbooks_dev.helpers import create_topic, unique_topic, wait_until
    from kafka_runbooks_dev.localstack import LocalStack, Topology

    work = Path(tempfile.mkdtemp(prefix="reassign-heal-"))
    if args.stack_home:
        stack, own = LocalStack(home=args.stack_home), False
    else:
        stack, own = LocalStack(home=work / "stack", topology=Topology(port_base=args.port_base)), True
    t0 = time.monotonic()
    stack.start()
    print(f"stack ready in {time.monotonic() - t0:.0f}s at {stack.bootstrap_servers}")
    bs = stack.bootstrap_servers
    admin = ClusterAdmin({"bootstrap.servers": bs}, timeout_s=15)
    try:
        messages = int(args.mb_per_topic * 1_000_000 / 2000)
        for i in range(args.topics):
            topic = unique_topic("heal-bench")
            create_topic(bs, topic, 6, 2 if i % 2 else 3)
            fill(bs, topic, messages, 2000)
        stack.kill(f"broker-{DEAD}")
        wait_until(
            lambda: not (b := admin.describe_brokers().get(DEAD)) or b.fenced, 60, 1, "broker 4 fenced"
        )
        snapshot = write_snapshot(admin.read_state(), work / "snapshot", bootstrap_servers=bs)
        t0 = time.monotonic()
        plan = subprocess.run(
            [
                sys.executable,
                str(ROOT / "spark_jobs" / "failed_broker_plan.py"),
                "--snapshot",
                str(snapshot),
                "--failed",
                str(DEAD),
                "--max-partitions-per-chunk",
                str(args.max_partitions_per_chunk),
                "--out",
                str(work / "plan"),
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        )
        if plan.returncode != 0:
            raise SystemExit(f"planning failed ({plan.returncode}):\n{plan.stderr[-3000:]}")
        print(f"planned with Spark in {time.monotonic() - t0:.1f}s")
        summary = json.loads((work / "plan" / "summary.json").read_text())
        state = ExecState(
            run_id="bench",
            failed_brokers=[DEAD],
            throttle_bytes_per_sec=args.throttle,
            chunks=chunks_from_plan_dir(work / "plan"),
        )
        executor = ChunkExecutor(admin, progress_every_s=30, receiver_slots=args.receiver_slots)
        while not executor.step(state):
            time.sleep(0.5)
        first = min(c.started_ms for c in state.chunks if c.started_ms)
        last = max(c.finished_ms for c in state.chunks if c.finished_ms)
        healed_s = (last - first) / 1000
        moved = summary["bytes"]
        per_receiver = Counter()
        for m in summary["moves"]:
            for b in set(m["to"]) - set(m["from"]):
                per_receiver[b] += m["bytes"]
        floor = moved / args.throttle
        receiver_floor = max(per_receiver.values(), default=0) / args.throttle
        print(
            f"partitions moved: {summary['partitions']} in {len(state.chunks)} chunk(s); bytes: {moved:,}; "
            f"throttle: {args.throttle:,} B/s per broker; per receiver: {dict(sorted(per_receiver.items()))}"
        )
        print(f"healing time (first chunk start -> full replication): {healed_s:.1f}s")
        print(
            f"floor (bytes / throttle): {floor:.1f}s   ratio: {healed_s / floor if floor else float('nan'):.2f}"
        )
        print(
            f"per-receiver floor (busiest receiver's bytes / throttle): {receiver_floor:.1f}s   ratio: "
            f"{healed_s / receiver_floor if receiver_floor else float('nan'):.2f} (target <= 1.1; "
            f"receiver slots {args.receiver_slots})"
        )
    finally:
        stack.start_node(f"broker-{DEAD}")
        stack.wait_ready([f"broker-{DEAD}"], 180)
        admin.close()
        if own:
            stack.stop()


if __name__ == "__main__":
    main()
