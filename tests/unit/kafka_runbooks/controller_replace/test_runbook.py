"""The replacement's steps: refusals before any change, skip-what-is-done, the final check.

The quorum here behaves as Kafka's does for these calls (the errors are the tool's own:
DuplicateVoterException on a second add, VoterNotFoundException on a second removal, as
seen on Kafka 4.3.1); the real run is tests/integration/test_controller_replace.py.
"""

from __future__ import annotations

import pytest

from kafka_runbooks.controller_replace.plan import ReplaceRequest
from kafka_runbooks.controller_replace.quorum_tool import VoterAlreadyAdded, VoterNotFound
from kafka_runbooks.controller_replace.runbook import ControllerReplacement
from kafka_runbooks.errors import RunbookFailed, SafetyRefusal
from kafka_runbooks.evidence import ClusterFeatures
from kafka_runbooks.model import Quorum, QuorumMember

NOW = 1_000_000
FETCH_TIMEOUT_MS = 2000  # the cluster's controller.quorum.fetch.timeout.ms, as the admin facade reads it


class Cluster:
    """A quorum led by 9001: ``ages`` is each node's caught-up age on the leader's clock."""

    def __init__(self, voters, observers, ages) -> None:
        self.voters, self.observers, self.ages = list(voters), list(observers), dict(ages)
        self.kraft_version = 1
        self.calls: list[tuple] = []

    def _m(self, n: int) -> QuorumMember:
        age = self.ages.get(n)
        ts = None if age is None else NOW - age
        return QuorumMember(n, 500 if age is not None and age < 10_000 else 100, ts, ts, f"dir-{n}")

    def describe_quorum(self) -> Quorum:
        return Quorum(
            9001,
            3,
            500,
            tuple(map(self._m, self.voters)),
            tuple(map(self._m, self.observers)),
            fetch_timeout_ms=2000,
        )

    def ping(self) -> str:
        return "cluster-1"

    def describe_features(self) -> ClusterFeatures:
        # a dynamic quorum (KIP-853), as a 3.9+ cluster formatted with --initial-controllers answers
        return ClusterFeatures(
            {"metadata.version": 30, "kraft.version": self.kraft_version}, {}, source="fake"
        )

    def add_controller(self, node_id, directory_id, cluster_id, endpoints) -> str:
        self.calls.append(("add", node_id, directory_id, cluster_id, [str(e) for e in endpoints]))
        if node_id in self.voters:
            raise VoterAlreadyAdded("DuplicateVoterException", "DuplicateVoterException")
        self.observers.remove(node_id)
        self.voters.append(node_id)
        return f"Added controller {node_id}"

    def remove_controller(self, node_id, directory_id) -> str:
        self.calls.append(("remove", node_id, directory_id))
        if node_id not in self.voters:
            raise VoterNotFound("VoterNotFoundException", "VoterNotFoundException")
        self.voters.remove(node_id)
        self.observers.append(node_id)
        return f"Removed controller {node_id}"


def replacement(cluster: Cluster, **kw) -> ControllerReplacement:
    request = ReplaceRequest(
        remove=kw.pop("remove", (9003,)),
        new_controller_id=kw.pop("new", 9004),
        new_controller_endpoints=("CONTROLLER://ctl4:9093",),
        catch_up_timeout_s=5,
        settle_s=0,
        poll_s=1,
    )
    clock = [0.0]

    def sleep(s: float) -> None:
        clock[0] += s

    return ControllerReplacement(cluster, cluster, request, sleep=sleep, monotonic=lambda: clock[0])


def one_dead() -> Cluster:
    return Cluster([9001, 9002, 9003], [9004], {9001: 0, 9002: 100, 9003: 60_000, 9004: 0})


def test_replacement_adds_then_removes_and_verifies():
    cluster = one_dead()
    runbook = replacement(cluster)
    report = runbook.run(runbook.plan())
    assert cluster.calls == [
        ("add", 9004, "dir-9004", "cluster-1", ["CONTROLLER://ctl4:9093"]),
        ("remove", 9003, "dir-9003"),
    ]
    assert report["final"]["voters"] == [9001, 9002, 9004] == report["final"]["caught_up"]


def test_a_rerun_after_the_add_skips_it_and_goes_on_to_the_removal():
    cluster = one_dead()
    document = replacement(cluster).plan()
    cluster.observers.remove(9004)
    cluster.voters.append(9004)  # a crash after the add
    report = replacement(cluster).run(document)
    assert cluster.calls == [("remove", 9003, "dir-9003")]
    assert "skipped" in report["steps"][0] and "skipped" not in report["steps"][1]


