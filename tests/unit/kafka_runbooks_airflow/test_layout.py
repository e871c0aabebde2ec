"""Every operator class in ``operators/``, every sensor class in ``sensors/``: where a newcomer looks.

Read twice: from the source (the AST: a class whose base names an operator or a sensor) and from
the imported modules (every ``BaseOperator`` subclass a plugin module defines, whatever its bases
are called, e.g. a gate built on a mixin). No exceptions: the plan gates and the metadata-error
sweep's controller gate moved to ``operators/`` (issue #26).
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PLUGIN = ROOT / "plugins" / "kafka_runbooks_airflow"


def _base_names(node: ast.ClassDef) -> list[str]:
    return [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]


def _operator_classes() -> dict[str, set[str]]:
    """Module path (relative to the plugin) -> its classes that are operators or sensors."""
    found: dict[str, set[str]] = {}
    for path in sorted(PLUGIN.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                n.endswith(("Operator", "Sensor")) for n in _base_names(node)
            ):
                found.setdefault(str(path.relative_to(PLUGIN)), set()).add(node.name)
    return found


def test_operators_live_in_operators_and_sensors_in_sensors():
    found = _operator_classes()
    assert "ClusterLeaseSensor" in found.get("sensors/lease.py", set())  # the scan works
    misplaced = {m: n for m, n in found.items() if not m.startswith(("operators/", "sensors/"))}
    assert misplaced == {}, f"operator or sensor classes outside their folder: {misplaced}"


def _defined_operators() -> dict[str, set[str]]:
    """Module path (relative to the plugin) -> the ``BaseOperator`` subclasses it defines."""
    from airflow.sdk import BaseOperator

    found: dict[str, set[str]] = {}
    for path in sorted(PLUGIN.rglob("*.py")):
        parts = path.relative_to(PLUGIN.parent).with_suffix("").parts
        module = importlib.import_module(".".join(p for p in parts if p != "__init__"))
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and value.__module__ == module.__name__
                and issubclass(value, BaseOperator)
            ):
                found.setdefault(str(path.relative_to(PLUGIN)), set()).add(name)
    return found


def test_every_operator_class_a_plugin_module_defines_lives_in_operators_or_sensors():
    found = _defined_operators()
    assert "PlanApprovalOperator" in found.get("operators/gate.py", set())  # the scan works
    assert "KafkaReassignmentSensor" in found.get("sensors/reassignment.py", set())
    misplaced = {m: n for m, n in found.items() if not m.startswith(("operators/", "sensors/"))}
    assert misplaced == {}, f"operator or sensor classes outside their folder: {misplaced}"


def test_the_trigger_forms_schemas_live_in_the_plugin():
    """How Airflow's trigger form renders a param (``forms.py``) is the plugin's business; the
    Airflow-free library keeps the parsers the schemas agree with (units, requests)."""
    library = ROOT / "include" / "kafka_runbooks"
    schemas = {
        str(path.relative_to(library)): [
            n.name
            for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.FunctionDef) and n.name.endswith("_schema")
        ]
        for path in sorted(library.rglob("*.py"))
    }
    assert "size_schema" in [
        n.name
        for n in ast.walk(ast.parse((PLUGIN / "forms.py").read_text()))
        if isinstance(n, ast.FunctionDef)
    ]  # the scan works
    assert not {m: n for m, n in schemas.items() if n}, "form schemas in the Airflow-free library"
