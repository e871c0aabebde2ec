"""Where notifications go: the Variable ``kafka_runbooks_notify`` as one typed object.

The Variable names Airflow connections, never a secret itself: an SMTP connection (host, port,
login, password in the connection) with the addresses to write to, or a Slack incoming-webhook
connection (the webhook's URL, its token, in the connection's password). ``escalate`` are the
targets told when a gate's deadline is near (``escalate_before_minutes`` before it).
``approvers`` maps the Airflow user names a gate assigns (HITL ``assigned_users``) to how each is
reached: an ``email`` (added to each mail target's recipients) and a Slack member id ``slack_id``
(mentioned in each Slack post, so Slack notifies that person, not only the channel).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from kafka_runbooks.errors import BadInput

KINDS = ("smtp", "slack_webhook")
SLACK_MEMBER_ID = re.compile(r"^[UW][A-Z0-9]{2,}$")  # Slack's user ids: U... (W... on Enterprise Grid)
FIELDS = ("targets", "escalate", "escalate_before_minutes", "base_url", "approvers")


class NotifyConfigError(BadInput):
    """The Variable cannot be read as a notification config: the message says which field and why."""


@dataclass(frozen=True)
class Target:
    """One place a notification goes: an Airflow connection of ``kind`` (and, for mail, to whom)."""

    kind: str
    conn_id: str
    to: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """How records and messages name it: kind and connection id, never the connection's contents."""
        return f"{self.kind}:{self.conn_id}"


@dataclass(frozen=True)
class Approver:
    """How one Airflow user is reached: a mail address, a Slack member id (either may be absent)."""

    name: str
    email: str | None = None
    slack_id: str | None = None


@dataclass(frozen=True)
class Reach:
    """Who a gate's notice reaches: the ``targets`` (mail ones with the approvers' addresses added),
    the Slack ``mentions``, and the assigned approvers the Variable gives no way to reach."""

    targets: tuple[Target, ...]
    assignees: tuple[str, ...] = ()
    mentions: tuple[str, ...] = ()
    unreachable: tuple[str, ...] = ()


@dataclass(frozen=True)
class NotifyConfig:
    """Who is told: ``targets`` for every notification, ``escalate`` as a gate's deadline nears,
    and each ``approvers``' own address when a gate assigns them."""

    targets: tuple[Target, ...]
    escalate: tuple[Target, ...] = ()
    escalate_before_s: float | None = None
    base_url: str | None = None
    approvers: tuple[Approver, ...] = ()

    def reach(self, targets: tuple[Target, ...], assignees: tuple[str, ...]) -> Reach:
        """``targets`` as a gate assigned to ``assignees`` (Airflow user ids) reaches them: every mail
        target also to each assignee's address, every Slack post mentioning each one's member id."""
        known = {a.name: a for a in self.approvers}
        chosen = [known[n] for n in assignees if n in known]
        emails = tuple(a.email for a in chosen if a.email)
        out = tuple(
            Target(t.kind, t.conn_id, t.to + tuple(e for e in emails if e not in t.to))
            if t.kind == "smtp"
            else t
            for t in targets
        )
        kinds = {t.kind for t in targets}
        unreachable = tuple(
            n
            for n in assignees
            if n not in known
            or not ((known[n].email and "smtp" in kinds) or (known[n].slack_id and "slack_webhook" in kinds))
        )
        mentions = tuple(a.slack_id for a in chosen if a.slack_id) if "slack_webhook" in kinds else ()
        return Reach(out, tuple(assignees), mentions, unreachable)


