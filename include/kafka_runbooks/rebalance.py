"""The planned rebalance's own rules (``kafka_rebalance``), Airflow-free, decided before the gate.

The rebalance runs the decommission's pipeline (planner, plan check, disk ceiling, gate, chunked
executor, stop, lease, cleanup) with its own request:

- ``mode``: ``add-brokers`` moves replicas only onto the named ``new_brokers`` (registered and
  live); ``full`` evens out every live broker; ``remove-brokers`` is the decommission and is
  refused here naming ``kafka_broker_decommission`` (its own DAG with its own checks);
  ``replication-factor`` raises topics to a target (``kafka_runbooks.replication_factor``);
- every broker holding replicas must be live (a dead one is the heal's case: moving the rest
  around it would plan from a cluster that is about to change);
- the target spreads (``max_replica_spread``, ``max_leader_spread``: a count or a percentage of
  the mean per broker, judged by ``kafka_runbooks.balance_rules``);
- the room each receiver has under the disk ceiling (DescribeLogDirs total and usable bytes; a
  broker whose dirs are unknown has no room);
- after the run, the spreads read back from the cluster (``spread_now``, ``judge_spread``), and the
  bytes per broker from DescribeLogDirs against the plan's bytes target and prediction (``judge_bytes``).

Each refusal is a :class:`RequestError` (the plugin records it as a ``refuse`` DECISION).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafka_runbooks.approval_proof import ApprovedAction
from kafka_runbooks.balance_rules import bytes_spread_limit, spread, spread_limit, within_bytes_spread
from kafka_runbooks.failed_broker.decommission import _percent
from kafka_runbooks.failed_broker.request import (
    ReassignRequest,
    RequestError,
    _broker_list,
    _not_controllers,
    build_request,
)
from kafka_runbooks.model import ClusterState, LogDir
from kafka_runbooks.replication_factor import RfRequest, build_rf_request

MODES = ("add-brokers", "full", "remove-brokers", "replication-factor")
DECOMMISSION_DAG_ID = "kafka_broker_decommission"
DEFAULT_SPREAD = "10%"
# Cruise Control's DiskUsageDistributionGoal keeps each broker within 10 % of the mean disk usage
# (disk.balance.threshold 1.10): most minus least within 20 % of the mean is the same window's width
DEFAULT_BYTES_SPREAD_PERCENT = "20"


def _spread_param(params: Mapping[str, Any], name: str) -> str:
    value = params.get(name)
    text = DEFAULT_SPREAD if value is None or not str(value).strip() else str(value).strip()
    if spread_limit(text, 100) is None:
        raise RequestError(f"{name}: a spread is a count >= 0 ('2') or a percentage ('10%'), not {value!r}")
    return text


def _bytes_spread_param(params: Mapping[str, Any]) -> str:
    value = params.get("max_bytes_spread_percent")
    text = DEFAULT_BYTES_SPREAD_PERCENT if value is None or not str(value).strip() else str(value).strip()
    if bytes_spread_limit(text, {}, []) is None:
        raise RequestError(
            f"max_bytes_spread_percent: a percentage of the mean bytes per broker >= 0 ('20'), not {value!r}"
        )
    return text.removesuffix("%").strip()


def build_rebalance_request(params: Mapping[str, Any]) -> ReassignRequest:
    """Parse the rebalance's params alone (no cluster call): the mode, the new brokers (add-brokers
    only, and needed there), the target spreads, the disk ceiling; the chunk, throttle, gate and
    election params as the heal reads them. ``remove-brokers`` is refused naming the decommission."""
    mode = params.get("mode") or "add-brokers"
    if mode not in MODES:
        raise RequestError(f"mode must be one of {list(MODES)}, not {mode!r}")
    new = _broker_list(params.get("new_brokers"), "new_brokers", ())
    if mode == "remove-brokers":
        raise RequestError(
            f"mode remove-brokers is the decommission: run {DECOMMISSION_DAG_ID} with broker_ids "
            f"{'= ' + ','.join(map(str, new)) + ' ' if new else ''}(or rack) instead; it drains live brokers "
            "with its own checks (what the rest can hold, the disk ceiling) and verifies them empty"
        )
    if mode == "add-brokers" and new is None:
        raise RequestError("mode add-brokers needs new_brokers: the ids of the brokers just added, e.g. '4'")
    if mode in ("full", "replication-factor") and new is not None:
        raise RequestError(
            f"new_brokers ({list(new)}) goes with mode add-brokers; mode {mode} uses every live broker"
        )
    if mode == "replication-factor":
        build_rf_request(params)  # its own params, refused here before the lease like the others
    heal = {k: v for k, v in params.items() if k not in ("mode", "new_brokers", "receivers")}
    request = build_request({**heal, "failed_brokers": [], "receivers": "all"})
    return ReassignRequest(
        **{
            **request.as_dict(),
            "failed_brokers": (),
            "drain": True,  # the brokers replicas leave are live: their being live stops nothing
            "rebalance": mode,
            "new_brokers": new,
            "max_replica_spread": _spread_param(params, "max_replica_spread"),
            "max_leader_spread": _spread_param(params, "max_leader_spread"),
            "max_bytes_spread_percent": _bytes_spread_param(params),
            "max_disk_usage_percent": _percent(params.get("max_disk_usage_percent")),
        }
    )


@dataclass(frozen=True)
class RebalanceRequest:
    """The run's whole request, parsed once by its validate task: ``reassign`` is what the shared
    pipeline reads (mode, new brokers, spreads, chunks); ``replication_factor`` is mode
    replication-factor's own (target, topics, lowering allowed), None in the other modes."""

    reassign: ReassignRequest
    replication_factor: RfRequest | None = None


