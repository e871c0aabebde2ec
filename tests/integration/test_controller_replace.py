"""A KRaft controller lost for good, replaced on the lane's dynamic quorum (issue #28).

The lane's dynamic-quorum stack (tests/integration/conftest.py: 3 controllers formatted with
--initial-controllers, 1 broker, and a fourth controller formatted with --no-initial-controllers
that joins as an observer; ports 600 above the session's base): a follower controller is killed -9 for good, the replacement
runs through the runbook's step class (AddRaftVoter and RemoveRaftVoter through Kafka's own
kafka-metadata-quorum from the stack's jars), while a thread reads DescribeQuorum every 200 ms
from outside and keeps every answer. No answer may show fewer live, caught-up voters (on the
leader's clock) than a majority of its voter set; the final voter set is the approved one; and
the new quorum then loses another controller and still takes a metadata change.
"""

from __future__ import annotations

import threading
from pathlib import Path

from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.controller_replace.plan import ReplaceRequest, caught_up, voter_ids
from kafka_runbooks.controller_replace.quorum_tool import QuorumTool
from kafka_runbooks.controller_replace.runbook import ControllerReplacement
from kafka_runbooks.quorum import majority
from tests.helpers import create_topic, unique_topic, wait_until

ROOT = Path(__file__).resolve().parents[2]
MAX_LAG_MS = 10_000


class QuorumWatch(threading.Thread):
    """DescribeQuorum every 200 ms from its own client: (voters, caught-up voters, leader) per answer."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.admin = ClusterAdmin({"bootstrap.servers": bootstrap}, timeout_s=5)
        self.answers: list[tuple[list[int], list[int], int]] = []
        self.errors: list[str] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.2):
            try:
                q = self.admin.describe_quorum()
            except Exception as exc:  # an unanswered read is kept apart, never read as caught up
                self.errors.append(repr(exc))
                continue
            self.answers.append((voter_ids(q), sorted(caught_up(q, MAX_LAG_MS)), q.leader_id))

    def short_of_majority(self) -> list[tuple[list[int], list[int], int]]:
        return [a for a in self.answers if len(a[1]) < majority(len(a[0]))]


def test_a_lost_controller_is_replaced_without_ever_losing_the_majority(dynamic_stack):
    stack = dynamic_stack
    spare = stack.topology.spare_controller_nodes[0]
    stack.start_node(spare.name)  # formatted with --no-initial-controllers: an observer
    admin = ClusterAdmin({"bootstrap.servers": stack.bootstrap_servers})
    initial = [n.node_id for n in stack.topology.controller_nodes]

    def settled():
        q = admin.describe_quorum()
        joined = any(o.node_id == spare.node_id for o in q.observers)
        return q if voter_ids(q) == initial and len(caught_up(q, MAX_LAG_MS)) == 3 and joined else None

    quorum = wait_until(
        settled, 90, 0.5, "the initial dynamic quorum caught up, the spare among its observers"
    )
    dead = next(v for v in initial if v != quorum.leader_id)
    stack.kill(dead)
    watch = QuorumWatch(stack.bootstrap_servers)
    watch.start()
    try:
        request = ReplaceRequest(
            remove=(dead,),
            new_controller_id=spare.node_id,
            new_controller_endpoints=(f"CONTROLLER://{spare.address}",),
            max_lag_ms=MAX_LAG_MS,
            catch_up_timeout_s=90,
            settle_s=3,
            poll_s=0.5,
        )
        runbook = ControllerReplacement(admin, QuorumTool(stack.lib_dir, stack.bootstrap_servers), request)
        document = runbook.plan()
        assert [(s["kind"], s["node_id"]) for s in document["steps"]] == [
            ("add", spare.node_id),
            ("remove", dead),
        ]
        assert all(c["ok"] for c in document["majority"]), document["majority"]
        report = runbook.run(document)
        # a re-run finds both steps done: it skips them and verifies the same voters again
        again = runbook.run(document)
    finally:
        watch.done.set()
        watch.join(10)
    expected = sorted(set(initial) - {dead} | {spare.node_id})
    assert report["final"]["voters"] == expected and report["final"]["caught_up"] == expected, report
    assert [s.get("skipped") is not None for s in again["steps"]] == [True, True], again
    assert again["final"]["voters"] == expected
    assert len(watch.answers) > 20, (len(watch.answers), watch.errors[-3:])
    assert watch.short_of_majority() == [], watch.short_of_majority()[:5]
    assert {tuple(a[0]) for a in watch.answers} >= {tuple(initial), tuple(sorted(initial + [spare.node_id]))}

    # the new quorum of three survives the loss of another controller: a metadata change still commits
    second = next(v for v in expected if v != spare.node_id)
    stack.kill(second)
    topic = unique_topic("after-replace")
    wait_until(
        lambda: _created(stack.bootstrap_servers, topic), 60, 1, "a topic created with two of three voters"
    )
    assert topic in admin.list_topics()
    admin.close()


def _created(bootstrap: str, topic: str) -> bool:
    try:
        create_topic(bootstrap, topic, partitions=1, replication_factor=1)
    except Exception as exc:  # the controller may be electing a leader: try again
        return "already exists" in str(exc).lower() or "TOPIC_ALREADY_EXISTS" in str(exc)
    return True
