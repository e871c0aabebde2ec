"""The runbooks' gates: no path around them, and what an answer does to the run.

The DAG structure is checked on the parsed DAGs; the gate's answer handling on the real
operator classes, with a task instance that keeps XComs in a dict (the part of Airflow's
TI interface the gate uses), a task state store per task instance, and Airflow's API server's
clock served over HTTP (``api_server``, conftest.py). The gates on a running Airflow:
tests/e2e/test_approval_records.py and tests/e2e/test_gate_answers.py.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from kafka_runbooks import approval as rules
from kafka_runbooks.approval import APPROVE_OPTION as APPROVE
from kafka_runbooks.approval import REJECT_OPTION as REJECT
from tests.unit.kafka_runbooks_airflow.airflow_clock import TaskStateStore

ROOT = Path(__file__).resolve().parents[3]
# runbook -> (gate, destructive task)
GATED = {
    "kafka_broker_restart": ("approval_gate", "rolling_restart"),
    "kafka_unclean_recovery": ("approve_elections", "run_elections"),
    "kafka_failed_broker_reassignment": ("approval_gate", "execute_chunks"),
    "kafka_metadata_error_sweep": ("cluster.controller_decision", "cluster.restart_active_controller"),
}


def _dag(dag_id: str):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags" / f"{dag_id}.py"), safe_mode=False)
    assert bag.import_errors == {}
    return bag.dags[dag_id]


@pytest.mark.parametrize("dag_id", sorted(GATED))
def test_the_destructive_task_runs_only_after_the_gate_succeeded(dag_id):
    """No branch around the gate (today's main: resumed / ungated restart runs skipped it),
    a skipped or failed gate never lets the destructive task run, and the gate keeps a record."""
    from kafka_runbooks_airflow.operators.gate import ApprovedTriggerDagRunOperator, _PlanGate

    dag = _dag(dag_id)
    gate_id, act_id = GATED[dag_id]
    act = dag.get_task(act_id)
    assert gate_id in act.upstream_task_ids
    assert act.trigger_rule == "all_success", act.trigger_rule
    assert isinstance(dag.get_task(gate_id), _PlanGate)
    checks = getattr(act, "approval_gate_task_id", None) == gate_id or isinstance(
        act, ApprovedTriggerDagRunOperator
    )
    assert checks or act_id == "run_elections"  # a @task: it calls require_approval itself


class FakeTI:
    """XComs in a dict, keyed (task_id, key): what the gate reads and writes.

    Another run's XCom (``dag_id`` and ``run_id`` given, as the task SDK's ``xcom_pull``
    takes them) is keyed (dag_id, run_id, task_id, map_index, key); ``map_indexes=None``
    reads map index -1, as Airflow does. ``start_date`` is when the worker says the task started
    (Airflow 3: the worker's own clock); ``try_number`` and ``max_tries`` as Airflow counts them (a
    retry keeps ``max_tries``, a clear raises it to the try number plus the task's retries).
    """

    def __init__(
        self,
        task_id: str,
        xcoms: dict | None = None,
        start_date: datetime | None = None,
        try_number: int = 1,
        max_tries: int = 0,
    ) -> None:
        self.task_id = task_id
        self.xcoms = dict(xcoms or {})
        self.start_date = start_date
        self.try_number = try_number
        self.max_tries = max_tries

    def xcom_push(self, key: str, value) -> None:
        self.xcoms[(self.task_id, key)] = value

    def xcom_pull(self, task_ids: str, key: str = "return_value", dag_id=None, run_id=None, map_indexes=None):
        if dag_id is not None or run_id is not None:
            index = -1 if map_indexes is None else map_indexes
            return self.xcoms.get((dag_id, run_id, task_ids, index, key))
        return self.xcoms.get((task_ids, key))


@pytest.fixture
def restart_run(tmp_path, monkeypatch, api_server):
    """A planned kafka_broker_restart run: its roll-state file and plan XCom; policy from a dict;
    Airflow's API server at 15:00:00 (``run.api``), each task instance's state store (``run.stores``)
    and its try (``run.tries``: try number and max_tries, the worker's start in ``run.clock``)."""
    from kafka_runbooks_airflow import gate
    from kafka_runbooks_airflow.operators import gate as gates
    from kafka_runbooks_airflow.run_state import roll_state_file

    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
    settings: dict[str, str] = {}
    for module in (gate, gates):  # the glue's check and the gate operators read it
        monkeypatch.setattr(module, "load_policy", lambda: rules.load_policy(settings.get, {}))
    dag = _dag("kafka_broker_restart")
    run_id = "manual__2026-11-23T15:00:00+00:00"
    roll_state_file(dag.dag_id, run_id).write_text(
        json.dumps(
            {
                "reason": "unit",
                "order": [2, 1],
                "nodes": {"1": {"node_id": 1, "role": "broker"}, "2": {"node_id": 2, "role": "broker"}},
                "options": {"dry_run": False, "allow_force_restart": False},
            }
        )
    )

    conf: dict = {}  # the run's conf (upstream_approvals of a run started by another run's gate)
    clock = {"started": datetime(2026, 11, 23, 15, 2, tzinfo=UTC)}  # the worker's start of a task
    stores: dict[str, TaskStateStore] = {}
    tries: dict[str, tuple[int, int]] = {}  # task_id -> (try_number, max_tries); default (1, 0)

    def context(task_id: str, xcoms: dict, triggered_by: str | None = "bob", **params):
        try_number, max_tries = tries.get(task_id, (1, 0))
        return {
            "dag": dag,
            "run_id": run_id,
            "ti": FakeTI(
                task_id, xcoms, start_date=clock["started"], try_number=try_number, max_tries=max_tries
            ),
            "task_state_store": stores.setdefault(task_id, TaskStateStore()),
            "dag_run": SimpleNamespace(triggering_user_name=triggered_by, conf=conf),
            "params": {"require_approval": True, "dry_run": False, "approval_timeout_s": 30, **params},
        }

    xcoms = {("plan_restart", "return_value"): {"order": [2, 1], "dry_run": False}}
    stored: dict[str, str] = {}  # the question Airflow keeps for the gate (its first try's)
    asked: list[str] = []  # every time the gate wrote its question

    def show_question(operator, ti_id):
        asked.append(ti_id)
        return stored.setdefault("body", operator.body)

    monkeypatch.setattr(gates, "show_question", show_question)
    return SimpleNamespace(
        dag=dag,
        context=context,
        xcoms=xcoms,
        settings=settings,
        run_id=run_id,
        stored=stored,
        conf=conf,
        clock=clock,
        api=api_server,
        stores=stores,
        tries=tries,
        asked=asked,
    )


def _edit_roll(run, **changes) -> None:
    from kafka_runbooks_airflow.run_state import roll_state_file

    path = roll_state_file(run.dag.dag_id, run.run_id)
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def _ask(run, parked_for: int | None = None, **params) -> dict:
    """Run the gate's execute up to the point where it would wait; return its context."""
    from airflow.sdk.exceptions import TaskAwaitingInput

    gate = run.dag.get_task("approval_gate")
    ctx = run.context("approval_gate", run.xcoms, **params)
    ctx["task_instance"] = SimpleNamespace(id="ti-1")
    import airflow.providers.standard.operators.hitl as hitl

    orig = hitl.upsert_hitl_detail
    hitl.upsert_hitl_detail = lambda **kw: None  # the question is written by show_question
    try:
        with pytest.raises(TaskAwaitingInput) as waiting:
            gate.execute(ctx)
    finally:
        hitl.upsert_hitl_detail = orig
        run.xcoms.update(ctx["ti"].xcoms)
    assert waiting.value.timeout == timedelta(seconds=parked_for or params.get("approval_timeout_s", 30))
    assert "Plan digest:** `sha256:" in run.stored["body"]
    return ctx


ANSWERED = datetime(2026, 11, 23, 15, 0, 10, tzinfo=UTC)  # 10 s after the question (API server's clock)


def _event(option: str, by: str | None = "alice", at: datetime = ANSWERED, timedout: bool = False) -> dict:
    """The event Airflow 3.3 resumes a gate with: ``HITLDetail.as_resume_event_payload`` (the Core API's
    answer, the scheduler's timeout sweep) and HITLTrigger's ``HITLTriggerEventSuccessPayload`` alike."""
    return {
        "chosen_options": [option],
        "params_input": {},
        "responded_at": at,
        "responded_by_user": {"id": by, "name": by} if by else None,
        "timedout": timedout,
    }


def _answer(run, option: str, by: str = "alice", triggered_by: str | None = "bob", at: datetime = ANSWERED):
    gate = run.dag.get_task("approval_gate")
    ctx = run.context("approval_gate", run.xcoms, triggered_by=triggered_by)
    event = _event(option, by, at)
    try:
        return gate.execute_complete(ctx, event), ctx
    finally:
        run.xcoms.update(ctx["ti"].xcoms)
        run.api.now = max(run.api.now, at + timedelta(minutes=1))  # the roll starts after the answer


def _clear_gate(run) -> None:
    """A Clear of the gate: Airflow deletes its XComs at the new try's start and raises max_tries to
    the try number plus the task's retries (the task state store it keeps)."""
    try_number, _ = run.tries.get("approval_gate", (1, 0))
    retries = run.dag.get_task("approval_gate").retries
    run.tries["approval_gate"] = (try_number + 1, try_number + retries)
    run.xcoms = {k: v for k, v in run.xcoms.items() if k[0] != "approval_gate"}


def _roll_check(run, triggered_by: str | None = "bob"):
    from kafka_runbooks_airflow.gate import require_approval

    return require_approval(
        run.context("rolling_restart", run.xcoms, triggered_by=triggered_by), "restart", "approval_gate"
    )


def test_reject_fails_the_gate_and_the_roll_refuses(restart_run):
    from airflow.sdk.exceptions import AirflowFailException

    _ask(restart_run)
    with pytest.raises(AirflowFailException, match="rejected by alice"):
        _answer(restart_run, REJECT)
    record = restart_run.xcoms[("approval_gate", "approval")]
    assert (
        record["outcome"] == rules.REJECTED
        and record["by"]["id"] == "alice"
        and record["triggered_by"] == "bob"
    )
    with pytest.raises(AirflowFailException, match="'rejected'"):
        _roll_check(restart_run)


def test_an_approval_lets_the_roll_act_until_the_plan_changes(restart_run):
    from airflow.sdk.exceptions import AirflowFailException

    _ask(restart_run)
    record, _ = _answer(restart_run, APPROVE)
    assert record["outcome"] == rules.APPROVED and record["digest"].startswith("sha256:")
    assert record["digest"] in restart_run.stored["body"]  # the digest shown is the one approved
    assert _roll_check(restart_run)["by"]["id"] == "alice"
    _edit_roll(restart_run, order=[1, 2])  # planned again differently, or edited by hand
    with pytest.raises(AirflowFailException, match="the plan changed since the gate"):
        _roll_check(restart_run)
    _edit_roll(restart_run, order=[2, 1], options={"dry_run": False, "allow_force_restart": True})
    with pytest.raises(AirflowFailException, match="the plan changed since the gate"):
        _roll_check(restart_run)


def test_a_plan_that_changed_while_the_gate_waited_is_not_approved(restart_run):
    from airflow.sdk.exceptions import AirflowFailException

    _ask(restart_run)
    _edit_roll(restart_run, order=[1, 2])
    with pytest.raises(AirflowFailException, match="the plan changed while the gate waited"):
        _answer(restart_run, APPROVE)
    assert restart_run.xcoms[("approval_gate", "approval")]["outcome"] == rules.REFUSED


def test_a_cleared_gate_asks_again_but_never_under_an_old_question_for_another_plan(restart_run):
    """Airflow keeps a cleared gate's first question: the same plan may be asked under it, a
    different plan may not (the approver would approve what they were not shown)."""
    from airflow.sdk.exceptions import AirflowFailException

    _ask(restart_run)
    with pytest.raises(AirflowFailException, match="rejected by alice"):
        _answer(restart_run, REJECT)
    shown = restart_run.stored["body"]
    # whole run cleared, the same roll resumed: asked again under the same question
    _clear_gate(restart_run)
    _ask(restart_run)
    assert restart_run.stored["body"] == shown
    record, _ = _answer(restart_run, APPROVE)
    assert record["outcome"] == rules.APPROVED and record["digest"] in shown
    # cleared again, and planned differently: the kept question shows the old plan: refused
    _clear_gate(restart_run)
    _edit_roll(restart_run, order=[1, 2])
    gate = restart_run.dag.get_task("approval_gate")
    ctx = restart_run.context("approval_gate", restart_run.xcoms)
    ctx["task_instance"] = SimpleNamespace(id="ti-1")
    with pytest.raises(AirflowFailException, match="question from an earlier try"):
        gate.execute(ctx)
    assert ctx["ti"].xcoms[("approval_gate", "approval")]["outcome"] == rules.REFUSED


TIMEOUT_EVENT = {  # the scheduler's awaiting_input sweep, no response and no defaults
    "error": "The Human-in-the-loop response timeout has passed without a response.",
    "error_type": "timeout",
}


def test_a_timeout_fails_the_gate_and_names_the_timeout(restart_run):
    from airflow.sdk.exceptions import AirflowFailException

    _ask(restart_run)  # at 15:00:00, 30 s to answer
    restart_run.api.now = datetime(2026, 11, 23, 15, 0, 31, tzinfo=UTC)
    gate = restart_run.dag.get_task("approval_gate")
    ctx = restart_run.context("approval_gate", restart_run.xcoms)
    with pytest.raises(AirflowFailException, match=r"not approved within 0:00:30"):
        gate.execute_complete(ctx, TIMEOUT_EVENT)
    assert ctx["ti"].xcoms[("approval_gate", "approval")]["outcome"] == rules.TIMED_OUT


def test_a_gate_parks_a_minute_at_a_time_until_its_own_deadline(restart_run, monkeypatch):
    """On a SQLite metadata database an answer given while the gate parks can be recorded without
    resuming it (no row locks: seen on the e2e Airflow); Airflow would take it only at the deadline.
    So the gate parks at most RECHECK at a time and looks again until its deadline, on the API
    server's clock; a resume that brings the recorded answer is judged as any other."""
    from airflow.sdk.exceptions import TaskAwaitingInput

    from kafka_runbooks_airflow.operators import gate as gates

    monkeypatch.setattr(gates, "RECHECK", timedelta(seconds=10))
    ctx = _ask(restart_run, approval_timeout_s=30, parked_for=10)
    gate = restart_run.dag.get_task("approval_gate")
    restart_run.api.now = datetime(2026, 11, 23, 15, 0, 24, tzinfo=UTC)
    ctx = restart_run.context("approval_gate", restart_run.xcoms)
    with pytest.raises(TaskAwaitingInput) as again:
        gate.execute_complete(ctx, TIMEOUT_EVENT)
    assert again.value.timeout == timedelta(seconds=6)  # what is left of the 30 s
    assert ("approval_gate", "approval") not in ctx["ti"].xcoms  # nothing decided
    record, _ = _answer(restart_run, APPROVE, at=datetime(2026, 11, 23, 15, 0, 3, tzinfo=UTC))
    assert record["outcome"] == rules.APPROVED


def test_four_eyes_an_approval_by_the_triggering_user_does_not_count(restart_run):
    from airflow.sdk.exceptions import AirflowFailException

    restart_run.settings[rules.FOUR_EYES_VARIABLE] = "true"
    _ask(restart_run)
    with pytest.raises(AirflowFailException, match="four-eyes is on and alice triggered this run"):
        _answer(restart_run, APPROVE, by="alice", triggered_by="alice")
    record = restart_run.xcoms[("approval_gate", "approval")]
    assert (
        record["outcome"] == rules.REFUSED
        and record["by"]["id"] == "alice"
        and record["triggered_by"] == "alice"
    )
    with pytest.raises(AirflowFailException):
        _roll_check(restart_run, triggered_by="alice")
    _clear_gate(restart_run)  # asked again: someone else approves
    _ask(restart_run)
    record, _ = _answer(restart_run, APPROVE, by="carol", triggered_by="alice")
    assert record["outcome"] == rules.APPROVED
    assert _roll_check(restart_run, triggered_by="alice")["by"]["id"] == "carol"


def test_an_ungated_run_passes_the_gate_only_where_the_deployment_allows_it(restart_run):
    from airflow.sdk.exceptions import AirflowFailException

    gate = restart_run.dag.get_task("approval_gate")
    ctx = restart_run.context("approval_gate", restart_run.xcoms, require_approval=False)
    with pytest.raises(AirflowFailException, match="require_approval=false is not allowed"):
        gate.execute(ctx)
    restart_run.settings[rules.ALLOW_UNGATED_VARIABLE] = "true"
    ctx = restart_run.context("approval_gate", restart_run.xcoms, require_approval=False)
    assert gate.execute(ctx) is None  # no question asked
    restart_run.xcoms.update(ctx["ti"].xcoms)
    assert restart_run.xcoms[("approval_gate", "approval")]["outcome"] == rules.NOT_REQUIRED
    roll_ctx = restart_run.context("rolling_restart", restart_run.xcoms, require_approval=False)
    from kafka_runbooks_airflow.gate import require_approval

    assert require_approval(roll_ctx, "restart", "approval_gate")["outcome"] == rules.NOT_REQUIRED
    restart_run.settings[rules.ALLOW_UNGATED_VARIABLE] = "false"  # withdrawn before the roll started
    with pytest.raises(AirflowFailException, match="ungated runs are not allowed"):
        require_approval(roll_ctx, "restart", "approval_gate")


# -- a run started by another run's approved decision; an approval that expired -------------

SWEEP_RUN = ("kafka_metadata_error_sweep", "scheduled__2026-11-23T14:45:00+00:00")


def _started_by_a_sweep_gate(run, approver: str = "alice", recorded_by: str | None = None) -> dict:
    """The run's conf names the sweep gate's approval; that gate's record (its XCom) says ``recorded_by``."""
    entry = {
        "user": {"id": approver, "name": approver},
        "at": "2026-11-23T14:50:00+00:00",
        "dag_id": SWEEP_RUN[0],
        "run_id": SWEEP_RUN[1],
        "task_id": "cluster.controller_decision",
        "map_index": 0,
    }
    run.conf[rules.UPSTREAM_KEY] = [entry]
    if recorded_by is not None:
        who = {"id": recorded_by, "name": recorded_by}
        parent = {"outcome": rules.APPROVED, "by": who, "at": entry["at"], "digest": "sha256:parent"}
        run.xcoms[(*SWEEP_RUN, "cluster.controller_decision", 0, "approval")] = parent
    return entry


def test_four_eyes_nobody_who_approved_the_decision_that_started_the_run_may_approve_it(restart_run):
    """Airflow gives the child the sweep's triggering user (None): only the chain excludes alice."""
    from airflow.sdk.exceptions import AirflowFailException

    restart_run.settings[rules.FOUR_EYES_VARIABLE] = "true"
    entry = _started_by_a_sweep_gate(restart_run, "alice", recorded_by="alice")
    _ask(restart_run)
    with pytest.raises(AirflowFailException, match="alice approved the decision that started this run"):
        _answer(restart_run, APPROVE, by="alice", triggered_by=None)
    assert restart_run.xcoms[("approval_gate", "approval")]["outcome"] == rules.REFUSED
    with pytest.raises(AirflowFailException, match="nothing was done"):
        _roll_check(restart_run, triggered_by=None)
    _clear_gate(restart_run)
    _ask(restart_run)
    record, _ = _answer(restart_run, APPROVE, by="carol", triggered_by=None)
    assert record["outcome"] == rules.APPROVED and record[rules.UPSTREAM_KEY] == [entry]
    assert _roll_check(restart_run, triggered_by=None)["by"]["id"] == "carol"
    restart_run.conf[rules.UPSTREAM_KEY] = []  # the chain is bound into the approved plan
    with pytest.raises(AirflowFailException, match="the plan changed since the gate"):
        _roll_check(restart_run, triggered_by=None)


def test_a_chain_the_parent_gate_did_not_record_is_refused(restart_run):
    """A person may trigger the run by hand with any conf: the parent gate's own record decides."""
    from airflow.sdk.exceptions import AirflowFailException

    _started_by_a_sweep_gate(restart_run, "bob")  # no record at that gate
    _ask(restart_run)
    with pytest.raises(AirflowFailException, match="that its gate did not record"):
        _answer(restart_run, APPROVE, by="carol")
    _started_by_a_sweep_gate(restart_run, "bob", recorded_by="alice")
    _clear_gate(restart_run)
    _ask(restart_run)
    with pytest.raises(AirflowFailException, match="but that gate recorded alice at"):
        _answer(restart_run, APPROVE, by="carol")
    assert restart_run.xcoms[("approval_gate", "approval")]["outcome"] == rules.REFUSED


def _at(hour: int, minute: int, second: int = 0) -> datetime:
    return datetime(2026, 11, 23, hour, minute, second, tzinfo=UTC)


def test_an_expired_approval_sends_a_cleared_roll_back_to_its_gate(restart_run, caplog):
    """Approved 15:00:10 (the HITL answer's time, API server's clock); the roll's work first started
    when its first approval check read the API server's clock; a clear starts a new run of tries."""
    from airflow.sdk.exceptions import AirflowFailException

    _ask(restart_run)
    _answer(restart_run, APPROVE)
    restart_run.api.now = _at(15, 2)
    assert _roll_check(restart_run)["by"]["id"] == "alice"
    restart_run.tries["rolling_restart"] = (2, 1)  # cleared an hour later: Airflow raised max_tries
    restart_run.api.now = _at(16, 0, 11)
    with pytest.raises(
        AirflowFailException, match=r"approved at 2026-11-23T15:00:10\+00:00, expired after 1:00:00"
    ):
        _roll_check(restart_run)
    assert "DECISION approval [rolling_restart]: refuse to act because approved at" in caplog.text
    restart_run.settings[rules.MAX_AGE_VARIABLE] = "7200"
    assert _roll_check(restart_run)["by"]["id"] == "alice"


def test_the_approvals_age_is_on_the_api_servers_clock_never_the_workers(restart_run):
    """Issue #37: a worker 50 minutes behind the API server let a 1 h 40 min old approval pass a 1 h
    limit (the age was responded_at, API server, against ti.start_date, which the worker stamps)."""
    from airflow.sdk.exceptions import AirflowFailException

    _ask(restart_run)
    _answer(restart_run, APPROVE, at=_at(15, 0, 10))
    restart_run.api.now = _at(16, 40, 10)  # the roll starts 1 h 40 min after the answer ...
    restart_run.clock["started"] = _at(15, 50, 10)  # ... on a worker 50 minutes behind
    with pytest.raises(
        AirflowFailException, match=r"expired after 1:00:00.*work first started at 2026-11-23T16:40:10"
    ):
        _roll_check(restart_run)
    # and a worker ahead of it does not expire a fresh approval
    restart_run.tries["rolling_restart"] = (2, 1)
    restart_run.api.now, restart_run.clock["started"] = _at(15, 5), _at(17, 0)
    assert _roll_check(restart_run)["by"]["id"] == "alice"


def test_an_unknown_time_never_counts_as_fresh(restart_run, caplog, monkeypatch):
    """The API server's clock unreadable (down, no Date, not the health route), or a record whose
    time has no clock: the approval does not count, and the DECISION record says why."""
    from airflow.sdk.exceptions import AirflowFailException

    from kafka_runbooks_airflow import api_clock

    _ask(restart_run)
    _answer(restart_run, APPROVE)
    restart_run.api.date = "soon"
    with pytest.raises(AirflowFailException, match="without a readable Date header"):
        _roll_check(restart_run)
    assert "DECISION approval [rolling_restart]: refuse to act because GET http://127.0.0.1" in caplog.text
    restart_run.api.date, restart_run.api.status = None, 503
    monkeypatch.setattr(api_clock, "PAUSE_S", 0)
    with pytest.raises(AirflowFailException, match=r"could not be read: .* failed 3 times, last: HTTP 503"):
        _roll_check(restart_run)
    restart_run.api.status = 200
    record = restart_run.xcoms[("approval_gate", "approval")]
    restart_run.xcoms[("approval_gate", "approval")] = {k: v for k, v in record.items() if k != "at_clock"}
    with pytest.raises(AirflowFailException, match="stamped by an unrecorded clock"):
        _roll_check(restart_run)
    restart_run.xcoms[("approval_gate", "approval")] = record
    assert _roll_check(restart_run)["by"]["id"] == "alice"
    no_store = restart_run.context("rolling_restart", restart_run.xcoms)
    del no_store["task_state_store"]
    from kafka_runbooks_airflow.gate import require_approval

    with pytest.raises(AirflowFailException, match="has no task state store"):
        require_approval(no_store, "restart", "approval_gate")


def test_a_rescheduled_sensor_ages_the_approval_from_its_first_poke(restart_run):
    """The roll re-checks at every poke (and a retry re-checks): the age is judged at the first
    check of this run of tries, kept in the task state store (a task's own XComs are deleted at
    each poke), so a long roll does not expire half-way; a clear judges it again."""
    from airflow.sdk.exceptions import AirflowFailException

    _ask(restart_run)
    _answer(restart_run, APPROVE)
    restart_run.api.now = _at(15, 2)
    assert _roll_check(restart_run)["by"]["id"] == "alice"  # the first poke
    restart_run.api.now = restart_run.clock["started"] = _at(18, 0)  # a poke three hours later
    assert _roll_check(restart_run)["by"]["id"] == "alice"
    restart_run.tries["rolling_restart"] = (2, 0)  # a retry (Airflow keeps max_tries)
    assert _roll_check(restart_run)["by"]["id"] == "alice"
    restart_run.tries["rolling_restart"] = (3, 2)  # a clear
    with pytest.raises(AirflowFailException, match="expired after 1:00:00"):
        _roll_check(restart_run)


def test_an_answer_after_the_gates_deadline_times_the_gate_out(restart_run):
    """Issue #37: Airflow resumes a gate with an answer given after its deadline (the scheduler's
    timeout sweep resumes with any response it finds, so does HITLTrigger's timeout path); the gate
    recorded its deadline on the API server's clock when it asked and judges the answer's time."""
    from airflow.sdk.exceptions import AirflowFailException

    _ask(restart_run)  # asked at 15:00:00 (API server), 30 s to answer
    with pytest.raises(
        AirflowFailException,
        match=r"not approved within 0:00:30: alice answered at 2026-11-23T15:00:31\+00:00, after the "
        r"deadline 2026-11-23T15:00:30\+00:00",
    ):
        _answer(restart_run, APPROVE, at=_at(15, 0, 31))
    record = restart_run.xcoms[("approval_gate", "approval")]
    assert (record["outcome"], record["by"]["id"], record["at"]) == (
        rules.TIMED_OUT,
        "alice",
        "2026-11-23T15:00:31+00:00",
    )
    with pytest.raises(AirflowFailException, match="'timed_out'"):
        _roll_check(restart_run)
    asked = restart_run.xcoms[("approval_gate", "approval_request")]
    assert (asked["deadline"], asked["deadline_clock"]) == (
        "2026-11-23T15:00:30+00:00",
        "Airflow's API server",
    )


def test_a_default_airflow_applied_at_the_timeout_is_no_approval(restart_run):
    """The timeout sweep (and HITLTrigger) apply a gate's defaults as its answer: ``timedout`` true,
    nobody responded. That is a timeout, never an approval."""
    from airflow.sdk.exceptions import AirflowFailException

    _ask(restart_run)
    gate = restart_run.dag.get_task("approval_gate")
    ctx = restart_run.context("approval_gate", restart_run.xcoms)
    with pytest.raises(AirflowFailException, match="not approved within 0:00:30"):
        gate.execute_complete(ctx, _event(APPROVE, by=None, at=_at(15, 0, 30), timedout=True))
    assert ctx["ti"].xcoms[("approval_gate", "approval")]["outcome"] == rules.TIMED_OUT


def test_a_gate_asks_nothing_when_the_api_servers_clock_cannot_be_read(restart_run, monkeypatch):
    from airflow.sdk.exceptions import AirflowFailException

    from kafka_runbooks_airflow import api_clock

    restart_run.api.date = ""
    monkeypatch.setattr(api_clock, "PAUSE_S", 0)
    gate = restart_run.dag.get_task("approval_gate")
    ctx = restart_run.context("approval_gate", restart_run.xcoms)
    ctx["task_instance"] = SimpleNamespace(id="ti-1")
    with pytest.raises(AirflowFailException, match="nothing was asked: the gate's deadline cannot be set"):
        gate.execute(ctx)
    assert (
        restart_run.asked == [] and ctx["ti"].xcoms[("approval_gate", "approval")]["outcome"] == rules.REFUSED
    )


def test_the_answered_gates_record_keeps_who_when_on_which_clock_and_what(restart_run):
    _ask(restart_run)
    record, _ = _answer(restart_run, APPROVE, by="carol")
    assert {k: record[k] for k in ("by", "at", "at_clock", "chosen_options", "deadline")} == {
        "by": {"id": "carol", "name": "carol"},
        "at": "2026-11-23T15:00:10+00:00",
        "at_clock": "Airflow's API server",
        "chosen_options": [APPROVE],
        "deadline": "2026-11-23T15:00:30+00:00",
    }


def test_every_runbook_gate_offers_options_that_say_what_each_does():
    """Issue #39 point 7: Airflow's bare "Approve" and "Reject" looked alike; every runbook's gate offers
    the two options of kafka_runbooks.approval, and the decision gates options of their own."""
    from airflow.dag_processing.dagbag import DagBag

    from kafka_runbooks_airflow.operators.gate import PlanApprovalOperator, _PlanGate

    bag = DagBag(dag_folder=str(ROOT / "dags"), safe_mode=False)
    assert bag.import_errors == {}
    gates = [t for dag in bag.dags.values() for t in dag.tasks if isinstance(t, _PlanGate)]
    plain = [t for t in gates if isinstance(t, PlanApprovalOperator)]
    assert len(plain) >= 5 and {tuple(t.options) for t in plain} == {rules.GATE_OPTIONS}
    assert {t.approve_option for t in plain} == {"Approve: run the plan"}
    assert rules.GATE_OPTIONS == ("Approve: run the plan", "Reject: do nothing")
    assert all(t.approve_option in t.options and "Approve" not in t.options for t in gates)


def test_the_answered_gate_says_who_chose_which_option_and_when(restart_run, caplog):
    """The decision line of an answered gate names the user, the option as chosen and the API server's
    time of the answer, from the record that decides the outcome (it said only "approved by carol")."""
    from airflow.sdk.exceptions import AirflowFailException

    _ask(restart_run)
    record, _ = _answer(restart_run, APPROVE, by="carol")
    said = "approved by carol (chose 'Approve: run the plan') at 2026-11-23T15:00:10+00:00"
    assert record["reason"] == said
    assert f"DECISION approval [approval_gate]: approved because {said}" in caplog.text
    _clear_gate(restart_run)
    _ask(restart_run)
    with pytest.raises(AirflowFailException, match="rejected by alice"):
        _answer(restart_run, REJECT)
    said = "rejected by alice (chose 'Reject: do nothing') at 2026-11-23T15:00:10+00:00"
    assert restart_run.xcoms[("approval_gate", "approval")]["reason"] == said
    assert f"DECISION approval [approval_gate]: rejected because {said}" in caplog.text


@pytest.mark.parametrize(("option", "outcome"), [("Approve", rules.APPROVED), ("Reject", rules.REJECTED)])
def test_an_answer_in_the_earlier_words_still_means_the_same(restart_run, option, outcome):
    """A gate asked before the options were renamed offered (Airflow keeps its question) the bare
    "Approve"/"Reject": its answer still counts as that choice, and the record keeps it as given."""
    from airflow.sdk.exceptions import AirflowFailException

    _ask(restart_run)
    if outcome == rules.APPROVED:
        record, _ = _answer(restart_run, option)
        assert _roll_check(restart_run)["by"]["id"] == "alice"
    else:
        with pytest.raises(AirflowFailException, match="rejected by alice"):
            _answer(restart_run, option)
        record = restart_run.xcoms[("approval_gate", "approval")]
    assert (record["outcome"], record["chosen_options"]) == (outcome, [option])
    assert f"(chose '{option}')" in record["reason"]
    assert rules.chose([option], rules.APPROVE_OPTION) is (outcome == rules.APPROVED)


# -- a gate's try Airflow 3.3.2 lost after its answer (apache/airflow#67287) ------------------


def _lost_try_then_retry(run):
    """Try 1 asked; Airflow failed it before its answer reached the gate; try 2 starts (a retry keeps
    max_tries) and, instead of asking again, defers for the answer Airflow kept."""
    from airflow.sdk.exceptions import TaskDeferred

    _ask(run)
    run.xcoms = {k: v for k, v in run.xcoms.items() if k[0] != "approval_gate"}  # deleted at try 2's start
    run.tries["approval_gate"] = (2, 2)
    gate = run.dag.get_task("approval_gate")
    ctx = run.context("approval_gate", run.xcoms)
    ctx["task_instance"] = SimpleNamespace(id="ti-2")
    import airflow.providers.standard.operators.hitl as hitl

    original, hitl.upsert_hitl_detail = hitl.upsert_hitl_detail, lambda **kw: run.asked.append(kw["ti_id"])
    try:  # a question written again (Airflow's upsert erases the kept answer) is counted in run.asked
        with pytest.raises(TaskDeferred) as deferred:
            gate.execute(ctx)
    finally:
        hitl.upsert_hitl_detail = original
    run.xcoms.update(ctx["ti"].xcoms)
    return deferred.value


def test_a_retry_of_a_lost_try_takes_the_kept_answer_without_asking_again(restart_run, caplog, monkeypatch):
    from airflow._shared.module_loading import import_string

    # the settle outlasts the report of the retry's own deferral: 3 x the supervisor's heartbeat
    monkeypatch.setenv("AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL", "5")
    restart_run.tries["approval_gate"] = (1, 2)  # the gates retry (GATE_RETRIES)
    deferred = _lost_try_then_retry(restart_run)
    assert restart_run.asked == ["ti-1"]  # not asked again: that would erase the kept answer
    path, kwargs = deferred.trigger.serialize()
    assert path == "kafka_runbooks_airflow.operators.gate.KeptAnswerTrigger"
    trigger = import_string(path)(**kwargs)  # as the triggerer builds it
    assert (kwargs["ti_id"], kwargs["settle_s"]) == ("ti-2", 15.0)
    assert trigger.timeout_datetime == datetime(2026, 11, 23, 15, 0, 30, tzinfo=UTC)
    assert "take the answer Airflow kept because try 1 of this gate asked at" in caplog.text
    record, _ = _answer(restart_run, APPROVE)  # what the trigger resumes the gate with
    assert record["outcome"] == rules.APPROVED and record["digest"] in restart_run.stored["body"]
    assert _roll_check(restart_run)["by"]["id"] == "alice"


def test_the_kept_answer_trigger_waits_then_resumes_with_the_answer_airflow_kept(monkeypatch):
    """The trigger reads the gate's HITL detail (Airflow's HITLDetailResponse) after its settle time."""
    import asyncio

    import airflow.providers.standard.triggers.hitl as hitl_triggers
    from airflow.sdk.api.datamodels._generated import HITLDetailResponse, HITLUser

    from kafka_runbooks_airflow.operators.gate import KeptAnswerTrigger

    answered = HITLDetailResponse(
        response_received=True,
        responded_by_user=HITLUser(id="alice", name="alice"),
        responded_at=ANSWERED,
        chosen_options=[APPROVE],
        params_input={},
    )
    monkeypatch.setattr(hitl_triggers, "get_hitl_detail_content_detail", lambda ti_id: answered)
    trigger = KeptAnswerTrigger(
        ti_id="ti-2", options=[APPROVE, REJECT], params={}, timeout_datetime=None, settle_s=0.01
    )

    async def first():
        async for event in trigger.run():
            return event.payload

    payload = asyncio.run(first())
    assert (payload["chosen_options"], payload["responded_at"], payload["responded_by_user"]["id"]) == (
        [APPROVE],
        ANSWERED,
        "alice",
    )


def test_a_try_lost_after_deciding_is_never_decided_again(restart_run, caplog):
    """Answered and approved in try 1, which Airflow then failed: try 2 restates the record."""
    restart_run.tries["approval_gate"] = (1, 2)
    _ask(restart_run)
    first, _ = _answer(restart_run, APPROVE)
    restart_run.tries["approval_gate"] = (2, 2)
    restart_run.xcoms = {k: v for k, v in restart_run.xcoms.items() if k[0] != "approval_gate"}
    gate = restart_run.dag.get_task("approval_gate")
    ctx = restart_run.context("approval_gate", restart_run.xcoms)
    ctx["task_instance"] = SimpleNamespace(id="ti-2")
    import airflow.providers.standard.operators.hitl as hitl

    original, hitl.upsert_hitl_detail = (
        hitl.upsert_hitl_detail,
        lambda **kw: restart_run.asked.append("again"),
    )
    try:
        restated = gate.execute(ctx)
    finally:
        hitl.upsert_hitl_detail = original
    assert restated == first and restart_run.asked == ["ti-1"]
    restart_run.xcoms.update(ctx["ti"].xcoms)
    assert caplog.text.count("DECISION approval [approval_gate]: approved because") == 1
    assert (
        f"keep the recorded answer because approved: approved by alice (chose '{APPROVE}') at " in caplog.text
    )
    # a second delivery of an answer (answered twice) changes nothing either
    record, _ = _answer(restart_run, REJECT, by="carol", at=_at(15, 0, 12))
    assert record == first and caplog.text.count("DECISION approval [approval_gate]: approved because") == 1
    assert _roll_check(restart_run)["by"]["id"] == "alice"


def test_a_cleared_gate_asks_again_whatever_an_earlier_run_of_tries_kept(restart_run):
    restart_run.tries["approval_gate"] = (1, 2)
    _ask(restart_run)
    _answer(restart_run, APPROVE)
    _clear_gate(restart_run)  # max_tries = try number 1 + retries 2
    assert restart_run.tries["approval_gate"] == (2, 3)
    _ask(restart_run)
    assert restart_run.asked == ["ti-1", "ti-1"]
    with pytest.raises(Exception, match="rejected by carol"):
        _answer(restart_run, REJECT, by="carol")


# -- PlanDecisionBranchOperator: a choice between a destructive option and a harmless one ----

RESTART_IT, LEAVE_IT = "Restart it", "Leave it"


@pytest.fixture
def decision(monkeypatch, api_server):
    """A PlanDecisionBranchOperator alone in a DAG, gating the escalation of a sweep's XCom."""
    import pendulum
    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.sdk import DAG

    from kafka_runbooks_airflow import gate
    from kafka_runbooks_airflow.operators import gate as gates

    settings: dict[str, str] = {}
    for module in (gate, gates):  # the glue's check and the gate operators read it
        monkeypatch.setattr(module, "load_policy", lambda: rules.load_policy(settings.get, {}))
    monkeypatch.setattr(gates, "show_question", lambda operator, ti_id: operator.body)
    with DAG("kafka_metadata_error_sweep", schedule=None, start_date=pendulum.datetime(2026, 1, 1)) as dag:
        op = gates.PlanDecisionBranchOperator(
            task_id="decide",
            action_kind="controller",
            approve_option=RESTART_IT,
            options=[RESTART_IT, LEAVE_IT],
            options_mapping={RESTART_IT: "restart_it", LEAVE_IT: "leave_it"},
            subject="Active controller",
            response_timeout=timedelta(hours=1),
        )
        op >> [EmptyOperator(task_id="restart_it"), EmptyOperator(task_id="leave_it")]
    branched: list[list[str]] = []
    monkeypatch.setattr(
        op, "do_branch", lambda context, branches_to_execute: branched.append(branches_to_execute)
    )
    escalation = {
        "node_id": 9001,
        "trigger_run_id": "metadata_errors__kafka_default__controller_9001__r1",
        "conf": {"node_ids": "9001", "kafka_config_id": "kafka_default", "require_approval": True},
        "reason": "KIP-859 metadata errors increasing on the active controller 9001",
    }
    xcoms = {("sweep", "controller_escalation"): escalation}
    stores: dict[str, TaskStateStore] = {}
    api_server.now = datetime(2026, 11, 24, 10, 4, tzinfo=UTC)  # asked at 10:04, answered at 10:05

    def context(task_id: str = "decide", triggered_by: str | None = "bob"):
        return {
            "dag": dag,
            "run_id": "scheduled__2026-11-24T10:00:00+00:00",
            "ti": FakeTI(task_id, xcoms, start_date=datetime(2026, 11, 24, 10, 6, tzinfo=UTC)),
            "task_state_store": stores.setdefault(task_id, TaskStateStore()),
            "task_instance": SimpleNamespace(id="ti-9"),
            "dag_run": SimpleNamespace(triggering_user_name=triggered_by, conf={}),
            "params": {},
        }

    return SimpleNamespace(
        op=op, context=context, xcoms=xcoms, settings=settings, branched=branched, api=api_server
    )


def _decide(d, option: str | None, by: str = "alice", triggered_by: str | None = "bob"):
    """Ask (up to where the gate waits), then answer ``option`` (None: the gate timed out)."""
    import airflow.providers.standard.operators.hitl as hitl
    from airflow.sdk.exceptions import TaskAwaitingInput

    asking = d.context(triggered_by=triggered_by)
    original, hitl.upsert_hitl_detail = hitl.upsert_hitl_detail, lambda **kw: None
    try:
        with pytest.raises(TaskAwaitingInput):
            d.op.execute(asking)
    finally:
        hitl.upsert_hitl_detail = original
        d.xcoms.update(asking["ti"].xcoms)
    answering = d.context(triggered_by=triggered_by)
    if option is None:
        d.api.now = datetime(2026, 11, 24, 11, 4, 1, tzinfo=UTC)  # past the hour the gate gave
        event = {"error": "The response timeout has passed", "error_type": "timeout"}
    else:
        event = {
            "chosen_options": [option],
            "params_input": {},
            "responded_at": datetime(2026, 11, 24, 10, 5, tzinfo=UTC),
            "responded_by_user": {"id": by, "name": by},
        }
    try:
        return d.op.execute_complete(answering, event)
    finally:
        d.xcoms.update(answering["ti"].xcoms)
        d.api.now = datetime(2026, 11, 24, 10, 6, tzinfo=UTC)  # the restart task starts after the answer


def _act(d):
    from kafka_runbooks_airflow.gate import require_approval

    return require_approval(d.context("restart_it"), "controller", "decide")


def test_the_destructive_option_is_an_approval_of_the_plan_and_takes_its_branch(decision):
    _decide(decision, RESTART_IT)
    record = decision.xcoms[("decide", "approval")]
    assert record["outcome"] == rules.APPROVED and record["by"]["id"] == "alice"
    assert record["digest"] in decision.op.body  # the digest shown is the one approved
    assert decision.branched == [["restart_it"]]
    assert _act(decision)["by"]["id"] == "alice"


def test_the_harmless_option_is_recorded_as_rejected_and_takes_its_own_branch(decision):
    from airflow.sdk.exceptions import AirflowFailException

    _decide(decision, LEAVE_IT)
    record = decision.xcoms[("decide", "approval")]
    assert (record["outcome"], record["reason"]) == (
        rules.REJECTED,
        "rejected by alice (chose 'Leave it') at 2026-11-24T10:05:00+00:00",
    )
    assert decision.branched == [["leave_it"]]
    with pytest.raises(AirflowFailException, match="nothing was done"):
        _act(decision)  # no destructive step on a 'Leave it'


def test_four_eyes_the_triggering_user_cannot_choose_the_destructive_option(decision):
    from airflow.sdk.exceptions import AirflowFailException

    decision.settings[rules.FOUR_EYES_VARIABLE] = "true"
    with pytest.raises(AirflowFailException, match="four-eyes is on and alice triggered this run"):
        _decide(decision, RESTART_IT, by="alice", triggered_by="alice")
    assert decision.xcoms[("decide", "approval")]["outcome"] == rules.REFUSED
    assert decision.branched == []  # no branch runs


def test_no_answer_in_time_fails_the_gate_and_takes_no_branch(decision):
    from airflow.sdk.exceptions import AirflowFailException

    with pytest.raises(AirflowFailException, match="not approved within 1:00:00"):
        _decide(decision, None)
    assert decision.xcoms[("decide", "approval")]["outcome"] == rules.TIMED_OUT
    assert decision.branched == []


def test_an_escalation_changed_while_the_gate_waited_is_not_approved(decision):
    import airflow.providers.standard.operators.hitl as hitl
    from airflow.sdk.exceptions import AirflowFailException, TaskAwaitingInput

    asking = decision.context()
    original, hitl.upsert_hitl_detail = hitl.upsert_hitl_detail, lambda **kw: None
    try:
        with pytest.raises(TaskAwaitingInput):
            decision.op.execute(asking)
    finally:
        hitl.upsert_hitl_detail = original
    decision.xcoms.update(asking["ti"].xcoms)
    decision.xcoms[("sweep", "controller_escalation")] = {
        **decision.xcoms[("sweep", "controller_escalation")],
        "node_id": 9002,
    }
    event = {
        "chosen_options": [RESTART_IT],
        "params_input": {},
        "responded_at": datetime(2026, 11, 24, 10, 5, tzinfo=UTC),
        "responded_by_user": {"id": "alice", "name": "alice"},
    }
    with pytest.raises(AirflowFailException, match="the plan changed while the gate waited"):
        decision.op.execute_complete(decision.context(), event)
    assert decision.branched == []


def test_the_decision_gate_refuses_an_unknown_plan_or_an_approve_option_it_does_not_offer():
    from kafka_runbooks.errors import BadInput
    from kafka_runbooks_airflow.operators.gate import PlanDecisionBranchOperator

    common = {"task_id": "d", "options": [RESTART_IT, LEAVE_IT], "subject": "q"}
    with pytest.raises(BadInput, match="unknown action_kind 'reboot'"):
        PlanDecisionBranchOperator(action_kind="reboot", approve_option=RESTART_IT, **common)
    with pytest.raises(BadInput, match="approve_option 'Yes' is not one of"):
        PlanDecisionBranchOperator(action_kind="controller", approve_option="Yes", **common)


def test_the_approved_trigger_starts_exactly_the_approved_run_and_only_after_an_approval(
    decision, monkeypatch
):
    from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
    from airflow.sdk.exceptions import AirflowFailException

    from kafka_runbooks_airflow.operators.gate import ApprovedTriggerDagRunOperator

    started: list[tuple[str, dict]] = []
    monkeypatch.setattr(
        TriggerDagRunOperator,
        "execute",
        lambda self, context: started.append((self.trigger_run_id, self.conf)),
    )
    escalation = decision.xcoms[("sweep", "controller_escalation")]

    def trigger(**changes) -> ApprovedTriggerDagRunOperator:
        fields = {"trigger_run_id": escalation["trigger_run_id"], "conf": dict(escalation["conf"]), **changes}
        return ApprovedTriggerDagRunOperator(
            task_id=f"restart_it_{len(started)}_{len(changes)}",
            trigger_dag_id="kafka_broker_restart",
            action_kind="controller",
            gate_task_id="decide",
            **fields,
        )

    with pytest.raises(AirflowFailException, match="nothing was done"):
        trigger().execute(decision.context("restart_it"))  # no answer yet
    _decide(decision, RESTART_IT)
    with pytest.raises(AirflowFailException, match="not the one approved"):
        trigger(conf={**escalation["conf"], "node_ids": "1"}).execute(decision.context("restart_it"))
    with pytest.raises(AirflowFailException, match="not the one approved"):
        trigger(trigger_run_id="manual__other").execute(decision.context("restart_it"))
    assert started == []
    trigger().execute(decision.context("restart_it"))
    # the started run carries who approved the decision that started it, and where that is recorded
    chain = [
        {
            "user": {"id": "alice", "name": "alice"},
            "at": "2026-11-24T10:05:00+00:00",
            "dag_id": "kafka_metadata_error_sweep",
            "run_id": "scheduled__2026-11-24T10:00:00+00:00",
            "task_id": "decide",
            "map_index": -1,
        }
    ]
    assert started == [(escalation["trigger_run_id"], {**escalation["conf"], "upstream_approvals": chain})]
