"""kafka_controller_replace's glue takes the typed ReplaceRequest, built once per task (issue #26).

Before, ``plan``, ``replace`` and ``_runbook`` each indexed the params (the cluster three
times) and ``replace`` parsed the catch-up and settle durations again for its lease hold, beside
the request ``_runbook`` built from the same params: two readings of one value that could
drift apart. Now each task builds the request once (``replace_request``) and hands it on with
the cluster's ``kafka_config_id``. The gate's action still shows the params as asked: its digest
is pinned (test_gate_digest.py).
"""

from __future__ import annotations

import logging

import pytest

import kafka_runbooks_airflow.controller_replace as glue
from tests.unit.kafka_runbooks_airflow.glue_source import callers_of, functions, params_reads


def test_planning_and_replacing_read_the_request_and_the_cluster_not_the_params():
    for name in ("plan", "replace", "_runbook"):
        function = functions(glue)[name]
        assert params_reads(function) == [], f"{name} reads the params"
        arguments = [a.arg for a in function.args.args]
        assert arguments[-2:] == ["request", "kafka_config_id"], name


def test_the_request_is_built_in_one_place():
    """``replace_request`` is the only caller of the parser in the glue; the parser and the gate's
    action are the only readers of the params left."""
    assert callers_of(glue, "build_request") == ["replace_request"]
    readers = sorted(name for name, f in functions(glue).items() if params_reads(f))
    assert readers == ["build_request", "controller_replace_action"]


def _said(caplog, capsys) -> str:
    """What the decision log said, through logging or (Airflow's structlog set up first) on stdout."""
    return caplog.text + capsys.readouterr().out


def test_the_task_bodies_hand_the_params_to_the_request_builder(caplog, capsys):
    from airflow.sdk.exceptions import AirflowFailException

    request = glue.replace_request(
        {"kafka_config_id": "k", "remove_voters": [3], "catch_up_timeout_s": "2m", "settle_period_s": 5}
    )
    assert (request.remove, request.catch_up_timeout_s, request.settle_s) == ((3,), 120.0, 5.0)
    with caplog.at_level(logging.INFO), pytest.raises(AirflowFailException, match="give both"):
        glue.replace_request({"kafka_config_id": "k", "remove_voters": [3], "new_controller_id": 4})
    assert "DECISION validate: refuse the run" in _said(caplog, capsys)


def test_the_plan_refuses_before_the_gate_when_kafkas_tool_cannot_run(monkeypatch, tmp_path, caplog, capsys):
    """Issue #39.3, tried as a new user would: the Variable kafka_runbooks_kafka_libs unset, the gate
    approved, then the replace task failed at once ("task(s) failed: replace"). The plan task now
    refuses, naming what is missing, before any cluster call and before the gate is shown."""
    from kafka_runbooks.errors import BadInput

    monkeypatch.delenv("KAFKA_RUNBOOKS_KAFKA_LIBS", raising=False)
    monkeypatch.setattr(glue, "_runbook", lambda *a: pytest.fail("the cluster was asked"))
    request = glue.replace_request({"kafka_config_id": "k", "remove_voters": [3]})
    with caplog.at_level(logging.INFO), pytest.raises(BadInput, match="kafka_runbooks_kafka_libs"):
        glue.plan(request, "k")
    assert "DECISION plan: refuse because set the Variable kafka_runbooks_kafka_libs" in _said(caplog, capsys)
    (tmp_path / "kafka-tools-4.3.1.jar").write_text("")
    monkeypatch.setenv("KAFKA_RUNBOOKS_KAFKA_LIBS", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))  # no java on it
    with pytest.raises(BadInput, match="needs a Java runtime"):
        glue.plan(request, "k")


def test_the_form_takes_voter_ids_as_text_and_refuses_what_is_not_ids(caplog, capsys):
    """Issue #39.8: the trigger form's voter list is a text box ("9003" or "9002, 9003"), as every
    other id list of the runbooks; a list still passes (REST, sweeps); anything else is refused."""
    from airflow.sdk.exceptions import AirflowFailException

    for given, expected in (("9003", (9003,)), (" 9002, 9003 ", (9002, 9003)), ([9003], (9003,))):
        assert glue.replace_request({"kafka_config_id": "k", "remove_voters": given}).remove == expected
    with pytest.raises(AirflowFailException, match="name the voter"):  # the empty form: nothing to do
        glue.replace_request({"kafka_config_id": "k", "remove_voters": ""})
    for bad in ("9003;9004", "x", [True], ["9003"]):
        with (
            caplog.at_level(logging.INFO),
            pytest.raises(AirflowFailException, match="remove_voters must be ids"),
        ):
            glue.replace_request({"kafka_config_id": "k", "remove_voters": bad})
    assert "DECISION validate: refuse the run" in _said(caplog, capsys)
