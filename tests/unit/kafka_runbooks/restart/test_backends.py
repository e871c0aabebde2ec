"""The product finds the local stack's restart back end by name, never by importing it."""

from __future__ import annotations

import ast
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from kafka_runbooks.restart import backends
from kafka_runbooks.restart.backends import backend_from_config
from kafka_runbooks_dev.restart_backend import LocalStackBackend

ROOT = Path(__file__).resolve().parents[4]


def test_localstack_is_selected_by_name_through_its_entry_point(tmp_path):
    backend = backend_from_config({"backend": "localstack", "stack_home": str(tmp_path)})
    assert isinstance(backend, LocalStackBackend)
    assert backend.stack.home == tmp_path
    # no "backend" key: the local stack, as before the move
    assert isinstance(backend_from_config({"stack_home": str(tmp_path)}), LocalStackBackend)


def test_localstack_still_names_its_missing_setting():
    with pytest.raises(ValueError, match="stack_home"):
        backend_from_config({"backend": "localstack"})


def test_without_the_dev_package_localstack_is_refused_clearly(monkeypatch):
    monkeypatch.setattr("importlib.metadata.entry_points", lambda group: [])
    with pytest.raises(ValueError, match="dev tooling"):
        backend_from_config({"backend": "localstack", "stack_home": "/nowhere"})
    with pytest.raises(ValueError, match="unknown restart back end 'ssh'"):
        backend_from_config({"backend": "ssh"})


def test_a_registration_whose_package_is_not_shipped_is_refused_clearly(monkeypatch):
    """The production image installs the project without devtools/: the entry point is in
    the metadata, its module is not."""
    entry = EntryPoint("localstack", "kafka_runbooks_dev_absent.restart_backend:from_config", "g")
    monkeypatch.setattr("importlib.metadata.entry_points", lambda group: [entry])
    with pytest.raises(ValueError, match="dev tooling"):
        backend_from_config({"backend": "localstack", "stack_home": "/nowhere"})


def test_another_package_can_register_a_back_end(monkeypatch):
    entry = EntryPoint("custom", f"{__name__}:_make", backends.BACKEND_ENTRY_POINTS)
    monkeypatch.setattr("importlib.metadata.entry_points", lambda group: [entry])
    backend = backend_from_config({"backend": "custom", "x": 1})
    assert backend == ("custom", {"backend": "custom", "x": 1})


def _make(extra):
    return ("custom", extra)


def test_the_product_never_imports_the_dev_package():
    offenders = []
    for folder in ("include", "plugins", "dags", "spark_jobs"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module]
                offenders += [
                    f"{path.relative_to(ROOT)}: {n}" for n in names if n.startswith("kafka_runbooks_dev")
                ]
    assert offenders == []
