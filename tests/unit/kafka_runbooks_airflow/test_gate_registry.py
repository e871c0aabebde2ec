"""Each runbook's glue module registers what its gate approves; the gate holds no table.

A kind registered twice would let one runbook's gate approve another's plan, and a DAG
whose gate names a kind its own imports never registered would fail to parse only where
no other DAG happened to import the glue first: each DAG file is parsed here with the
plugin modules imported afresh, so a missing import shows up as that DAG's import error.
"""

from __future__ import annotations

import ast
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PLUGINS = ROOT / "plugins" / "kafka_runbooks_airflow"
DAG_FILES = sorted((ROOT / "dags").glob("*.py"))
REGISTERING = ("gate_action", "register_action")


def _registrations() -> list[tuple[str, str]]:
    """(kind, file) for every ``gate_action("kind")`` / ``register_action("kind", fn)`` in the plugins."""
    found = []
    for path in sorted(PLUGINS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            if node.func.id in REGISTERING and node.args and isinstance(node.args[0], ast.Constant):
                found.append((node.args[0].value, path.name))
    return [(kind, name) for kind, name in found if name != "gate.py"]


def test_every_kind_is_registered_by_exactly_one_glue_module():
    kinds = [kind for kind, _ in _registrations()]
    assert sorted(set(kinds)) == sorted(kinds), _registrations()
    assert len(kinds) >= 5, _registrations()  # restart, unclean, reassign, controller, controller_replace


def test_a_second_function_for_a_registered_kind_is_refused():
    from kafka_runbooks.errors import BadInput
    from kafka_runbooks_airflow import broker_restart
    from kafka_runbooks_airflow.gate import register_action, registered_action

    with pytest.raises(
        BadInput, match=r"'restart' is already registered by \S*broker_restart.py:restart_action"
    ):
        register_action("restart", lambda context: {})
    assert registered_action("restart") is broker_restart.restart_action
    assert register_action("restart", broker_restart.restart_action) is broker_restart.restart_action


def test_a_glue_module_loaded_again_under_its_plugin_name_registers_the_same_function():
    """Airflow's plugin manager loads ``plugins/kafka_runbooks_airflow/*.py`` as top-level modules
    too (``broker_restart`` beside ``kafka_runbooks_airflow.broker_restart``): the same function from
    the same file is no second runbook, and a task that imports the glue after that still runs
    (seen through Airflow: every report_pending_restores failed with 'already registered')."""
    import importlib.util

    from kafka_runbooks_airflow import broker_restart
    from kafka_runbooks_airflow.gate import registered_action

    spec = importlib.util.spec_from_file_location("broker_restart", PLUGINS / "broker_restart.py")
    again = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(again)  # registers its own restart_action: no BadInput
    assert again.restart_action is not broker_restart.restart_action
    assert registered_action("restart").__qualname__ == "restart_action"


@contextmanager
def _fresh_plugin_modules():
    """Import ``kafka_runbooks_airflow`` anew inside (an empty registry), and put the process's
    own modules back afterwards, so other tests keep the classes they imported."""
    saved = {name: mod for name, mod in sys.modules.items() if name.split(".")[0] == "kafka_runbooks_airflow"}
    for name in saved:
        del sys.modules[name]
    try:
        yield
    finally:
        for name in [n for n in sys.modules if n.split(".")[0] == "kafka_runbooks_airflow"]:
            del sys.modules[name]
        sys.modules.update(saved)


@pytest.mark.parametrize("path", DAG_FILES, ids=[p.stem for p in DAG_FILES])
def test_every_gate_of_a_dag_names_a_kind_its_own_imports_registered(path):
    from airflow.dag_processing.dagbag import DagBag

    with _fresh_plugin_modules():
        bag = DagBag(dag_folder=str(path), safe_mode=False)
        from kafka_runbooks_airflow.gate import action_kinds

        registered = action_kinds()
    assert bag.import_errors == {}
    named = {
        task.action_kind for dag in bag.dags.values() for task in dag.tasks if hasattr(task, "action_kind")
    }
    assert named <= set(registered), (path.name, named, registered)
