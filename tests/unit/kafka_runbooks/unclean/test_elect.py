"""The steps of ``elect_chosen`` that decide without a cluster, each tried alone.

``_still_to_elect`` screens the pending partitions on a fresh read; ``_judge_leader``
says what the leader read back after the election means; ``_start_outcomes`` and
``_finish`` frame the run. The steps that talk to the cluster are covered by
tests/integration/test_unclean_recovery.py and test_elect_race.py (beside this file).
"""

from __future__ import annotations

import logging
import time

import pytest

from kafka_runbooks.model import PartitionState
from kafka_runbooks.unclean import elect
from kafka_runbooks.unclean.choose import Choice, ReplicaRow

ROWS = (
    ReplicaRow(2, 4, 200, candidate=True, note="ok", truncated_if_chosen_stands=0),
    ReplicaRow(1, 4, 150, candidate=True, note="ok", truncated_if_chosen_stands=0),
)


def choice(partition: int = 0, chosen: int | None = 2) -> Choice:
    return Choice(
        "t", partition, (2, 1, 3), 5, ROWS, chosen=chosen, reason="longest log", kafka_unclean_pick=1
    )


def leaderless(partition: int = 0, replicas=(2, 1, 3)) -> PartitionState:
    return PartitionState("t", partition, -1, 5, replicas, ())


def led_by(leader: int, partition: int = 0) -> PartitionState:
    return PartitionState("t", partition, leader, 6, (2, 1, 3), (leader,))


def screen(states, live):
    choices = {("t", p): choice(p) for p in range(5)}
    outcomes, pending = elect._start_outcomes(list(choices.values()))
    to_elect = elect._still_to_elect(pending, outcomes, states, live, logging.getLogger("t"))
    return to_elect, pending, outcomes


def test_screening_on_a_fresh_read():
    states = {
        ("t", 0): leaderless(0),  # electable
        # ("t", 1) is gone
        ("t", 2): led_by(1, 2),  # came online meanwhile
        ("t", 3): leaderless(3, (2, 1, 4)),  # another replica set than approved
        ("t", 4): leaderless(4),  # chosen broker 2 away (below)
    }
    to_elect, pending, outcomes = screen(states, live={1, 2, 3})
    assert list(to_elect) == [("t", 0), ("t", 4)]
    assert outcomes[("t", 1)].status == elect.FAILED and "no longer exists" in outcomes[("t", 1)].detail
    assert outcomes[("t", 2)].status == elect.ALREADY_ONLINE and outcomes[("t", 2)].leader == 1
    assert outcomes[("t", 3)].status == elect.FAILED and "replica set changed" in outcomes[("t", 3)].detail
    assert set(pending) == {("t", 0), ("t", 4)}

    to_elect, pending, outcomes = screen(states, live={1, 3})
    assert to_elect == {} and outcomes[("t", 4)].status == elect.PENDING
    assert "chosen broker 2 is not available now" in outcomes[("t", 4)].detail
    assert ("t", 4) in pending  # waits for the next attempt


def test_a_leader_on_a_broker_that_is_not_live_is_no_leader():
    to_elect, _, outcomes = screen({("t", 0): led_by(1)}, live={2, 3})
    assert list(to_elect) == [("t", 0)] and outcomes[("t", 0)].status == elect.PENDING


@pytest.mark.parametrize(
    ("leader", "not_needed", "chosen", "status", "detail"),
    [
        (2, False, True, elect.PENDING, "broker 2 leads at epoch 6; settling"),
        (1, True, False, elect.ALREADY_ONLINE, "came online before the election (ElectionNotNeeded)"),
        (1, False, False, elect.ELECTED_OTHER, "DATA LOSS: broker 1 was elected, not the chosen broker 2"),
    ],
)
def test_what_the_leader_read_back_means(caplog, leader, not_needed, chosen, status, detail):
    caplog.set_level(logging.INFO)
    outcome = elect.Outcome("t-0", elect.PENDING, 2)
    assert (
        elect._judge_leader(outcome, choice(), led_by(leader), not_needed, logging.getLogger("t")) is chosen
    )
    assert outcome.status == status and detail in outcome.detail and outcome.leader == leader
    if status == elect.ELECTED_OTHER:
        assert "it ends at offset 150, the chosen one at 200" in outcome.detail
        assert any(
            "WRONG LEADER ELECTED" in r.getMessage() and r.levelno == logging.ERROR for r in caplog.records
        )


