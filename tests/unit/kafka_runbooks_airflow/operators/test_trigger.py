"""The sweep's trigger starts a run only on a True decision, by itself (no upstream short-circuit)."""

from __future__ import annotations

import pytest
from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException
from airflow.sdk.execution_time.comms import DagResult

from kafka_runbooks_airflow.operators.trigger import TriggerWhenDueOperator


class _TaskInstance:
    """What the operator reads of the running task instance: ``get_dag`` answers the DAG as
    the task SDK's supervisor does (a ``DagResult``); tests/e2e/test_paused_target.py asks a
    real Airflow."""

    task_id = "start_reassignment"

    def __init__(self, paused: bool) -> None:
        self.paused = paused

    def get_dag(self, dag_id: str) -> DagResult:
        return DagResult(
            dag_id=dag_id,
            is_paused=self.paused,
            bundle_name="dags-folder",
            bundle_version=None,
            relative_fileloc=f"{dag_id}.py",
            owners="kafka-runbooks",
            tags=[],
            next_dagrun=None,
        )


def context(paused: bool = False) -> dict:
    return {"ti": _TaskInstance(paused)}


@pytest.fixture
def started(monkeypatch) -> list[tuple[str, dict]]:
    calls: list[tuple[str, dict]] = []

    def fake_execute(self, context):  # stands in for the run creation the Execution API does
        calls.append((self.trigger_run_id, self.conf))

    monkeypatch.setattr(TriggerDagRunOperator, "execute", fake_execute)
    return calls


def operator(due, run_id="sweep__kafka_default__r1", conf=None) -> TriggerWhenDueOperator:
    return TriggerWhenDueOperator(
        task_id="start_reassignment",
        trigger_dag_id="kafka_failed_broker_reassignment",
        due=due,
        trigger_run_id=run_id,
        conf={"failed_brokers": [4]} if conf is None else conf,
    )


@pytest.mark.parametrize("due", [False, None, "True", 1, [], {}])
def test_anything_but_true_skips_and_starts_nothing(started, due):
    with pytest.raises(AirflowSkipException, match="not due"):
        operator(due).execute({})
    assert started == []


@pytest.mark.parametrize(("run_id", "conf"), [(None, {"failed_brokers": [4]}), ("r", {}), ("", {"x": 1})])
def test_due_without_run_id_or_conf_is_refused(started, run_id, conf):
    with pytest.raises(ValueError, match="no run started"):
        operator(True, run_id=run_id, conf=conf).execute({})
    assert started == []


def test_due_starts_the_run_with_its_id_and_conf(started):
    operator(True).execute(context(paused=False))
    assert started == [("sweep__kafka_default__r1", {"failed_brokers": [4]})]


def test_due_into_a_paused_dag_fails_and_starts_nothing(started):
    with pytest.raises(AirflowFailException, match="kafka_failed_broker_reassignment is paused"):
        operator(True).execute(context(paused=True))
    assert started == []


def test_the_decision_is_templated_so_an_xcom_reaches_it():
    assert "due" in TriggerWhenDueOperator.template_fields
    assert set(TriggerDagRunOperator.template_fields) <= set(TriggerWhenDueOperator.template_fields)
