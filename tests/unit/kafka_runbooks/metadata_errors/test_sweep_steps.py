"""The steps of the metadata-error sweep's decision, each tried alone on hand-made rows and readings.

``run_sweep`` as a whole (discovery, metrics, the state file) is covered by
test_sweep.py (beside this file) and tests/integration/test_metadata_error_sweep.py.
"""

from __future__ import annotations

import logging

import pytest

from kafka_runbooks.metadata_errors.discovery import BROKER, CONTROLLER, NodeRef
from kafka_runbooks.metadata_errors.metrics import NodeMetrics
from kafka_runbooks.metadata_errors.state import NodeState
from kafka_runbooks.metadata_errors.sweep import (
    FLAGGED,
    HEALTHY,
    SweepOptions,
    _active_controller,
    _broker_restarts,
    _compare_counters,
    _controller_escalation,
    _copy_reading,
    _learn_roles,
    _missing_counters,
    _status,
)

LOG = logging.getLogger("test")


def row(node_id: int, role: str, status: str = FLAGGED, count: int | None = 0) -> dict:
    return {
        "node_id": node_id,
        "roles": [role],
        "status": status,
        "active_controller_count": count,
        "counters": {"load": 2.0},
        "increased": {"load": (1.0, 2.0)} if status == FLAGGED else {},
        "metric_names": {"load": "kafka_server_metadata_load_error_count"},
    }


def no_run_active(_dag: str, _run: str) -> bool:
    return False


def test_the_quorum_leader_wins_and_a_lone_active_count_stands_in_for_it():
    rows = [row(1, CONTROLLER, HEALTHY, 1), row(2, CONTROLLER, HEALTHY, 0), row(3, BROKER, HEALTHY, None)]
    assert _active_controller(2, rows) == (2, [1])
    assert [r["active_controller"] for r in rows] == [False, True, False]
    assert _active_controller(None, rows) == (1, [1])
    rows[1]["active_controller_count"] = 1
    assert _active_controller(None, rows) == (None, [1, 2])  # two claim it: nobody is named


def test_a_flagged_broker_gets_a_gated_restart_run_once():
    rows = [row(4, BROKER), row(5, BROKER, HEALTHY)]
    states = {4: NodeState(), 5: NodeState()}
    alerts: list = []
    requests = _broker_restarts(rows, states, SweepOptions(), "scheduled__1", no_run_active, alerts, LOG)
    assert [r["conf"] for r in requests] == [
        {
            "node_ids": "4",
            "reason": requests[0]["conf"]["reason"],
            "require_approval": True,
            "kafka_config_id": "kafka_default",  # the swept cluster, not the restart's default
            "probe_conn_id": "kafka_broker_probe_default",
            "restart_conn_id": "kafka_restart_default",
        }
    ]
    assert states[4].restart_run_id == requests[0]["trigger_run_id"] and alerts == []
    assert "(its approval gate applies)" in rows[0]["action"] and "action" not in rows[1]
    # the next sweep, while that run is active: no second run
    again = _broker_restarts(rows, states, SweepOptions(), "scheduled__2", lambda d, r: True, alerts, LOG)
    assert again == [] and rows[0]["action"].startswith(
        "none: restart run metadata_errors__kafka_default__broker_4__"
    )


def test_too_many_flagged_brokers_restart_nothing_and_alert():
    rows = [row(b, BROKER) for b in (1, 2, 3)]
    alerts: list = []
    requests = _broker_restarts(
        rows, {b: NodeState() for b in (1, 2, 3)}, SweepOptions(), "r", no_run_active, alerts, LOG
    )
    assert requests == [] and alerts[0]["nodes"] == [1, 2, 3]
    assert all(r["action"].startswith("reported: too many") for r in rows)


def test_only_the_active_controller_is_escalated_after_the_streak():
    rows = [row(9001, CONTROLLER), row(9002, CONTROLLER)]
    states = {9001: NodeState(increase_streak=1), 9002: NodeState(increase_streak=5)}
    options = SweepOptions(controller_escalate_after=2)
    alerts: list = []
    assert _controller_escalation(rows, states, 9001, options, "r1", no_run_active, alerts, LOG) is None
    assert rows[0]["action"].startswith("reported (active controller; increased in 1")
    assert rows[1]["action"] == "reported (not the active controller)" and len(alerts) == 2
    states[9001].increase_streak = 2
    escalation = _controller_escalation(rows, states, 9001, options, "r2", no_run_active, [], LOG)
    assert escalation["node_id"] == 9001 and escalation["conf"]["require_approval"] is True
    assert states[9001].decision_run_id == "r2" and states[9001].increase_streak == 0
    states[9001].increase_streak = 3  # a new streak while r2 still waits for its answer
    assert _controller_escalation(rows, states, 9001, options, "r3", lambda d, r: r == "r2", [], LOG) is None
    assert rows[0]["action"] == "none: sweep run r2 is still waiting for a decision about it"


