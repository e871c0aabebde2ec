"""Benchmark: how long the local stack takes to start, and how much memory it holds.

    .venv/bin/python bench/stack_startup.py [--port-base 49000] [--messages 20000]

Starts a fresh stack in a temporary folder, samples the summed RSS of its JVMs every
half second while it starts and while a producer writes ``--messages`` 1 KiB records
with acks=all, then stops it. Prints: time to ready (all nodes), time to the first
broker RUNNING, peak RSS (MiB) in total and per role, and produce throughput.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from kafka_runbooks_dev.localstack import LocalStack, Topology


def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Sampler(threading.Thread):
    def __init__(self, stack: LocalStack) -> None:
        super().__init__(daemon=True)
        self.stack = stack
        self.peak_total = 0.0
        self.peak_by_role: dict[str, float] = {}
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.is_set():
            by_role: dict[str, float] = {}
            for node in self.stack.topology.nodes:
                pid = self.stack.pid(node.name)
                if pid:
                    by_role[node.role] = by_role.get(node.role, 0.0) + rss_mib(pid)
            self.peak_total = max(self.peak_total, sum(by_role.values()))
            for role, value in by_role.items():
                self.peak_by_role[role] = max(self.peak_by_role.get(role, 0.0), value)
            time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port-base", type=int, default=49000)
    parser.add_argument("--messages", type=int, default=20000)
    args = parser.parse_args()
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    with tempfile.TemporaryDirectory(prefix="kr-bench-") as tmp:
        stack = LocalStack(home=Path(tmp), topology=Topology(port_base=args.port_base))
        sampler = Sampler(stack)
        sampler.start()
        started = time.monotonic()
        try:
            stack.start()
            ready = time.monotonic() - started
            admin = AdminClient({"bootstrap.servers": stack.bootstrap_servers})
            admin.create_topics([NewTopic("bench", 12, 3)])["bench"].result(60)
            producer = Producer({"bootstrap.servers": stack.bootstrap_servers, "acks": "all", "linger.ms": 5})
            payload = b"x" * 1024
            t0 = time.monotonic()
            for i in range(args.messages):
                producer.produce("bench", payload, key=str(i).encode())
                producer.poll(0)
            producer.flush(120)
            produce_s = time.monotonic() - t0
            del producer, admin  # close the clients before the brokers go away
            time.sleep(1)
        finally:
            sampler.stop_event.set()
            sampler.join()
            stack.stop()
    print(f"stack ready (3 controllers, 4 brokers, Connect): {ready:.1f} s")
    print(f"peak RSS, all JVMs: {sampler.peak_total:.0f} MiB")
    for role, value in sorted(sampler.peak_by_role.items()):
        print(f"  peak RSS, {role}s: {value:.0f} MiB")
    print(
        f"produce {args.messages} x 1 KiB, acks=all, RF 3: {produce_s:.1f} s "
        f"({args.messages / produce_s:.0f} msg/s)"
    )


if __name__ == "__main__":
    main()