def parse_notify_config(raw: str | dict[str, Any] | None) -> NotifyConfig | None:
    """The Variable's value (JSON text or an already decoded dict) as a :class:`NotifyConfig`; None
    when unset or empty (nothing is sent, and the gate's record says so)."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    data = _decoded(raw)
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise NotifyConfigError(f"unknown field(s) {unknown}: expected {', '.join(FIELDS)}")
    targets = _targets(data.get("targets"), "targets")
    if not targets:
        raise NotifyConfigError("targets: at least one target is needed (or leave the Variable unset)")
    escalate = _targets(data.get("escalate") or [], "escalate")
    before = data.get("escalate_before_minutes")
    if before is not None and (
        isinstance(before, bool) or not isinstance(before, (int, float)) or before <= 0
    ):
        raise NotifyConfigError(f"escalate_before_minutes: a positive number of minutes, not {before!r}")
    if escalate and before is None:
        raise NotifyConfigError("escalate needs escalate_before_minutes: how long before a gate's deadline")
    base_url = data.get("base_url")
    if base_url is not None and not (
        isinstance(base_url, str) and base_url.startswith(("http://", "https://"))
    ):
        raise NotifyConfigError(f"base_url: the Airflow UI's URL (http:// or https://), not {base_url!r}")
    approvers = _approvers(data.get("approvers") or {})
    return NotifyConfig(targets, escalate, before * 60 if before is not None else None, base_url, approvers)


def _approvers(items: Any) -> tuple[Approver, ...]:
    """``approvers``: Airflow user name -> ``{"email": ..., "slack_id": ...}``, each checked."""
    if not isinstance(items, dict):
        raise NotifyConfigError(
            f"approvers: an object of user name -> how to reach them, not {type(items).__name__}"
        )
    out = []
    for name, how in items.items():
        where = f"approvers[{name!r}]"
        if not isinstance(how, dict) or not how or set(how) - {"email", "slack_id"}:
            raise NotifyConfigError(f"{where}: an object with email and/or slack_id, not {how!r}")
        email, slack_id = how.get("email"), how.get("slack_id")
        if email is not None and not (isinstance(email, str) and "@" in email):
            raise NotifyConfigError(f"{where}.email: an e-mail address, not {email!r}")
        if slack_id is not None and not (isinstance(slack_id, str) and SLACK_MEMBER_ID.match(slack_id)):
            raise NotifyConfigError(
                f"{where}.slack_id: a Slack member id (U... or W..., in the member's profile), not {slack_id!r}"
            )
        out.append(Approver(name, email, slack_id))
    return tuple(out)


def _decoded(raw: str | dict[str, Any]) -> dict[str, Any]:
    """The Variable's JSON object."""
    if isinstance(raw, dict):
        return raw
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise NotifyConfigError(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise NotifyConfigError(f"a JSON object is expected, not {type(data).__name__}")
    return data


def _targets(items: Any, field: str) -> tuple[Target, ...]:
    """The list under ``field`` as targets, each checked."""
    if not isinstance(items, list):
        raise NotifyConfigError(f"{field}: a list of targets, not {type(items).__name__}")
    return tuple(_target(item, f"{field}[{i}]") for i, item in enumerate(items))


def _target(item: Any, where: str) -> Target:
    """One target: its kind, its connection id and, for mail, a non-empty list of addresses."""
    if not isinstance(item, dict):
        raise NotifyConfigError(f"{where}: an object with kind and conn_id, not {item!r}")
    kind, conn_id = item.get("kind"), item.get("conn_id")
    if kind not in KINDS:
        raise NotifyConfigError(f"{where}.kind: one of {list(KINDS)}, not {kind!r}")
    if not isinstance(conn_id, str) or not conn_id.strip():
        raise NotifyConfigError(f"{where}.conn_id: the Airflow connection's id, not {conn_id!r}")
    to = item.get("to") or []
    if kind == "smtp":
        if not isinstance(to, list) or not to or not all(isinstance(a, str) and "@" in a for a in to):
            raise NotifyConfigError(f"{where}.to: a list of e-mail addresses, not {to!r}")
    elif to:
        raise NotifyConfigError(
            f"{where}.to: only smtp targets take addresses (a webhook posts to its channel)"
        )
    return Target(kind, conn_id.strip(), tuple(to))
