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
        ("kafka_unclean_recovery", {"partitions": ["orders:0", "orders"]}, "topic:partition, e.g. orders:0"),
        ("kafka_broker_restart", {"operation_timeout_s": "5 minutes"}, "a duration such as 90s, 10m or 1h"),
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


# Every duration and size param of every DAG, by what its name says it counts (issue #24.4: one unit
# convention across all forms). A new param named like these is checked without editing this list.
DURATION_SUFFIXES = {"_s": "seconds", "_ms": "milliseconds", "_minutes": "minutes", "_seconds": "seconds"}
SIZE_NAMES = ("max_bytes_per_chunk", "throttle_bytes_per_sec")


def _unit_params(served_dags):
    """(dag_id, param name, 'size' or the plain unit of a duration) for every such param of every DAG."""
    out = []
    for dag_id, dag in sorted(served_dags.items()):
        for name in dag.params:
            plain = next((unit for end, unit in DURATION_SUFFIXES.items() if name.endswith(end)), None)
            if name in SIZE_NAMES:
                out.append((dag_id, name, "size"))
            elif plain:
                out.append((dag_id, name, plain))
    return out


def test_every_dag_has_its_duration_and_size_params_found(served_dags):
    """The checks below see the params the issue names (a rename would silently skip them otherwise)."""
    found = {(dag_id, name) for dag_id, name, _ in _unit_params(served_dags)}
    assert {
        ("kafka_broker_restart", "operation_timeout_s"),
        ("kafka_broker_restart", "approval_timeout_s"),
        ("kafka_failed_broker_sweep", "failure_threshold_minutes"),
        ("kafka_failed_broker_sweep", "throttle_bytes_per_sec"),
        ("kafka_failed_broker_sweep", "max_bytes_per_chunk"),
        ("kafka_unclean_recovery", "recovery_duration_ms"),
        ("kafka_connect_restart", "settle_timeout_s"),
        ("kafka_reassignment_stop", "wait_for_task_s"),
    } <= found


def test_every_duration_and_size_param_takes_units_and_the_runbook_reads_them(served_dags):
    """'10m', '90s', '1h', plain numbers (sizes: '50 MiB', '50MiB', bytes) pass the API's check, and the
    runbooks' one parser reads each as the same seconds or bytes."""
    from kafka_runbooks.units import PLAIN_UNITS, parse_duration, parse_size

    for dag_id, name, kind in _unit_params(served_dags):
        dag = served_dags[dag_id]
        if kind == "size":
            for value in ("50 MiB", "50MiB", 52428800):
                assert _refusal(dag, {name: value}) == "", (dag_id, name, value)
                assert parse_size(value, name) == 50 << 20
            continue
        schema = dag.params.get_param(name).schema
        number = next((o for o in schema.get("anyOf", []) if o.get("type") == "number"), schema)
        top = number.get("maximum", 10**9) * PLAIN_UNITS[kind]
        for value, seconds in (("10m", 600), ("90s", 90), ("1h", 3600), ("90 s", 90)):
            if seconds <= top:
                assert _refusal(dag, {name: value}) == "", (dag_id, name, value)
                assert parse_duration(value, name, kind) == seconds
        plain = 5 if kind != "milliseconds" else 5000
        assert _refusal(dag, {name: plain}) == "" and _refusal(dag, {name: str(plain)}) == "", (dag_id, name)
        assert parse_duration(plain, name, kind) == plain * PLAIN_UNITS[kind]
        assert parse_duration(str(plain), name, kind) == plain * PLAIN_UNITS[kind]


def test_every_duration_and_size_param_refuses_a_negative_saying_why(served_dags):
    """A negative value is refused by the API with the rule in words (a string: the pattern's rule) or
    the minimum (a number), never 'not valid under any of the given schemas'."""
    for dag_id, name, kind in _unit_params(served_dags):
        dag = served_dags[dag_id]
        text = "-5 MiB" if kind == "size" else "-5m"
        first = _refusal(dag, {name: text}).splitlines()[0]
        assert first.startswith(f"Invalid input for param {name}: "), (dag_id, name, first)
        rule = "a size such as 50 MiB" if kind == "size" else "a duration such as 90s, 10m or 1h"
        plain = "or bytes" if kind == "size" else f"or a number of {kind}"
        assert rule in first and plain in first, (dag_id, name, first)
        first = _refusal(dag, {name: -5}).splitlines()[0]
        assert first.startswith(f"Invalid input for param {name}: "), (dag_id, name, first)
        assert "-5 is less than the minimum of" in first, (dag_id, name, first)


def test_the_unclean_form_takes_topic_partition_items_and_the_run_reads_them(served_dags):
    from kafka_runbooks.unclean.request import build_request

    conf = {"partitions": ["orders:0", "orders:3"]}
    dag = served_dags["kafka_unclean_recovery"]
    assert _refusal(dag, conf) == ""
    assert build_request(dict(dag.params.deep_merge(conf).validate())).partitions == (
        ("orders", 0),
        ("orders", 3),
    )