def build_rebalance_run(params: Mapping[str, Any]) -> RebalanceRequest:
    """``build_rebalance_request`` and, in mode replication-factor, ``build_rf_request``, from one
    reading of the params (no cluster call)."""
    reassign = build_rebalance_request(params)
    rf = build_rf_request(params) if reassign.rebalance == "replication-factor" else None
    return RebalanceRequest(reassign, rf)


def resolve_rebalance(request: ReassignRequest, state: ClusterState) -> tuple[list[int], list[int]]:
    """(sources, receivers): the brokers replicas may leave and the ones they may go to, or a
    RequestError: a broker holding replicas that is not live, new brokers that are unknown, not
    live or controllers. (Racks never forbid every move onto a live new broker: the replica in its
    rack, or any one when its rack is new to the partition, may go; what the racks forbid is how
    far the plan gets, which it says.)"""
    live = state.alive_broker_ids()
    holding = sorted({b for p in state.partitions for b in p.replicas})
    down = [b for b in holding if b not in live]
    if down:
        raise RequestError(
            f"broker(s) {down} hold replicas but are not live (down or fenced): heal them first "
            "(kafka_failed_broker_reassignment); a rebalance plans only on a cluster whose brokers are all up"
        )
    if request.rebalance == "replication-factor":
        return live, live  # new replicas may go to any live broker; the target is judged by select_topics
    if request.rebalance == "full":
        if len(live) < 2:
            raise RequestError(f"a full rebalance needs at least two live brokers, the cluster has {live}")
        return live, live
    new = list(request.new_brokers or ())
    _not_controllers(tuple(new), "new broker(s)", state)
    unknown = [b for b in new if b not in state.brokers]
    if unknown:
        raise RequestError(
            f"new broker(s) {unknown} are not registered with the cluster (registered: {sorted(state.brokers)})"
        )
    dead = [b for b in new if b not in live]
    if dead:
        raise RequestError(f"new broker(s) {dead} are not live (down or fenced): start them first")
    sources = [b for b in live if b not in new]
    if not sources:
        raise RequestError(f"every live broker is named new ({new}): there is nothing to take replicas from")
    return sources, new


