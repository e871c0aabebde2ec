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

from pathlib import Path

from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.controller_replace.plan import ReplaceRequest, caught_up, voter_ids
from kafka_runbooks.controller_replace.quorum_tool import QuorumTool
from kafka_runbooks.controller_replace.runbook import ControllerReplacement
from tests.helpers import unique_topic, wait_until
from tests.quorum_watch import QuorumWatch, created

ROOT = Path(__file__).resolve().parents[2]


def test_a_lost_controller_is_replaced_without_ever_losing_the_majority(dynamic_stack):
    stack = dynamic_stack
    spare = stack.topology.spare_controller_nodes[0]
    stack.start_node(spare.name)  # formatted with --no-initial-controllers: an observer
    admin = ClusterAdmin({"bootstrap.servers": stack.bootstrap_servers})
    initial = [n.node_id for n in stack.topology.controller_nodes]

    def settled():
        q = admin.describe_quorum()
        joined = any(o.node_id == spare.node_id for o in q.observers)
        return q if voter_ids(q) == initial and len(caught_up(q)) == 3 and joined else None

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
        watch.stop()
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
        lambda: created(stack.bootstrap_servers, topic), 60, 1, "a topic created with two of three voters"
    )
    # the brokers learn of it from the new leader one after the other: wait, never assert at once
    wait_until(lambda: topic in admin.list_topics(), 60, 0.5, "the topic in the asked broker's metadata")
    admin.close()
