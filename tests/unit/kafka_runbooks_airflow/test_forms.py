"""The manual runbooks' trigger forms, as a person meets them in Airflow 3.3's UI.

``widget`` and ``required`` follow the rules of Airflow's form (``FieldSelector.tsx`` and
``isParamRequired.tsx`` of the 3.3 UI): several non-null types give a JSON editor, an
array of non-strings a JSON editor, a ``type`` without ``null`` makes the field required
(an empty box then disables Trigger), no ``type`` takes the widget from the default
value. The browser test (tests/e2e/test_console_browser.py) checks the real form.
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
MANUAL_DAGS = [
    "kafka_unclean_recovery",
    "kafka_broker_restart",
    "kafka_failed_broker_reassignment",
    "kafka_connect_restart",
    "kafka_cluster_health",
]


def widget(schema: dict, value) -> str:
    types = schema.get("type")
    if isinstance(types, list) and len([t for t in types if t != "null"]) > 1 and "enum" not in schema:
        return "json"
    if types:
        kind = next((t for t in types if t != "null"), "string") if isinstance(types, list) else types
    else:
        kind = "array" if isinstance(value, list) else "null" if value is None else type(value).__name__
        kind = {"str": "string", "int": "integer", "bool": "boolean", "float": "number"}.get(kind, kind)
    if kind == "array" and schema.get("items", {}).get("type") not in (None, "string"):
        return "json"
    if kind == "object":
        return "json"
    return {"string": "text", "null": "text", "integer": "number", "number": "number"}.get(kind, kind)


def required(schema: dict) -> bool:
    types = schema.get("type")
    return bool(types) and (not isinstance(types, list) or "null" not in types)


@pytest.fixture(scope="module")
def dags():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags"), safe_mode=False)
    assert not bag.import_errors
    return bag.dags


def _param(dags, dag_id, name):
    return dags[dag_id].params.get_param(name)


def _validate(dags, dag_id, conf):
    params = copy.deepcopy(dags[dag_id].params)
    for key, value in conf.items():
        params[key] = value
    params.validate()


def test_every_field_is_a_plain_widget_with_a_description_of_format_and_consequence(dags):
    for dag_id in MANUAL_DAGS:
        for name in dags[dag_id].params:
            param = _param(dags, dag_id, name)
            assert widget(param.schema, param.value) != "json", f"{dag_id}.{name} is a JSON text area"
            text = param.description or ""
            assert len(text) >= 40, f"{dag_id}.{name}: description too short to say format and consequence"


def test_unclean_recovery_can_be_triggered_with_all_offline_partitions(dags):
    from kafka_runbooks.unclean.request import build_request

    param = _param(dags, "kafka_unclean_recovery", "partitions_json")
    assert not required(param.schema), "an empty partitions_json would keep Trigger disabled"
    conf = {"all_offline_partitions": True, "partitions_json": None}  # what the form sends for an empty box
    _validate(dags, "kafka_unclean_recovery", conf)
    assert build_request({**dags["kafka_unclean_recovery"].params.dump(), **conf}).all_offline


def test_restart_has_no_whole_cluster_default(dags):
    """No default node list (the person names the nodes), yet Trigger stays enabled (issue #24.4): the
    run's input check refuses the empty list (test_trigger_forms.py)."""
    param = _param(dags, "kafka_broker_restart", "node_ids")
    assert param.value is None and not required(param.schema), "empty, and the form's Trigger enabled"
    _validate(dags, "kafka_broker_restart", {"node_ids": "1, 2,9001"})
    _validate(dags, "kafka_broker_restart", {"node_ids": "3"})  # what the metadata sweep sends
    with pytest.raises(Exception, match="Invalid input for param"):
        _validate(dags, "kafka_broker_restart", {"node_ids": "1;2"})


def test_reassignment_form_takes_sizes_with_units_and_plain_broker_lists(dags):
    from kafka_runbooks.failed_broker.request import build_request

    dag = dags["kafka_failed_broker_reassignment"]
    for name in ("max_bytes_per_chunk", "throttle_bytes_per_sec"):
        assert isinstance(dag.params[name], str) and "iB" in dag.params[name], f"{name} default without unit"
    for name in ("failed_brokers", "receivers"):
        assert widget(_param(dags, dag.dag_id, name).schema, dag.params[name]) == "text"
    form = {"failed_brokers": "4, 5", "receivers": "1,2,3", "max_bytes_per_chunk": "512 MiB"}
    _validate(dags, dag.dag_id, form)
    request = build_request({**dag.params.dump(), **form})
    assert request.failed_brokers == (4, 5) and request.receivers == (1, 2, 3)
    assert request.max_bytes_per_chunk == 512 << 20 and request.throttle_bytes_per_sec == 50 << 20
    for bad in ({"failed_brokers": "[4]"}, {"max_bytes_per_chunk": "lots"}, {"throttle_bytes_per_sec": 0}):
        with pytest.raises(Exception, match="Invalid input for param"):
            _validate(dags, dag.dag_id, bad)


def test_the_sweeps_conf_still_validates(dags):
    """kafka_failed_broker_sweep passes ids as a list and sizes in bytes; the metadata sweep node ids as text."""
    from kafka_runbooks.failed_broker.request import build_request
    from kafka_runbooks_airflow.failed_broker import SWEEP_DEFAULTS

    conf = {
        "failed_brokers": [4],
        "receivers": "all",
        "max_partitions_per_chunk": 50,
        "max_bytes_per_chunk": int(SWEEP_DEFAULTS["max_bytes_per_chunk"]),
        "throttle_bytes_per_sec": int(SWEEP_DEFAULTS["throttle_bytes_per_sec"]),
        "require_approval": True,
        "dry_run": False,
        "kafka_config_id": "kafka_default",
    }
    _validate(dags, "kafka_failed_broker_reassignment", conf)
    assert build_request(conf).max_bytes_per_chunk == 1 << 30


def test_connect_task_ids_are_a_text_box():
    from kafka_runbooks.connect.request import build_restart_request

    base = {"connect_conn_id": "x", "connector": "c", "scope": "tasks"}
    assert build_restart_request({**base, "task_ids": "2, 0"}).task_ids == (0, 2)
    assert build_restart_request({**base, "task_ids": [1]}).task_ids == (1,)
    with pytest.raises(ValueError, match="task_ids must be ids separated by commas"):
        build_restart_request({**base, "task_ids": "0;2"})


@pytest.mark.parametrize(
    ("parse", "params", "message"),
    [
        ("unclean", {"mode": "show_replica_info", "partitions_json": "{not json"}, "not valid JSON"),
        ("unclean", {"mode": "show_replica_info"}, "neither was given"),
        ("reassign", {"max_bytes_per_chunk": "1 GB per chunk"}, "must be a size such as"),
        ("reassign", {"failed_brokers": "four"}, "'detect' or broker ids"),
    ],
)
def test_a_bad_value_is_a_decision_record_not_only_a_traceback(caplog, parse, params, message):
    from airflow.sdk.exceptions import AirflowFailException

    from kafka_runbooks.failed_broker.request import build_request as reassign_request
    from kafka_runbooks.unclean.request import build_request as unclean_request
    from kafka_runbooks_airflow.inputs import refuse_bad_input

    parser = {"unclean": unclean_request, "reassign": reassign_request}[parse]
    with caplog.at_level(logging.INFO), pytest.raises(AirflowFailException, match=message):
        refuse_bad_input(parser, params, "kafka_runbooks.test")
    records = [r for r in caplog.records if getattr(r, "decision_record", None)]
    assert len(records) == 1 and records[0].levelno == logging.ERROR
    assert message in records[0].getMessage() and "nothing was done" in records[0].getMessage()


def test_sizes_read_as_people_write_them():
    from kafka_runbooks.units import SizeError, format_size, parse_size

    assert (
        parse_size("1 GiB") == 1 << 30 and parse_size("50MiB") == 50 << 20 and parse_size("2 MB") == 2_000_000
    )
    assert parse_size(1048576) == 1 << 20 and parse_size("0.5 KiB") == 512
    for bad in ("0 MiB", "-1", "1 GiB/s", "1.3 B", True):
        with pytest.raises(SizeError):
            parse_size(bad)
    assert format_size(10_760_464) == "10.3 MiB" and format_size(512) == "512 B"
