"""The broker restart's glue takes the typed request, not the params.

``plan_restart`` builds ``RestartRequest`` once (``broker_restart.restart_request``) and passes
it with the cluster's ``kafka_config_id`` and the roll's connections; a glue function that
indexed the params again would judge the reason and parse the timeout a second time, in a
second way. Only the gate's action reads the run's params: it shows the approver what was
asked, as asked (its digest is pinned by ``test_gate_digest.py``).
"""

from __future__ import annotations

import ast

import kafka_runbooks_airflow.broker_restart as glue
from tests.unit.kafka_runbooks_airflow.glue_source import callers_of, functions, params_reads


def test_the_check_sees_a_params_read_and_a_parser_call():
    source = (
        "def f(params):\n    return params['kafka_config_id'], params.get('mode'), build_request(params)\n"
    )
    function = ast.parse(source).body[0]
    assert params_reads(function) == ["params['kafka_config_id']", "params.get"]
    assert any(isinstance(n, ast.Name) and n.id == "build_request" for n in ast.walk(function))


def test_planning_the_roll_reads_the_request_not_the_params():
    function = functions(glue)["plan_roll"]
    assert params_reads(function) == [], "plan_roll reads the params"
    assert [a.arg for a in function.args.args][:2] == ["request", "kafka_config_id"]


def test_the_request_is_built_in_one_place():
    """``restart_request`` is the only caller of the library's parser in the glue."""
    assert callers_of(glue, "build_request") == ["restart_request"]
