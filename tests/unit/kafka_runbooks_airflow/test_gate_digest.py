"""What each gate's digest covers: every input the destructive task reads that changes what it
does or how it checks, and none of the progress it writes while it acts.

For every kind a glue module registers with the gate, a planned run is built from the files and XComs the
destructive task reads; each input is then changed in turn and the digest must change (an
approval of the old plan no longer lets the task act). Progress written by an approved task
must NOT change it (else an approved roll would refuse itself at its next poke).
"""

from __future__ import annotations

import copy
import json
from types import SimpleNamespace

import pytest

RUN_ID = "manual__2026-11-23T15:00:00+00:00"


class FakeTI:
    def __init__(self, xcoms: dict) -> None:
        self.task_id = "act"
        self.xcoms = xcoms

    def xcom_pull(self, task_ids: str, key: str = "return_value"):
        return copy.deepcopy(self.xcoms.get((task_ids, key)))


def _context(dag_id: str, xcoms: dict, params: dict) -> dict:
    return {
        "dag": SimpleNamespace(dag_id=dag_id),
        "run_id": RUN_ID,
        "ti": FakeTI(xcoms),
        "params": params,
    }


GLUE = ("broker_restart", "unclean", "failed_broker", "metadata_errors", "controller_replace")


def _digest(kind: str, context) -> str:
    from kafka_runbooks_airflow.gate import current_action

    return current_action(kind, context)[1]


@pytest.fixture(autouse=True)
def registered_actions():
    """The glue modules register their gate actions when imported (as the DAG files import them)."""
    import importlib

    for name in GLUE:
        importlib.import_module(f"kafka_runbooks_airflow.{name}")


@pytest.fixture(autouse=True)
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
    return tmp_path


def test_every_kind_of_action_is_covered_here():
    from kafka_runbooks_airflow.gate import action_kinds

    # the test-only DAGs (tests/e2e/dags) register theirs when another test in this worker parsed them
    assert [kind for kind in action_kinds() if not kind.startswith("e2e_")] == sorted(CASES)


# ------------------------------------------------------------------ restart

ROLL = {
    "reason": "unit",
    "order": [2, 1],
    "nodes": {
        "1": {"node_id": 1, "role": "broker", "phase": "wait_ready", "attempts": 0},
        "2": {"node_id": 2, "role": "broker", "phase": "wait_ready", "attempts": 0},
    },
    "options": {
        "operation_timeout_s": 300.0,
        "max_attempts": 10,
        "allow_force_restart": False,
        "dry_run": False,
        "quorum_max_lag_ms": 5000,
    },
    "gate_rows": [
        {"node_id": 2, "partitions": 10, "leaders": 4, "under_replicated": 0, "at_min_isr": 0},
        {"node_id": 1, "partitions": 10, "leaders": 6, "under_replicated": 0, "at_min_isr": 0},
    ],
}
RESTART_PARAMS = {
    "require_approval": True,
    "dry_run": False,
    "kafka_config_id": "kafka_default",
    "probe_conn_id": "kafka_broker_probe_default",
    "restart_conn_id": "kafka_restart_default",
}


def _restart(roll: dict, params: dict) -> dict:
    from kafka_runbooks_airflow.run_state import write_roll_state

    write_roll_state("kafka_broker_restart", RUN_ID, json.dumps(roll))
    return _context("kafka_broker_restart", {("plan_restart", "return_value"): {"dry_run": False}}, params)


def _set(doc: dict, path: tuple, value) -> dict:
    doc = copy.deepcopy(doc)
    target = doc
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return doc


