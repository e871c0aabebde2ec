"""The auto-restart back-off policy and its persisted state (pure logic, no network)."""

from __future__ import annotations

import json

import pytest

from kafka_runbooks.connect.policy import (
    GIVE_UP,
    HEALTHY,
    RECOVERING,
    RESET,
    RESTART,
    WAIT,
    RestartPolicy,
    RestartState,
    decide,
)
from kafka_runbooks.connect.state import JsonStateStore

MIN = 60.0


def simulate(policy: RestartPolicy, failed_until: float | None, horizon_s: float, tick_s: float = 10.0):
    """Sweep every ``tick_s`` while the connector fails (until ``failed_until``); return restart times."""
    state, restarts, t = None, [], 0.0
    while t <= horizon_s:
        failed = failed_until is None or t < failed_until
        verdict = decide(policy, state, failed, t)
        state = verdict.state
        if verdict.action == RESTART:
            state = state.after_restart(t)
            restarts.append(t)
        t += tick_s
    return restarts, state


def test_default_schedule_is_the_proposals_then_stop():
    policy = RestartPolicy()
    assert policy.schedule_minutes() == [0, 2, 6, 12, 20, 30]
    restarts, state = simulate(policy, None, horizon_s=120 * MIN)
    assert [r / MIN for r in restarts] == [0, 2, 6, 12, 20, 30]
    assert state.count == 6
    assert decide(policy, state, True, 121 * MIN).action == GIVE_UP


def test_unlimited_restarts_keep_going_with_the_interval_capped():
    policy = RestartPolicy(max_restarts=None, max_interval_minutes=10)
    assert policy.schedule_minutes(restarts=9) == [0, 2, 6, 12, 20, 30, 40, 50, 60]
    restarts, state = simulate(policy, None, horizon_s=100 * MIN)
    assert [r / MIN for r in restarts] == [0, 2, 6, 12, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    assert state.count == 13
    with pytest.raises(ValueError, match="unlimited"):
        policy.schedule_minutes()


def test_strimzi_today_cap_of_sixty_minutes():
    policy = RestartPolicy(max_restarts=None, max_interval_minutes=60)
    assert policy.schedule_minutes(restarts=10) == [0, 2, 6, 12, 20, 30, 42, 56, 72, 90]
    assert policy.interval_minutes(40) == 60


def test_max_restarts_is_configurable_and_zero_never_restarts():
    restarts, _ = simulate(RestartPolicy(max_restarts=2), None, horizon_s=60 * MIN)
    assert [r / MIN for r in restarts] == [0, 2]
    assert decide(RestartPolicy(max_restarts=0), None, True, 0).action == GIVE_UP


def test_not_due_waits_and_says_when():
    policy = RestartPolicy()
    state = RestartState().after_restart(0.0).after_restart(2 * MIN)  # 2 restarts: next after 4 min
    verdict = decide(policy, state, True, 5 * MIN)
    assert verdict.action == WAIT and verdict.due_at == 6 * MIN
    assert decide(policy, state, True, 6 * MIN).action == RESTART


def test_healed_connector_resets_after_longer_than_its_interval():
    policy = RestartPolicy()
    state = RestartState().after_restart(0.0).after_restart(2 * MIN)  # count 2, interval 4 min
    v = decide(policy, state, False, 3 * MIN)
    assert v.action == RECOVERING and v.state.healthy_since == 3 * MIN and v.state.count == 2
    v = decide(policy, v.state, False, 7 * MIN)  # healthy exactly 4 min: not longer than
    assert v.action == RECOVERING
    v = decide(policy, v.state, False, 7 * MIN + 1)
    assert v.action == RESET and v.state.count == 0 and v.state.total_restarts == 2
    assert v.state.last_restart_at == 2 * MIN  # kept for the report
    # it fails again later: a fresh schedule, restarted at once
    assert decide(policy, v.state, True, 30 * MIN).action == RESTART


def test_failing_again_before_the_reset_keeps_the_count():
    policy = RestartPolicy()
    state = RestartState().after_restart(0.0).after_restart(2 * MIN)
    v = decide(policy, state, False, 3 * MIN)
    v = decide(policy, v.state, True, 4 * MIN)
    assert v.action == WAIT and v.state.count == 2 and v.state.healthy_since is None


def test_a_connector_that_never_failed_is_just_healthy():
    assert decide(RestartPolicy(), None, False, 0).action == HEALTHY


def test_minute_seconds_scales_the_whole_schedule():
    policy = RestartPolicy(minute_seconds=1.0)
    restarts, state = simulate(policy, None, horizon_s=60, tick_s=0.5)
    assert restarts == [0, 2, 6, 12, 20, 30] and state.count == 6


def test_healthy_after_third_restart_stops_the_schedule():
    restarts, state = simulate(RestartPolicy(), failed_until=7 * MIN, horizon_s=60 * MIN)
    assert [r / MIN for r in restarts] == [0, 2, 6]
    assert state.count == 0 and state.total_restarts == 3  # reset after > 6 min healthy


@pytest.mark.parametrize(
    "kwargs",
    [
        {"step_minutes": 0},
        {"max_interval_minutes": -1},
        {"max_restarts": -1},
        {"max_restarts": True},
        {"minute_seconds": 0},
    ],
)
def test_bad_policy_is_refused(kwargs):
    with pytest.raises(ValueError):
        RestartPolicy(**kwargs)


def test_state_store_round_trip_is_atomic_and_per_cluster(tmp_path):
    a = JsonStateStore("kafka_connect_default", tmp_path)
    b = JsonStateStore("other/cluster", tmp_path)
    state = RestartState().after_restart(1000.0)
    with a.locked():
        assert a.load() == {}
        a.save({"src->tgt.MirrorSourceConnector": state})
    assert JsonStateStore("kafka_connect_default", tmp_path).load() == {
        "src->tgt.MirrorSourceConnector": state
    }
    assert b.load() == {}
    raw = json.loads(a.path.read_text())
    assert raw["connectors"]["src->tgt.MirrorSourceConnector"]["count"] == 1
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [
        "kafka_connect_default.json"
    ]


def test_a_corrupt_state_file_is_a_clear_error(tmp_path):
    store = JsonStateStore("c", tmp_path)
    store.path.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        store.load()
