"""A voter is caught up only on its last fetch AND its last catch-up, by the leader's clock,
within the cluster's controller.quorum.fetch.timeout.ms (issue #37, point 2)."""

from __future__ import annotations

from kafka_runbooks.evidence import CAUGHT_UP, NOT_CAUGHT_UP, UNKNOWN, QuorumView
from kafka_runbooks.model import Quorum, QuorumMember

NOW = 1_700_000_000_000  # the leader's clock; the worker's is nowhere in these answers
FETCH_TIMEOUT_MS = 2000


def member(node_id, fetch_ago, caught_ago, end=100):
    return QuorumMember(
        node_id,
        end,
        None if caught_ago is None else NOW - caught_ago,
        None if fetch_ago is None else NOW - fetch_ago,
    )


def quorum(*voters, leader=9001, observers=()):
    return Quorum(leader, 5, 100, (member(leader, 0, 0), *voters), tuple(observers))


def test_a_voter_killed_6_s_ago_is_not_caught_up_though_its_caught_up_time_is_within_10_s():
    view = QuorumView(quorum(member(9002, 6000, 6000), member(9003, 100, 100)), FETCH_TIMEOUT_MS)
    judged = view.voter(9002)
    assert judged.state == NOT_CAUGHT_UP
    assert "no fetch for 6000 ms" in judged.why and "controller.quorum.fetch.timeout.ms=2000" in judged.why
    assert view.caught_up_voters() == {9001, 9003}


def test_a_voter_fetching_but_behind_is_not_caught_up():
    view = QuorumView(quorum(member(9002, 100, 5000)), FETCH_TIMEOUT_MS)
    assert view.voter(9002).state == NOT_CAUGHT_UP
    assert "last caught up 5000 ms ago" in view.voter(9002).why


def test_missing_times_are_unknown_never_caught_up():
    view = QuorumView(quorum(member(9002, None, 100), member(9003, 100, None)), FETCH_TIMEOUT_MS)
    assert view.voter(9002).state == UNKNOWN and view.voter(9003).state == UNKNOWN
    assert view.unknown_voters() == (9002, 9003)
    assert view.caught_up_voters() == {9001}


def test_an_answer_without_the_leaders_own_entry_judges_nobody_caught_up():
    q = Quorum(9001, 5, 100, (member(9002, 10, 10),), ())
    view = QuorumView(q, FETCH_TIMEOUT_MS)
    assert view.voter(9002).state == UNKNOWN
    assert view.caught_up_voters() == set()
    assert not view.has_leader


def test_no_leader_means_no_caught_up_voter():
    q = Quorum(-1, 5, 100, (member(9001, 0, 0), member(9002, 0, 0)), ())
    assert QuorumView(q, FETCH_TIMEOUT_MS).caught_up_voters() == set()


def test_the_leader_is_caught_up_and_the_ages_are_on_its_clock_only():
    view = QuorumView(quorum(member(9002, 1999, 1999)), FETCH_TIMEOUT_MS)
    assert view.voter(9001).state == CAUGHT_UP
    assert view.voter(9002).state == CAUGHT_UP
    assert view.voter(9002).fetch_ms_ago == 1999
    assert view.now.clock == "controller 9001" and view.now.ms == NOW


def test_the_limit_is_the_clusters_fetch_timeout():
    q = quorum(member(9002, 2500, 2500))
    assert QuorumView(q, 2000).voter(9002).state == NOT_CAUGHT_UP
    assert QuorumView(q, 3000).voter(9002).state == CAUGHT_UP


def test_observers_and_brokers_are_judged_by_the_same_rule():
    view = QuorumView(quorum(observers=[member(1, 100, 100), member(2, 7000, 7000)]), FETCH_TIMEOUT_MS)
    assert view.fetching(1).state == CAUGHT_UP
    assert view.fetching(2).state == NOT_CAUGHT_UP
    assert view.fetching(3) is None
