"""The reassignment run's input, checked against the cluster before anything moves.

Bad input is a :class:`RequestError` with a clear message, raised before any change:
an unknown or live broker named as failed, a KRaft controller named as a broker, a
broker named twice, receivers that are unknown, not available or failed themselves,
receivers that cannot hold the replication factor of a partition that moves
(:func:`refuse_receivers_short`), a throttle of zero, chunk limits below one, and a
reassignment in flight that this runbook did not start. Broker ids the cluster does not
have are refused in the run's first task already (:func:`unknown_broker_ids`).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from kafka_runbooks.errors import BadInput
from kafka_runbooks.failed_broker.failures import failed_brokers
from kafka_runbooks.model import ClusterState, PartitionState

# The chunk and throttle defaults of every reassigning runbook, in one place: the trigger forms
# (kafka_runbooks_airflow.reassign_dag), the sweep's defaults and build_request import them;
# spark_jobs/failed_broker_plan.py cannot import the package and repeats the chunk limits as
# literals, which a unit test holds equal to these.
DEFAULT_MAX_PARTITIONS_PER_CHUNK = 50
DEFAULT_MAX_BYTES_PER_CHUNK = 1 << 30
DEFAULT_THROTTLE_BYTES_PER_SEC = 50 << 20
LISTED = 10  # topics and partitions named in a refusal


class RequestError(BadInput):
    """The run's parameters cannot be acted on; nothing was changed."""


@dataclass(frozen=True)
class ReassignRequest:
    """A reassigning run's params, parsed and checked once (no cluster call): what crosses from the
    plugin into the library, for the heal, the decommission, the log-dir failure and the rebalance."""

    failed_brokers: tuple[int, ...] | None  # None: detect
    receivers: tuple[int, ...] | None  # None: every live broker
    max_partitions_per_chunk: int
    max_bytes_per_chunk: int
    throttle_bytes_per_sec: int
    require_approval: bool
    dry_run: bool
    elect_preferred_leaders: bool = True
    # the planned decommission (kafka_broker_decommission): failed_brokers are live brokers to empty
    drain: bool = False
    drain_rack: str | None = None  # drain every registered broker of this rack
    max_disk_usage_percent: float | None = None  # no receiver log dir above this after the plan
    # the planned rebalance (kafka_rebalance): its mode, the brokers just added, the target spreads
    rebalance: str | None = None
    new_brokers: tuple[int, ...] | None = None
    max_replica_spread: str | None = None
    max_leader_spread: str | None = None
    max_bytes_spread_percent: str | None = None  # kafka_rebalance: bytes per broker, percent of the mean

    def as_dict(self) -> dict[str, Any]:
        """The validated request as the run's decision record and XCom carry it."""
        return asdict(self)


def _broker_list(value: Any, what: str, keywords: tuple[str, ...]) -> tuple[int, ...] | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in keywords + ("",)):
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        items: list[Any] = [value]
    elif isinstance(value, str):
        if not re.fullmatch(r"\s*\d+(\s*,\s*\d+)*\s*", value):
            either = "".join(f"{k!r} or " for k in keywords)
            raise RequestError(f"{what} must be {either}broker ids separated by commas, not {value!r}")
        items = value.split(",")
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        raise RequestError(f"{what} must be a list of broker ids, not {value!r}")
    try:
        listed = [int(str(i).strip()) for i in items]
    except ValueError as exc:
        raise RequestError(f"{what} must be broker ids (integers): {value!r}") from exc
    if not listed:
        return None
    twice = sorted(b for b in set(listed) if listed.count(b) > 1)
    if twice:
        # a typo such as "4,4" for "4,5" must not quietly become a smaller run
        raise RequestError(
            f"{what} names broker(s) {twice} more than once ({value!r}): list each broker once"
        )
    ids = tuple(sorted(listed))
    if any(i < 0 for i in ids):
        raise RequestError(f"{what}: broker ids are >= 0, got {list(ids)}")
    return ids


