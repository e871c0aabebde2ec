"""The proof a destructive write function takes: an approved action, as the approval check found it.

The approval gate (``kafka_runbooks.approval``, the plugins' ``require_approval``) decides whether a
run's current plan is approved. A write that happens far from the gate (a rebalance's leader-only
reorders, a preferred-leader election after the chunks) must not trust whoever calls it to have
asked: it takes an :class:`ApprovedAction`, which only :func:`approved_action` builds, from the record
the approval check just returned and the action whose digest it checked, and asks it for exactly
what it is about to write (:meth:`ApprovedAction.require`). A verify step, a cleanup or a cleared
task that was handed no proof cannot write; one handed a proof of another plan cannot write this one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_runbooks.approval import (
    APPROVED,
    NOT_REQUIRED,
    NotApproved,
    canonical_json,
    plan_digest,
    user_label,
)

_ISSUED = object()  # only approved_action builds an ApprovedAction


@dataclass(frozen=True)
class ApprovedAction:
    """What a destructive write function takes instead of trusting its caller: the action a gate
    approved, as the approval check found it approved (its digest recomputed from the action).

    A write function asks it for exactly what it is about to do (:meth:`require`) and refuses
    (NotApproved) when the approved action says otherwise: a verify step, a cleanup or a cleared
    task that was handed no proof cannot write, and one handed a proof of another plan cannot
    write this one. Built only by :func:`approved_action`, right after the approval check.
    """

    digest: str
    action: Mapping[str, Any]
    outcome: str
    by: str
    issued: object = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.issued is not _ISSUED:
            raise NotApproved("an ApprovedAction is handed out by the approval check only (approved_action)")

    def require(self, key: str, value: Any) -> None:
        """NotApproved unless the approved action's ``key`` is exactly ``value`` (canonical JSON), and
        the action is no dry run: the write about to happen is the one approved."""
        if self.action.get("dry_run"):
            raise NotApproved(f"the approved action {self.digest} is a dry run: nothing may be written")
        if canonical_json(self.action.get(key)) != canonical_json(value):
            raise NotApproved(
                f"{key} about to be done is not the approved one ({self.digest}, by {self.by}): "
                f"approved {canonical_json(self.action.get(key))[:300]}, about to do {canonical_json(value)[:300]}"
            )

    def as_dict(self) -> dict[str, Any]:
        """For decision records: which approval a write acted on."""
        return {"digest": self.digest, "outcome": self.outcome, "by": self.by}


def approved_action(record: Mapping[str, Any], digest: str, action: Mapping[str, Any]) -> ApprovedAction:
    """The proof of approval for ``action``, from the record the approval check (``check_approval``,
    the plugins' ``require_approval``) just returned for ``digest``: NotApproved unless the record
    approves that digest and the digest is the action's own."""
    if not record or record.get("outcome") not in (APPROVED, NOT_REQUIRED):
        raise NotApproved(f"no approval to act on: {dict(record or {}).get('outcome')!r}")
    if record.get("digest") != digest or plan_digest(dict(action)) != digest:
        raise NotApproved(
            f"the approval ({record.get('digest')}) is not of the action about to be done ({plan_digest(dict(action))})"
        )
    return ApprovedAction(
        digest=digest,
        action=json.loads(canonical_json(action)),
        outcome=str(record["outcome"]),
        by=user_label(by) if isinstance(by := record.get("by"), Mapping) else str(by or "nobody"),
        issued=_ISSUED,
    )