def test_a_rerun_after_everything_changes_nothing():
    cluster = one_dead()
    runbook = replacement(cluster)
    document = runbook.plan()
    runbook.run(document)
    cluster.calls.clear()
    report = runbook.run(document)
    assert cluster.calls == [] and all("skipped" in s for s in report["steps"])


def test_an_observer_that_never_catches_up_is_never_added():
    cluster = one_dead()
    cluster.ages[9004] = 60_000
    runbook = replacement(cluster)
    document = runbook.plan()
    with pytest.raises(RunbookFailed, match="observer 9004 caught up"):
        runbook.run(document)
    assert cluster.calls == []


def test_a_live_voter_that_stopped_fetching_before_the_add_blocks_it():
    """Between the plan and the add 9002 died too: adding 9004 would leave 2 caught up of 4
    (majority 3), so nothing is added, and nothing removed."""
    cluster = one_dead()
    runbook = replacement(cluster)
    document = runbook.plan()
    cluster.ages[9002] = 60_000
    with pytest.raises(SafetyRefusal, match="2 live caught-up voter.s. of 4, fewer than the majority of 3"):
        runbook.run(document)
    assert cluster.calls == []


def test_a_removal_that_would_break_the_majority_is_refused_before_any_call():
    cluster = Cluster([9001, 9002, 9003], [], {9001: 0, 9002: 100, 9003: 60_000})
    runbook = replacement(cluster, remove=(9002,), new=None)
    with pytest.raises(SafetyRefusal, match="fewer than the majority of 2"):
        runbook.plan()
    with pytest.raises(SafetyRefusal, match="fewer than the majority"):
        runbook.remove(_remove_step(9002))  # a step approved before 9003 died
    assert cluster.calls == []


def _remove_step(node_id: int):
    from kafka_runbooks.controller_replace.plan import REMOVE, Step

    return Step(REMOVE, node_id, f"dir-{node_id}")


def test_plain_removal_of_a_dead_voter_of_five():
    cluster = Cluster([9001, 9002, 9003, 9004, 9005], [], {9001: 0, 9002: 0, 9003: 0, 9004: 60_000, 9005: 0})
    runbook = replacement(cluster, remove=(9004,), new=None)
    report = runbook.run(runbook.plan())
    assert cluster.calls == [("remove", 9004, "dir-9004")]
    assert report["final"]["voters"] == [9001, 9002, 9003, 9005]


def test_a_final_voter_set_that_is_not_the_approved_one_fails_the_run():
    cluster = one_dead()
    runbook = replacement(cluster)
    document = runbook.plan()
    with pytest.raises(RunbookFailed, match="final quorum check failed"):
        runbook.verify([*document["expected_voters"], 9009])


def test_the_plan_refuses_removing_a_live_voter_beside_one_killed_6_s_ago():
    """Issue #37, point 2, through the runbook: nothing is sent, the refusal names the majority."""
    cluster = Cluster([9001, 9002, 9003], [], {9001: 0, 9002: 100, 9003: 6_000})
    with pytest.raises(SafetyRefusal, match="would leave 1 live caught-up voter"):
        replacement(cluster, remove=(9002,), new=None).plan()
    assert cluster.calls == []


def test_the_verification_fails_when_a_voter_goes_silent_during_the_settle():
    """A final answer read once could catch a voter just killed as "caught up" by its old time; every
    answer of the settle period is judged, and a voter that stops fetching fails it."""
    cluster = Cluster([9001, 9002, 9004], [], {9001: 0, 9002: 100, 9004: 100})
    run = replacement(cluster)
    run.request = ReplaceRequest(remove=(9003,), settle_s=10, poll_s=1, catch_up_timeout_s=5)
    reads = iter(range(100))
    original = cluster.describe_quorum

    def describe():
        if next(reads) == 3:
            cluster.ages[9004] = 6_000  # killed: its last fetch stops
        return original()

    cluster.describe_quorum = describe
    with pytest.raises(RunbookFailed, match="final quorum check failed"):
        run.verify([9001, 9002, 9004])


def test_a_static_quorum_is_refused_naming_the_feature_and_the_release_that_has_it():
    """Issue #38: asked of the cluster (kraft.version finalized), never of a release string."""
    cluster = Cluster([9001, 9002, 9003], [9004], {9001: 0, 9002: 100, 9003: 60_000, 9004: 100})
    cluster.kraft_version = 0
    with pytest.raises(
        SafetyRefusal, match=r"needs a dynamic KRaft quorum \(kraft.version finalized at 1.*4.1\+"
    ):
        replacement(cluster).plan()
    assert cluster.calls == []