# -- one node's counters against its last sweep -----------------------------------------


def test_a_counter_without_a_last_value_is_based_never_increased():
    increased, rebased, based = _compare_counters({"load": 7.0, "apply": 2.0}, {"apply": 2.0}, False)
    assert (increased, rebased, based) == ({}, {}, ["load"])


def test_a_counter_up_is_an_increase_down_without_a_restart_is_rebased():
    previous = {"load": 3.0, "apply": 3.0, "same": 1.0}
    increased, rebased, based = _compare_counters({"load": 4.0, "apply": 1.0, "same": 1.0}, previous, False)
    assert increased == {"load": [3.0, 4.0]} and rebased == {"apply": [3.0, 1.0]} and based == []


@pytest.mark.parametrize(("now", "increased"), [(1.0, {"load": [0.0, 1.0]}), (3.0, {"load": [0.0, 3.0]})])
def test_after_a_restart_a_counter_counts_from_zero_even_below_its_old_value(now, increased):
    assert _compare_counters({"load": now}, {"load": 3.0}, True)[0] == increased
    assert _compare_counters({"load": 0.0}, {"load": 3.0}, True)[:2] == ({}, {"load": [3.0, 0.0]})


@pytest.mark.parametrize(
    ("prev", "restarted", "increased", "rebased", "expected"),
    [
        (NodeState(counters={"load": 1.0}), True, True, False, (FLAGGED, "increased since its restart")),
        (NodeState(counters={"load": 1.0}), False, True, False, (FLAGGED, "increased")),
        (None, False, False, False, (HEALTHY, "first seen")),
        (NodeState(), False, False, False, (HEALTHY, "first seen")),
        (NodeState(counters={"load": 1.0}), True, False, True, (HEALTHY, "re-based (restarted")),
        (NodeState(counters={"load": 1.0}), False, False, True, (HEALTHY, "re-based (a counter went down")),
        (NodeState(counters={"load": 1.0}), False, False, False, (HEALTHY, "unchanged")),
    ],
)
def test_the_status_says_flagged_only_for_an_increase_and_why_it_is_healthy(
    prev, restarted, increased, rebased, expected
):
    status, change = _status(prev, restarted, increased, rebased)
    assert status == expected[0] and change.startswith(expected[1])


@pytest.mark.parametrize(("moved_s", "restarted"), [(0.0, False), (1.0, False), (1.5, True), (-30.0, True)])
def test_a_restart_is_a_process_start_time_that_moved_by_more_than_a_second(moved_s, restarted):
    row = {"restarted_since_last_sweep": None}
    _copy_reading(row, NodeMetrics(process_start_s=1000.0 + moved_s), NodeState(process_start_s=1000.0))
    assert row["restarted_since_last_sweep"] is restarted


def test_without_a_start_time_on_both_sides_nobody_knows_about_a_restart():
    for metrics, prev in (
        (NodeMetrics(), NodeState(process_start_s=1.0)),
        (NodeMetrics(process_start_s=1.0), NodeState()),
    ):
        row = {"restarted_since_last_sweep": None}
        _copy_reading(row, metrics, prev)
        assert row["restarted_since_last_sweep"] is None


def test_each_role_needs_its_own_counters():
    both = NodeRef(1, {BROKER, CONTROLLER})
    broker_only = NodeMetrics(counters={"metadata_load_errors": 0.0, "metadata_apply_errors": 0.0})
    assert _missing_counters(both, broker_only) == ["controller_metadata_errors"]
    assert _missing_counters(NodeRef(1, {BROKER}), broker_only) == []
    assert _missing_counters(NodeRef(1, {BROKER}), NodeMetrics(counters={"metadata_load_errors": 0.0})) == [
        "metadata_apply_errors"
    ]


def test_only_a_node_the_cluster_did_not_describe_takes_its_roles_from_its_metrics():
    controller_like = NodeMetrics(active_controller_count=0)
    configured, row = NodeRef(9001), {"roles": []}
    _learn_roles(configured, controller_like, row)
    assert configured.roles == {CONTROLLER} and row["roles"] == [CONTROLLER]
    described, row = NodeRef(2, {BROKER}), {"roles": [BROKER]}
    _learn_roles(described, controller_like, row)
    assert described.roles == {BROKER} and row["roles"] == [BROKER]