RESTART_INPUTS = {
    # the evidence rows the approver was shown (today's main: not covered)
    "evidence: leaders of node 2": ("roll", ("gate_rows", 0, "leaders"), 9),
    "evidence: at-min-ISR partitions": ("roll", ("gate_rows", 1, "at_min_isr"), 3),
    "evidence: rows dropped": ("roll", ("gate_rows",), []),
    "order": ("roll", ("order",), [1, 2]),
    "role": ("roll", ("nodes", "1", "role"), "controller"),
    # issue #25: which nodes are in flight together (a node's lane; absent = alone)
    "lane": ("roll", ("nodes", "1", "lane"), "broker"),
    "reason": ("roll", ("reason",), "another reason"),
    "force restart": ("roll", ("options", "allow_force_restart"), True),
    "operation timeout": ("roll", ("options", "operation_timeout_s"), 5.0),
    "max attempts": ("roll", ("options", "max_attempts"), 1),
    "quorum lag": ("roll", ("options", "quorum_max_lag_ms"), 60000),
    # the connections the sensor acts through (today's main: not covered)
    "cluster": ("params", ("kafka_config_id",), "kafka_other"),
    "probe": ("params", ("probe_conn_id",), None),
    "restart back end": ("params", ("restart_conn_id",), "kafka_restart_other"),
}


@pytest.mark.parametrize("name", sorted(RESTART_INPUTS))
def test_restart_digest_changes_with_every_input_of_the_roll(name):
    where, path, value = RESTART_INPUTS[name]
    before = _digest("restart", _restart(ROLL, RESTART_PARAMS))
    roll = _set(ROLL, path, value) if where == "roll" else ROLL
    params = _set(RESTART_PARAMS, path, value) if where == "params" else RESTART_PARAMS
    assert _digest("restart", _restart(roll, params)) != before, name


def test_restart_digest_ignores_the_progress_of_an_approved_roll():
    before = _digest("restart", _restart(ROLL, RESTART_PARAMS))
    roll = _set(ROLL, ("nodes", "2", "phase"), "wait_isr")
    roll = _set(roll, ("nodes", "2", "attempts"), 3)
    roll["nodes"]["2"]["last_evidence"] = {"process_start_time_seconds": 1.0}
    assert _digest("restart", _restart(roll, RESTART_PARAMS)) == before


# ------------------------------------------------------------------ unclean recovery

DOCUMENT = {
    "mode": "automated_recovery",
    "recovery_election_attempts": 3,
    "choices": [{"topic": "t", "partition": 0, "chosen": 2, "replicas": [1, 2], "rows": []}],
    "artifacts": {"plan": "/x/plan.json"},
}
UNCLEAN_PARAMS = {"kafka_config_id": "kafka_default", "restore_replica_order": True, "settle_period_s": 30}


def _unclean(document: dict, params: dict) -> dict:
    return _context("kafka_unclean_recovery", {("plan_recovery", "return_value"): document}, params)


UNCLEAN_INPUTS = {
    # today's main: the settle period each election must hold for was not covered
    "settle period": ("params", ("settle_period_s",), 0),
    "cluster": ("params", ("kafka_config_id",), "kafka_other"),
    "restore order": ("params", ("restore_replica_order",), False),
    "chosen replica": ("document", ("choices", 0, "chosen"), 1),
    "attempts": ("document", ("recovery_election_attempts",), 1),
    "mode": ("document", ("mode",), "manual"),
}


@pytest.mark.parametrize("name", sorted(UNCLEAN_INPUTS))
def test_unclean_digest_changes_with_every_input_of_the_elections(name):
    where, path, value = UNCLEAN_INPUTS[name]
    before = _digest("unclean", _unclean(DOCUMENT, UNCLEAN_PARAMS))
    document = _set(DOCUMENT, path, value) if where == "document" else DOCUMENT
    params = _set(UNCLEAN_PARAMS, path, value) if where == "params" else UNCLEAN_PARAMS
    assert _digest("unclean", _unclean(document, params)) != before, name


def test_unclean_digest_covers_the_replica_orders_an_earlier_run_left_changed():
    """run_elections restores them too: a change on partitions the plan table does not list."""
    from kafka_runbooks.unclean.elect import ReorderState

    before = _digest("unclean", _unclean(DOCUMENT, UNCLEAN_PARAMS))
    ReorderState("kafka_default").write_entries({"u-3": {"topic": "u", "partition": 3, "original": [3, 1]}})
    assert _digest("unclean", _unclean(DOCUMENT, UNCLEAN_PARAMS)) != before
    ReorderState("kafka_default").write_entries({})
    assert _digest("unclean", _unclean(DOCUMENT, UNCLEAN_PARAMS)) == before
    ReorderState("kafka_other").write_entries({"u-3": {"topic": "u", "partition": 3, "original": [3, 1]}})
    assert _digest("unclean", _unclean(DOCUMENT, UNCLEAN_PARAMS)) == before  # another cluster's


