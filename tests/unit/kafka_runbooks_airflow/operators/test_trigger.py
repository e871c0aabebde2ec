"""The sweep's trigger starts a run only on a True decision, by itself (no upstream short-circuit)."""

from __future__ import annotations

import pytest
from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk.exceptions import AirflowSkipException

from kafka_runbooks_airflow.operators.trigger import TriggerWhenDueOperator


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
    operator(True).execute({})
    assert started == [("sweep__kafka_default__r1", {"failed_brokers": [4]})]


def test_the_decision_is_templated_so_an_xcom_reaches_it():
    assert "due" in TriggerWhenDueOperator.template_fields
    assert set(TriggerDagRunOperator.template_fields) <= set(TriggerWhenDueOperator.template_fields)
