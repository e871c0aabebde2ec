"""The replica table, the plan document and the manual recovery file."""

from __future__ import annotations

import json
from pathlib import Path

from kafka_runbooks.unclean.choose import Choice


def _cell(value) -> str:
    return "-" if value is None else str(value)


def replica_table(choices: list[Choice], online: list[str] = ()) -> str:
    """One line per replica: partition, broker, leader epoch, log end offset, offsets lost, choice."""
    header = ("partition", "broker", "leader_epoch", "log_end_offset", "lost_if_elected", "choice", "note")
    lines = [header]
    for c in choices:
        for r in c.rows:
            mark = []
            if r.broker_id == c.chosen:
                mark.append("CHOSEN")
            if r.broker_id == c.kafka_unclean_pick:
                mark.append("kafka-unclean-pick")
            lines.append(
                (
                    c.name,
                    str(r.broker_id),
                    _cell(r.leader_epoch),
                    _cell(r.log_end_offset),
                    _cell(r.offsets_lost_vs_choice),
                    ",".join(mark) or "",
                    r.note,
                )
            )
        if c.chosen is None:
            lines.append((c.name, "-", "-", "-", "-", "NO CANDIDATE", c.reason))
    for name in online:
        lines.append((name, "-", "-", "-", "-", "ONLINE", "has a leader: left alone"))
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in lines)


def recovery_file(choices: list[Choice]) -> dict:
    """The proposal's output: partitions with their ``designatedLeader`` (kafka-leader-election input)."""
    return {
        "partitions": [
            {"topic": c.topic, "partition": c.partition, "designatedLeader": c.chosen}
            for c in choices
            if c.chosen is not None
        ]
    }


def write_json(path: Path, document: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, sort_keys=False) + "\n")
    return path