def _positive(params: dict, name: str, default: int) -> int:
    value = params.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
        raise RequestError(f"{name} must be an integer, not {value!r}")
    if value <= 0:
        raise RequestError(
            f"{name} must be > 0, not {value}"
            + (" (a throttle of zero would stop replication altogether)" if "throttle" in name else "")
        )
    return int(value)


def _bytes(params: dict, name: str, default: int) -> int:
    """A size from the form ("1 GiB", "50 MiB") or bytes (sweeps, REST); empty is the default."""
    from kafka_runbooks.units import SizeError, parse_size

    value = params.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        return default
    try:
        return parse_size(value, name)
    except SizeError as exc:
        hint = " (a throttle of zero would stop replication altogether)" if "throttle" in name else ""
        raise RequestError(f"{exc}{hint}") from exc


def build_request(params: dict[str, Any]) -> ReassignRequest:
    """Parse and check the params alone (no cluster call)."""
    return ReassignRequest(
        failed_brokers=_broker_list(params.get("failed_brokers", "detect"), "failed_brokers", ("detect",)),
        receivers=_broker_list(params.get("receivers", "all"), "receivers", ("all",)),
        max_partitions_per_chunk=_positive(
            params, "max_partitions_per_chunk", DEFAULT_MAX_PARTITIONS_PER_CHUNK
        ),
        max_bytes_per_chunk=_bytes(params, "max_bytes_per_chunk", DEFAULT_MAX_BYTES_PER_CHUNK),
        throttle_bytes_per_sec=_bytes(params, "throttle_bytes_per_sec", DEFAULT_THROTTLE_BYTES_PER_SEC),
        require_approval=bool(params.get("require_approval", True)),
        dry_run=bool(params.get("dry_run", False)),
        elect_preferred_leaders=bool(params.get("elect_preferred_leaders", True)),
    )


def controller_ids(state: ClusterState) -> set[int]:
    """Node ids of the KRaft controllers (voters of the metadata quorum) that are not brokers.

    A dedicated controller never hosts a replica, so naming one as failed or as a receiver
    is a mix-up of ids that deserves its own message, not "unknown broker".
    """
    if state.quorum is None:
        return set()
    # a combined-mode node is also a registered broker: it stays a broker here
    return {v.node_id for v in state.quorum.voters} - set(state.brokers)


def _not_controllers(ids: tuple[int, ...], what: str, state: ClusterState) -> None:
    named = sorted(set(ids) & controller_ids(state))
    if named:
        raise RequestError(
            f"{what} {named}: node(s) {named} are KRaft controllers (voters of the metadata quorum), not "
            f"brokers; controllers host no replicas (brokers: {sorted(state.brokers)})"
        )


def resolve(request: ReassignRequest, state: ClusterState) -> tuple[list[int], list[int]]:
    """The failed brokers and receivers this run will use, or a RequestError.

    Detect mode takes every broker that hosts replicas and is not available; a named
    broker must be known to the cluster (registered or in some assignment) and not
    available. Receivers default to every available broker.
    """
    failed = (
        failed_brokers(state)
        if request.failed_brokers is None
        else _named_failed(request.failed_brokers, state)
    )
    receivers = (
        state.alive_broker_ids()
        if request.receivers is None
        else _named_receivers(request.receivers, failed, state)
    )
    if failed and not receivers:
        raise RequestError("no available broker can receive replicas")
    refuse_receivers_short(state, failed, receivers)
    return failed, receivers


def dead_brokers(state: ClusterState) -> list[int]:
    """Brokers the cluster knows (registered, or named by a replica) that are not available."""
    return sorted(b for b in state.brokers if not state.is_available(b))


def _by_topic(short: list[PartitionState]) -> str:
    """``topic (RF 3: partitions [0, 2])`` for each topic of ``short``, the first ``LISTED`` topics."""
    topics: dict[str, list[PartitionState]] = {}
    for p in short:
        topics.setdefault(p.topic, []).append(p)
    shown = [
        f"{t} (RF {max(len(p.replicas) for p in ps)}: partition(s) {sorted(p.partition for p in ps)[:LISTED]})"
        for t, ps in sorted(topics.items())[:LISTED]
    ]
    return ", ".join(shown) + (f" and {len(topics) - LISTED} more topic(s)" if len(topics) > LISTED else "")


