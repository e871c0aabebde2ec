"""The preferred-leader election after a heal, on the real stack, beside a broker killed a second ago
(issue #37, 3).

For ``broker.session.timeout.ms`` after a kill -9 the controller still has the broker registered,
unfenced and in its ISRs: a PREFERRED election of a partition whose preferred replica it is would
be granted, and the partition led by a dead broker until the session times out. The election
asks each preferred replica itself first and leaves such a partition alone, named, never a failure.
"""

from __future__ import annotations

from kafka_runbooks.approval import APPROVED, plan_digest
from kafka_runbooks.approval_proof import approved_action
from kafka_runbooks.evidence import silent_brokers
from kafka_runbooks.failed_broker.leaders import elect_preferred_leaders
from tests.helpers import create_topic, unique_topic, wait_until


def _proof(keys: set[str]):
    """The proof the approval check hands out for a heal whose chunk moved ``keys``."""
    action = {"chunks": [{k: [] for k in sorted(keys)}], "elect_preferred_leaders": True, "dry_run": False}
    digest = plan_digest(action)
    return approved_action({"outcome": APPROVED, "digest": digest, "by": {"id": "test"}}, digest, action)


def test_a_preferred_replica_killed_a_moment_ago_is_never_elected(restore_stack, admin):
    """t-0's preferred replica is broker 3, t-1's broker 1, both led by another replica (a reorder
    keeps the leader). Broker 3 killed -9, then at once the election: t-1 is elected, t-0 is skipped
    naming broker 3 (it does not answer itself) and stays led by its live leader; no failure."""
    stack = restore_stack
    topic = unique_topic("elect-beside-killed")
    create_topic(stack.bootstrap_servers, topic, assignment={0: [1, 2, 3], 1: [2, 1, 3]})
    wait_until(
        lambda: all(p.leader == p.replicas[0] for p in admin.describe_topic_partitions([topic])),
        60,
        0.5,
        "leaders",
    )
    # reorder only (no data moves, the leader stays): preferred 3 for t-0, 1 for t-1
    admin.alter_partition_reassignments({(topic, 0): [3, 1, 2], (topic, 1): [1, 2, 3]})
    wait_until(
        lambda: (
            not admin.list_reassignments()
            and [list(p.replicas) for p in admin.describe_topic_partitions([topic])] == [[3, 1, 2], [1, 2, 3]]
        ),
        60,
        0.5,
        "the reorders",
    )
    before = {p.partition: p.leader for p in admin.describe_topic_partitions([topic])}
    assert before == {0: 1, 1: 2}, before
    timeouts = admin.cluster_timeouts()  # read before the kill, as the runbook has it
    keys = {f"{topic}:0", f"{topic}:1"}
    stack.kill(3)
    result = elect_preferred_leaders(
        read=lambda: admin.describe_topic_partitions([topic]),
        elect=admin.elect_preferred,
        keys=keys,
        approval=_proof(keys),
        silent=lambda brokers: silent_brokers(admin, brokers),
        timeouts=timeouts,
        settle_s=2,
        poll_s=1,
    )
    assert result.ok, result
    assert f"{topic}:0" in result.skipped and "preferred replica 3" in result.skipped[f"{topic}:0"], (
        result.skipped
    )
    assert f"{topic}:0" not in result.asked and f"{topic}:1" in result.asked, result.asked
    after = {p.partition: p.leader for p in admin.describe_topic_partitions([topic])}
    assert after[1] == 1 and after[0] != 3, after
    assert result.settle["held_s"] >= timeouts.broker_session_timeout_s
