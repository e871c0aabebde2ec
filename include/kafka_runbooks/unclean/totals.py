"""The totals that open the unclean recovery's approval gate, before its per-partition table.

A gate over many partitions was a table of thousands of rows with no totals (issue #39 point 7):
the approver had to add up what the elections lose. The totals are sums of the figures each
partition's SUMMARY already states (:mod:`.render`), never new ones: acknowledged records lost
(a number only where the chosen replica holds every committed record, else unknown), offsets lost
against the longest log that answered, for the choice and for Kafka's own unclean election. An
unknown figure is never added as 0: a total with unknowns says "at least N" and how many
partitions it leaves out, by name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from kafka_runbooks.unclean.choose import Choice

NAMES_SHOWN = 20  # partitions named in a totals line; the rest are counted
_FIGURE = re.compile(r"^(\d+)(?=:|$)")  # committed_loss "0: broker 2 holds every committed record"


def acknowledged_lost(c: Choice) -> int | None:
    """The acknowledged records electing ``c``'s chosen replica loses, as its SUMMARY states them
    (``committed_loss``); None when that figure is unknown (or nothing is elected)."""
    if c.chosen is None:
        return None
    found = _FIGURE.match(c.committed_loss or "")
    return int(found.group(1)) if found else None


def _names(choices: Iterable[Choice]) -> str:
    """The partitions' names, the first :data:`NAMES_SHOWN` of them, and how many more."""
    names = [c.name for c in choices]
    more = len(names) - NAMES_SHOWN
    return ", ".join(names[:NAMES_SHOWN]) + (f" and {more} more" if more > 0 else "")


def summed(figures: list[int | None], choices: list[Choice], unknown_why: str) -> str:
    """The sum of per-partition figures in words: the exact sum when every figure is known, else
    "at least" the known ones' sum and the partitions whose figure is unknown, by name."""
    known = sum(f for f in figures if f is not None)
    unknown = [c for c, f in zip(choices, figures) if f is None]
    if not choices:
        return "0 (nothing is elected)"
    if not unknown:
        return str(known)
    said = f"unknown for {len(unknown)} partition(s) ({unknown_why}): {_names(unknown)}"
    others = len(choices) - len(unknown)
    return said if not others else f"at least {known} ({known} for the other {others}); {said}"


def _elected_lines(elected: list[Choice]) -> list[str]:
    """The loss lines: acknowledged records, and offsets against the longest log that answered, for
    the choice and for Kafka's own unclean election (the first live replica)."""
    unread = [c for c in elected if any(r.log_end_offset is None for r in c.rows)]
    caveat = (
        f" ({len(unread)} of these partition(s) have a replica that was not read and may hold more)"
        if unread
        else ""
    )
    choice_loss = summed([c.loss_vs_longest for c in elected], elected, "no replica answered")
    kafka_loss = summed(
        [c.kafka_pick_loss_vs_longest for c in elected], elected, "no live replica, or its log was not read"
    )
    acked = summed(
        [acknowledged_lost(c) for c in elected],
        elected,
        "the chosen replica is not known to hold every committed record",
    )
    return [
        f"- **Acknowledged records lost if the chosen replicas are elected:** {acked}",
        f"- **Offsets lost against the longest log that answered{caveat}:** the choice: {choice_loss}; "
        f"Kafka's own unclean election: {kafka_loss}",
    ]


def totals_markdown(choices: list[Choice], online: list[str] = ()) -> str:
    """The gate's opening lines: how many partitions and topics, how many are elected (and on a replica
    that lacks committed records), how many are not, and the sums of what the elections lose."""
    elected = [c for c in choices if c.chosen is not None]
    lacking = [c for c in elected if c.loses_committed]
    left = [c for c in choices if c.chosen is None]
    topics = {c.topic for c in choices}
    head = f"**Totals:** {len(choices)} offline partition(s) in {len(topics)} topic(s)"
    if online:
        head += f"; {len(online)} named partition(s) are online and left alone"
    lines = [
        head,
        "",
        f"- **Elected:** {len(elected)} partition(s)"
        + (
            f", {len(lacking)} on a replica that LACKS COMMITTED RECORDS: {_names(lacking)}"
            if lacking
            else ""
        ),
        f"- **Not elected:** {len(left)} partition(s)"
        + (f" (clean path or no candidate; see their SUMMARY): {_names(left)}" if left else ""),
        *_elected_lines(elected),
    ]
    return "\n".join(lines)
