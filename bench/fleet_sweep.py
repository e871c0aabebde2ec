"""Benchmark: a sweep over N clusters, wall time and Kafka requests per cluster.

    .venv/bin/python bench/fleet_sweep.py [--port-base 31000] [--sizes 1,2,4,8] [--rounds 3]

Starts two small local stacks (2 brokers, 1 controller, no Connect) at ``--port-base`` and
``--port-base + 500`` in a temporary folder (or uses running ones: ``--bootstrap a,b``).
N = 1 and 2 are real clusters; larger N are simulated with several connection ids pointing
at the two real stacks in turn, as a fleet sweep would see them.

One cluster's sweep is what a mapped ``cluster`` group of the failed-broker sweep does:
read the cluster (brokers, quorum, every partition, min ISR) and update that cluster's
failure-tracking state file; the clusters run in parallel, one thread each (one mapped
task instance each, with enough worker slots). Counted per cluster: the requests the
sweep sends through kafka-python's connection manager (DescribeCluster,
DescribeTopicPartitions, DescribeConfigs, ...) plus the calls it makes through
librdkafka's AdminClient (list_topics); client-internal traffic (ApiVersions, metadata
refreshes) is not counted.

Printed per N: total wall time, the slowest cluster's wall time, requests per cluster
(min/max), and the floor each is compared to: the N=1 figures. Requests per cluster must
stay flat as N grows (each cluster's work does not depend on how many others there are);
wall time per cluster grows only with contention for the 2 cores.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

_local = threading.local()
_counts: dict[str, Counter] = {}
_lock = threading.Lock()


def _count(kind: str, cluster: str | None = None) -> None:
    cluster = cluster or getattr(_local, "cluster", None)
    if cluster is None:
        return
    with _lock:
        _counts.setdefault(cluster, Counter())[kind] += 1


def instrument() -> None:
    """Count every kafka-python request and every librdkafka admin call, per current cluster."""
    from kafka.net.manager import KafkaConnectionManager

    from kafka_runbooks.admin import ClusterAdmin

    init, send = KafkaConnectionManager.__init__, KafkaConnectionManager.send

    def counted_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self._bench_cluster = getattr(_local, "cluster", None)  # built lazily in the sweep's thread

    def counted_send(self, request, *args, **kwargs):
        _count(f"kp:{type(request).__name__}", getattr(self, "_bench_cluster", None))
        return send(self, request, *args, **kwargs)

    KafkaConnectionManager.__init__ = counted_init
    KafkaConnectionManager.send = counted_send

    class CountingAdmin:
        def __init__(self, inner) -> None:
            self._inner = inner

        def __getattr__(self, name):
            attr = getattr(self._inner, name)
            if not callable(attr):
                return attr

            def call(*args, **kwargs):
                _count(f"rdkafka:{name}")
                return attr(*args, **kwargs)

            return call

    original = ClusterAdmin.__dict__["confluent"].func

    def confluent(self):
        return CountingAdmin(original(self))

    ClusterAdmin.confluent = property(confluent)


def sweep_one(conn_id: str, bootstrap: str, state_dir: Path) -> float:
    """One cluster's failed-broker sweep body, without Airflow."""
    from kafka_runbooks.admin import ClusterAdmin
    from kafka_runbooks.failed_broker.failures import FailureStore, FailureTracker, Thresholds

    _local.cluster = conn_id
    started = time.monotonic()
    try:
        with ClusterAdmin({"bootstrap.servers": bootstrap}, timeout_s=30) as admin:
            state = admin.read_state(include_log_dirs=False)
        tracker = FailureTracker(
            FailureStore(conn_id, directory=state_dir),
            Thresholds(alert_after_s=900, failure_threshold_s=1800, max_failed_fraction=1 / 3),
        )
        tracker.observe(state)
    finally:
        _local.cluster = None
    return time.monotonic() - started


def run_fleet(n: int, real: list[str], state_dir: Path) -> dict:
    clusters = {f"kafka_bench_{i}": real[i % len(real)] for i in range(n)}
    _counts.clear()
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=n) as pool:
        walls = list(pool.map(lambda item: sweep_one(item[0], item[1], state_dir), clusters.items()))
    total = time.monotonic() - started
    requests = [sum(_counts.get(c, Counter()).values()) for c in clusters]
    return {
        "n": n,
        "total_s": total,
        "slowest_s": max(walls),
        "median_s": statistics.median(walls),
        "requests": requests,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port-base", type=int, default=31000)
    parser.add_argument(
        "--bootstrap",
        help="running clusters' bootstrap servers, one per cluster, separated by ; (no stacks started)",
    )
    parser.add_argument("--sizes", default="1,2,4,8")
    parser.add_argument("--rounds", type=int, default=3, help="sweeps per N (the median round is printed)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    from kafka_runbooks_dev.helpers import create_topic
    from kafka_runbooks_dev.localstack import LocalStack, Topology

    instrument()
    stacks: list[LocalStack] = []
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        try:
            if args.bootstrap:
                real = [b.strip() for b in args.bootstrap.split(";") if b.strip()]
            else:
                for i, base in enumerate((args.port_base, args.port_base + 500)):
                    stack = LocalStack(
                        home=Path(tmp) / f"stack-{i}",
                        topology=Topology(brokers=2, controllers=1, connect=False, port_base=base),
                    )
                    stacks.append(stack)
                    stack.start(timeout=900)
                real = [s.bootstrap_servers for s in stacks]
                for i, bootstrap in enumerate(real):  # something to read: 20 partitions each
                    create_topic(bootstrap, f"bench-{i}", partitions=20, replication_factor=2)
            state_dir = Path(tmp) / "state"
            print(f"real clusters: {real}; load average {os.getloadavg()[0]:.1f}")
            rows = []
            for n in sizes:
                results = [run_fleet(n, real, state_dir) for _ in range(args.rounds)]
                rows.append(sorted(results, key=lambda r: r["total_s"])[len(results) // 2])
            floor = rows[0]
            per1 = statistics.median(floor["requests"])
            print(
                f"floor (N={floor['n']}): {per1:.0f} requests per cluster, "
                f"{floor['slowest_s']:.2f}s per cluster"
            )
            print(
                f"{'N':>3} {'kind':>9} {'total s':>8} {'slowest s':>10} {'req/cluster min-max':>20} {'vs floor':>9}"
            )
            for row in rows:
                kind = "real" if row["n"] <= len(real) else "simulated"
                lo, hi = min(row["requests"]), max(row["requests"])
                print(
                    f"{row['n']:>3} {kind:>9} {row['total_s']:>8.2f} {row['slowest_s']:>10.2f} "
                    f"{f'{lo}-{hi}':>20} {hi / per1:>8.2f}x"
                )
            flat = all(max(r["requests"]) <= per1 * 1.1 for r in rows)
            print("requests per cluster flat as N grows:", "yes" if flat else "NO")
        finally:
            for stack in stacks:
                stack.stop()


if __name__ == "__main__":
    main()