def test_no_candidate_is_an_outcome_from_the_start_and_pending_fails_at_the_end(tmp_path):
    choices = [choice(0), choice(1, chosen=None)]
    outcomes, pending = elect._start_outcomes(choices)
    assert list(pending) == [("t", 0)] and outcomes[("t", 1)].status == elect.NO_CANDIDATE
    report = elect.ElectionReport(settle_s=1)
    state_file = elect.ReorderState("t", directory=tmp_path)
    run = elect._Run(None, choices, outcomes, {}, state_file, 1, logging.getLogger("t"))
    elect._finish(run, report, False)
    assert [o.status for o in report.outcomes] == [elect.FAILED, elect.NO_CANDIDATE]
    assert report.outcomes[0].detail == "not elected within the attempts" and report.finished


def test_asked_to_keep_the_new_order_nothing_is_left_to_put_back(tmp_path):
    state_file = elect.ReorderState("t", directory=tmp_path)
    elect._remember(state_file, {"t-0": {"topic": "t", "partition": 0, "original": [1, 2, 3]}})
    original = elect._orders_left_changed(state_file, logging.getLogger("t"))
    assert original == {("t", 0): (1, 2, 3)}
    report = elect.ElectionReport(settle_s=1)
    run = elect._Run(None, [], {}, original, state_file, 1, logging.getLogger("t"))
    elect._finish(run, report, False)
    assert report.restores == {"t-0": "left chosen-first (restore_replica_order=false)"}
    assert elect._orders_left_changed(state_file, logging.getLogger("t")) == {}


class Reads:
    """A cluster whose metadata answers come from a list, one per read (the last one repeats);
    brokers in ``silent`` are registered and unfenced but do not answer themselves (killed a
    moment ago: their session has not timed out)."""

    def __init__(self, answers, silent=(), session_timeout_ms=300):
        self.answers = list(answers)
        self.silent = set(silent)
        self.session_timeout_ms = session_timeout_ms

    def broker_answers(self, broker_id, timeout_s=5.0):
        return "KafkaConnectionError: 111 ECONNREFUSED" if broker_id in self.silent else None

    def cluster_timeouts(self):
        from kafka_runbooks.evidence import timeouts_from
        from kafka_runbooks.evidence.settings import FETCH_TIMEOUT, SESSION_TIMEOUT

        return timeouts_from({1: {SESSION_TIMEOUT: str(self.session_timeout_ms), FETCH_TIMEOUT: "2000"}})

    def describe_topic_partitions(self, topics):
        return [self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]]

    def describe_brokers(self):
        from kafka_runbooks.model import Broker

        return {b: Broker(b) for b in (1, 2, 3)}


def test_a_read_older_than_the_election_is_read_again_not_taken_for_a_loss():
    """Seen under load: the broker that answered had not got the election yet (leader -1 at
    the old epoch 5) right after another had shown the chosen leader at epoch 6."""
    cluster = Reads([leaderless(), led_by(2), led_by(2)])
    key = ("t", 0)
    assert elect._settle(cluster, {key: choice()}, 0.2, interval_s=0.05, epochs={key: 6}) == {key: []}
    # without the epoch the same read is a loss: what the epoch guards against
    cluster = Reads([leaderless(), led_by(2), led_by(2)])
    assert elect._settle(cluster, {key: choice()}, 0.2, interval_s=0.05)[key]


def test_a_loss_after_the_election_comes_with_a_newer_epoch_and_breaks_the_hold():
    offline_again = PartitionState("t", 0, -1, 7, (2, 1, 3), ())
    key = ("t", 0)
    broken = elect._settle(Reads([led_by(2), offline_again]), {key: choice()}, 0.2, 0.05, epochs={key: 6})
    assert broken[key] and "leader -1 (offline)" in broken[key][0]


def test_a_settle_of_0_s_lasts_the_session_timeout_and_ends_asking_the_chosen_leader(caplog):
    """Issue #37, point 7: the chosen leader died right after its election; DescribeCluster still
    shows it registered and unfenced (its session has not timed out) and the metadata still names
    it leader. A settle of 0 s took that for "held"; now the settle lasts broker.session.timeout.ms
    and its last read asks broker 2 itself, which does not answer."""
    key = ("t", 0)
    cluster = Reads([led_by(2)], silent={2}, session_timeout_ms=400)
    outcomes = {key: elect.Outcome("t-0", elect.PENDING, 2, leader_epoch=6)}
    started = time.monotonic()
    elect._verify_settled(cluster, {key: choice()}, outcomes, 0, logging.getLogger("t"))
    assert time.monotonic() - started >= 0.4
    assert outcomes[key].status == elect.NOT_HELD
    assert "broker 2 does not answer itself" in outcomes[key].detail
    cluster = Reads([led_by(2)], session_timeout_ms=400)
    outcomes = {key: elect.Outcome("t-0", elect.PENDING, 2, leader_epoch=6)}
    elect._verify_settled(cluster, {key: choice()}, outcomes, 0, logging.getLogger("t"))
    assert outcomes[key].status == elect.ELECTED and "answered itself" in outcomes[key].detail
