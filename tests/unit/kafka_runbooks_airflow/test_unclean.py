"""The unclean recovery's glue takes the typed request, not the params.

The DAG's tasks build ``RecoveryRequest`` once (``recovery_request``) and pass it with the
cluster's ``kafka_config_id``; a glue function that indexed the params again would parse a
duration twice, in two ways. Only the gate's action reads the run's params: it shows the
approver what was asked, as asked.
"""

from __future__ import annotations

import ast

import pytest

import kafka_runbooks_airflow.unclean as glue
from tests.unit.kafka_runbooks_airflow.glue_source import callers_of, functions, params_reads


def test_the_check_sees_a_params_read():
    source = "def f(params):\n    return params['kafka_config_id'], params.get('mode')\n"
    assert params_reads(ast.parse(source).body[0]) == ["params['kafka_config_id']", "params.get"]


@pytest.mark.parametrize("name", ["plan_recovery", "run_elections", "_journal_if_lease_held"])
def test_a_glue_function_reads_the_request_not_the_params(name):
    function = functions(glue)[name]
    assert params_reads(function) == [], f"{name} reads the params"
    assert "request" in [a.arg for a in function.args.args]


def test_the_request_is_built_in_one_place():
    """``recovery_request`` is the only caller of the library's parser in the glue."""
    assert callers_of(glue, "build_request") == ["recovery_request"]


def test_an_automated_recovery_that_can_elect_nothing_fails_naming_the_clean_path(caplog):
    """Found by the fault campaign (unclean seeds 1 and 2): a partition offline, its only clean
    replica down, a stale one back; nothing may be elected without allow_committed_loss, and the
    run ended green over an offline partition. It fails now, naming the partition and what to do;
    a read-only mode still ends successfully."""
    from airflow.sdk.exceptions import AirflowFailException

    from kafka_runbooks_airflow.unclean import automated_recovery_requested

    choice = {
        "topic": "orders",
        "partition": 0,
        "chosen": None,
        "reason": "clean path: broker(s) 1 hold every committed record and did not answer",
        "clean_path": "CLEAN PATH: broker(s) 1 (down) hold every committed record of orders-0",
    }
    document = {"mode": "automated_recovery", "choices": [choice], "artifacts": {}}
    with pytest.raises(
        AirflowFailException, match=r"not recovered: 1 partition\(s\) stay offline: orders-0: CLEAN PATH"
    ):
        automated_recovery_requested(document)
    assert automated_recovery_requested({**document, "mode": "show_replica_info"}) is False
    assert automated_recovery_requested({**document, "choices": []}) is False


def test_a_cleared_elections_try_acts_no_more():
    """Found by the fault campaign (unclean seed 6): a Clear sent the run back to its plan while the
    elections' try ran on; nothing claimed the fence, and the old try reordered and elected. The
    fence's halted check now asks Airflow, which says ``restarting``."""
    from kafka_runbooks_airflow.unclean import superseded_by_airflow

    class TI:
        task_id, map_index = "run_elections", -1

        def __init__(self, state):
            self.state = state

        def get_task_states(self, dag_id, task_ids, run_ids, map_index=None):
            return {run_ids[0]: {"run_elections": self.state}}

    class Dag:
        dag_id = "kafka_unclean_recovery"

    def halted(state):
        return superseded_by_airflow({"ti": TI(state), "run_id": "r1", "dag": Dag()})()

    assert halted("running") is None
    assert "restarting, not running" in halted("restarting")
    assert "failed, not running" in halted("failed")


def _rendered_gate_body(document: dict) -> str:
    """The unclean gate's body as Airflow renders it (the DAG's own Jinja environment) over a plan."""
    from airflow.dag_processing.dagbag import DagBag

    from tests.unit.kafka_runbooks_airflow.test_gate import ROOT

    bag = DagBag(dag_folder=str(ROOT / "dags" / "kafka_unclean_recovery.py"), safe_mode=False)
    dag = bag.dags["kafka_unclean_recovery"]
    gate = dag.get_task("approve_elections")

    class TI:
        """What the body's template reads: the plan task's XCom."""

        def xcom_pull(self, task_ids):
            """The plan document, as plan_recovery returned it."""
            assert task_ids == "plan_recovery"
            return document

    return dag.get_template_env().from_string(gate.body).render(ti=TI())


def test_the_gate_opens_with_the_totals_before_any_table():
    """Issue #39 point 7: the gate was a 19,000-character table with no totals."""
    document = {"totals_md": "**Totals:** 2 offline partition(s) in 1 topic(s)", "table_md": "| partition |"}
    body = _rendered_gate_body({**document, "unanswered_brokers": {}})
    assert body.startswith("**Totals:** 2 offline partition(s) in 1 topic(s)")
    assert body.index("**Totals:**") < body.index("| partition |")
    # a plan made before the totals existed (its gate asked after the change): the table alone
    older = _rendered_gate_body({"table_md": "| partition |", "unanswered_brokers": {}})
    assert older.lstrip().startswith(
        "Offline partitions and the replica chosen"
    )  # the gate strips it and "| partition |" in older
