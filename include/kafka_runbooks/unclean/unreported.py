"""What the cluster says of a plan's partitions when its elections task ended without reporting.

A kill -9 (or a Clear) of the elections task after its UNCLEAN election reached the controller
leaves the partition online, led by the replica the plan chose, with nobody left to say so: the
restore step then read "the elections failed" as "the offline partitions were not recovered", and a
run whose approved election lost acknowledged records ended without naming the loss (fault
campaign, round 3, unclean:13). The last step asks the cluster instead: each planned partition is
still offline, back with the plan's choice as leader (elected after the plan: its leader epoch is
newer), or back with another leader; a choice that was not known to hold every committed record is
named RECOVERED WITH LOSS, with the same words as a reported election.
"""

from __future__ import annotations

import logging
from typing import Any

from kafka_runbooks import decisions
from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.errors import KafkaRunbookError
from kafka_runbooks.unclean.choose import Choice

log = logging.getLogger(__name__)
LOSS_WORDS = "RECOVERED WITH LOSS of acknowledged records"


def partitions_now(admin: ClusterAdmin, document: dict[str, Any], logger=None) -> dict[str, str]:
    """Per planned partition with a choice, what the cluster says now, in words (each a decision
    record); a read that fails says so: unknown, never "not recovered"."""
    logger = logger or log
    choices = [Choice.from_dict(c) for c in document.get("choices") or () if c.get("chosen") is not None]
    if not choices:
        return {}
    try:
        now = {p.name: p for p in admin.describe_partitions(sorted({c.topic for c in choices}))}
    except KafkaRunbookError as exc:
        return dict.fromkeys((c.name for c in choices), f"unknown: the partitions were not read ({exc})")
    return {c.name: _judge(c, now.get(c.name), logger) for c in choices}


def _judge(choice: Choice, part, logger) -> str:
    """One partition's words, recorded."""
    if part is None:
        return "unknown: the partition is not in the metadata any more"
    if part.leader < 0:
        words, level = "still offline (no leader)", logging.ERROR
    elif part.leader == choice.chosen and part.leader_epoch > choice.leader_epoch:
        if choice.loses_committed:
            words = (
                f"{LOSS_WORDS}: online, led by broker {choice.chosen} (this run's choice, elected after the "
                f"plan: leader epoch {choice.leader_epoch} -> {part.leader_epoch}), not known to hold every "
                f"committed record (clean replicas {list(choice.clean_replicas)}); acknowledged records lost: "
                f"{choice.committed_loss}"
            )
        else:
            words = f"recovered: online, led by broker {choice.chosen} (this run's clean choice)"
        level = logging.ERROR if choice.loses_committed else logging.WARNING
    elif part.leader == choice.chosen:
        words = f"online, led by broker {part.leader} at the planned leader epoch {part.leader_epoch}"
        level = logging.WARNING
    else:
        words = (
            f"online, led by broker {part.leader} (epoch {part.leader_epoch}), not by this run's choice "
            f"{choice.chosen}: elected by someone else"
        )
        level = logging.WARNING
    decisions.record(
        "outcome",
        LOSS_WORDS if words.startswith(LOSS_WORDS) else "read the partition after the elections task ended",
        words,
        observed={
            "leader": part.leader,
            "leader_epoch": part.leader_epoch,
            "planned_epoch": choice.leader_epoch,
        },
        subject=choice.name,
        logger=logger,
        level=level,
    )
    return words
