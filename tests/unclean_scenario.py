"""Offline partitions whose live replicas hold different amounts of data (issue 4 tests).

Every partition is assigned [1, 3, 2] with min.insync.replicas=1:

- 100 messages with all three in sync; stop broker 3 (its replica ends at 100);
- 100 more; stop broker 2 (ends at 200);
- 100 more; kill -9 broker 1, the last ISR member (ends at 300, then gone);
- start brokers 3 and 2 again. Neither is in the ISR or the ELR (they left the ISR while
  it was still at or above min ISR), so only an unclean election can bring the
  partition back. Kafka's UNCLEAN election takes the first live replica in assignment
  order: broker 3, with 100 messages. The longest live log is broker 2's, with 200.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks_dev.helpers import cluster_healthy, restore_cluster
from tests.helpers import create_topic, produce, unique_topic, wait_until

ASSIGNMENT = [1, 3, 2]
PER_STEP = 100
LONGEST, KAFKA_PICK, LOST = 2, 3, 1
HELD = {3: 100, 2: 200, 1: 300}


@dataclass
class OfflineScenario:
    topic: str
    partitions: int


def build(stack, admin: ClusterAdmin, prefix: str, partitions: int) -> OfflineScenario:
    bootstrap = stack.bootstrap_servers
    wait_until(
        lambda: cluster_healthy(admin), 180, 1, "a fully replicated cluster before building the scenario"
    )
    topic = unique_topic(prefix)
    create_topic(
        bootstrap,
        topic,
        assignment={p: list(ASSIGNMENT) for p in range(partitions)},
        config={"min.insync.replicas": "1"},
    )
    wait_until(lambda: all(len(p.isr) == 3 for p in admin.describe_partitions([topic])), 60, 0.5, "full ISR")

    def produce_all():
        for p in range(partitions):
            assert produce(bootstrap, topic, PER_STEP, partition=p) == PER_STEP

    produce_all()
    stack.stop_node(3)
    wait_until(
        lambda: all(3 not in p.isr for p in admin.describe_partitions([topic])), 60, 0.5, "3 out of ISR"
    )
    produce_all()
    stack.stop_node(2)
    wait_until(
        lambda: all(2 not in p.isr for p in admin.describe_partitions([topic])), 60, 0.5, "2 out of ISR"
    )
    produce_all()
    stack.kill(1)
    _start_both(stack, 3, 2)

    def offline_with_live_followers():
        brokers = admin.describe_brokers()
        if not all(brokers.get(b) and brokers[b].available for b in (2, 3)):
            return False
        parts = admin.describe_partitions([topic])
        return all(p.leader == -1 and not ({2, 3} & set(p.isr + p.elr)) for p in parts)

    wait_until(offline_with_live_followers, 120, 1, "offline partitions with brokers 2 and 3 back")
    return OfflineScenario(topic, partitions)


def _start_both(stack, *brokers: int) -> None:
    """Start the followers together and wait for both: neither is in the ISR or the ELR, so the
    order they come back in changes nothing, and one start-up wait (~10 s) is saved."""
    for broker in brokers:
        stack.start_node(broker)
    stack.wait_ready(brokers)


def restore(stack, admin: ClusterAdmin, topics: list[str], timeout: float = 180) -> None:
    """Delete the scenario topics, restart whatever is down, wait for a healthy cluster."""
    restore_cluster(stack, admin, topics, timeout)


def count_messages(bootstrap: str, topic: str, partition: int) -> int:
    """Read the partition from the beginning to its end; the number of messages read."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique_topic("unclean-reader"),
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        count = 0
        while True:
            msg = consumer.poll(10)
            if msg is None:
                raise AssertionError(f"no end of partition {topic}-{partition} after {count} messages")
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    return count
                raise AssertionError(f"reading {topic}-{partition}: {msg.error()}")
            count += 1
    finally:
        consumer.close()


# ---------------------------------------------------------------------------------
# Diverged logs: two live replicas whose logs end in different leader epochs.
# ---------------------------------------------------------------------------------

DIVERGED_ASSIGNMENT = [1, 2, 3]
DIVERGED_OLD, DIVERGED_NEW, DIVERGED_DEAD = 2, 3, 1
DIVERGED_NEW_TAIL = 20


@dataclass
class DivergedScenario:
    topic: str
    partitions: int
    old_epoch: int  # the epoch broker 2's log ends in
    new_epoch: int  # the epoch broker 3's log ends in (later, after a real unclean election)