@dataclass(frozen=True)
class Spread:
    """Replicas, preferred leaders and leaders per live broker as the cluster has them, with the limits."""

    replicas: dict[int, int]
    preferred: dict[int, int]
    leaders: dict[int, int]
    limits: tuple[int, int]
    # with a bytes target and the log dirs read: bytes per live broker from DescribeLogDirs (a
    # broker's None: unknown) and the target's limit (None: bytes unknown); else None, not judged
    bytes: dict[int, int | None] | None = None
    bytes_limit: int | None = None

    @property
    def figures(self) -> dict[str, int | None]:
        """Most minus least per live broker for replicas, preferred leaders and leaders, and bytes
        when they were read (None when a broker's bytes are unknown)."""
        scope = sorted(self.replicas)
        out: dict[str, int | None] = {
            "replicas": spread(self.replicas, scope),
            "preferred_leaders": spread(self.preferred, scope),
            "leaders": spread(self.leaders, scope),
        }
        if self.bytes is not None:
            known = all(self.bytes.get(b) is not None for b in scope)
            out["bytes"] = spread(self.bytes, scope) if known else None
        return out

    def within(self, replicas_max: int, leaders_max: int) -> bool:
        """Replicas and preferred leaders per broker within the limits. The leaders themselves follow
        the preferred ones after an election or the controller's auto leader rebalance: they are
        shown (``observed``), and the runbook elects and reads back the partitions it changed."""
        f = self.figures
        counts = f["replicas"] <= replicas_max and f["preferred_leaders"] <= leaders_max
        if self.bytes is None:
            return counts
        # a bytes target asked and bytes read: within it too (unknown bytes are not within: the
        # planner then says why, never "nothing to do" on bytes it cannot see)
        return counts and within_bytes_spread(self.bytes, sorted(self.replicas), self.bytes_limit) is True

    def observed(self) -> dict[str, Any]:
        """The spreads, the limits and each broker's counts, for the decision record."""
        return {
            "spread": self.figures,
            "limits": {"replicas": self.limits[0], "leaders": self.limits[1], "bytes": self.bytes_limit},
            "per_broker": {
                str(b): {
                    "replicas": n,
                    "preferred_leaders": self.preferred[b],
                    "leaders": self.leaders[b],
                    **({} if self.bytes is None else {"bytes": self.bytes.get(b)}),
                }
                for b, n in sorted(self.replicas.items())
            },
        }


def bytes_per_broker(state: ClusterState) -> dict[int, int | None] | None:
    """Bytes each live broker holds, from the DescribeLogDirs answers the state carries (future
    replicas of an intra-broker move left out); None when the state was read without log dirs. A
    broker whose log dirs did not answer, or with a dir offline, has unknown bytes (None, not 0)."""
    if not state.log_dir_states and not state.log_dir_errors:
        return None
    out: dict[int, int | None] = {}
    for b in state.alive_broker_ids():
        dirs = state.log_dir_states.get(b)
        if b in state.log_dir_errors or not dirs or not all(d.online for d in dirs):
            out[b] = None
            continue
        out[b] = sum(r.size_bytes for d in dirs for r in d.replicas if not r.is_future)
    return out


def spread_now(state: ClusterState, request_or_texts: ReassignRequest | tuple[str | None, ...]) -> Spread:
    """The spreads of the live brokers now, and the targets' limits at the cluster's means (the
    bytes target's only when the state carries the log dirs and a bytes target is asked)."""
    texts = (
        request_or_texts
        if isinstance(request_or_texts, tuple)
        else (
            request_or_texts.max_replica_spread,
            request_or_texts.max_leader_spread,
            request_or_texts.max_bytes_spread_percent,
        )
    )
    scope = state.alive_broker_ids()
    replicas = Counter(b for p in state.partitions for b in p.replicas)
    preferred = Counter(p.replicas[0] for p in state.partitions if p.replicas)
    leaders = Counter(p.leader for p in state.partitions)
    mean = len(scope) or 1
    limits = (
        spread_limit(texts[0], sum(replicas[b] for b in scope) / mean),
        spread_limit(texts[1], sum(preferred[b] for b in scope) / mean),
    )
    if limits[0] is None or limits[1] is None:
        raise RequestError(f"the targets {list(texts)} are not counts or percentages")
    bytes_text = texts[2] if len(texts) > 2 else None
    sizes = None if bytes_text is None else bytes_per_broker(state)  # no bytes target: not judged
    return Spread(
        {b: replicas[b] for b in scope},
        {b: preferred[b] for b in scope},
        {b: leaders[b] for b in scope},
        limits,
        sizes,
        None if sizes is None or bytes_text is None else bytes_spread_limit(bytes_text, sizes, scope),
    )


def room(
    log_dirs: Mapping[int, tuple[LogDir, ...]], brokers: list[int], max_percent: float
) -> dict[int, int]:
    """Bytes each broker may gain before a log dir of it passes ``max_percent`` (Kafka picks the dir
    of a new replica, so the fullest online dir sets it); a broker with no online dir of known size
    is left out: unknown room is no room."""
    out = {}
    for b in brokers:
        dirs = [d for d in log_dirs.get(b, ()) if d.online]
        if not dirs or any(d.total_bytes is None or d.usable_bytes is None for d in dirs):
            continue
        out[b] = max(
            0,
            min(int(d.total_bytes * max_percent / 100) - (d.total_bytes - d.usable_bytes) for d in dirs),
        )
    return out


