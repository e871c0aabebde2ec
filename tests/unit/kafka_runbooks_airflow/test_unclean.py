"""The unclean recovery's glue takes the typed request, not the params.

The DAG's tasks build ``RecoveryRequest`` once (``recovery_request``) and pass it with the
cluster's ``kafka_config_id``; a glue function that indexed the params again would parse a
duration twice, in two ways. Only the gate's action reads the run's params: it shows the
approver what was asked, as asked.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kafka_runbooks_airflow.unclean as glue

SOURCE = Path(glue.__file__).read_text()


def params_reads(function: ast.FunctionDef) -> list[str]:
    """Every ``params[...]`` / ``params.get(...)`` in a function, as source."""
    out = []
    for node in ast.walk(function):
        if isinstance(node, ast.Subscript | ast.Attribute) and getattr(node.value, "id", None) == "params":
            out.append(ast.unparse(node))
    return out


def functions() -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in ast.parse(SOURCE).body if isinstance(n, ast.FunctionDef)}


def test_the_check_sees_a_params_read():
    source = "def f(params):\n    return params['kafka_config_id'], params.get('mode')\n"
    assert params_reads(ast.parse(source).body[0]) == ["params['kafka_config_id']", "params.get"]


@pytest.mark.parametrize("name", ["plan_recovery", "run_elections", "_journal_if_lease_held"])
def test_a_glue_function_reads_the_request_not_the_params(name):
    function = functions()[name]
    assert params_reads(function) == [], f"{name} reads the params"
    assert "request" in [a.arg for a in function.args.args]


def test_the_request_is_built_in_one_place():
    """``recovery_request`` is the only caller of the library's parser in the glue."""
    callers = [
        name
        for name, function in functions().items()
        if any(isinstance(n, ast.Name) and n.id == "build_request" for n in ast.walk(function))
    ]
    assert callers == ["recovery_request"]
