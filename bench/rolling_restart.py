"""Benchmark: a rolling restart of the whole local cluster with the roller.

    .venv/bin/python bench/rolling_restart.py [--port-base 47000] [--topics 20]

Starts a fresh stack, creates ``--topics`` topics (6 partitions, RF 3) with some data,
then rolls every broker and controller one at a time exactly as ``kafka_broker_restart``
does (availability checks, wait for ready, wait for ISR). Prints the total roll time,
the sum of the nodes' own start-to-ready times (the floor for a one-at-a-time roll) and
their ratio: what the safety checks and ISR catch-up cost on top of the restarts.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.probes import PrometheusProbe
from kafka_runbooks.restart.roller import Roller, RollOptions
from kafka_runbooks_dev.localstack import LocalStack, Topology
from kafka_runbooks_dev.restart_backend import LocalStackBackend


class TimedBackend(LocalStackBackend):
    """Times each node from process start to ready, by the roller's own readiness test."""

    def __init__(self, home: str) -> None:
        super().__init__(home)
        self.start_to_ready: dict[int, float] = {}
        self.ready_check = None
        self.watchers: list[threading.Thread] = []

    def restart(self, node_id: int) -> str:
        self.stack.stop_node(node_id)
        started = time.monotonic()
        started_ms = int(time.time() * 1000)
        self.stack.start_node(node_id)

        def watch() -> None:
            while not self.ready_check(node_id, started_ms):
                time.sleep(0.1)
            self.start_to_ready[node_id] = time.monotonic() - started

        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        self.watchers.append(thread)
        return "timed restart"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port-base", type=int, default=47000)
    parser.add_argument("--topics", type=int, default=20)
    args = parser.parse_args()
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    with tempfile.TemporaryDirectory(prefix="kr-bench-roll-") as tmp:
        stack = LocalStack(home=Path(tmp), topology=Topology(port_base=args.port_base, connect=False))
        stack.start()
        try:
            client = AdminClient({"bootstrap.servers": stack.bootstrap_servers})
            names = [f"bench-{i}" for i in range(args.topics)]
            for f in client.create_topics([NewTopic(n, 6, 3) for n in names]).values():
                f.result(60)
            producer = Producer({"bootstrap.servers": stack.bootstrap_servers, "acks": "all"})
            for i in range(20000):
                producer.produce(names[i % len(names)], b"x" * 512)
                if i % 1000 == 0:
                    producer.poll(0)
            producer.flush(60)
            del producer, client
            backend = TimedBackend(str(stack.home))
            probe = PrometheusProbe(endpoints={n.node_id: n.metrics_url for n in stack.topology.broker_nodes})
            with ClusterAdmin({"bootstrap.servers": stack.bootstrap_servers}) as admin:
                roller = Roller(admin, backend, probe)
                state = roller.plan(None, "benchmark", RollOptions(operation_timeout_s=300))
                with ClusterAdmin({"bootstrap.servers": stack.bootstrap_servers}) as watcher:
                    observer = Roller(watcher, LocalStackBackend(str(stack.home)), probe)
                    backend.ready_check = lambda n, since: observer.observe(n, state.nodes[n].role, since)[0]
                    started = time.monotonic()
                    while not roller.step(state):
                        time.sleep(0.2)
                    total = time.monotonic() - started
                    for thread in backend.watchers:
                        thread.join(120)
            time.sleep(1)
        finally:
            stack.stop()
    floor = sum(backend.start_to_ready.values())
    print(f"nodes rolled: {len(state.order)} ({state.order})")
    print(f"total roll time: {total:.1f} s")
    print(f"sum of start-to-ready times (floor): {floor:.1f} s")
    for node_id, seconds in sorted(backend.start_to_ready.items()):
        print(f"  node {node_id}: {seconds:.1f} s")
    print(f"ratio total/floor: {total / floor:.2f}")


if __name__ == "__main__":
    main()