@dataclass(frozen=True)
class LeaderMoves:
    """What the leader-only moves did: reordered, left alone (replicas changed since the plan), refused."""

    submitted: list[str]
    skipped: dict[str, str]
    errors: dict[str, str]


def apply_leader_moves(
    admin, moves: list[Mapping[str, Any]], approval: ApprovedAction, timeout_s: float = 60.0, sleep=None
) -> LeaderMoves:
    """The approved leader-only moves: reorder each partition's replicas (no replica is added, so no
    data moves) where its replicas are still the planned ones, then wait until the controller lists
    none of them in flight. A partition whose replicas changed since the plan is left alone, and one
    already in the planned order is not sent again (a re-run redoes nothing done).

    ``approval`` is the proof the approval check handed out (``kafka_runbooks.approval_proof.approved_action``):
    unless it approved exactly these moves (``leader_moves``), nothing is sent (NotApproved)."""
    import time

    from kafka_runbooks.errors import RunbookFailed

    approval.require("leader_moves", [dict(m) for m in moves])
    current = {
        (p.topic, p.partition): p.replicas for p in admin.read_state(include_log_dirs=False).partitions
    }
    submit: dict[tuple[str, int], list[int]] = {}
    skipped: dict[str, str] = {}
    for m in moves:
        key, target = (str(m["topic"]), int(m["partition"])), [int(b) for b in m["to"]]
        now = current.get(key)
        if now is None or sorted(now) != sorted(target):
            skipped[f"{key[0]}:{key[1]}"] = f"replicas now {None if now is None else list(now)}, not {target}"
        elif list(now) != target:
            submit[key] = target
    errors = (
        {f"{k[0]}:{k[1]}": e for k, e in admin.alter_partition_reassignments(submit).items() if e}
        if submit
        else {}
    )
    deadline = time.monotonic() + timeout_s
    while set(submit) & set(admin.list_reassignments()):
        if time.monotonic() >= deadline:
            raise RunbookFailed(f"leader-only moves still in flight after {timeout_s:g} s")
        (sleep or time.sleep)(1.0)
    return LeaderMoves([f"{t}:{p}" for t, p in submit], skipped, errors)


@dataclass(frozen=True)
class SpreadJudged:
    """The spreads read back against what the plan promised (the target, or its own "as close as
    it gets" when the target is out of reach)."""

    now: Spread
    promised: tuple[int, int]
    done: bool

    def observed(self, summary: Mapping[str, Any]) -> dict[str, Any]:
        """The spreads now, the limits the plan promised, and whether the plan reached its target (and why
        not), for the decision record."""
        return {
            **self.now.observed(),
            "promised": {"replicas": self.promised[0], "leaders": self.promised[1]},
            "target_reached_in_plan": bool(summary.get("reached")),
            "why_not": summary.get("why_not"),
        }


def judge_spread(state: ClusterState, summary: Mapping[str, Any]) -> SpreadJudged:
    """Replicas and preferred leaders per live broker within the plan's promise: the target's
    limit, or the plan's own figure if larger (``Spread.within``)."""
    s = summary["spread"]
    promised = (
        max(s["replicas"]["limit"], s["replicas"]["after"]),
        max(s["leaders"]["limit"], s["leaders"]["after"]),
    )
    now = spread_now(state, (s["replicas"]["target"], s["leaders"]["target"]))
    return SpreadJudged(now, promised, now.within(*promised))


# the bytes read back after a rebalance (``judge_bytes``), as the verify step's decision says them
BYTES_WITHIN = "within the target"
BYTES_NOT_PROMISED = "out of the target, which the plan did not promise"  # it said it cannot reach it
BYTES_OFF_PLAN = "NOT within the target the plan reached"  # the plan said it reaches it
BYTES_UNJUDGED = "unjudged"  # a live broker's bytes unknown, or no bytes target in the plan