def refuse_receivers_short(
    state: ClusterState,
    emptied: list[int],
    receivers: list[int],
    keys: set[str] | None = None,
    drain: bool = False,
) -> None:
    """RequestError when a partition that moves (one with a replica on ``emptied``; ``keys``:
    ``topic:partition`` of only those) cannot keep its replication factor: its replicas kept and the
    receivers are fewer brokers than it has replicas (the planner would refuse the whole plan after
    the snapshot; refused here, before the gate, naming the topics and their RF, the receivers and
    the dead brokers). A partition the heal cannot copy from (no available replica outside the
    brokers emptied) is not moved and not counted: the plan lists it; a ``drain`` copies from the
    emptied brokers themselves."""
    gone, rest = set(emptied), set(receivers)
    short = []
    for p in state.partitions:
        if not gone & set(p.replicas) or (keys is not None and f"{p.topic}:{p.partition}" not in keys):
            continue
        kept = [b for b in p.replicas if b not in gone]
        if not drain and not any(state.is_available(b) for b in kept):
            continue
        if len(set(kept) | rest) < len(p.replicas):
            short.append(p)
    if short:
        raise RequestError(
            f"the receivers cannot hold the replication factor of {len(short)} partition(s) that move off "
            f"broker(s) {sorted(gone)}: {_by_topic(short)}; receivers {sorted(rest)} (live brokers: "
            f"{state.alive_broker_ids()}, dead: {dead_brokers(state)}), fewer than the replicas each needs "
            "outside the brokers emptied. Bring a broker back or add one, or name more receivers, then run again"
        )


def unknown_broker_ids(named: dict[str, tuple[int, ...] | None], known: set[int]) -> dict[str, list[int]]:
    """Per param (``failed_brokers``, ``broker_ids``, ``receivers``), the ids it names that are not
    brokers the cluster has (``known``: registered, or named by a replica); empty: all exist."""
    out = {name: sorted(set(ids) - known) for name, ids in named.items() if ids}
    return {name: ids for name, ids in out.items() if ids}


def _named_failed(named: tuple[int, ...], state: ClusterState) -> list[int]:
    """Brokers named as failed must be brokers the cluster knows and not available: moving the
    replicas off a live broker is the decommission's job, with its own checks."""
    _not_controllers(named, "broker(s) named as failed", state)
    unknown = [b for b in named if b not in state.brokers]
    if unknown:
        raise RequestError(
            f"broker(s) {unknown} named as failed are unknown to the cluster (known: {sorted(state.brokers)})"
        )
    live = [b for b in named if state.is_available(b)]
    if live:
        raise RequestError(
            f"broker(s) {live} named as failed are alive (registered and unfenced): "
            "refusing to move replicas off a live broker"
        )
    return list(named)


def _named_receivers(named: tuple[int, ...], failed: list[int], state: ClusterState) -> list[int]:
    """Receivers named by hand must be known, available and not among the brokers emptied."""
    _not_controllers(named, "receiver(s)", state)
    unknown = [b for b in named if b not in state.brokers]
    if unknown:
        raise RequestError(
            f"receiver(s) {unknown} are unknown to the cluster (known: {sorted(state.brokers)})"
        )
    overlap = [b for b in named if b in failed]
    if overlap:
        raise RequestError(f"receiver(s) {overlap} are among the failed brokers {failed}")
    dead = [b for b in named if not state.is_available(b)]
    if dead:
        raise RequestError(f"receiver(s) {dead} are not available (down or fenced)")
    return list(named)


def foreign_reassignments(
    inflight: dict[str, dict[str, list[int]]], owned: dict[str, list[int]]
) -> dict[str, dict[str, list[int]]]:
    """Reassignments in flight that are not exactly one ``owned`` by a run of this runbook."""
    from kafka_runbooks.failed_broker.execute import target_of

    return {k: v for k, v in inflight.items() if k not in owned or target_of(v) != set(owned[k])}