# ------------------------------------------------------------------ reassignment

EXEC = {
    "run_id": RUN_ID,
    "failed_brokers": [4],
    "throttle_bytes_per_sec": 50 << 20,
    "chunks": [{"index": 0, "targets": {"t:0": [1, 2, 3]}, "status": "pending"}],
}
REASSIGN_PARAMS = {"kafka_config_id": "kafka_default"}
CHECKED = {"elect_preferred_leaders": True, "dry_run": False, "require_approval": True}


def _reassign(state: dict, params: dict, checked: dict = CHECKED) -> dict:
    from kafka_runbooks_airflow.run_state import EXEC_STATE, run_dir

    path = run_dir("kafka_failed_broker_reassignment", RUN_ID) / EXEC_STATE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state))
    return _context(
        "kafka_failed_broker_reassignment",
        {("validate", "return_value"): checked, ("review_plan", "return_value"): {"dry_run": False}},
        params,
    )


REASSIGN_INPUTS = {
    "cluster": ("params", ("kafka_config_id",), "kafka_other"),  # today's main: not covered
    "targets": ("state", ("chunks", 0, "targets", "t:0"), [1, 2, 5]),
    "throttle": ("state", ("throttle_bytes_per_sec",), 1),
    "failed brokers": ("state", ("failed_brokers",), [4, 5]),
    "elect preferred leaders": ("checked", ("elect_preferred_leaders",), False),
}


@pytest.mark.parametrize("name", sorted(REASSIGN_INPUTS))
def test_reassign_digest_changes_with_every_input_of_the_moves(name):
    where, path, value = REASSIGN_INPUTS[name]
    before = _digest("reassign", _reassign(EXEC, REASSIGN_PARAMS))
    state = _set(EXEC, path, value) if where == "state" else EXEC
    params = _set(REASSIGN_PARAMS, path, value) if where == "params" else REASSIGN_PARAMS
    checked = _set(CHECKED, path, value) if where == "checked" else CHECKED
    assert _digest("reassign", _reassign(state, params, checked)) != before, name


def test_reassign_digest_ignores_the_progress_of_approved_chunks():
    before = _digest("reassign", _reassign(EXEC, REASSIGN_PARAMS))
    state = _set(EXEC, ("chunks", 0, "status"), "done")
    state["chunks"][0]["started_ms"] = 1
    assert _digest("reassign", _reassign(state, REASSIGN_PARAMS)) == before


def test_reassign_digest_binds_a_rebalances_leader_only_moves(tmp_path):
    """The rebalance's reorders (in its plan's summary.json, applied by verify after the chunks)
    are part of what is approved: another reorder is another plan, and a heal's summary without
    any leaves the digest as it was."""
    plan = tmp_path / "plan"
    plan.mkdir()
    checked = {**CHECKED, "plan_dir": str(plan)}
    (plan / "summary.json").write_text(json.dumps({"moves": []}))
    without = _digest("reassign", _reassign(EXEC, REASSIGN_PARAMS, checked))
    assert without == _digest("reassign", _reassign(EXEC, REASSIGN_PARAMS))
    moves = [{"topic": "t", "partition": 1, "replicas": [2, 1, 3]}]
    (plan / "summary.json").write_text(json.dumps({"leader_moves": moves}))
    approved = _digest("reassign", _reassign(EXEC, REASSIGN_PARAMS, checked))
    assert approved != without
    moves[0]["replicas"] = [3, 1, 2]
    (plan / "summary.json").write_text(json.dumps({"leader_moves": moves}))
    assert _digest("reassign", _reassign(EXEC, REASSIGN_PARAMS, checked)) != approved


# ------------------------------------------------------------------ controller escalation


