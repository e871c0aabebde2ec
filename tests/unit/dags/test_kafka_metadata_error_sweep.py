"""The metadata-error sweep's form and a conf that leaves params out mean the same sweep: both take
the defaults of ``SweepOptions`` (kafka_runbooks.metadata_errors.sweep), kept in one place."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest

from kafka_runbooks.metadata_errors.sweep import SweepOptions
from tests.unit.kafka_runbooks_airflow.glue_source import callers_of, functions, params_reads

ROOT = Path(__file__).resolve().parents[3]
DEFAULTED = ("restart_brokers", "max_flagged_brokers", "controller_escalate_after")


def test_the_form_and_an_empty_conf_sweep_with_the_options_defaults():
    from airflow.dag_processing.dagbag import DagBag

    from kafka_runbooks_airflow.metadata_errors import OPTION_DEFAULTS, options_from_params

    bag = DagBag(dag_folder=str(ROOT / "dags" / "kafka_metadata_error_sweep.py"), safe_mode=False)
    assert not bag.import_errors
    form = {name: bag.dags["kafka_metadata_error_sweep"].params[name] for name in DEFAULTED}
    assert SweepOptions() == OPTION_DEFAULTS
    assert form == {name: getattr(OPTION_DEFAULTS, name) for name in DEFAULTED}
    assert options_from_params(form, "sweep") == options_from_params({}, "sweep")
    assert options_from_params({}, "sweep") == SweepOptions(sweep_dag_id="sweep")


def test_the_sweep_reads_its_options_never_the_params():
    """Issue #26: the sweep task reads the params (with its cluster's target) once into
    SweepOptions (``sweep_options``); ``run_metadata_error_sweep`` takes those, not the params.
    The two params readers left are the parsers: the options' and the clusters task's targets."""
    import kafka_runbooks_airflow.metadata_errors as glue

    readers = sorted(name for name, f in functions(glue).items() if params_reads(f))
    assert readers == ["_count", "options_from_params", "sweep_targets_from_params"]
    assert callers_of(glue, "options_from_params") == ["sweep_options"]
    assert functions(glue)["run_metadata_error_sweep"].args.args[0].arg == "options"
    tree = ast.parse((ROOT / "dags" / "kafka_metadata_error_sweep.py").read_text())
    sweep = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "sweep")
    calls = {
        n.func.id: n for n in ast.walk(sweep) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }
    assert "sweep_options" in calls
    handed = {id(n) for a in calls["sweep_options"].args for n in ast.walk(a)}
    reads = [
        n
        for n in ast.walk(sweep)
        if isinstance(n, ast.Subscript) and getattr(n.slice, "value", None) == "params"
    ]
    assert reads and all(id(n) in handed for n in reads), "the sweep task reads the params itself"


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({"max_flagged_brokers": "two"}, "max_flagged_brokers must be a whole number, not 'two'"),
        ({"controller_escalate_after": 1.5}, "controller_escalate_after must be a whole number"),
        ({"controller_escalate_after": 0}, "controller_escalate_after must be >= 1"),
    ],
)
def test_bad_options_are_refused_with_a_decision_record_naming_the_param(caplog, conf, message):
    from airflow.sdk.exceptions import AirflowFailException

    from kafka_runbooks_airflow.metadata_errors import sweep_options

    with caplog.at_level(logging.INFO), pytest.raises(AirflowFailException, match=message):
        sweep_options({"kafka_config_id": "kafka_a", **conf}, "sweep")
    assert [r for r in caplog.records if getattr(r, "decision_record", None)]
    assert sweep_options({"kafka_config_id": "kafka_a"}, "sweep").kafka_config_id == "kafka_a"
