"""Every DAG imports only the plugin layer: the domain library is reached through it.

A DAG that imports ``kafka_runbooks.*`` itself grows task bodies inline (hooks built in
the DAG file, decisions next to the wiring); keeping DAGs thin is checked on their
source, imports inside task functions included.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

DAGS = sorted((Path(__file__).resolve().parents[3] / "dags").glob("*.py"))


def imported_modules(source: str) -> list[str]:
    """Every module a source imports, at any depth (task bodies import lazily)."""
    out: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return out


def domain_imports(source: str) -> list[str]:
    return [m for m in imported_modules(source) if m == "kafka_runbooks" or m.startswith("kafka_runbooks.")]


def test_the_check_sees_imports_inside_task_functions():
    source = "def t():\n    from kafka_runbooks import decisions\n    import kafka_runbooks.paths\n"
    assert domain_imports(source) == ["kafka_runbooks", "kafka_runbooks.decisions", "kafka_runbooks.paths"]
    assert domain_imports("from kafka_runbooks_airflow.inputs import size_schema\n") == []


@pytest.mark.parametrize("path", DAGS, ids=lambda p: p.name)
def test_a_dag_imports_only_the_plugin_layer(path: Path):
    modules = imported_modules(path.read_text())
    assert any(m.startswith("kafka_runbooks_airflow") for m in modules) or "airflow.sdk" in modules
    assert domain_imports(path.read_text()) == [], f"{path.name} imports the domain library directly"


def test_every_dag_file_is_checked():
    assert len(DAGS) >= 8 and {p.name for p in DAGS} >= {"kafka_unclean_recovery.py"}
