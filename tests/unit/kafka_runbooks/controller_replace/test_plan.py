"""The controller replacement's majority rule and plan, from DescribeQuorum answers shaped as
Kafka sends them (every time on the leader's clock; the leader's own entry is its "now")."""

from __future__ import annotations

import pytest

from kafka_runbooks.controller_replace.plan import (
    ReplaceRequest,
    check_add,
    check_remove,
    observer_state,
    plan_steps,
    project,
)
from kafka_runbooks.errors import BadInput, SafetyRefusal
from kafka_runbooks.model import Quorum, QuorumMember

NOW = 1_000_000
FETCH_TIMEOUT_MS = 2000  # the cluster's controller.quorum.fetch.timeout.ms, as the admin facade reads it
DIRS = {9001: "dir-9001", 9002: "dir-9002", 9003: "dir-9003", 9004: "dir-9004", 9005: "dir-9005"}


def member(node_id: int, caught_up_ago: int | None = 0, end: int = 500) -> QuorumMember:
    ts = None if caught_up_ago is None else NOW - caught_up_ago
    return QuorumMember(node_id, end, ts, ts, DIRS[node_id])


def quorum(voters, observers=(), leader: int = 9001, hwm: int = 500) -> Quorum:
    return Quorum(leader, 3, hwm, tuple(voters), tuple(observers), fetch_timeout_ms=FETCH_TIMEOUT_MS)


def three_one_dead(observer_end: int = 500, observer_ago: int | None = 0) -> Quorum:
    """9001 leads, 9002 fetches, 9003 died a minute ago; 9004 observes."""
    return quorum(
        [member(9001), member(9002, 200), member(9003, 60_000, 300)],
        [member(9004, observer_ago, observer_end)],
    )


def test_adding_a_caught_up_observer_to_three_with_one_dead_keeps_the_majority():
    check = check_add(three_one_dead(), 9004, new_caught_up=True)
    assert (check.voters_after, check.caught_up_after, check.majority_after) == (4, 3, 3)
    assert check.ok


def test_adding_an_observer_that_has_not_caught_up_is_refused():
    check = check_add(three_one_dead(), 9004, new_caught_up=False)
    assert (check.caught_up_after, check.majority_after) == (2, 3)
    assert not check.ok and "fewer than the majority of 3" in check.refusal()


def test_removing_the_dead_voter_of_four_leaves_three_caught_up_of_three():
    q = quorum([member(9001), member(9002), member(9003, 60_000), member(9004)])
    check = check_remove(q, 9003)
    assert (check.voters_after, check.caught_up_after, check.majority_after) == (3, 3, 2) and check.ok


def test_removing_a_live_voter_when_one_is_dead_is_refused():
    """3 voters, one dead: removing a live one leaves 1 caught up of 2 (majority 2)."""
    check = check_remove(three_one_dead(), 9002)
    assert (check.voters_after, check.caught_up_after, check.majority_after) == (2, 1, 2)
    assert not check.ok


def test_a_voter_whose_state_is_unknown_never_counts_as_caught_up():
    q = quorum([member(9001), member(9002), member(9003, None)])
    check = check_remove(q, 9002)
    assert check.unknown_voters == (9003,)
    assert (check.caught_up_after, check.majority_after) == (1, 2) and not check.ok


def test_an_answer_without_the_leaders_own_time_counts_only_the_leader():
    """No "now" on the leader's clock: no follower's caught-up time can be judged."""
    q = quorum([member(9001, None), member(9002), member(9003)])
    check = check_remove(q, 9003)
    assert check.unknown_voters == (9002, 9003)
    assert check.caught_up_before == 1 and not check.ok


def test_no_leader_counts_no_one_and_plans_nothing():
    q = quorum([member(9001), member(9002), member(9003)], leader=-1)
    assert check_remove(q, 9003).caught_up_before == 0
    with pytest.raises(SafetyRefusal, match="no leader"):
        plan_steps(q, ReplaceRequest(remove=(9003,)))


def test_the_last_voter_is_never_removed():
    check = check_remove(quorum([member(9001)]), 9001)
    assert check.voters_after == 0 and not check.ok


