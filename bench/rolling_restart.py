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
        self.ready_check = None  # (node id, offset the new process must pass or None) -> ready
        self.leader_offset = None  # () -> the quorum leader's log end offset
        self.controllers: set[int] = set()
        self.watchers: list[threading.Thread] = []

    def _leader_offset(self) -> int:
        while True:  # the quorum may be electing a leader: read until it answers
            try:
                offset = self.leader_offset()
            except Exception:  # noqa: BLE001  (a read during an election: look again)
                offset = None
            if offset is not None and offset >= 0:
                return offset
            time.sleep(0.1)

    def _ready(self, node_id: int, offset: int | None) -> bool:
        try:
            return bool(self.ready_check(node_id, offset))
        except Exception:  # noqa: BLE001  (a read while a node restarts: look again)
            return False

    def restart(self, node_id: int) -> str:
        self.stack.stop_node(node_id)
        started = time.monotonic()
        self.stack.start_node(node_id)

        def watch() -> None:
            """Ready by the roller's own test: a controller once the quorum leader reports its
            new process fetching past the leader's log end offset read after the old one exited
            (a time or offset from before the restart would count the old process)."""
            offset = self._leader_offset() if node_id in self.controllers else None
            while not self._ready(node_id, offset):
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
                    backend.ready_check = lambda n, offset: observer.observe(n, state.nodes[n].role, offset)[
                        0
                    ]
                    backend.leader_offset = lambda: (
                        (q := watcher.describe_quorum()).leader and q.leader.log_end_offset
                    )
                    backend.controllers = {n for n, p in state.nodes.items() if p.role == "controller"}
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
    missing = sorted(set(state.order) - set(backend.start_to_ready))
    if missing:  # the floor would be too low: say so rather than print a flattering ratio
        print(f"NO start-to-ready time for node(s) {missing}: the floor lacks them")
    print(f"ratio total/floor: {total / floor:.2f} (target <= 1.1)")


if __name__ == "__main__":
    main()
