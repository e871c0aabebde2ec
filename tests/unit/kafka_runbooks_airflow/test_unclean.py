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
