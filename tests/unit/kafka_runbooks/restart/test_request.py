"""The restart request carries the run's switches, read once from the params.

``plan_roll`` used to read ``allow_force_restart``, ``dry_run`` and ``require_approval`` from
the raw params; the request is now what crosses into the glue, so it must hold them, and
the roll options the plan keeps come from it.
"""

from __future__ import annotations

from kafka_runbooks.restart.request import build_request
from kafka_runbooks.restart.roller import RollOptions

FORM = {"node_ids": "1,2", "reason": "patch the JVM", "operation_timeout_s": "90s", "max_attempts": 4}


def test_the_switches_default_to_a_gated_real_roll_without_force():
    request = build_request(FORM)
    assert (request.allow_force_restart, request.dry_run, request.require_approval) == (False, False, True)


def test_the_switches_are_carried_as_given():
    request = build_request({**FORM, "allow_force_restart": True, "dry_run": True, "require_approval": False})
    assert (request.allow_force_restart, request.dry_run, request.require_approval) == (True, True, False)


def test_the_roll_options_are_the_requests_own():
    request = build_request({**FORM, "allow_force_restart": True, "dry_run": True})
    assert request.roll_options() == RollOptions(
        operation_timeout_s=90.0, max_attempts=4, allow_force_restart=True, dry_run=True
    )


def test_a_broker_and_a_follower_controller_overlap_unless_the_run_asks_for_one_node_at_a_time():
    assert build_request(FORM).roll_options().overlap is True
    assert build_request({**FORM, "one_node_at_a_time": True}).roll_options().overlap is False
