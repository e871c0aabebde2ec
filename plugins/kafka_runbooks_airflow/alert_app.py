"""Alertmanager's webhook receiver, served by Airflow's own API server (a plugin ``fastapi_apps``
entry mounted at ``/kafka-alerts``): each post becomes one asset event of
:data:`~kafka_runbooks_airflow.alert_intake.ALERTS`, which the DAG ``kafka_alert_intake`` is
scheduled on.

Authenticated by a shared secret: the API server's environment variable
``KAFKA_RUNBOOKS_ALERTS_TOKEN``, sent by Alertmanager as ``Authorization: Bearer <token>``
(``webhook_config.http_config.authorization.credentials``). Unset, the receiver refuses every post
(503): no alert starts anything until a deployment turns it on. A body that is not an Alertmanager
webhook (version 4) is refused with the field it is about (400) and records nothing.
"""

from __future__ import annotations

import hmac
import os
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from kafka_runbooks.alerts import parse_webhook
from kafka_runbooks.errors import BadInput

URL_PREFIX = "/kafka-alerts"
TOKEN_ENV = "KAFKA_RUNBOOKS_ALERTS_TOKEN"  # noqa: S105 - the variable's name, not its value

app = FastAPI(title="Kafka runbooks alert intake", docs_url=None, redoc_url=None, openapi_url=None)


def _refusal(status: int, why: str) -> JSONResponse:
    """A refused post: its status and the reason in words."""
    return JSONResponse({"error": why}, status_code=status)


def authorized(header: str | None, token: str | None) -> bool:
    """Whether the ``Authorization`` header carries the configured token (compared in constant time)."""
    if not token:
        return False
    return hmac.compare_digest((header or "").encode(), f"Bearer {token}".encode())


@app.post("/alertmanager")
async def alertmanager(request: Request):
    """One Alertmanager post: checked, then recorded as one asset event (202 with its id and alert count)."""
    token = os.environ.get(TOKEN_ENV) or None
    if token is None:
        return _refusal(503, f"the alert intake is off: set {TOKEN_ENV} on the API server to turn it on")
    if not authorized(request.headers.get("authorization"), token):
        return _refusal(
            401, "a bearer token is required (Alertmanager: http_config.authorization.credentials)"
        )
    try:
        body = await request.json()
        alerts = parse_webhook(body)
    except (ValueError, BadInput) as exc:
        return _refusal(400, f"not an Alertmanager webhook body: {exc}")
    event_id = _register(body)
    if event_id is None:
        return _refusal(503, "the DAG kafka_alert_intake is not parsed yet: its asset does not exist")
    return JSONResponse({"asset_event_id": event_id, "alerts": len(alerts)}, status_code=202)


def _register(body: dict[str, Any]) -> int | None:
    """The post as an asset event of the alerts asset (as Airflow's own ``POST /assets/events``
    records one); None when the asset is not known yet."""
    from airflow.assets.manager import asset_manager
    from airflow.models.asset import AssetModel
    from airflow.utils import timezone
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from kafka_runbooks_airflow.alert_intake import ALERTS_NAME, EXTRA_KEY

    with create_session() as session:  # by name: Airflow stores the URI normalised (a "/" added)
        asset = session.scalar(select(AssetModel).where(AssetModel.name == ALERTS_NAME).limit(1))
        if asset is None:
            return None
        event = asset_manager.register_asset_change(
            asset=asset,
            timestamp=timezone.utcnow(),
            extra={EXTRA_KEY: body},
            source_is_api=True,
            session=session,
        )
        return None if event is None else event.id