def test_an_observer_is_caught_up_only_at_the_high_watermark_and_recently_by_the_leaders_clock():
    assert observer_state(three_one_dead(), 9004)["caught_up"] is True
    behind = observer_state(three_one_dead(observer_end=450), 9004)
    assert behind["caught_up"] is False and behind["lag_offsets"] == 50
    # a removed or dead controller lingers among the observers with an old time
    stale = observer_state(three_one_dead(observer_ago=60_000), 9004)
    assert stale["caught_up"] is False and stale["caught_up_ms_ago"] == 60_000
    never = observer_state(three_one_dead(observer_ago=None), 9004)
    assert never["caught_up"] is False and never["caught_up_ms_ago"] is None
    assert observer_state(three_one_dead(), 9005) == {
        **observer_state(three_one_dead(), 9005),
        "observer": False,
        "caught_up": False,
    }


def test_a_replacement_plans_the_add_then_the_removal_with_directory_ids_from_the_quorum():
    request = ReplaceRequest(
        remove=(9003,), new_controller_id=9004, new_controller_endpoints=("CONTROLLER://h:1",)
    )
    steps = plan_steps(three_one_dead(), request)
    assert [(s.kind, s.node_id, s.directory_id, s.done) for s in steps] == [
        ("add", 9004, "dir-9004", None),
        ("remove", 9003, "dir-9003", None),
    ]
    checks = project(three_one_dead(), steps)
    assert [(c.voters_after, c.caught_up_after, c.majority_after, c.ok) for c in checks] == [
        (4, 3, 3, True),
        (3, 3, 2, True),
    ]


def test_a_replan_after_the_add_marks_it_done_and_after_the_removal_both():
    request = ReplaceRequest(
        remove=(9003,), new_controller_id=9004, new_controller_endpoints=("CONTROLLER://h:1",)
    )
    added = quorum([member(9001), member(9002), member(9003, 60_000), member(9004)])
    assert [s.done is not None for s in plan_steps(added, request)] == [True, False]
    removed = quorum([member(9001), member(9002), member(9004)], [member(9003, 60_000)])
    assert [s.done is not None for s in plan_steps(removed, request)] == [True, True]


def test_a_new_controller_that_is_not_an_observer_is_refused():
    request = ReplaceRequest(
        remove=(9003,), new_controller_id=9005, new_controller_endpoints=("CONTROLLER://h:1",)
    )
    with pytest.raises(SafetyRefusal, match="not an observer"):
        plan_steps(three_one_dead(), request)


def test_a_static_quorum_without_directory_ids_is_refused():
    q = quorum([member(9001), member(9002), QuorumMember(9003, 1, NOW - 60_000, NOW - 60_000, None)])
    with pytest.raises(SafetyRefusal, match="not a dynamic"):
        plan_steps(q, ReplaceRequest(remove=(9003,)))


def test_a_plain_removal_that_would_break_the_majority_projects_not_ok():
    """Three voters, 9003 dead: removing the live 9002 leaves 1 caught up of 2."""
    steps = plan_steps(three_one_dead(), ReplaceRequest(remove=(9002,)))
    assert [c.ok for c in project(three_one_dead(), steps)] == [False]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"remove": ()}, "name the voter"),
        ({"remove": (9003, 9003)}, "named twice"),
        ({"remove": (9004,), "new_controller_id": 9004, "new_controller_endpoints": ("C://h:1",)}, "both"),
        ({"remove": (9003,), "new_controller_id": 9004}, "endpoint"),
    ],
)
def test_bad_requests(kwargs, message):
    with pytest.raises(BadInput, match=message):
        ReplaceRequest(**kwargs)


def test_a_voter_killed_6_s_ago_does_not_count_so_removing_a_live_voter_is_refused():
    """Issue #37, point 2: 9003 died 6 s ago; its lastCaughtUpTimestamp (6 s old) was within the old
    10 s window, its last fetch in the same answer is 6 s old too. Removing 9002 would leave 9001
    and a dead 9003: by the cluster's fetch timeout (2 s) only one of two is caught up."""
    q = quorum([member(9001), member(9002, 100), member(9003, 6_000)])
    check = check_remove(q, 9002)
    assert (check.voters_after, check.caught_up_after, check.majority_after) == (2, 1, 2)
    assert not check.ok
    assert [c.ok for c in project(q, plan_steps(q, ReplaceRequest(remove=(9002,))))] == [False]