def build_diverged(stack, admin: ClusterAdmin, prefix: str, partitions: int = 1) -> DivergedScenario:
    """Offline partitions where broker 2 holds the longer log and broker 3 the newer epoch.

    Assignment [1, 2, 3], min.insync.replicas=1, every step a real leader change:

    - 100 messages in sync (leader 1, epoch e0); stop 3 (ends at 100); 100 more; stop 2
      (ends at 200, last written epoch e0); kill -9 broker 1: offline;
    - start 3 and elect it unclean (epoch e1 > e0); 20 messages at e1 (3 ends at 120);
    - start 1: it follows 3 (truncates to 100, catches up to 120, joins the ISR); stop 3
      (leadership moves to 1, 3 leaves the ISR at 120, last written epoch e1); kill -9 1;
    - start 3 and 2: the partition is offline, broker 2 ends at 200 in e0, broker 3 at
      120 in e1. Their logs diverged at offset 100: whichever is elected, the other is
      truncated to 100. Kafka's own unclean election takes broker 2 (first live replica).
    """
    wait_until(
        lambda: cluster_healthy(admin), 180, 1, "a fully replicated cluster before building the scenario"
    )
    topic = unique_topic(prefix)
    try:
        return _diverge(stack, admin, topic, partitions)
    except BaseException:  # never leave brokers down and a topic offline for the next test
        restore(stack, admin, [topic], timeout=600)
        raise


def _diverge(stack, admin: ClusterAdmin, topic: str, partitions: int) -> DivergedScenario:
    """The steps of :func:`build_diverged` (limits generous: each wait ends on its condition)."""
    bootstrap = stack.bootstrap_servers
    create_topic(
        bootstrap,
        topic,
        assignment={p: list(DIVERGED_ASSIGNMENT) for p in range(partitions)},
        config={"min.insync.replicas": "1"},
    )
    wait_until(lambda: all(len(p.isr) == 3 for p in admin.describe_partitions([topic])), 180, 0.5, "full ISR")

    def parts():
        return admin.describe_partitions([topic])

    def produce_all(count):
        for p in range(partitions):
            assert produce(bootstrap, topic, count, partition=p) == count

    produce_all(PER_STEP)
    old_epoch = max(p.leader_epoch for p in parts())
    stack.stop_node(3)
    wait_until(lambda: all(3 not in p.isr for p in parts()), 180, 0.5, "3 out of ISR")
    produce_all(PER_STEP)
    stack.stop_node(2)
    wait_until(lambda: all(2 not in p.isr for p in parts()), 180, 0.5, "2 out of ISR")
    stack.kill(1)
    wait_until(lambda: all(p.leader == -1 for p in parts()), 180, 0.5, "offline after broker 1 died")
    stack.start_node(3, wait=True)
    wait_until(
        lambda: admin.describe_brokers().get(3) and admin.describe_brokers()[3].available, 90, 0.5, "3 up"
    )
    keys = [(topic, p) for p in range(partitions)]

    def elected_unclean():
        # ElectionNotNeeded: an earlier ask was elected, but the metadata read then came from a
        # broker that had not seen it yet (the CI failure of 2026-11-26 waited on that for 180 s)
        errors = admin.elect_unclean(keys).values()
        return not any(e and not e.startswith("ElectionNotNeeded") for e in errors) and all(
            p.leader == 3 for p in parts()
        )

    wait_until(elected_unclean, 180, 1, "broker 3 elected unclean")
    new_epoch = min(p.leader_epoch for p in parts())
    produce_all(DIVERGED_NEW_TAIL)
    stack.start_node(1, wait=True)
    wait_until(lambda: all(set(p.isr) == {1, 3} for p in parts()), 120, 0.5, "1 back in the ISR")
    stack.stop_node(3)
    wait_until(lambda: all(p.leader == 1 and 3 not in p.isr for p in parts()), 180, 0.5, "1 leads, 3 out")
    stack.kill(1)
    _start_both(stack, 3, 2)

    def offline_with_live_followers():
        brokers = admin.describe_brokers()
        if not all(brokers.get(b) and brokers[b].available for b in (2, 3)):
            return False
        return all(p.leader == -1 and not ({2, 3} & set(p.isr + p.elr)) for p in parts())

    wait_until(offline_with_live_followers, 120, 1, "offline partitions with brokers 2 and 3 back")
    return DivergedScenario(topic, partitions, old_epoch, new_epoch)
