"""The trigger forms as Airflow's API server judges them: each DAG serialized and read back as
the server does, its params merged with a conf and validated (``SerializedDAG.create_dagrun``
does ``params.deep_merge(conf).validate()``; the 400 answer's detail is that message, which
the trigger form shows above its fields).

Why here and not only in the browser: every manual DAG must be triggerable from its
defaults (a required param without a default keeps the form's Trigger disabled and answers
REST with 400), and every refusal must say its rule in words, not a bare regex. Both are
facts of the schema that Airflow's own validation shows without a running Airflow.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MANUAL = (
    "kafka_broker_restart",
    "kafka_cluster_health",
    "kafka_connect_restart",
    "kafka_failed_broker_reassignment",
    "kafka_reassignment_stop",
    "kafka_unclean_recovery",
)


@pytest.fixture(scope="module")
def served_dags():
    """The DAGs of dags/ as the API server holds them (serialized, then deserialized)."""
    from airflow.dag_processing.dagbag import DagBag
    from airflow.serialization.serialized_objects import DagSerialization

    bag = DagBag(dag_folder=str(ROOT / "dags"), safe_mode=False)
    assert bag.import_errors == {}
    return {
        dag_id: DagSerialization.from_dict(DagSerialization.to_dict(dag)) for dag_id, dag in bag.dags.items()
    }


def _refusal(dag, conf: dict) -> str:
    """The message of the API's 400 for this conf ('' when the server accepts it)."""
    from airflow.exceptions import ParamValidationError

    try:
        dag.params.deep_merge(conf).validate()
    except ParamValidationError as exc:
        return str(exc)
    return ""


@pytest.mark.parametrize("dag_id", MANUAL)
def test_every_manual_dag_is_accepted_from_its_defaults(served_dags, dag_id):
    assert _refusal(served_dags[dag_id], {}) == ""


@pytest.mark.parametrize(
    ("dag_id", "conf", "words"),
    [
        (
            "kafka_broker_restart",
            {"node_ids": "1;2"},
            "node ids separated by commas, e.g. 2 or 1,2,9001, or all",
        ),
        ("kafka_failed_broker_reassignment", {"throttle_bytes_per_sec": "-5 MiB"}, "a size such as 50 MiB"),
        ("kafka_failed_broker_reassignment", {"max_bytes_per_chunk": "1 GB/s"}, "a size such as 50 MiB"),
        ("kafka_failed_broker_reassignment", {"failed_brokers": "four"}, "broker ids separated by commas"),
        ("kafka_failed_broker_reassignment", {"receivers": "1 2"}, "broker ids separated by commas, e.g. 4"),
        ("kafka_connect_restart", {"task_ids": "0;2"}, "ids separated by commas, e.g. 0 or 0,2"),
    ],
)
def test_a_refusal_names_the_param_and_its_rule_in_words(served_dags, dag_id, conf, words):
    message = _refusal(served_dags[dag_id], conf)
    (name,) = conf
    first_line = message.splitlines()[0]
    assert first_line.startswith(f"Invalid input for param {name}: "), message
    assert words in first_line, message


def test_the_restart_form_is_accepted_empty_and_the_run_then_refuses_before_anything_is_done(served_dags):
    """node_ids has no safe default: the form lets it stay empty (Trigger enabled, the API accepts it) and
    the run's input check refuses it, saying what to fill in (a DECISION record, nothing restarted)."""
    from kafka_runbooks.restart.request import build_request
    from kafka_runbooks.restart.roller import RollInputError

    conf = {"node_ids": None}
    assert _refusal(served_dags["kafka_broker_restart"], conf) == ""
    with pytest.raises(RollInputError, match="name the brokers/controllers to restart, or 'all'"):
        build_request(dict(served_dags["kafka_broker_restart"].params.deep_merge(conf).validate()))
