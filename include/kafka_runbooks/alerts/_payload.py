"""Alertmanager's webhook body as typed alerts.

Alertmanager posts (``webhook_config``, payload version ``4``) a JSON object with ``receiver``,
``status``, ``alerts`` (each ``status``, ``labels``, ``annotations``, ``startsAt``, ``endsAt``,
``generatorURL``, ``fingerprint``), ``groupLabels``, ``commonLabels``, ``externalURL`` and
``groupKey``. One post can carry many alerts, firing and resolved together.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kafka_runbooks.errors import BadInput

STATUSES = ("firing", "resolved")


@dataclass(frozen=True)
class Alert:
    """One alert of a post: its name (label ``alertname``), labels, state and identity."""

    name: str
    status: str
    labels: dict[str, str]
    fingerprint: str
    starts_at: str
    ends_at: str | None = None
    annotations: dict[str, str] = field(default_factory=dict)
    generator_url: str | None = None

    @property
    def firing(self) -> bool:
        """Whether the alert fires (else it was resolved)."""
        return self.status == "firing"

    def as_dict(self) -> dict[str, Any]:
        """The alert as the intake records it (what the run's conf and records carry)."""
        return {
            "name": self.name,
            "status": self.status,
            "labels": dict(self.labels),
            "fingerprint": self.fingerprint,
            "starts_at": self.starts_at,
            "ends_at": self.ends_at,
            "annotations": dict(self.annotations),
            "generator_url": self.generator_url,
        }


def parse_webhook(body: Any) -> list[Alert]:
    """The alerts of an Alertmanager webhook body; BadInput naming the field when it is not one."""
    if not isinstance(body, dict):
        raise BadInput(f"an Alertmanager webhook body is a JSON object, not {type(body).__name__}")
    if str(body.get("version", "4")) != "4":
        raise BadInput(
            f"Alertmanager webhook payload version {body.get('version')!r}: only version 4 is read"
        )
    alerts = body.get("alerts")
    if not isinstance(alerts, list):
        raise BadInput("alerts: a list is expected")
    return [_alert(a, f"alerts[{i}]") for i, a in enumerate(alerts)]


def _alert(item: Any, where: str) -> Alert:
    """One alert, its required fields checked."""
    if not isinstance(item, dict):
        raise BadInput(f"{where}: an object is expected")
    labels, status = _strings(item.get("labels"), f"{where}.labels"), item.get("status")
    if status not in STATUSES:
        raise BadInput(f"{where}.status: one of {list(STATUSES)}, not {status!r}")
    if not labels.get("alertname"):
        raise BadInput(f"{where}.labels.alertname: missing")
    fingerprint, starts_at = item.get("fingerprint"), item.get("startsAt")
    if not isinstance(fingerprint, str) or not fingerprint:
        raise BadInput(f"{where}.fingerprint: missing (Alertmanager 0.19+ sends it)")
    if not isinstance(starts_at, str) or not starts_at:
        raise BadInput(f"{where}.startsAt: missing")
    ends_at = item.get("endsAt")
    return Alert(
        name=labels["alertname"],
        status=status,
        labels=labels,
        fingerprint=fingerprint,
        starts_at=starts_at,
        ends_at=None if not ends_at or str(ends_at).startswith("0001-01-01") else str(ends_at),
        annotations=_strings(item.get("annotations") or {}, f"{where}.annotations"),
        generator_url=item.get("generatorURL") or None,
    )


def _strings(value: Any, where: str) -> dict[str, str]:
    """A label or annotation set: string keys to string values."""
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise BadInput(f"{where}: an object of strings is expected")
    return dict(value)
