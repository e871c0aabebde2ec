"""The planned decommission's own rules: which live brokers to drain, what the rest can hold.

``kafka_broker_decommission`` empties live brokers through the failed-broker heal's machinery
(planner with ``--drain``, plan check, gate, chunked executor, stop, lease, cleanup). What
differs is decided here, Airflow-free, before the gate:

- the brokers to drain are named (``broker_ids``) or a rack is (``rack``: every registered
  broker of it); each must be registered and live, not a KRaft controller;
- the brokers left must be able to hold what moves: a drain that would leave fewer live brokers
  than the replication factor of a topic it moves is refused, naming the topics, the live brokers
  left and the dead ones (another broker already dead must be healed or brought back first); a
  partition whose replication factor is above the brokers it can still use is refused, so is one
  whose rack spread cannot be kept;
- after the plan, no receiver's log dir may pass ``max_disk_usage_percent`` (from the
  DescribeLogDirs total and usable bytes of each dir; unknown sizes are not "room").

Each refusal is a :class:`RequestError` (the plugin records it as a ``refuse`` DECISION).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafka_runbooks.failed_broker.request import (
    ReassignRequest,
    RequestError,
    _broker_list,
    _not_controllers,
    build_request,
    dead_brokers,
)
from kafka_runbooks.model import ClusterState, LogDir, PartitionState
from kafka_runbooks.units import format_size

DEFAULT_MAX_DISK_USAGE_PERCENT = 85  # the trigger forms' default too (reassign_dag.disk_ceiling_param)
MAX_LISTED = 10


def _rack_param(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise RequestError(f"rack must be a rack name (broker.rack), not {value!r}")
    return value.strip()


def _percent(value: Any) -> float:
    if value is None or (isinstance(value, str) and not value.strip()):
        return float(DEFAULT_MAX_DISK_USAGE_PERCENT)
    try:
        percent = float(value)
    except (TypeError, ValueError):
        raise RequestError(f"max_disk_usage_percent must be a number, not {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(percent) or not 0 < percent <= 100:
        raise RequestError(f"max_disk_usage_percent must be above 0 and at most 100, not {value!r}")
    return percent


def build_decommission_request(params: Mapping[str, Any]) -> ReassignRequest:
    """Parse the decommission's params alone (no cluster call): exactly one of ``broker_ids`` or
    ``rack``; the chunk, throttle, gate and election params as the heal reads them."""
    broker_ids = _broker_list(params.get("broker_ids"), "broker_ids", ())
    rack = _rack_param(params.get("rack"))
    if broker_ids is None and rack is None:
        raise RequestError("name the brokers to drain: broker_ids (e.g. '4' or '3,4') or rack")
    if broker_ids is not None and rack is not None:
        raise RequestError(
            f"name either broker_ids ({list(broker_ids)}) or rack ({rack!r}), not both: "
            "a rack drains every broker of it"
        )
    heal_params = {k: v for k, v in params.items() if k not in ("broker_ids", "rack")}
    request = build_request({**heal_params, "failed_brokers": list(broker_ids or ())})
    return ReassignRequest(
        **{
            **request.as_dict(),
            "failed_brokers": broker_ids,
            "drain": True,
            "drain_rack": rack,
            "max_disk_usage_percent": _percent(params.get("max_disk_usage_percent")),
        }
    )


def brokers_to_drain(request: ReassignRequest, state: ClusterState) -> list[int]:
    """The named brokers, or every registered broker of the rack; each registered and live."""
    if request.drain_rack is not None:
        named = sorted(b for b, info in state.brokers.items() if info.rack == request.drain_rack)
        if not named:
            racks = sorted({str(info.rack) for info in state.brokers.values()})
            raise RequestError(f"no registered broker is in rack {request.drain_rack!r} (racks: {racks})")
    else:
        named = list(request.failed_brokers or ())
        _not_controllers(tuple(named), "broker(s) to drain", state)
    unknown = [b for b in named if b not in state.brokers]
    if unknown:
        raise RequestError(
            f"broker(s) {unknown} to drain are not registered with the cluster "
            f"(registered brokers: {sorted(state.brokers)})"
        )
    down = [b for b in named if not state.is_available(b)]
    if down:
        raise RequestError(
            f"broker(s) {down} to drain are not live (down or fenced): a decommission drains live brokers; "
            "a dead broker's replicas are moved by kafka_failed_broker_reassignment"
        )
    return named


def resolve_drain(request: ReassignRequest, state: ClusterState) -> tuple[list[int], list[int]]:
    """(brokers to drain, receivers), or a RequestError: unknown, dead or controller ids, receivers
    that are not live or among the drained, and what the brokers left cannot hold (replication
    factor, racks)."""
    drained = brokers_to_drain(request, state)
    live = state.alive_broker_ids()
    if request.receivers is None:
        receivers = [b for b in live if b not in drained]
    else:
        _not_controllers(request.receivers, "receiver(s)", state)
        overlap = sorted(set(request.receivers) & set(drained))
        if overlap:
            raise RequestError(f"receiver(s) {overlap} are among the brokers to drain {drained}")
        not_live = [b for b in request.receivers if b not in live]
        if not_live:
            raise RequestError(f"receiver(s) {not_live} are not live registered brokers")
        receivers = list(request.receivers)
    if not receivers:
        raise RequestError(f"no live broker is left to receive the replicas of {drained}")
    refuse_what_the_rest_cannot_hold(state, drained, receivers)
    refuse_live_below_rf(state, drained)  # what the partitions' own count misses: a dead replica kept
    return drained, receivers


def refuse_live_below_rf(state: ClusterState, drained: list[int]) -> None:
    """RequestError when the live brokers left after the drain are fewer than the replication factor
    of a topic the drain moves: with another broker already dead, the drained replicas would land
    beside a dead one (the plan keeps it) and the cluster could not hold the topic's RF on live
    brokers any more, nor heal the dead broker. Names the topics and their RF, the live brokers left
    and the dead ones."""
    gone = set(drained)
    left = [b for b in state.alive_broker_ids() if b not in gone]
    rf: dict[str, int] = {}
    for p in state.partitions:
        if gone & set(p.replicas):
            rf[p.topic] = max(rf.get(p.topic, 0), len(p.replicas))
    above = {t: n for t, n in sorted(rf.items()) if n > len(left)}
    if not above:
        return
    shown = ", ".join(f"{t} (RF {n})" for t, n in list(above.items())[:MAX_LISTED])
    more = f" and {len(above) - MAX_LISTED} more" if len(above) > MAX_LISTED else ""
    raise RequestError(
        f"draining {sorted(gone)} is refused: it leaves {len(left)} live broker(s) {left} (dead: "
        f"{dead_brokers(state)}), fewer than the replication factor of {len(above)} topic(s) it moves: "
        f"{shown}{more}. Heal or bring back the dead broker(s) first, or add brokers"
    )


def _rack_of(state: ClusterState, broker_id: int) -> tuple:
    """A broker's rack for counting racks; no known rack counts as a rack of its own (as the planner does)."""
    info = state.brokers.get(broker_id)
    rack = info.rack if info is not None else None
    return ("rack", rack) if rack is not None else ("broker", broker_id)