def _escalation(cluster: str = "kafka_b") -> dict:
    from kafka_runbooks.metadata_errors.sweep import SweepOptions

    options = SweepOptions(
        kafka_config_id=cluster, metrics_conn_id=f"{cluster}_metrics", restart_conn_id=f"{cluster}_restart"
    )
    return {
        "node_id": 9001,
        "reason": "errors increasing",
        "trigger_run_id": "metadata_errors__controller_9001__r1",
        "conf": options.restart_conf(9001, "errors increasing"),
    }


def _controller(escalation: dict) -> dict:
    return _context("kafka_metadata_error_sweep", {("sweep", "controller_escalation"): escalation}, {})


CONTROLLER_INPUTS = {
    "node": (("node_id",), 9002),
    "run id": (("trigger_run_id",), "other"),
    "reason": (("reason",), "other"),
    # today's main: the conf the run is started with was not covered (nor did it name the cluster)
    "cluster in conf": (("conf", "kafka_config_id"), "kafka_default"),
    "probe in conf": (("conf", "probe_conn_id"), "kafka_broker_probe_default"),
    "restart back end in conf": (("conf", "restart_conn_id"), "kafka_restart_default"),
    "node in conf": (("conf", "node_ids"), "1"),
}


@pytest.mark.parametrize("name", sorted(CONTROLLER_INPUTS))
def test_controller_digest_changes_with_every_input_of_the_run_it_starts(name):
    path, value = CONTROLLER_INPUTS[name]
    before = _digest("controller", _controller(_escalation()))
    assert _digest("controller", _controller(_set(_escalation(), path, value))) != before, name


def test_the_sweep_starts_restarts_on_the_cluster_it_swept():
    """Today's main: the conf named no cluster, so the restart ran on kafka_default's nodes."""
    conf = _escalation("kafka_b")["conf"]
    assert conf["kafka_config_id"] == "kafka_b" and conf["probe_conn_id"] == "kafka_b_metrics"
    assert conf["restart_conn_id"] == "kafka_b_restart"
    assert conf["require_approval"] is True


# ------------------------------------------------------------------ controller replacement

REPLACE_DOCUMENT = {
    "steps": [
        {
            "kind": "add",
            "node_id": 9004,
            "directory_id": "d4",
            "endpoints": ["CONTROLLER://c4:9093"],
            "done": None,
        },
        {"kind": "remove", "node_id": 9001, "directory_id": "d1", "endpoints": [], "done": None},
    ],
    "expected_voters": [9002, 9003, 9004],
    "request": {"remove": [9001], "new_controller_id": 9004, "max_lag_ms": 10000},
}
REPLACE_INPUTS = {
    "directory id of the removed voter": (("steps", 1, "directory_id"), "other"),
    "endpoint of the new voter": (("steps", 0, "endpoints"), ["CONTROLLER://c5:9093"]),
    "final voters": (("expected_voters",), [9002, 9003]),
    "caught-up window": (("request", "max_lag_ms"), 60000),
}


@pytest.mark.parametrize("name", sorted(REPLACE_INPUTS))
def test_controller_replace_digest_changes_with_every_step(name):
    path, value = REPLACE_INPUTS[name]
    params = {"kafka_config_id": "kafka_default", "settle_period_s": 10}
    ctx = lambda d: _context("kafka_controller_replace", {("plan_replacement", "return_value"): d}, params)  # noqa: E731
    changed = copy.deepcopy(REPLACE_DOCUMENT)
    target = changed
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert _digest("controller_replace", ctx(changed)) != _digest(
        "controller_replace", ctx(REPLACE_DOCUMENT)
    ), name


CASES = {
    "restart": RESTART_INPUTS,
    "unclean": UNCLEAN_INPUTS,
    "reassign": REASSIGN_INPUTS,
    "controller": {},
    "controller_replace": REPLACE_INPUTS,
}


