"""Thresholds from the cluster; settles never shorter than broker.session.timeout.ms and ending
with the nodes' own answers (#37, point 7)."""

from __future__ import annotations

import pytest

from kafka_runbooks.errors import SafetyRefusal
from kafka_runbooks.evidence import hold_then_ask, settle_period_s, timeouts_from
from kafka_runbooks.evidence.settings import FETCH_TIMEOUT, SESSION_TIMEOUT


def timeouts(session="9000", fetch="2000"):
    return timeouts_from({1: {SESSION_TIMEOUT: session, FETCH_TIMEOUT: fetch}})


def test_the_largest_value_any_broker_gives_is_used():
    t = timeouts_from({1: {SESSION_TIMEOUT: "6000", FETCH_TIMEOUT: "2000"}, 2: {SESSION_TIMEOUT: "9000"}})
    assert t.broker_session_timeout_ms == 9000 and t.quorum_fetch_timeout_ms == 2000
    assert "broker(s) [1, 2]" in t.source


def test_a_threshold_nobody_answered_is_refused_not_guessed():
    with pytest.raises(SafetyRefusal, match="could not read broker.session.timeout.ms.*broker 2: timed out"):
        timeouts_from({1: {FETCH_TIMEOUT: "2000"}}, {2: "timed out"})
    with pytest.raises(SafetyRefusal):
        timeouts_from({1: {SESSION_TIMEOUT: "junk", FETCH_TIMEOUT: "2000"}})


def test_a_settle_is_never_shorter_than_the_session_timeout():
    assert settle_period_s(0, timeouts()) == 9.0
    assert settle_period_s(3, timeouts()) == 9.0
    assert settle_period_s(15, timeouts()) == 15.0


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t

    def sleep(self, s):
        self.t += s


def test_the_last_read_asks_the_nodes_and_a_silent_one_restarts_the_period():
    clock = Clock()
    asks = []

    def ask(answer):
        asks.append(clock.t)
        return {3: "timed out"} if len(asks) == 1 else {}

    answer, held, silent = hold_then_ask(
        lambda: "ok",
        lambda a: a == "ok",
        ask,
        requested_settle_s=0,
        timeouts=timeouts("6000"),
        timeout_s=60,
        interval_s=1,
        clock=clock,
        sleep=clock.sleep,
    )
    assert held and silent == {}
    assert asks[0] >= 6.0 and asks[1] >= asks[0] + 6.0  # a full session timeout each time


def test_a_node_still_silent_at_the_deadline_fails_the_settle():
    clock = Clock()
    answer, held, silent = hold_then_ask(
        lambda: "ok",
        lambda a: True,
        lambda a: {3: "refused"},
        requested_settle_s=0,
        timeouts=timeouts("6000"),
        timeout_s=20,
        interval_s=1,
        clock=clock,
        sleep=clock.sleep,
    )
    assert not held and silent == {3: "refused"}
