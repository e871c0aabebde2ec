"""Turning the cluster-health report (written by ``spark_jobs/cluster_health.py``) into findings:
unhealthy partitions by category, the
quorum and log dirs; replicas, preferred leaders, leaders now and bytes per live broker against
``kafka_rebalance``'s target spreads (judged with its own rule units, ``kafka_runbooks.balance_rules``:
the planner and the plan check use the same ones), topics below the
minimum replication factor; and the proposal: whether the sweep starts one gated ``kafka_rebalance``
run (only where the setting ``start_rebalance`` allows it; off by default: the sweep proposes,
an operator decides at the gate)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_runbooks import decisions
from kafka_runbooks.balance_rules import (
    bytes_spread_limit,
    moves_lower_bound,
    spread,
    spread_limit,
    within_bytes_spread,
)
from kafka_runbooks.errors import BadInput
from kafka_runbooks.log_dirs import OFFLINE
from kafka_runbooks.log_dirs import UNKNOWN as DIRS_UNKNOWN
from kafka_runbooks.units import parse_duration

CATEGORIES = ("offline", "under_min_isr", "at_min_isr", "under_replicated", "min_isr_unknown")
WHY = {
    "offline": "no leader: producers and consumers of these partitions are down",
    "under_min_isr": "ISR below min.insync.replicas: acks=all producers are rejected",
    "at_min_isr": "ISR at min.insync.replicas: one more replica lost and acks=all writes stop",
    "under_replicated": "ISR smaller than the replica set: redundancy is reduced",
    "min_isr_unknown": "min.insync.replicas was not read (DescribeConfigs did not answer for the topic): "
    "whether acks=all producers are refused there is unknown, and the min-ISR counts leave them out",
}


def log_findings(report: dict, logger: logging.Logger | None = None) -> list[decisions.DecisionRecord]:
    """One decision record per category with partitions in it, or one saying all is healthy."""
    counts = report.get("counts", {})
    records = []
    for category in CATEGORIES:
        n = int(counts.get(category, 0))
        if not n:
            continue
        listed = [f"{p['topic']}-{p['partition']}" for p in report.get(category, [])]
        records.append(
            decisions.record(
                "health",
                f"{n} partition(s) {category.replace('_', ' ')}",
                WHY[category],
                observed={"count": n, "partitions": listed[:50], "truncated": len(listed) < n},
                action="reported only (this sweep never changes the cluster)",
                logger=logger,
                level=logging.WARNING,
            )
        )
    records.extend(balance_findings(report.get("balance"), logger))
    records.extend(replication_findings(report.get("replication"), logger))
    records.extend(quorum_findings(report.get("quorum"), logger))
    records.extend(log_dir_findings(report.get("log_dirs"), logger))
    if not records:
        records.append(
            decisions.record(
                "health",
                "healthy",
                "every partition has a leader and a full ISR",
                observed={"partitions": report.get("partitions"), "brokers": len(report.get("brokers", []))},
                logger=logger,
            )
        )
    return records


def quorum_findings(quorum: dict | None, logger: logging.Logger | None) -> list[decisions.DecisionRecord]:
    """A WARNING when the KRaft quorum has no spare voter, or when that cannot be told."""
    if not quorum or quorum.get("has_spare") is True:
        return []
    if quorum.get("error"):
        summary, why = "quorum unknown", f"DescribeQuorum was not read: {quorum['error']}"
    elif quorum["has_spare"] is False:
        summary = (
            f"quorum has no spare voter: {len(quorum['caught_up_voters'])} of {len(quorum['voters'])} "
            f"caught up, {quorum['majority']} needed"
        )
        why = "one more lost voter stops every metadata change (no leader can be elected)"
    else:
        summary = f"quorum spare unknown: voter(s) {quorum['unknown_voters']} in an unknown state"
        why = "a voter whose state cannot be read is never counted as caught up"
    observed = {
        k: quorum.get(k)
        for k in ("leader_id", "leader_epoch", "caught_up_voters", "not_caught_up_voters", "unknown_voters")
    }
    observed["voters"] = {v["node_id"]: v["state"] for v in quorum.get("voters", [])}
    return [
        decisions.record(
            "health",
            summary,
            why,
            observed=observed,
            action="reported only (this sweep never changes the cluster)",
            logger=logger,
            level=logging.WARNING,
        )
    ]


def log_dir_findings(log_dirs: dict | None, logger: logging.Logger | None) -> list[decisions.DecisionRecord]:
    """A WARNING per broker with offline log directories, and one naming brokers whose
    directories are unknown (never read as "none offline")."""
    out = []
    for b in (log_dirs or {}).get("brokers", []):
        if b["state"] != OFFLINE:
            continue
        summary = (
            f"broker {b['broker_id']}: {len(b['offline_dirs'])} log dir(s) offline, "
            f"{len(b['partitions'])} replica(s) in them"
            if b["offline_dirs"]
            else f"broker {b['broker_id']}: the controller names {len(b['partitions'])} replica(s) offline, "
            "no log dir offline in its own answer"
        )
        out.append(
            decisions.record(
                "health",
                summary,
                "the broker lives, but its replicas in a failed directory are offline on it: those "
                "partitions run under-replicated (offline where no other replica is in sync)",
                subject=str(b["broker_id"]),
                observed={
                    "offline_dirs": b["offline_dirs"],
                    "partitions": b["partitions"][:50],
                    "truncated": len(b["partitions"]) > 50,
                    "decided_by": b.get("decided_by"),
                    "metadata_offline": b.get("metadata_offline", [])[:50],
                    "disagreements": b.get("disagreements", {}),
                },
                action="reported only (this sweep never changes the cluster)",
                logger=logger,
                level=logging.WARNING,
            )
        )
    unknown = [b for b in (log_dirs or {}).get("brokers", []) if b["state"] == DIRS_UNKNOWN]
    if unknown:
        out.append(
            decisions.record(
                "health",
                f"log dirs unknown on broker(s) {[b['broker_id'] for b in unknown]}",
                "a broker that did not answer DescribeLogDirs may have offline directories",
                observed={str(b["broker_id"]): b.get("reason") for b in unknown},
                action="reported only (this sweep never changes the cluster)",
                logger=logger,
                level=logging.WARNING,
            )
        )
    return out


# ------------------------------------------------------------------ balance: the rebalance's rules

BALANCED, OUT_OF_SPREAD, UNKNOWN = "balanced", "out of spread", "unknown"
# (kind, the report's per-broker count, the kafka_rebalance param that sets its target)
SPREAD_KINDS = (
    ("replicas", "replica_count", "max_replica_spread"),
    ("preferred_leaders", "preferred_leader_count", "max_leader_spread"),
)
# leadership now (who leads, not who is preferred): judged by the preferred leaders' rule and target,
# shown and reported, never part of the proposal (a preferred-leader election moves it back, not a
# reassignment)
LEADERS = ("leaders", "leader_count", "max_leader_spread")
BYTES_PARAM = "max_bytes_spread_percent"  # bytes per live broker: a percentage of the mean
REBALANCE_DAG_ID = "kafka_rebalance"


@dataclass(frozen=True)
class SpreadJudged:
    """What a judged figure (a kind's count, or bytes) shows: its value per live broker, the target
    and the limit the rebalance's rule derives from it, and the spread seen. Subclasses say when
    it is out of spread; how far over and how the report shows it are said here, once."""

    target: str
    per_broker: dict[int, Any]
    limit: int | None  # None: unknown (a live broker's figure is unknown)
    spread: int | None

    @property
    def state(self) -> str:
        """``balanced``, ``out of spread`` or ``unknown``: each subclass says by its own rule."""
        raise NotImplementedError

    @property
    def over_by(self) -> int | None:
        """How far the spread exceeds its limit; None unless out of spread."""
        return None if self.state != OUT_OF_SPREAD else self.spread - self.limit

    def as_dict(self) -> dict[str, Any]:
        """The judgement as the health report and the Kafka page show it (a broker's None: unknown)."""
        return {
            "state": self.state,
            "target": self.target,
            "limit": self.limit,
            "spread": self.spread,
            "over_by": self.over_by,
            "per_broker": {str(b): n for b, n in sorted(self.per_broker.items())},
        }


@dataclass(frozen=True)
class KindJudged(SpreadJudged):
    """One kind (replicas or preferred leaders) per live broker against its target spread."""

    kind: str = ""
    moves_at_least: int | None = None  # the rule's lower bound for the moves the target needs

    @property
    def state(self) -> str:
        """``out of spread`` when the spread exceeds its limit, ``balanced`` when within; ``unknown`` when
        either is unknown (never balanced)."""
        if self.limit is None or self.spread is None:
            return UNKNOWN
        return OUT_OF_SPREAD if self.spread > self.limit else BALANCED

    def as_dict(self) -> dict[str, Any]:
        """The shared shape, with the rule's lower bound for the moves the target needs."""
        return {**super().as_dict(), "moves_at_least": self.moves_at_least}


@dataclass(frozen=True)
class BytesJudged(SpreadJudged):
    """Bytes per live broker against ``max_bytes_spread_percent``, with the rule units the rebalance's
    planner and plan check use (``bytes_spread_limit``, ``within_bytes_spread``). ``per_broker``
    holds None for a broker whose bytes are unknown (named in ``unknown`` with why): then the
    limit, the spread and the verdict are None too, never 0 and never "balanced"."""

    unknown: dict[int, str] = field(default_factory=dict)
    within: bool | None = None

    @property
    def state(self) -> str:
        """``balanced``, ``out of spread``, or ``unknown`` when the rule could not judge."""
        return UNKNOWN if self.within is None else BALANCED if self.within else OUT_OF_SPREAD

    def as_dict(self) -> dict[str, Any]:
        """The shared shape, with the brokers whose bytes are unknown and why."""
        return {
            **super().as_dict(),
            "unknown_brokers": {str(b): why for b, why in sorted(self.unknown.items())},
        }


@dataclass(frozen=True)
class BalanceJudged:
    """Replicas, preferred leaders and bytes per live broker judged as ``kafka_rebalance`` judges them.

    ``unknown``: live brokers whose count cannot be trusted, with why; any one makes every kind
    unknown (the mean, and so a percentage target's limit, depends on every live broker). Bytes
    have their own unknowns (``bytes.unknown``): counts read from the metadata stay judged when only
    a size is missing."""

    kinds: tuple[KindJudged, ...]
    unknown: dict[int, str]
    live: list[int]
    bytes: BytesJudged | None = None
    leaders: KindJudged | None = None  # leadership now: shown and reported, never proposed

    @property
    def state(self) -> str:
        """``unknown`` if a count is unknown (or nothing was judged); else ``out of spread`` if any kind,
        bytes included, is out (a known excess is worth proposing even while another kind is unknown:
        the rebalance judges every kind again before its gate); else ``unknown`` if the bytes are;
        else ``balanced``."""
        states = {k.state for k in self.kinds}
        if UNKNOWN in states or not self.kinds:
            return UNKNOWN
        if self.bytes is not None:
            states.add(self.bytes.state)
        return OUT_OF_SPREAD if OUT_OF_SPREAD in states else UNKNOWN if UNKNOWN in states else BALANCED

    def out_of_spread(self) -> list[tuple[str, Any]]:
        """(kind, its judgement) of each kind out of its target spread, bytes last."""
        out: list[tuple[str, Any]] = [(k.kind, k) for k in self.kinds if k.state == OUT_OF_SPREAD]
        if self.bytes is not None and self.bytes.state == OUT_OF_SPREAD:
            out.append(("bytes", self.bytes))
        return out

    def as_dict(self) -> dict[str, Any]:
        """The judgement as the health report shows it, with the brokers whose figures are unknown and why."""
        return {
            "state": self.state,
            "live_brokers": self.live,
            "unknown_brokers": {str(b): why for b, why in sorted(self.unknown.items())},
            **{k.kind: k.as_dict() for k in self.kinds},
            **({} if self.bytes is None else {"bytes": self.bytes.as_dict()}),
            **({} if self.leaders is None else {"leaders": self.leaders.as_dict()}),
        }


def live_brokers(report: Mapping[str, Any]) -> list[int]:
    """The report's live brokers: registered, alive and not fenced (the rebalance's scope)."""
    return sorted(
        int(b["broker_id"]) for b in report.get("brokers", []) if b.get("alive") and not b.get("fenced")
    )


def unknown_counts(report: Mapping[str, Any], live: list[int]) -> dict[int, str]:
    """Live brokers whose replica or preferred-leader count is unknown: no count in the report, or
    no DescribeLogDirs answer (what such a broker holds on disk, and its room, cannot be told)."""
    out: dict[int, str] = {}
    for b in report.get("brokers", []):
        broker = int(b["broker_id"])
        missing = [name for _, name, _ in SPREAD_KINDS if b.get(name) is None]
        if broker in live and missing:
            out[broker] = f"no {' or '.join(missing)} in the report"
    for d in (report.get("log_dirs") or {}).get("brokers", []):
        if int(d["broker_id"]) in live and d.get("state") == DIRS_UNKNOWN:
            out.setdefault(
                int(d["broker_id"]), f"log dirs unknown: {d.get('reason') or 'no DescribeLogDirs answer'}"
            )
    return out


def judge_balance(report: Mapping[str, Any], targets: Mapping[str, str]) -> BalanceJudged:
    """Replicas and preferred leaders per live broker against ``targets`` (``max_replica_spread``,
    ``max_leader_spread``: a count or a percentage of the mean), with ``kafka_rebalance``'s own rule
    units (``balance_rules.spread``, ``spread_limit``, ``moves_lower_bound``) over the same scope (the
    live brokers), so the sweep proposes exactly what the rebalance would find to do; and the bytes
    per live broker against ``max_bytes_spread_percent`` (``judge_bytes``)."""
    live = live_brokers(report)
    unknown = unknown_counts(report, live)
    rows = {int(b["broker_id"]): b for b in report.get("brokers", [])}
    kinds = tuple(_judge_kind(spec, rows, live, bool(unknown), targets) for spec in SPREAD_KINDS)
    leaders_unknown = bool(unknown) or any(rows[b].get(LEADERS[1]) is None for b in live)
    return BalanceJudged(
        kinds,
        unknown,
        live,
        judge_bytes(report, live, targets[BYTES_PARAM]),
        _judge_kind(LEADERS, rows, live, leaders_unknown, targets),
    )


def _judge_kind(spec, rows, live: list[int], unknown: bool, targets: Mapping[str, str]) -> KindJudged:
    """One kind's count per live broker against its target, in the rebalance's rule units."""
    kind, count_field, param = spec
    target = str(targets[param]).strip()
    if unknown or not live:
        return KindJudged(target, {}, None, None, kind=kind)
    counts = {b: int(rows[b][count_field]) for b in live}
    limit = spread_limit(target, sum(counts.values()) / len(live))
    if limit is None:
        raise BadInput(f"{param}: a spread is a count >= 0 ('2') or a percentage ('10%'), not {target!r}")
    need = moves_lower_bound([counts[b] for b in live], limit)
    return KindJudged(target, counts, limit, spread(counts, live), kind=kind, moves_at_least=need)


def unknown_bytes(report: Mapping[str, Any], live: list[int]) -> dict[int, str]:
    """Live brokers whose bytes are unknown, with why: no size in the report (a replica whose size
    no log dir reported: the job leaves the broker's sum null rather than partial), or log dirs
    unknown or offline (DescribeLogDirs did not answer, or a failed dir lists nothing)."""
    rows = {int(b["broker_id"]): b for b in report.get("brokers", [])}
    out = {b: "no size_bytes in the report" for b in live if rows.get(b, {}).get("size_bytes") is None}
    for d in (report.get("log_dirs") or {}).get("brokers", []):
        if int(d["broker_id"]) in live and d.get("state") in (DIRS_UNKNOWN, OFFLINE):
            out[int(d["broker_id"])] = f"log dirs {d['state']}: {d.get('reason') or 'sizes not all reported'}"
    return out


def judge_bytes(report: Mapping[str, Any], live: list[int], target: Any) -> BytesJudged:
    """Bytes per live broker (the report's ``size_bytes``, the planner's own figure: the sum of its
    replicas' sizes) against ``max_bytes_spread_percent`` with ``bytes_spread_limit`` and
    ``within_bytes_spread``: a broker whose bytes are unknown leaves the whole judgement unknown."""
    text = str(target).strip()
    unknown = unknown_bytes(report, live)
    rows = {int(b["broker_id"]): b for b in report.get("brokers", [])}
    sizes = {b: None if b in unknown else int(rows[b]["size_bytes"]) for b in live}
    limit = bytes_spread_limit(text, sizes, live) if live else None
    if limit is None and not unknown and live:
        raise BadInput(f"{BYTES_PARAM}: a percentage of the mean bytes per broker >= 0 ('20'), not {text!r}")
    within = within_bytes_spread(sizes, live, limit) if live else None
    seen = None if within is None else spread(sizes, live)
    return BytesJudged(text, sizes, limit, seen, unknown=unknown, within=within)


def balance_findings(
    balance: Mapping[str, Any] | None, logger: logging.Logger | None
) -> list[decisions.DecisionRecord]:
    """A WARNING naming what is out of the target spread and by how much, one saying the balance (or
    only its bytes) is unknown (never "balanced"); nothing when it is within the target or was not
    judged. Leadership now has its own record (``leadership_findings``)."""
    if not balance:
        return []
    out = leadership_findings(balance.get("leaders"), logger)
    if balance.get("state") == BALANCED:
        return out
    out_of = {
        k: balance[k] for k in (*KIND_NAMES, "bytes") if (balance.get(k) or {}).get("state") == OUT_OF_SPREAD
    }
    if out_of:
        out.append(_out_of_spread_record(out_of, logger))
    unknown = balance.get("unknown_brokers") or {}
    if balance["state"] == UNKNOWN and (unknown or not (balance.get("bytes") or {}).get("unknown_brokers")):
        why = (
            f"live broker(s) {sorted(int(b) for b in unknown)} have no trustworthy count: {unknown}"
            if unknown
            else "no live broker to judge"
        )
        out.append(_unknown_record("balance unknown", why, {"unknown_brokers": unknown}, logger))
        return out
    bytes_unknown = (balance.get("bytes") or {}).get("unknown_brokers") or {}
    if bytes_unknown:
        why = f"live broker(s) {sorted(int(b) for b in bytes_unknown)} have no known size: {bytes_unknown}"
        out.append(
            _unknown_record("bytes per broker unknown", why, {"unknown_brokers": bytes_unknown}, logger)
        )
    return out


KIND_NAMES = tuple(kind for kind, _, _ in SPREAD_KINDS)


def leadership_findings(leaders: Mapping[str, Any] | None, logger) -> list[decisions.DecisionRecord]:
    """A WARNING when leadership now is out of the preferred leaders' target spread: leaders left
    where a restart or a failure put them; a preferred-leader election moves them back."""
    if not leaders or leaders.get("state") != OUT_OF_SPREAD:
        return []
    return [
        decisions.record(
            "health",
            f"leaders out of the target spread: spread {leaders['spread']} > {leaders['limit']} "
            f"(target {leaders['target']}), over by {leaders['over_by']}",
            "the brokers that lead now are further apart than kafka_rebalance's max_leader_spread allows "
            "(the preferred leaders' own rule and target); leadership goes back to the preferred leaders "
            "by a preferred-leader election (auto.leader.rebalance.enable, or kafka-leader-election "
            "--election-type PREFERRED), not by moving replicas",
            observed=dict(leaders),
            action="reported only (this sweep never changes the cluster)",
            logger=logger,
            level=logging.WARNING,
        )
    ]


def _unknown_record(decision: str, why: str, observed: dict, logger) -> decisions.DecisionRecord:
    return decisions.record(
        "health",
        decision,
        why + "; an unknown figure is never read as balanced nor as 0, and no rebalance is proposed on it",
        observed=observed,
        action="reported only",
        logger=logger,
        level=logging.WARNING,
    )


def _out_of_spread_record(out_of: dict[str, dict], logger) -> decisions.DecisionRecord:
    """What is out of the target spread and how far, with the fewest moves where a bound is known."""
    summary = "; ".join(
        f"{k.replace('_', ' ')} spread {v['spread']} > {v['limit']} (target {_target_text(k, v)}), over by {v['over_by']}"
        for k, v in out_of.items()
    )
    moves = [
        f"{v['moves_at_least']} {k.replace('_', ' ')} move(s)" for k, v in out_of.items() if k != "bytes"
    ]
    return decisions.record(
        "health",
        f"out of the target spread: {summary}",
        "the most loaded minus the least loaded live broker is above what kafka_rebalance's target allows "
        "(the same rule units)"
        + (f"; at least {', '.join(moves)} bring it within" if moves else "")
        + ("; bytes even out by replica moves or swaps, the counts kept" if "bytes" in out_of else ""),
        observed=dict(out_of),
        action="reported; a kafka_rebalance run (mode full, gated) is proposed only where the setting allows",
        logger=logger,
        level=logging.WARNING,
    )


def _target_text(kind: str, judged: Mapping[str, Any]) -> str:
    """A target as the operator set it: bytes are a percentage of the mean, the counts say their unit."""
    return f"{judged['target']}% of the mean" if kind == "bytes" else str(judged["target"])


def replication_findings(
    replication: Mapping[str, Any] | None, logger: logging.Logger | None
) -> list[decisions.DecisionRecord]:
    """A WARNING naming the topics below the minimum replication factor (and the minimum's origin)."""
    if not replication or not replication.get("below_minimum"):
        return []
    listed = [f"{t['topic']} (RF {t['replication_factor']})" for t in replication.get("listed", [])]
    return [
        decisions.record(
            "health",
            f"{replication['below_minimum']} topic(s) below replication factor {replication['minimum']}",
            f"the minimum is {replication['minimum']} ({replication['minimum_from']}); one lost broker leaves "
            "these topics with fewer copies than the deployment asks for",
            observed={
                "topics": listed[:50],
                "truncated": bool(replication.get("truncated")) or len(listed) > 50,
            },
            action="reported; a kafka_rebalance run (mode replication-factor, gated) raising them is proposed "
            "only where the setting allows, before any balance run",
            logger=logger,
            level=logging.WARNING,
        )
    ]


# ------------------------------------------------------------------ the proposal: one gated rebalance


@dataclass(frozen=True)
class LastProposal:
    """The kafka_rebalance run this sweep last started on a cluster, and when (the worker's clock,
    compared only with the worker's clock)."""

    run_id: str
    started_ms: int


@dataclass(frozen=True)
class RebalanceProposal:
    """Whether the sweep starts a kafka_rebalance run now, what it decided and why (on the Kafka page)."""

    start: bool
    decision: str
    why: str
    run_id: str | None = None
    conf: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The proposal as the sweep's report and decision record show it."""
        return {"start": self.start, "decision": self.decision, "why": self.why, "run_id": self.run_id}


@dataclass(frozen=True)
class HealthSettings:
    """The health sweep's settings, checked once by its ``health_settings`` task: whether it may start
    a rebalance, the rebalance's targets, the minimum replication factor (None: 3, or the live
    brokers when fewer; the job decides), how long a rejected proposal waits. They cross XCom to
    each cluster's tasks as :meth:`as_dict` (JSON; Airflow rebuilds no class of ours)."""

    start_rebalance: bool
    max_replica_spread: str
    max_leader_spread: str
    max_bytes_spread_percent: str  # a percentage of the mean bytes per live broker ('20')
    min_replication_factor: int | None
    retrigger_after_minutes: Any  # as given: '1d', '12h' or minutes
    retrigger_after_s: float

    @classmethod
    def from_given(cls, given: Mapping[str, Any]) -> HealthSettings:
        """Check the layered settings (or their XCom form); a bad one is BadInput, named."""
        if not isinstance(given["start_rebalance"], bool):
            raise BadInput(f"start_rebalance must be true or false, not {given['start_rebalance']!r}")
        for name in ("max_replica_spread", "max_leader_spread"):
            if spread_limit(given[name], 100) is None:
                raise BadInput(
                    f"{name}: a spread is a count >= 0 ('2') or a percentage ('10%'), not {given[name]!r}"
                )
        bytes_target = str(given[BYTES_PARAM]).strip().removesuffix("%").strip()
        if isinstance(given[BYTES_PARAM], bool) or bytes_spread_limit(bytes_target, {}, []) is None:
            raise BadInput(
                f"{BYTES_PARAM}: a percentage of the mean bytes per broker >= 0 ('20'), not {given[BYTES_PARAM]!r}"
            )
        rf = given["min_replication_factor"]
        if rf is not None and (isinstance(rf, bool) or not isinstance(rf, int) or rf < 1):
            raise BadInput(
                f"min_replication_factor must be an integer >= 1 or null (3, or the live brokers), not {rf!r}"
            )
        retrigger = given["retrigger_after_minutes"]
        return cls(
            start_rebalance=given["start_rebalance"],
            max_replica_spread=str(given["max_replica_spread"]).strip(),
            max_leader_spread=str(given["max_leader_spread"]).strip(),
            max_bytes_spread_percent=bytes_target,
            min_replication_factor=rf,
            retrigger_after_minutes=retrigger,
            retrigger_after_s=parse_duration(retrigger, "retrigger_after_minutes", "minutes"),
        )

    def targets(self) -> dict[str, str]:
        """The spreads the balance is judged against (``judge_balance``'s targets)."""
        return {
            "max_replica_spread": self.max_replica_spread,
            "max_leader_spread": self.max_leader_spread,
            BYTES_PARAM: self.max_bytes_spread_percent,
        }

    def as_dict(self) -> dict[str, Any]:
        """The settings as the sweep read them, checked (its XCom: each cluster's tasks get these)."""
        return {
            "start_rebalance": self.start_rebalance,
            **self.targets(),
            "min_replication_factor": self.min_replication_factor,
            "retrigger_after_minutes": self.retrigger_after_minutes,
        }


@dataclass(frozen=True)
class ProposalInputs:
    """What the proposal is decided from: the judged balance, the report it came from, the settings."""

    balance: BalanceJudged
    report: Mapping[str, Any]
    enabled: bool  # the setting start_rebalance (off by default: report only)
    targets: Mapping[str, str]
    conn_id: str
    run_id: str  # the id the started run gets (it names the cluster)
    last: LastProposal | None
    now_ms: int
    retrigger_after_s: float


def propose_rebalance(
    inputs: ProposalInputs, active: Callable[[], list[str]], logger: logging.Logger | None = None
) -> RebalanceProposal:
    """Start ONE gated kafka_rebalance run when nothing holds it back; the decision is recorded
    either way. Durability first: topics below the minimum replication factor make it a
    ``replication-factor`` run raising them to the minimum; otherwise replicas, preferred leaders
    or bytes (alone too) out of the target spread make it a ``full`` one with the same targets. ``active``: the reassigning runs on
    the cluster, read only when it matters."""
    below = below_minimum_rf(inputs.report)
    if inputs.balance.state == BALANCED and below is None:
        return RebalanceProposal(False, "nothing to propose", "within the target spread")
    held = _proposal_held_back(inputs, active)
    if held is not None:
        decision, why, level = held
        decisions.record("health", decision, why, subject=inputs.conn_id, logger=logger, level=level)
        return RebalanceProposal(False, decision, why)
    conf = {
        **(
            {"mode": "replication-factor", "replication_factor": below}
            if below is not None
            else {"mode": "full", **rebalance_targets(inputs.targets)}
        ),
        "require_approval": True,  # it waits at its gate: the sweep proposes, an operator decides
        "dry_run": False,
        "kafka_config_id": inputs.conn_id,
    }
    why = (
        f"{_finding(inputs)}; start_rebalance is on and no reassignment runs on the cluster: "
        f"one kafka_rebalance run (mode {conf['mode']}), which plans and then waits at its approval gate"
    )
    decisions.record(
        "health",
        "propose a rebalance",
        why,
        subject=inputs.conn_id,
        observed=inputs.balance.as_dict(),
        action=f"trigger {REBALANCE_DAG_ID} run {inputs.run_id} with {conf}",
        logger=logger,
        level=logging.WARNING,
    )
    return RebalanceProposal(True, "propose a rebalance", why, inputs.run_id, conf)


def below_minimum_rf(report: Mapping[str, Any]) -> int | None:
    """The minimum replication factor when the report lists topics below it, else None."""
    replication = report.get("replication") or {}
    return int(replication["minimum"]) if replication.get("below_minimum") else None


def _finding(inputs: ProposalInputs) -> str:
    """What the proposal is about, in the order it is acted on: the replication factor, the spread."""
    below = below_minimum_rf(inputs.report)
    if below is not None:
        count = inputs.report["replication"]["below_minimum"]
        return f"{count} topic(s) below replication factor {below}"
    return _out_of_spread(inputs.balance)


def _out_of_spread(balance: BalanceJudged) -> str:
    return ", ".join(
        f"{kind.replace('_', ' ')} spread {k.spread} above {k.limit} (target {_target_text(kind, {'target': k.target})})"
        for kind, k in balance.out_of_spread()
    )


def rebalance_targets(targets: Mapping[str, Any]) -> dict[str, Any]:
    """The targets as kafka_rebalance's params take them: the spreads as text, the bytes target as a
    number (its trigger form's type)."""
    out: dict[str, Any] = {param: str(targets[param]) for _, _, param in SPREAD_KINDS}
    if targets.get(BYTES_PARAM) is not None:
        out[BYTES_PARAM] = float(str(targets[BYTES_PARAM]).strip().removesuffix("%"))
    return out


def _proposal_held_back(
    inputs: ProposalInputs, active: Callable[[], list[str]]
) -> tuple[str, str, int] | None:
    """(decision, reason, level) when no rebalance starts now, in this order: the balance is unknown;
    a broker holding replicas is down (the heal's case; the rebalance refuses such a cluster); a live
    broker has offline log dirs (kafka_log_dir_failure's case); the setting is off (report only); the
    last proposal is recent; a reassignment runs on the cluster (one per cluster at a time)."""
    report, balance = inputs.report, inputs.balance
    if balance.state == UNKNOWN:
        bytes_unknown = sorted(balance.bytes.unknown) if balance.bytes is not None else []
        return (
            "no proposal: balance unknown",
            (
                f"live broker(s) {sorted(balance.unknown)} have no trustworthy count (or no broker is live)"
                if balance.unknown or not bytes_unknown
                else f"the bytes of live broker(s) {bytes_unknown} are unknown and nothing else is out of spread"
            )
            + ": an unknown balance is never a proposal",
            logging.WARNING,
        )
    down = sorted(
        int(b["broker_id"])
        for b in report.get("brokers", [])
        if not (b.get("alive") and not b.get("fenced")) and (b.get("replica_count") or 0) > 0
    )
    if down:
        return (
            "no proposal: the heal goes first",
            f"broker(s) {down} hold replicas but are not live: "
            "kafka_failed_broker_reassignment's case; kafka_rebalance plans only when every broker holding "
            "replicas is up",
            logging.INFO,
        )
    offline = (report.get("log_dirs") or {}).get("brokers_with_offline_dirs") or []
    if offline:
        return (
            "no proposal: the log-dir failure goes first",
            f"live broker(s) {offline} have offline log dirs "
            "(kafka_log_dir_failure's case): their replicas there are out, whatever the counts say",
            logging.INFO,
        )
    return _not_now(inputs, active)


def _mode(inputs: ProposalInputs) -> str:
    return "replication-factor" if below_minimum_rf(inputs.report) is not None else "full"


def _not_now(inputs: ProposalInputs, active: Callable[[], list[str]]) -> tuple[str, str, int] | None:
    """The rest of the order, once a rebalance could plan on the cluster: the setting, a recent
    proposal, another reassigning run (asked of Airflow last: only when everything else allows)."""
    last = inputs.last
    if not inputs.enabled:
        return (
            "report only",
            f"{_finding(inputs)}; start_rebalance is off (the default): the sweep reports only. Trigger "
            f"{REBALANCE_DAG_ID} by hand (mode {_mode(inputs)}), or turn the setting on",
            logging.WARNING,
        )
    if last is not None and inputs.now_ms - last.started_ms < inputs.retrigger_after_s * 1000:
        return (
            "wait",
            f"this sweep proposed run {last.run_id} less than {inputs.retrigger_after_s / 60:g} "
            "minute(s) ago (retrigger_after_minutes): an answered or rejected gate is not asked again at "
            "once",
            logging.INFO,
        )
    running = active()
    if running:
        return (
            "do not start another reassignment",
            f"run(s) {running} are active on cluster {inputs.conn_id}: "
            "one reassignment per cluster at a time",
            logging.INFO,
        )
    return None
