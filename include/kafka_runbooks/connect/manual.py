"""A restart on request: the connector, some of its tasks, or the connector with its failed tasks.

Bad input fails before any call; an unknown connector or task id fails after the one
listing call, before any restart, with a message naming what does exist.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from kafka_runbooks import decisions
from kafka_runbooks.connect.client import ConnectClient, ConnectorStatus, UnknownConnector, UnknownTask

log = logging.getLogger(__name__)
STEP = "connect-restart"
SCOPES = {
    "failed": "the connector if it FAILED and its FAILED tasks (one KIP-745 call)",
    "connector": "the connector instance only (its tasks keep running)",
    "tasks": "the given task ids only",
    "all": "the connector and all its tasks (KIP-745, onlyFailed=false)",
}
SETTLING = frozenset({"RESTARTING", "UNASSIGNED"})


def validate_request(connector: str, scope: str, task_ids: Iterable[int] | None) -> list[int]:
    """Check the request's shape; returns the task ids as a sorted list without duplicates."""
    if not isinstance(connector, str) or not connector.strip():
        raise ValueError("connector: give the connector's name")
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {sorted(SCOPES)}, got {scope!r}")
    ids = list(task_ids or [])
    for t in ids:
        if isinstance(t, bool) or not isinstance(t, int) or t < 0:
            raise ValueError(f"task ids are integers >= 0, got {t!r}")
    if scope == "tasks" and not ids:
        raise ValueError("scope 'tasks' needs task_ids, e.g. [0]")
    if scope != "tasks" and ids:
        raise ValueError(f"task_ids are only for scope 'tasks' (scope is {scope!r})")
    return sorted(set(ids))


def manual_restart(
    client: ConnectClient,
    connector: str,
    scope: str = "failed",
    task_ids: Iterable[int] | None = None,
    *,
    settle_timeout_s: float = 60.0,
    logger: logging.Logger | None = None,
) -> dict[str, Any]:
    logger = logger or log
    ids = validate_request(connector, scope, task_ids)
    listing = client.list_connectors()
    if connector not in listing:
        raise UnknownConnector(
            f"connector {connector!r} does not exist on {client.url}; it has: {sorted(listing) or 'no connectors'}",
            404,
        )
    before = listing[connector]
    unknown = sorted(set(ids) - set(before.task_ids))
    if unknown:
        raise UnknownTask(
            f"connector {connector!r} on {client.url} has no task {unknown}; its tasks are {before.task_ids}",
            404,
        )
    subject = f"{client.url}/{connector}"
    decisions.record(
        STEP,
        f"restart {scope}",
        f"requested by hand: {SCOPES[scope]}",
        observed={**before.as_dict(), "task_ids": ids},
        subject=subject,
        logger=logger,
    )
    if scope == "tasks":
        statuses = [client.restart_task(connector, t) for t in ids]
        result = {
            "method": "per-task",
            "restarted_connector": False,
            "restarted_tasks": ids,
            "http_statuses": statuses,
        }
    elif scope == "connector":
        result = {
            "method": "connector",
            "restarted_connector": True,
            "restarted_tasks": [],
            "http_statuses": [client.restart_connector(connector)],
        }
    else:
        outcome = client.restart(connector, include_tasks=True, only_failed=scope == "failed", known=before)
        result = outcome.as_dict()
    after = _settle(client, connector, settle_timeout_s)
    decisions.record(
        STEP,
        "restarted",
        "the worker accepted the restart; the status after it settled is in observed",
        observed=after.as_dict(),
        action=f"{result['method']}: connector={result['restarted_connector']} tasks={result['restarted_tasks']}",
        subject=subject,
        logger=logger,
    )
    return {
        "connector": connector,
        "scope": scope,
        **result,
        "before": before.as_dict(),
        "after": after.as_dict(),
    }


def _settle(client: ConnectClient, connector: str, timeout_s: float) -> ConnectorStatus:
    deadline = time.monotonic() + timeout_s
    while True:
        status = client.connector_status(connector)
        busy = status.state in SETTLING or any(t.state in SETTLING for t in status.tasks)
        if not busy or time.monotonic() > deadline:
            return status
        time.sleep(0.5)
