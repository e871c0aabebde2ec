"""The Connect runbooks' params, checked once (no network) into the requests the glue acts on.

A bad value fails here with a :class:`BadInput` naming the param, before any call to a
Connect worker: a restart on request must not list the cluster to learn that its scope is
wrong, and a sweep must not restart half a fleet before it finds that its policy cannot be
read. What needs the worker (does the connector exist?) is checked by the runbook itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafka_runbooks.connect.autorestart import validate_patterns
from kafka_runbooks.connect.manual import validate_request
from kafka_runbooks.connect.policy import RestartPolicy
from kafka_runbooks.errors import BadInput
from kafka_runbooks.units import parse_duration, parse_id_list

MAX_SETTLE_TIMEOUT_S = 600.0  # the form's bound: a person waits for the answer


@dataclass(frozen=True)
class ConnectorRestartRequest:
    """One restart on request (``kafka_connect_restart``): which worker, which connector, what
    of it (Connect's restart scopes), and how long to wait for it to read RUNNING again."""

    connect_conn_id: str
    connector: str
    scope: str  # kafka_runbooks.connect.manual.SCOPES
    task_ids: tuple[int, ...]  # sorted, each once; only with scope "tasks"
    settle_timeout_s: float
    fail_if_not_settled: bool = True

    def as_dict(self) -> dict[str, Any]:
        """The checked request as XCom carries it from ``check_request`` to ``restart``."""
        return {
            "connect_conn_id": self.connect_conn_id,
            "connector": self.connector,
            "scope": self.scope,
            "task_ids": list(self.task_ids),
            "settle_timeout_s": self.settle_timeout_s,
            "fail_if_not_settled": self.fail_if_not_settled,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ConnectorRestartRequest:
        """Read back what :meth:`as_dict` wrote, checked again (an XCom is not trusted to be one
        of ours)."""
        return build_restart_request(data)


def build_restart_request(params: dict[str, Any]) -> ConnectorRestartRequest:
    """The manual restart's params as a request; BadInput says which param and why."""
    task_ids = parse_id_list(params.get("task_ids"), "task_ids")
    connector = params.get("connector") or ""
    scope = params.get("scope", "failed")
    ids = validate_request(connector, scope, task_ids)
    conn_id = params.get("connect_conn_id") or ""
    if not isinstance(conn_id, str) or not conn_id.strip():
        raise BadInput("connect_conn_id must name an Airflow connection")
    return ConnectorRestartRequest(
        connect_conn_id=conn_id.strip(),
        connector=connector,
        scope=scope,
        task_ids=tuple(ids),
        settle_timeout_s=parse_duration(
            params.get("settle_timeout_s", "60s"), "settle_timeout_s", maximum_s=MAX_SETTLE_TIMEOUT_S
        ),
        fail_if_not_settled=bool(params.get("fail_if_not_settled", True)),
    )


@dataclass(frozen=True)
class AutoRestartRequest:
    """One auto-restart sweep (``kafka_connect_autorestart``): the back-off policy, the connectors
    never restarted, and the Connect clusters when the run names them itself."""

    policy: RestartPolicy
    exclude: tuple[str, ...] = ()
    connect_conn_ids: tuple[str, ...] | None = None  # None: each Kafka cluster's own (the fleet)
    fail_on_alert: bool = True


def parse_connect_conn_ids(value: Any) -> list[str]:
    """The Connect connection ids to sweep, stripped and without duplicates; BadInput when none or a blank
    one is given."""
    ids = value or []
    if isinstance(ids, str):
        ids = [ids]
    if not ids or any(not isinstance(i, str) or not i.strip() for i in ids):
        raise BadInput(f"connect_conn_ids must be a non-empty list of connection ids, got {ids!r}")
    return list(dict.fromkeys(i.strip() for i in ids))


def policy_from_params(params: dict[str, Any]) -> RestartPolicy:
    """The restart policy from the sweep's params: the step and cap as '2m', '1h' or a number of
    minutes, ``minute_seconds`` as a duration in seconds (tests shorten a policy minute). A param
    left out is the policy's default; ``max_restarts`` null is unlimited."""
    default = RestartPolicy()
    max_restarts = params.get("max_restarts", default.max_restarts)
    return RestartPolicy(
        step_minutes=parse_duration(params.get("step_minutes", 2), "step_minutes", "minutes") / 60,
        max_interval_minutes=parse_duration(
            params.get("max_interval_minutes", 30), "max_interval_minutes", "minutes"
        )
        / 60,
        max_restarts=None if max_restarts is None else _count("max_restarts", max_restarts),
        minute_seconds=parse_duration(params.get("minute_seconds", 60), "minute_seconds"),
        errors_before_alert=_count(
            "errors_before_alert", params.get("errors_before_alert", default.errors_before_alert)
        ),
    )


def _count(name: str, value: Any) -> int:
    """A count from the form or a REST conf; BadInput naming the param when it is not a number."""
    try:
        return int(value)
    except (TypeError, ValueError):
        raise BadInput(f"{name} must be a whole number, not {value!r}") from None


def build_sweep_request(params: dict[str, Any]) -> AutoRestartRequest:
    """The auto-restart sweep's params as a request; BadInput says which param and why.

    ``connect_conn_ids`` left out (or null) means the fleet's Connect clusters; given, it must
    list at least one connection.
    """
    given = params.get("connect_conn_ids")
    return AutoRestartRequest(
        policy=policy_from_params(params),
        exclude=tuple(validate_patterns(params.get("exclude") or [])),
        connect_conn_ids=None if given is None else tuple(parse_connect_conn_ids(given)),
        fail_on_alert=bool(params.get("fail_on_alert", True)),
    )
