"""An approval is a record bound to the plan shown; who may remove a gate is the deployment's call."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kafka_runbooks import approval as rules
from kafka_runbooks.evidence import AIRFLOW_API_SERVER, WORKER, Stamp

PLAN = {
    "runbook": "kafka_broker_restart",
    "run_id": "r1",
    "plan_id": "p1",
    "order": [1, 2, 3],
    "dry_run": False,
}


APPROVED_AT = "2026-11-23T15:00:00+00:00"  # the HITL answer's responded_at (the API server stamps it)


def _api(when: datetime) -> Stamp:
    """A time on Airflow's API server's clock."""
    return Stamp.of(when, AIRFLOW_API_SERVER)


STARTED = _api(datetime(2026, 11, 23, 15, 1, tzinfo=UTC))  # the destructive work's first start


def _policy(**kw) -> rules.ApprovalPolicy:
    return rules.ApprovalPolicy(**kw)


def _approved(digest: str, by="alice", triggered_by="bob") -> dict:
    return {
        "outcome": rules.APPROVED,
        "reason": f"approved by {by}",
        "by": {"id": by, "name": by},
        "at": APPROVED_AT,
        "at_clock": AIRFLOW_API_SERVER,
        "triggered_by": triggered_by,
        "digest": digest,
    }


def test_the_digest_is_of_the_canonical_plan_and_changes_with_any_part_of_it():
    digest = rules.plan_digest(PLAN)
    assert digest.startswith("sha256:") and len(digest) == len("sha256:") + 64
    assert rules.plan_digest(dict(reversed(list(PLAN.items())))) == digest  # key order does not matter
    for key, value in (("order", [1, 3, 2]), ("plan_id", "p2"), ("run_id", "r2"), ("dry_run", True)):
        assert rules.plan_digest({**PLAN, key: value}) != digest, key


def test_the_destructive_step_acts_only_on_an_approval_of_exactly_its_plan():
    digest = rules.plan_digest(PLAN)
    assert (
        rules.check_approval(_approved(digest), digest, _policy(), started_at=STARTED)["by"]["id"] == "alice"
    )
    with pytest.raises(rules.NotApproved, match="no approval is recorded"):
        rules.check_approval(None, digest, _policy(), started_at=STARTED)
    changed = rules.plan_digest({**PLAN, "order": [2, 1, 3]})
    with pytest.raises(rules.NotApproved, match="the plan changed since the gate"):
        rules.check_approval(_approved(digest), changed, _policy(), started_at=STARTED)


@pytest.mark.parametrize("outcome", [rules.REJECTED, rules.TIMED_OUT, rules.REFUSED, "something else"])
def test_a_rejection_a_timeout_or_a_refused_answer_never_lets_it_act(outcome):
    digest = rules.plan_digest(PLAN)
    record = {**_approved(digest), "outcome": outcome, "reason": "rejected by alice"}
    with pytest.raises(rules.NotApproved, match=f"'{outcome}'"):
        rules.check_approval(record, digest, _policy(allow_ungated=True), started_at=STARTED)


def test_ungated_runs_are_refused_unless_the_deployment_allows_them():
    assert rules.ungated_refusal(True, False, _policy()) is None
    assert rules.ungated_refusal(False, True, _policy()) is None  # a dry run changes nothing
    refusal = rules.ungated_refusal(False, False, _policy())
    assert refusal and rules.ALLOW_UNGATED_VARIABLE in refusal and rules.ALLOW_UNGATED_ENV in refusal
    assert rules.ungated_refusal(False, False, _policy(allow_ungated=True)) is None

    digest = rules.plan_digest(PLAN)
    ungated = {"outcome": rules.NOT_REQUIRED, "reason": "ungated", "digest": digest, "dry_run": False}
    assert rules.check_approval(ungated, digest, _policy(allow_ungated=True), started_at=STARTED) is ungated
    with pytest.raises(rules.NotApproved, match="ungated runs are not allowed"):  # allowance withdrawn since
        rules.check_approval(ungated, digest, _policy(), started_at=STARTED)
    dry = {**ungated, "dry_run": True}
    assert rules.check_approval(dry, digest, _policy(), started_at=STARTED) is dry


def test_four_eyes_the_triggering_user_cannot_approve_their_own_run():
    digest = rules.plan_digest(PLAN)
    own = _approved(digest, by="alice", triggered_by="alice")
    assert rules.check_approval(own, digest, _policy(), started_at=STARTED) is own  # four-eyes off: it counts
    with pytest.raises(rules.NotApproved, match="four-eyes is on and alice triggered this run"):
        rules.check_approval(own, digest, _policy(four_eyes=True), started_at=STARTED)
    assert rules.check_approval(
        _approved(digest, "alice", "bob"), digest, _policy(four_eyes=True), started_at=STARTED
    )
    # matched by id or by display name; a run no person triggered (a sweep) has nobody to exclude
    assert rules.same_user({"id": "7", "name": "alice"}, "alice") and rules.same_user(
        {"id": "alice"}, "alice"
    )
    assert not rules.same_user({"id": "alice", "name": "alice"}, None)
    refusal = rules.four_eyes_refusal({"id": "u1", "name": "Alice"}, "Alice", _policy(four_eyes=True))
    assert refusal and "Alice (u1)" in refusal


def test_the_policy_is_read_from_the_variable_then_the_environment_then_off():
    variables: dict[str, str | None] = {}
    policy = rules.load_policy(variables.get, {})
    assert (policy.allow_ungated, policy.four_eyes, policy.errors) == (False, False, ())
    env = {rules.ALLOW_UNGATED_ENV: "true", rules.FOUR_EYES_ENV: "1"}
    policy = rules.load_policy(variables.get, env)
    assert policy.allow_ungated and policy.four_eyes and rules.ALLOW_UNGATED_ENV in policy.source
    variables = {rules.ALLOW_UNGATED_VARIABLE: "false", rules.FOUR_EYES_VARIABLE: "off"}
    policy = rules.load_policy(variables.get, env)
    assert not policy.allow_ungated and not policy.four_eyes
    assert f"Variable {rules.ALLOW_UNGATED_VARIABLE}" in policy.source


def test_an_unreadable_setting_takes_the_safe_value_and_says_so():
    variables = {rules.ALLOW_UNGATED_VARIABLE: "sure", rules.FOUR_EYES_VARIABLE: "maybe"}
    policy = rules.load_policy(variables.get, {rules.ALLOW_UNGATED_ENV: "true"})
    assert policy.allow_ungated is False and policy.four_eyes is True
    assert len(policy.errors) == 2 and "'sure' is not a boolean" in policy.errors[0]


def _upstream(user: str = "alice") -> dict:
    return {
        "user": {"id": user, "name": user},
        "at": "2026-11-23T14:50:00+00:00",
        "dag_id": "kafka_metadata_error_sweep",
        "run_id": "scheduled__2026-11-23T14:45:00+00:00",
        "task_id": "cluster.controller_decision",
        "map_index": 0,
    }


def test_four_eyes_nobody_who_approved_the_decision_that_started_the_run_may_approve_it():
    """A sweep-started run has no triggering user (Airflow: None); the chain still excludes alice."""
    digest = rules.plan_digest(PLAN)
    record = _approved(digest, by="alice", triggered_by=None)
    chain = [_upstream("alice")]
    on = _policy(four_eyes=True)
    assert rules.check_approval(record, digest, _policy(), started_at=STARTED, upstream=chain) is record
    with pytest.raises(rules.NotApproved, match="alice approved the decision that started this run"):
        rules.check_approval(record, digest, on, started_at=STARTED, upstream=chain)
    assert rules.check_approval(record, digest, on, started_at=STARTED, upstream=[_upstream("bob")])
    refusal = rules.upstream_refusal({"id": "u1", "name": "Alice"}, [_upstream("Alice")], on)
    assert refusal and "kafka_metadata_error_sweep run scheduled__2026-11-23T14:45:00+00:00" in refusal


def test_an_upstream_approval_counts_only_as_its_gate_recorded_it():
    entry = _upstream("alice")
    recorded = {"outcome": rules.APPROVED, "by": {"id": "alice", "name": "alice"}, "at": entry["at"]}
    assert rules.upstream_mismatch(entry, recorded) is None
    assert "did not record" in rules.upstream_mismatch(entry, None)
    assert "'rejected', not an approval" in rules.upstream_mismatch(
        entry, {**recorded, "outcome": "rejected"}
    )
    forged = rules.upstream_mismatch(_upstream("bob"), recorded)
    assert "the run says bob approved" in forged and "that gate recorded alice" in forged
    assert rules.upstream_mismatch(entry, {**recorded, "at": "2026-11-23T14:51:00+00:00"})
    assert rules.upstream_entries(None) == [] and rules.upstream_entries([entry]) == [entry]
    for malformed in ("alice", [entry, "bob"], [{**entry, "user": None}]):
        with pytest.raises(rules.NotApproved):
            rules.upstream_entries(malformed)


def test_an_approval_expires_when_the_work_first_started_on_the_api_servers_clock():
    digest = rules.plan_digest(PLAN)
    record = _approved(digest)
    approved_at = datetime.fromisoformat(APPROVED_AT)
    hour = _policy()  # the default: one hour
    assert hour.approval_max_age_s == 3600
    assert rules.check_approval(record, digest, hour, started_at=_api(approved_at + timedelta(minutes=59)))
    late = _api(approved_at + timedelta(hours=1, seconds=1))
    with pytest.raises(
        rules.NotApproved, match=r"approved at 2026-11-23T15:00:00\+00:00, expired after 1:00:00"
    ):
        rules.check_approval(record, digest, hour, started_at=late)
    assert rules.check_approval(record, digest, _policy(approval_max_age_s=7200), started_at=late)
    # unknown stays unknown: no time, another clock, a record without its clock, a start before the answer
    with pytest.raises(rules.NotApproved, match="work first started is unknown"):
        rules.check_approval(record, digest, hour, started_at=None)
    with pytest.raises(rules.NotApproved, match="stamped by this worker clock"):
        rules.check_approval(record, digest, hour, started_at=Stamp.of(approved_at, WORKER))
    with pytest.raises(rules.NotApproved, match="approval's time .* is unknown"):
        rules.check_approval({**record, "at": None}, digest, hour, started_at=STARTED)
    with pytest.raises(rules.NotApproved, match="stamped by an unrecorded clock"):
        rules.check_approval({**record, "at_clock": None}, digest, hour, started_at=STARTED)
    with pytest.raises(rules.NotApproved, match="that work did not start under this approval"):
        rules.check_approval(record, digest, hour, started_at=_api(approved_at - timedelta(seconds=5)))


def test_an_answer_counts_only_by_the_gates_deadline_on_one_clock():
    deadline = _api(datetime(2026, 11, 23, 15, 30, tzinfo=UTC))
    assert rules.late_answer(deadline, deadline) is None  # at the deadline: in time
    assert rules.late_answer(deadline.plus_ms(-1), deadline) is None
    outcome, why = rules.late_answer(deadline.plus_ms(1000), deadline)
    assert outcome == rules.TIMED_OUT
    assert why.startswith(
        "answered at 2026-11-23T15:30:01+00:00, after the deadline 2026-11-23T15:30:00+00:00"
    )
    for answered, missing in (
        (Stamp(None, AIRFLOW_API_SERVER), "the answer's time is unknown"),
        (Stamp(deadline.ms, WORKER), "stamped by this worker clock"),
    ):
        outcome, why = rules.late_answer(answered, deadline)
        assert outcome == rules.REFUSED and missing in why
    assert rules.late_answer(deadline, Stamp(None, AIRFLOW_API_SERVER))[0] == rules.REFUSED


def test_the_approval_lifetime_is_read_from_the_variable_then_the_environment():
    assert rules.load_policy({}.get, {}).approval_max_age_s == 3600
    env = {rules.MAX_AGE_ENV: "600"}
    policy = rules.load_policy({}.get, env)
    assert (
        policy.approval_max_age_s == 600 and f"approval_max_age_s=600 ({rules.MAX_AGE_ENV})" in policy.source
    )
    assert rules.load_policy({rules.MAX_AGE_VARIABLE: "5"}.get, env).approval_max_age_s == 5
    for bad in ("soon", "0", "-5", "inf"):
        policy = rules.load_policy({rules.MAX_AGE_VARIABLE: bad}.get, env)
        assert policy.approval_max_age_s == 3600 and policy.errors, bad