@dataclass(frozen=True)
class BytesVerified:
    """Bytes per live broker read back from DescribeLogDirs after the settle period, judged with the
    planner's unit (``within_bytes_spread``, the limit at the cluster's mean now: producers and
    retention move the mean), beside what the plan predicted (its bytes spread after, and its limit
    at the snapshot's mean)."""

    target: str | None
    sizes: dict[int, int | None] | None
    limit: int | None
    spread: int | None
    within: bool | None
    planned: Mapping[str, Any]  # the summary's spread.bytes: target, limit, before, after

    @property
    def plan_reached(self) -> bool | None:
        """Whether the plan said its moves bring the bytes within the target (None: it could not judge)."""
        limit, after = self.planned.get("limit"), self.planned.get("after")
        return None if limit is None or after is None else after <= limit

    @property
    def state(self) -> str:
        """Within, unjudged (never success by default), or out: against the plan's promise, or where
        the plan did not promise the target (it said it cannot reach it, or could not judge bytes)."""
        if self.target is None or self.within is None:
            return BYTES_UNJUDGED
        if self.within:
            return BYTES_WITHIN
        return BYTES_OFF_PLAN if self.plan_reached else BYTES_NOT_PROMISED

    @property
    def done(self) -> bool:
        """Within the target (what a read-back waiting for the bytes waits on)."""
        return self.state == BYTES_WITHIN

    def observed(self) -> dict[str, Any]:
        """The read-back beside the plan's prediction, for the decision record and the task's result."""
        return {
            "state": self.state,
            "target_percent": self.target,
            "spread": self.spread,
            "limit": self.limit,
            "planned": {k: self.planned.get(k) for k in ("before", "after", "limit")},
            "plan_reached": self.plan_reached,
            "per_broker": None if self.sizes is None else {str(b): n for b, n in sorted(self.sizes.items())},
        }


def judge_bytes(state: ClusterState, summary: Mapping[str, Any]) -> BytesVerified:
    """The bytes per live broker of a state read with its log dirs (``bytes_per_broker``: a broker
    whose dirs did not answer, or with one offline, is None) against the plan's bytes target."""
    planned = (summary.get("spread") or {}).get("bytes") or {}
    target = planned.get("target")
    sizes = bytes_per_broker(state)
    scope = state.alive_broker_ids()
    if target is None or sizes is None:
        return BytesVerified(target, sizes, None, None, None, planned)
    limit = bytes_spread_limit(target, sizes, scope)
    within = within_bytes_spread(sizes, scope, limit)
    return BytesVerified(
        target, sizes, limit, None if within is None else spread(sizes, scope), within, planned
    )


def record_bytes(judged: BytesVerified, logger: logging.Logger | None = None) -> dict[str, Any]:
    """The ``verify bytes`` decision record of a rebalance's read-back; its observed figures.

    Within: INFO. Otherwise a WARNING, never a failure of the run: every approved move was verified
    on the cluster already (targets, ISR, no throttle, counts), and bytes move on their own
    (producers, retention, compaction) between the snapshot and now, so a failed run would only
    invite a Clear that cannot change them. A plan that said it reaches the target and a cluster that
    disagrees says so (``NOT within the target the plan reached``: plan a new run; the health sweep
    flags it too); one that did not promise it says how close it got against the prediction;
    unknown sizes are ``unjudged``, never within."""
    from kafka_runbooks import decisions

    seen = judged.observed()
    decisions.record(
        "verify bytes",
        judged.state,
        _bytes_reason(judged.state, seen),
        observed=seen,
        logger=logger,
        level=logging.INFO if judged.state == BYTES_WITHIN else logging.WARNING,
    )
    return seen


def _bytes_reason(state: str, seen: Mapping[str, Any]) -> str:
    """The record's reason: the spread now and its limit beside the plan's prediction."""
    plan = seen["planned"]
    predicted = f"the plan predicted {plan['after']} (limit {plan['limit']} at the snapshot's mean, before {plan['before']})"
    now = f"bytes spread now {seen['spread']}, limit {seen['limit']} ({seen['target_percent']} % of the mean now)"
    if state == BYTES_WITHIN:
        return f"{now}; {predicted}"
    if state == BYTES_UNJUDGED:
        unknown = [b for b, n in (seen["per_broker"] or {}).items() if n is None]
        return (
            f"bytes per broker unknown (broker(s) {unknown} without a DescribeLogDirs answer or with a dir "
            f"offline, or no log dirs read, or no bytes target): not judged, never taken as within; {predicted}"
        )
    return (
        f"{now}; {predicted}. Every move is verified on the cluster: a WARNING, not a failure (bytes change "
        "on their own; trigger a new kafka_rebalance to even them out)"
    )
