"""What to recover: parse and validate the input before anything touches the cluster.

The input mirrors the proposal's ``--path-to-json-file`` format::

    {"partitions": [{"topic": "foo", "partitions": [0, 3, 5]}, {"topic": "bar", "partitions": [1]}]}

or, easier to type in a form, ``topic:partition`` items (``["orders:0", "orders:3"]``, the
``partitions`` param), or ``--all-offline-partitions``; exactly one of the three.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from kafka_runbooks.errors import BadInput
from kafka_runbooks.model import ClusterState, PartitionState
from kafka_runbooks.units import DurationError, parse_duration

MODES = ("show_replica_info", "manual_recovery_file", "automated_recovery")
# One item of the ``partitions`` param: a topic name (Kafka's legal characters) and a partition number.
PARTITION_ITEM = r"^\s*([a-zA-Z0-9._-]+)\s*:\s*(\d+)\s*$"
PARTITION_ITEM_RULE = "topic:partition, e.g. orders:0"
DEFAULT_SETTLE_PERIOD_S = 30.0


class RecoveryInputError(BadInput):
    """The request is malformed or names partitions the cluster does not have."""


@dataclass(frozen=True)
class RecoveryRequest:
    mode: str
    partitions: tuple[tuple[str, int], ...] | None  # None = all offline partitions
    recovery_duration_ms: int = 30000
    recovery_election_attempts: int = 3
    # elect a replica not known to hold every committed record (ISR/ELR) even
    # though one that does exists or none is known: the operator's explicit, separate choice
    allow_committed_loss: bool = False
    # how each election is judged and left: seconds it must hold (online, chosen leader,
    # unfenced), and whether the partition's original replica order is put back afterwards
    settle_period_s: float = DEFAULT_SETTLE_PERIOD_S
    restore_replica_order: bool = True

    @property
    def all_offline(self) -> bool:
        """Whether the run recovers every offline partition (no partitions named)."""
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


def parse_partition_items(items: Any) -> tuple[tuple[str, int], ...]:
    """``["orders:0", "orders:3"]`` (the ``partitions`` param) as sorted, de-duplicated pairs."""
    if isinstance(items, str):
        items = [items]
    if not isinstance(items, list | tuple) or not items:
        raise RecoveryInputError(f"partitions must be a list of {PARTITION_ITEM_RULE}, not {items!r}")
    out: set[tuple[str, int]] = set()
    for i, item in enumerate(items):
        match = re.fullmatch(PARTITION_ITEM, item) if isinstance(item, str) else None
        if match is None:
            raise RecoveryInputError(f"partitions[{i}] must be {PARTITION_ITEM_RULE}, not {item!r}")
        out.add((match.group(1), int(match.group(2))))
    return tuple(sorted(out))


def _given(value: Any) -> bool:
    """Whether a form field was filled in: the form sends null, "" or [] for an empty one."""
    return value not in (None, "", {}, []) and not (isinstance(value, str) and not value.strip())


def _chosen_partitions(params: dict[str, Any]) -> tuple[tuple[str, int], ...] | None:
    """Exactly one of partitions, partitions_json, all_offline_partitions: the pairs, or None for all."""
    given = [name for name in ("partitions", "partitions_json") if _given(params.get(name))]
    if bool(params.get("all_offline_partitions", False)):
        given.append("all_offline_partitions=true")
    if len(given) != 1:
        several = "not both" if len(given) == 2 else "not all three"
        why = "neither was given" if not given else f"{several}: {' and '.join(given)} were given"
        raise RecoveryInputError(
            f"give exactly one of partitions, partitions_json or all_offline_partitions=true ({why})"
        )
    if given[0] == "partitions":
        return parse_partition_items(params["partitions"])
    if given[0] == "partitions_json":
        return parse_partitions(params["partitions_json"])
    return None


def _duration(params: dict[str, Any], name: str, default: float, **bounds: Any) -> float:
    """Seconds of the duration param ``name``; a bad one is this runbook's input error."""
    try:
        return parse_duration(params.get(name, default), name, **bounds)
    except DurationError as exc:
        raise RecoveryInputError(str(exc)) from None


def recovery_duration_ms(params: dict[str, Any]) -> int:
    """``recovery_duration_ms``: '30s', '2m' or milliseconds, 1 ms to 1 h."""
    seconds = _duration(
        params, "recovery_duration_ms", 30000, plain="milliseconds", minimum_s=0.001, maximum_s=3600
    )
    return int(round(seconds * 1000))


def settle_period_s(params: dict[str, Any]) -> float:
    """``settle_period_s``: '30s', '2m' or seconds, 0 to 1 h."""
    return _duration(params, "settle_period_s", DEFAULT_SETTLE_PERIOD_S, maximum_s=3600)


def build_request(params: dict[str, Any]) -> RecoveryRequest:
    """Validate the runbook's params (the DAG's trigger form) into a request."""
    mode = params.get("mode", "show_replica_info")
    if mode not in MODES:
        raise RecoveryInputError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    partitions = _chosen_partitions(params)
    duration = recovery_duration_ms(params)
    settle = settle_period_s(params)  # refused here, before the lease, rather than after the gate
    attempts = int(params.get("recovery_election_attempts", 3))
    if attempts < 1:
        raise RecoveryInputError("recovery_election_attempts must be at least 1")
    return RecoveryRequest(
        mode=mode,
        partitions=partitions,
        recovery_duration_ms=duration,
        recovery_election_attempts=attempts,
        allow_committed_loss=params.get("allow_committed_loss", False) is True,
        settle_period_s=settle,
        restore_replica_order=bool(params.get("restore_replica_order", True)),
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
