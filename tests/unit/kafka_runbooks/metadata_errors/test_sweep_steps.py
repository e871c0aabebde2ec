"""The steps of the metadata-error sweep's decision, each tried alone on hand-made rows.

``run_sweep`` as a whole (discovery, metrics, the state file) is covered by
test_sweep.py (beside this file) and tests/integration/test_metadata_error_sweep.py.
"""

from __future__ import annotations

import logging

from kafka_runbooks.metadata_errors.discovery import BROKER, CONTROLLER
from kafka_runbooks.metadata_errors.state import NodeState
from kafka_runbooks.metadata_errors.sweep import (
    FLAGGED,
    HEALTHY,
    SweepOptions,
    _active_controller,
    _broker_restarts,
    _controller_escalation,
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
            "kafka_conn_id": "kafka_default",  # the swept cluster, not the restart's default
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
