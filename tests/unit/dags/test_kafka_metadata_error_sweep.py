"""The metadata-error sweep's form and a conf that leaves params out mean the same sweep: both take
the defaults of ``SweepOptions`` (kafka_runbooks.metadata_errors.sweep), kept in one place."""

from __future__ import annotations

from pathlib import Path

from kafka_runbooks.metadata_errors.sweep import SweepOptions

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