def _cannot_hold(
    state: ClusterState, p: PartitionState, drained: set[int], receivers: set[int]
) -> str | None:
    """Why the brokers left cannot hold partition ``p`` once its drained replicas leave (None: they can)."""
    usable = (set(p.replicas) - drained) | receivers
    if len(usable) < len(p.replicas):
        return (
            f"{p.name}: replication factor {len(p.replicas)} is above the {len(usable)} broker(s) left for it "
            f"({sorted(usable)})"
        )
    before = len({_rack_of(state, b) for b in p.replicas})
    reachable = min(len(p.replicas), len({_rack_of(state, b) for b in usable}))
    if reachable < before:
        return (
            f"{p.name}: its replicas {list(p.replicas)} span {before} racks; the brokers left for it span "
            f"only {reachable}"
        )
    return None


def refuse_what_the_rest_cannot_hold(state: ClusterState, drained: list[int], receivers: list[int]) -> None:
    """RequestError naming the partitions (first ``MAX_LISTED``) the brokers left cannot hold."""
    gone, rest = set(drained), set(receivers)
    why = [
        w for p in state.partitions if gone & set(p.replicas) and (w := _cannot_hold(state, p, gone, rest))
    ]
    if not why:
        return
    rf = [w for w in why if "replication factor" in w]
    kind = "a replication factor above the brokers left" if rf else "a rack rule that cannot be kept"
    raise RequestError(
        f"draining {drained} is refused: {len(why)} partition(s) with {kind}: {why[:MAX_LISTED]}"
    )


@dataclass(frozen=True)
class DiskUse:
    """One receiver's log dir after the plan: used bytes now, what it may gain, its size."""

    broker_id: int
    path: str | None
    total_bytes: int | None
    used_bytes: int | None
    gains: int

    @property
    def percent_after(self) -> float | None:
        """The dir's fill after the plan; None when its size is unknown (refused, never "room")."""
        if not self.total_bytes or self.used_bytes is None:
            return None
        return 100.0 * (self.used_bytes + self.gains) / self.total_bytes

    def line(self) -> str:
        """The dir in one line of the refusal or the gate's summary."""
        where = f"broker {self.broker_id} log dir {self.path or '?'}"
        if self.percent_after is None:
            return f"{where}: size unknown (DescribeLogDirs gave no total/usable bytes), gains {format_size(self.gains)}"
        return (
            f"{where}: {format_size(self.used_bytes or 0)} used of {format_size(self.total_bytes or 0)}, "
            f"gains {format_size(self.gains)} -> {self.percent_after:.1f} %"
        )


def receiver_disk_use(
    summary: Mapping[str, Any], log_dirs: Mapping[int, tuple[LogDir, ...]]
) -> list[DiskUse]:
    """Each receiver's online log dirs with what the plan adds to the broker (``bytes_after -
    bytes_before`` of the summary). Kafka picks the dir of a new replica itself, so each dir is
    judged as if it got all of it; a receiver that did not answer has one entry of unknown size."""
    out = []
    for b in summary["receivers"]:
        figures = summary["per_broker"].get(str(b), {})
        gains = int(figures.get("bytes_after", 0)) - int(figures.get("bytes_before", 0))
        if gains <= 0:
            continue
        dirs = [d for d in log_dirs.get(int(b), ()) if d.online]
        if not dirs:
            out.append(DiskUse(int(b), None, None, None, gains))
        for d in dirs:
            known = d.total_bytes is not None and d.usable_bytes is not None
            used = d.total_bytes - d.usable_bytes if known else None
            out.append(DiskUse(int(b), d.path, d.total_bytes, used, gains))
    return out


def over_ceiling(uses: list[DiskUse], max_percent: float) -> list[DiskUse]:
    """The log dirs that would pass the ceiling, or whose size is unknown (unknown is no room)."""
    return [u for u in uses if u.percent_after is None or u.percent_after > max_percent]


def refuse_over_ceiling(uses: list[DiskUse], max_percent: float) -> None:
    """RequestError naming every receiver log dir the plan would fill past ``max_percent``."""
    over = over_ceiling(uses, max_percent)
    if over:
        raise RequestError(
            f"the plan would fill receiver log dir(s) past max_disk_usage_percent={max_percent:g}: "
            + "; ".join(u.line() for u in over[:MAX_LISTED])
        )
