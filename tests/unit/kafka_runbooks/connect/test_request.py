"""The Connect runbooks' requests: params checked once, before any call to a worker (issue #26).

The checks were in the glue (policy_from_params, conn_ids_from_params, check_restart_request)
and in the manual DAG's restart task (settle_timeout_s); the messages are the same.
"""

from __future__ import annotations

import pytest

from kafka_runbooks.connect.policy import RestartPolicy
from kafka_runbooks.connect.request import (
    AutoRestartRequest,
    ConnectorRestartRequest,
    build_restart_request,
    build_sweep_request,
    parse_connect_conn_ids,
)
from kafka_runbooks.errors import BadInput

MANUAL = {"connect_conn_id": " x ", "connector": "c", "scope": "tasks", "task_ids": "2, 0"}


def test_the_manual_restart_request_is_read_once_with_its_wait():
    request = build_restart_request({**MANUAL, "settle_timeout_s": "2m", "fail_if_not_settled": False})
    assert request == ConnectorRestartRequest("x", "c", "tasks", (0, 2), 120.0, False)
    defaults = build_restart_request({"connect_conn_id": "x", "connector": "c"})
    assert (defaults.scope, defaults.task_ids, defaults.settle_timeout_s) == ("failed", (), 60.0)
    assert defaults.fail_if_not_settled is True


def test_the_manual_restart_request_crosses_xcom_and_comes_back_the_same():
    request = build_restart_request(MANUAL)
    carried = request.as_dict()
    assert carried["task_ids"] == [0, 2] and carried["settle_timeout_s"] == 60.0
    assert ConnectorRestartRequest.from_dict(carried) == request
    with pytest.raises(BadInput, match="scope must be one of"):
        ConnectorRestartRequest.from_dict({**carried, "scope": "everything"})


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"connector": ""}, "connector's name"),
        ({"scope": "everything"}, "scope must be one of"),
        ({"task_ids": "0;2"}, "task_ids must be ids separated by commas"),
        ({"task_ids": None}, "scope 'tasks' needs task_ids"),
        ({"scope": "all"}, "task_ids are only for scope 'tasks'"),
        ({"connect_conn_id": "  "}, "connect_conn_id must name an Airflow connection"),
        ({"settle_timeout_s": "11m"}, "settle_timeout_s"),
        ({"settle_timeout_s": "soon"}, "settle_timeout_s"),
    ],
)
def test_a_bad_manual_restart_is_refused_naming_the_param(params, message):
    with pytest.raises(BadInput, match=message):
        build_restart_request({**MANUAL, **params})


def test_the_sweep_request_carries_the_policy_the_exclusions_and_the_named_clusters():
    request = build_sweep_request(
        {
            "step_minutes": "90s",
            "max_interval_minutes": "1h",
            "max_restarts": None,
            "minute_seconds": 1,
            "errors_before_alert": 2,
            "exclude": [" mm2-* "],
            "connect_conn_ids": ["a", "a", " b "],
            "fail_on_alert": False,
        }
    )
    assert request == AutoRestartRequest(
        RestartPolicy(1.5, 60.0, None, 1.0, 2), ("mm2-*",), ("a", "b"), fail_on_alert=False
    )
    default = build_sweep_request({})
    assert default == AutoRestartRequest(RestartPolicy(), (), None, True)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"minute_seconds": 0}, "minute_seconds"),
        ({"step_minutes": "2 fortnights"}, "step_minutes"),
        ({"max_restarts": -1}, "max_restarts must be None"),
        ({"max_restarts": "many"}, "max_restarts must be a whole number"),
        ({"errors_before_alert": 0}, "errors_before_alert must be >= 1"),
        ({"exclude": [""]}, "exclude patterns must be non-empty strings"),
        ({"connect_conn_ids": []}, "connect_conn_ids must be a non-empty list"),
        ({"connect_conn_ids": ["a", " "]}, "connect_conn_ids must be a non-empty list"),
    ],
)
def test_a_bad_sweep_is_refused_naming_the_param(params, message):
    with pytest.raises(BadInput, match=message):
        build_sweep_request(params)


def test_the_run_may_name_one_connect_cluster_as_a_string():
    assert parse_connect_conn_ids(" c1 ") == ["c1"]
    with pytest.raises(BadInput, match="got \\[\\]"):
        parse_connect_conn_ids(None)
