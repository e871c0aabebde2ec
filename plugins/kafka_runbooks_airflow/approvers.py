"""Who may answer the runbooks' approval gates.

``KAFKA_RUNBOOKS_APPROVERS`` (environment of the DAG processor, so it is read at parse
time without any network call): comma-separated Airflow user ids, each optionally with a
display name, e.g. ``alice,bob`` or ``alice:Alice Martin,bob:Bob Chen``. The ids are what
the auth manager calls the user id: the user name with the SimpleAuthManager, the numeric
id with the FAB auth manager. When set, Airflow lets only these users answer (HTTP 403 for
anyone else); when unset, any user allowed to edit the DAG's HITL details may answer.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from kafka_runbooks.errors import BadInput

ENV_VAR = "KAFKA_RUNBOOKS_APPROVERS"


def assigned_approvers(environ: Mapping[str, str] | None = None) -> list[dict[str, str]] | None:
    """The HITL ``assigned_users`` for the gates, or None (Airflow's default: role-based only)."""
    text = (os.environ if environ is None else environ).get(ENV_VAR, "")
    users: list[dict[str, str]] = []
    seen: set[str] = set()
    for item in text.split(","):
        if not item.strip():
            continue
        user_id, _, name = item.partition(":")
        user_id, name = user_id.strip(), name.strip()
        if not user_id:
            raise BadInput(f"{ENV_VAR}: empty user id in {item!r} (expected 'id' or 'id:Name')")
        if user_id in seen:
            continue
        seen.add(user_id)
        users.append({"id": user_id, "name": name or user_id})
    return users or None