def test_the_controller_trigger_starts_only_the_run_that_was_approved():
    """The trigger task's conf is rendered from templates: it must equal the approved conf."""
    from airflow.sdk.exceptions import AirflowFailException

    from tests.unit.kafka_runbooks_airflow.test_gate import _dag

    task = copy.copy(_dag("kafka_metadata_error_sweep").get_task("cluster.restart_active_controller"))
    escalation = _escalation("kafka_b")
    context = _controller(escalation)
    task.trigger_run_id = escalation["trigger_run_id"]
    task.conf = dict(escalation["conf"])  # as rendered from the escalation XCom
    task.refuse_unless_approved_run(context, {"by": None})
    for field, value in (("kafka_config_id", "kafka_default"), ("restart_conn_id", "x"), ("node_ids", "1")):
        task.conf = {**escalation["conf"], field: value}
        with pytest.raises(AirflowFailException, match="not the one approved"):
            task.refuse_unless_approved_run(context, {"by": None})


def test_the_unclean_gate_shows_the_replica_orders_it_will_also_restore(monkeypatch, api_server):
    """The digest covers them, so the question must show them (the plan table does not). The gate
    reads Airflow's API server's clock when it asks (its deadline): ``api_server``."""
    import airflow.providers.standard.operators.hitl as hitl
    from airflow.sdk.exceptions import TaskAwaitingInput

    from kafka_runbooks import approval as rules
    from kafka_runbooks.unclean.elect import ReorderState
    from kafka_runbooks_airflow.operators import gate as gates
    from tests.unit.kafka_runbooks_airflow.test_gate import _dag

    ReorderState("kafka_default").write_entries({"u-3": {"topic": "u", "partition": 3, "original": [3, 1]}})
    monkeypatch.setattr(gates, "load_policy", lambda: rules.load_policy({}.get, {}))
    shown = {}
    monkeypatch.setattr(gates, "show_question", lambda op, ti_id: shown.setdefault("body", op.body))
    monkeypatch.setattr(hitl, "upsert_hitl_detail", lambda **kw: None)
    task = copy.copy(_dag("kafka_unclean_recovery").get_task("approve_elections"))
    context = _unclean(DOCUMENT, {**UNCLEAN_PARAMS, "approval_timeout_s": 30})
    context["ti"].xcom_push = lambda key, value: None
    context["ti"].task_id = "approve_elections"
    context["task_instance"] = SimpleNamespace(id="ti-1")
    context["dag_run"] = SimpleNamespace(triggering_user_name="bob")
    with pytest.raises(TaskAwaitingInput):
        task.execute(context)
    assert "**Also restores the replica order an earlier run left changed:** u-3 -> [3, 1]" in shown["body"]


# Each kind's digest for the fixed plans above, as gate.py computed them when it held every
# runbook's action function in one table (before the glue modules registered their own): an
# approval given before that move still binds the same plan after it. Re-pinned once, when the
# param kafka_conn_id became kafka_config_id: the digest covers the params' names, so a gate
# answered before that upgrade no longer matches and is asked again (the safe side).
PINNED = {
    "restart": "sha256:334ce76b6b6072f8953ea588e31928d56838225c132098c01132146cf916892c",
    "unclean": "sha256:60f9a460da2a80e8d324920c5998de5beda1879377f72f7359498cfba6a72a9f",
    "reassign": "sha256:c08d56e573dfd073f3d0a569409b7d89a9266c8642edaa3c85670201621b847c",
    "controller": "sha256:d774800495853fe43219a2f7810bd738748a05d03fbe87bb63d9bbc69d594162",
    "controller_replace": "sha256:1f9ba58a79c59df586b41d71bf5416725bc4b3f81cfe17d895dcf17e5e21a8d2",
}


def test_every_kinds_digest_of_a_fixed_plan_is_the_one_pinned():
    replace_params = {"kafka_config_id": "kafka_default", "settle_period_s": 10}
    contexts = {
        "restart": _restart(ROLL, RESTART_PARAMS),
        "unclean": _unclean(DOCUMENT, UNCLEAN_PARAMS),
        "reassign": _reassign(EXEC, REASSIGN_PARAMS),
        "controller": _controller(_escalation()),
        "controller_replace": _context(
            "kafka_controller_replace",
            {("plan_replacement", "return_value"): REPLACE_DOCUMENT},
            replace_params,
        ),
    }
    assert {kind: _digest(kind, context) for kind, context in contexts.items()} == PINNED
