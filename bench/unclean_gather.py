"""Benchmark: gathering replica log info and choosing, for thousands of offline partitions.

    .venv/bin/python bench/unclean_gather.py --home .stack/t-unclean [--partitions 3000] [--topics 3]

Uses an already running local stack (``kstack --home``; it must be healthy). Creates
``--topics`` topics with ``--partitions`` partitions in all, each assigned
[1, a, b] with a, b rotating over brokers 2-4 (min.insync.replicas=1), stops brokers 2-4,
kills broker 1 (the last ISR member), starts 2-4 again: every partition is offline and
its two live replicas are outside the ISR and ELR. Then times the runbook's gathering
(directed ListOffsets(replica_id=-2): LATEST for the log end offsets and MAX_TIMESTAMP
for the newest epochs, every partition of a broker in one request each, all brokers at
once) and choosing, and prints partitions per second and the number of requests sent
against the floor: 2 per broker hosting candidate replicas (a partition may appear only
once per ListOffsets request, and there are two questions; ListOffsets has no partition
cap). Finally restarts broker 1, deletes the topics and waits for a healthy cluster.
"""

from __future__ import annotations

import argparse
import math
import time
from collections import Counter

from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.errors import ClusterUnreachable
from kafka_runbooks.unclean.choose import choose
from kafka_runbooks.unclean.loginfo import gather
from kafka_runbooks_dev.helpers import create_topic, restore_cluster, unique_topic, wait_until
from kafka_runbooks_dev.localstack import LocalStack

FOLLOWERS = [(2, 3), (3, 4), (4, 2)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", required=True, help="the running stack's folder")
    parser.add_argument("--partitions", type=int, default=3000)
    parser.add_argument("--topics", type=int, default=3)
    parser.add_argument("--duration-ms", type=int, default=30000)
    args = parser.parse_args()

    stack = LocalStack(home=args.home)
    bootstrap = stack.bootstrap_servers
    per_topic = math.ceil(args.partitions / args.topics)
    topics = [unique_topic("bench-unclean") for _ in range(args.topics)]
    config = {"bootstrap.servers": bootstrap}
    admin = ClusterAdmin(config, timeout_s=30)
    try:
        t0 = time.monotonic()
        for topic in topics:
            assignment = {p: [1, *FOLLOWERS[p % 3]] for p in range(per_topic)}
            create_topic(bootstrap, topic, assignment=assignment, config={"min.insync.replicas": "1"})
        wait_until(
            lambda: all(len(p.isr) == 3 for p in admin.describe_partitions(topics)), 300, 2, "full ISR"
        )
        for b in (2, 3, 4):
            stack.stop_node(b)
        stack.kill(1)
        for b in (2, 3, 4):
            stack.start_node(b)
        stack.wait_ready([2, 3, 4], 300)
        # kafka-python's client does not recover from every broker being down at once: a fresh one
        admin.close()
        admin = ClusterAdmin(config, timeout_s=30)

        def all_offline():
            try:
                brokers = admin.describe_brokers()
                if not all(brokers.get(b) and brokers[b].available for b in (2, 3, 4)):
                    return None
                state = admin.read_state(topics, include_log_dirs=False)
            except ClusterUnreachable:
                return None
            return state if len(state.offline()) == per_topic * len(topics) else None

        state = wait_until(all_offline, 300, 2, "every partition offline with brokers 2-4 back")
        print(f"setup: {per_topic * len(topics)} offline partitions in {time.monotonic() - t0:.1f}s")

        offline = state.offline()
        hosted = Counter(b for p in offline for b in p.replicas if state.is_available(b))
        floor = 2 * len(hosted)  # one LATEST + one MAX_TIMESTAMP per broker hosting candidates
        admin.describe_brokers()  # connect before timing
        t1 = time.monotonic()
        gathered = gather(admin, offline, state.brokers, args.duration_ms)
        t2 = time.monotonic()
        choices = [choose(p, gathered, state.brokers) for p in offline]
        t3 = time.monotonic()
        answered = sum(1 for i in gathered.infos.values() if i.answered)
        epochs = sum(1 for i in gathered.infos.values() if i.answered and i.newest_epoch is not None)
        chosen = sum(1 for c in choices if c.chosen is not None)
        print(f"partitions: {len(offline)}; live replicas per broker: {dict(sorted(hosted.items()))}")
        print(
            f"gather: {t2 - t1:.3f}s, {len(offline) / (t2 - t1):.0f} partitions/s, "
            f"{answered} replica answers ({epochs} with their newest epoch), {gathered.rounds} round(s)"
        )
        print(
            f"requests sent: {gathered.requests_sent} (floor: {floor} = 2 per broker hosting "
            f"candidate replicas: LATEST + MAX_TIMESTAMP)"
        )
        print(
            f"choose: {t3 - t2:.3f}s, {len(offline) / max(t3 - t2, 1e-9):.0f} partitions/s; "
            f"{chosen} with a chosen replica"
        )
        errors = Counter(i.error for i in gathered.infos.values() if i.error)
        for error, n in errors.most_common(5):
            print(f"  not answered: {n} x {error[:160]}")
        for broker_id, why in sorted(gathered.unanswered_brokers.items()):
            print(f"  broker {broker_id} excluded: {why[:200]}")
        print(f"gather + choose: {len(offline) / (t3 - t1):.0f} partitions/s")
    finally:
        admin.close()
        with ClusterAdmin(config, timeout_s=30) as fresh:
            restore_cluster(stack, fresh, topics, timeout=900)


if __name__ == "__main__":
    main()
