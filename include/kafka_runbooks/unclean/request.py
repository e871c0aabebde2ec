"""What to recover: parse and validate the input before anything touches the cluster.

The input mirrors the proposal's ``--path-to-json-file`` format::

    {"partitions": [{"topic": "foo", "partitions": [0, 3, 5]}, {"topic": "bar", "partitions": [1]}]}

or ``--all-offline-partitions``; exactly one of the two.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kafka_runbooks.errors import BadInput
from kafka_runbooks.model import ClusterState, PartitionState

MODES = ("show_replica_info", "manual_recovery_file", "automated_recovery")


class RecoveryInputError(BadInput):
    """The request is malformed or names partitions the cluster does not have."""


@dataclass(frozen=True)
class RecoveryRequest:
    mode: str
    partitions: tuple[tuple[str, int], ...] | None  # None = all offline partitions
    recovery_duration_ms: int = 30000
    recovery_election_attempts: int = 3
    # elect a replica not known to hold every committed record (ISR/ELR/last known ELR) even
    # though one that does exists or none is known: the operator's explicit, separate choice
    allow_committed_loss: bool = False

    @property
    def all_offline(self) -> bool:
        return self.partitions is None


def parse_partitions(document: str | dict | None) -> tuple[tuple[str, int], ...]:
    """The proposal's JSON partition list as sorted, de-duplicated (topic, partition) pairs."""
    if isinstance(document, str):
        try:
            document = json.loads(document)
        except json.JSONDecodeError as exc:
            raise RecoveryInputError(f"the partition list is not valid JSON: {exc}") from exc
    if not isinstance(document, dict) or not isinstance(document.get("partitions"), list):
        raise RecoveryInputError('the partition list must be an object {"partitions": [...]}')
    if not document["partitions"]:
        raise RecoveryInputError(
            'the partition list is empty: name at least one {"topic", "partitions"} entry'
        )
    out: set[tuple[str, int]] = set()
    for i, entry in enumerate(document["partitions"]):
        if not isinstance(entry, dict):
            raise RecoveryInputError(f"partitions[{i}] must be an object with 'topic' and 'partitions'")
        topic = entry.get("topic")
        parts = entry.get("partitions")
        if not isinstance(topic, str) or not topic:
            raise RecoveryInputError(f"partitions[{i}].topic must be a non-empty string")
        if not isinstance(parts, list) or not parts:
            raise RecoveryInputError(f"partitions[{i}].partitions must be a non-empty list of integers")
        for p in parts:
            if isinstance(p, bool) or not isinstance(p, int) or p < 0:
                raise RecoveryInputError(f"partitions[{i}] ({topic}): {p!r} is not a partition number")
            out.add((topic, p))
    return tuple(sorted(out))


def build_request(params: dict[str, Any]) -> RecoveryRequest:
    """Validate the runbook's params (the DAG's trigger form) into a request."""
    mode = params.get("mode", "show_replica_info")
    if mode not in MODES:
        raise RecoveryInputError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    raw = params.get("partitions_json")
    has_list = raw not in (None, "", {}) and not (isinstance(raw, str) and not raw.strip())
    all_offline = bool(params.get("all_offline_partitions", False))
    if has_list and all_offline:
        raise RecoveryInputError("give either partitions_json or all_offline_partitions=true, not both")
    if not has_list and not all_offline:
        raise RecoveryInputError(
            "give either partitions_json or all_offline_partitions=true (neither was given)"
        )
    duration = int(params.get("recovery_duration_ms", 30000))
    attempts = int(params.get("recovery_election_attempts", 3))
    if duration < 1:
        raise RecoveryInputError("recovery_duration_ms must be at least 1")
    if attempts < 1:
        raise RecoveryInputError("recovery_election_attempts must be at least 1")
    return RecoveryRequest(
        mode=mode,
        partitions=None if all_offline else parse_partitions(raw),
        recovery_duration_ms=duration,
        recovery_election_attempts=attempts,
        allow_committed_loss=params.get("allow_committed_loss", False) is True,
    )


@dataclass(frozen=True)
class Targets:
    offline: list[PartitionState]
    online: list[PartitionState]


def resolve(request: RecoveryRequest, state: ClusterState) -> Targets:
    """The requested partitions split into offline (to recover) and online (left alone).

    Unknown topics or partitions fail here, before any election, naming every one.
    """
    offline_names = {p.name for p in state.offline()}
    if request.all_offline:
        chosen = [p for p in state.partitions if p.name in offline_names]
    else:
        by_key = {(p.topic, p.partition): p for p in state.partitions}
        topics = {p.topic for p in state.partitions}
        unknown_topics = sorted({t for t, _ in request.partitions if t not in topics})
        unknown_parts = [f"{t}-{p}" for t, p in request.partitions if t in topics and (t, p) not in by_key]
        problems = []
        if unknown_topics:
            problems.append(f"unknown topic(s): {', '.join(unknown_topics)}")
        if unknown_parts:
            problems.append(f"unknown partition(s): {', '.join(unknown_parts)}")
        if problems:
            raise RecoveryInputError("; ".join(problems))
        chosen = [by_key[k] for k in request.partitions]
    chosen.sort(key=lambda p: (p.topic, p.partition))
    return Targets(
        offline=[p for p in chosen if p.name in offline_names],
        online=[p for p in chosen if p.name not in offline_names],
    )
