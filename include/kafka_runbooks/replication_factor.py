"""``kafka_rebalance`` mode ``replication-factor``: raise (or, when asked, lower) topics to a target.

Decided before the gate, from what Kafka reports (Airflow-free):

- the request: ``replication_factor`` (>= 1), the topics as a list (``topics``) or a regex
  (``topic_regex``, matched whole), neither meaning every topic with a partition below the target
  (internal ``__`` topics only when named);
- the selection against the cluster: a target above the live brokers is refused naming both
  numbers; a named topic that does not exist, a regex that matches none, and a topic above the
  target (lowering) are refused unless ``allow_replication_factor_decrease`` is true (off by
  default: lowering removes replicas);
- a lowering, when asked (``check_lowering``): never below the topic's effective
  ``min.insync.replicas`` (below it no ``acks=all`` write succeeds; unread, it is unknown and the
  lowering is refused), and every replica a partition keeps is in its ISR now (never a kept replica
  that lacks acknowledged messages, never the only in-sync replica dropped); the replicas dropped
  are chosen by ``dropped_replicas``;
- the plan check: the planner's choice replayed on the snapshot with the same units
  (``kafka_runbooks.balance_rules``: ``new_replicas`` in ``raise_order``, ``racks_wanted``, ``fits``),
  plus the chunk and per-broker families every plan is held to;
- the gate's Markdown: the topics, partitions, replicas added, data to copy, per broker before and
  after; and the read-back after the chunks (every partition of the topics at the target, in sync).

Each refusal is a :class:`RequestError` (the plugin records it as a ``refuse`` DECISION).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_runbooks.balance_rules import (
    distinct_racks,
    dropped_replicas,
    kept_in_sync,
    new_replicas,
    racks_wanted,
    raise_order,
)
from kafka_runbooks.failed_broker.plan import (
    Chunks,
    PerBrokerFigures,
    Plan,
    PlanModel,
    PlanRule,
    RebalanceDisk,
    RuleFamily,
    Violation,
    scope_of,
)
from kafka_runbooks.failed_broker.request import RequestError
from kafka_runbooks.model import ClusterState

MODE = "replication-factor"
LISTED = 20  # topics or partitions named in one message


@dataclass(frozen=True)
class RfRequest:
    """The mode's own params: the target, which topics (a list, a regex, or None: every one below),
    and whether topics above the target may be lowered to it (off by default)."""

    replication_factor: int
    topics: tuple[str, ...] | None
    topic_regex: str | None
    allow_decrease: bool = False


def _target(value: Any) -> int:
    if value is None or (isinstance(value, str) and not value.strip()):
        raise RequestError("mode replication-factor needs replication_factor: the target, e.g. 3")
    try:
        rf = int(str(value).strip())
    except ValueError:
        raise RequestError(f"replication_factor must be an integer, not {value!r}") from None
    if isinstance(value, bool) or rf < 1:
        raise RequestError(f"replication_factor must be at least 1, not {value!r}")
    return rf


def _topics(value: Any) -> tuple[str, ...] | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    names = tuple(sorted({str(t).strip() for t in items if str(t).strip()}))
    bad = [t for t in names if not re.fullmatch(r"[A-Za-z0-9._-]+", t)]
    if bad:
        raise RequestError(
            f"topics are Kafka topic names separated by commas (letters, digits, . _ -): {bad}"
        )
    return names or None


def _allow_decrease(value: Any) -> bool:
    """``allow_replication_factor_decrease``: a boolean (the form's checkbox), absent meaning no."""
    if value is None:
        return False
    if not isinstance(value, bool):
        raise RequestError(f"allow_replication_factor_decrease must be true or false, not {value!r}")
    return value


def build_rf_request(params: Mapping[str, Any]) -> RfRequest:
    """The mode's params alone (no cluster call): a target >= 1, a list or a regex (not both),
    whether lowering is allowed."""
    topics = _topics(params.get("topics"))
    regex = params.get("topic_regex")
    regex = None if regex is None or not str(regex).strip() else str(regex).strip()
    if topics is not None and regex is not None:
        raise RequestError("name the topics either as a list (topics) or as a regex (topic_regex), not both")
    if regex is not None:
        try:
            re.compile(regex)
        except re.error as exc:
            raise RequestError(f"topic_regex {regex!r} is not a regular expression: {exc}") from None
    allow = _allow_decrease(params.get("allow_replication_factor_decrease"))
    return RfRequest(_target(params.get("replication_factor")), topics, regex, allow)


@dataclass(frozen=True)
class RfSelection:
    """The topics the run raises (or lowers, when asked), with the partitions below and above the
    target and the live brokers."""

    replication_factor: int
    topics: list[str]
    below: dict[str, int]  # topic -> partitions below the target
    live: list[int]
    above: dict[str, int] = field(default_factory=dict)  # topic -> partitions above (lowered)

    @property
    def changed(self) -> list[str]:
        """The topics with a partition off the target: the planner's ``--topics``."""
        return sorted(set(self.below) | set(self.above))

    def observed(self) -> dict[str, Any]:
        """What the selection found, for the decision record (each list cut to its first 100)."""
        return {
            "replication_factor": self.replication_factor,
            "topics": self.topics[:100],
            "partitions_below": dict(list(self.below.items())[:100]),
            "partitions_above": dict(list(self.above.items())[:100]),
            "live_brokers": self.live,
        }


def _named(request: RfRequest, factors: dict[str, set[int]]) -> list[str]:
    """The topics the request names (or every non-internal one with a partition below the target)."""
    if request.topics is not None:
        unknown = [t for t in request.topics if t not in factors]
        if unknown:
            raise RequestError(f"topic(s) {unknown[:LISTED]} do not exist in the cluster")
        return list(request.topics)
    if request.topic_regex is not None:
        matched = sorted(t for t in factors if re.fullmatch(request.topic_regex, t))
        if not matched:
            raise RequestError(f"topic_regex {request.topic_regex!r} matches no topic of the cluster")
        return matched
    rf = request.replication_factor
    return sorted(t for t, seen in factors.items() if not t.startswith("__") and min(seen) < rf)


def select_topics(request: RfRequest, state: ClusterState) -> RfSelection:
    """The topics to raise (and lower, when asked), or a RequestError: a target above the live
    brokers (naming both), a named topic unknown, a regex matching none, a topic above the target
    unless ``allow_replication_factor_decrease`` (then ``check_lowering`` judges it)."""
    live = state.alive_broker_ids()
    rf = request.replication_factor
    if rf > len(live):
        raise RequestError(
            f"replication factor {rf} is above the {len(live)} live broker(s) {live}: a partition cannot "
            "have more replicas than there are brokers; add brokers first or ask for less"
        )
    factors: dict[str, set[int]] = {}
    for p in state.partitions:
        factors.setdefault(p.topic, set()).add(len(p.replicas))
    topics = _named(request, factors)
    above = {t: max(factors[t]) for t in topics if max(factors[t]) > rf}
    if above and not request.allow_decrease:
        raise RequestError(
            f"lowering the replication factor is refused: topic(s) {dict(list(above.items())[:LISTED])} have "
            f"more than {rf} replicas; set allow_replication_factor_decrease to lower them (off by default: "
            "it removes replicas), or name only the topics below the target"
        )
    named = set(topics)
    below = Counter(p.topic for p in state.partitions if p.topic in named and len(p.replicas) < rf)
    higher = Counter(p.topic for p in state.partitions if p.topic in named and len(p.replicas) > rf)
    return RfSelection(rf, topics, dict(sorted(below.items())), live, dict(sorted(higher.items())))


def check_lowering(selection: RfSelection, state: ClusterState, min_isr: Mapping[str, int | None]) -> None:
    """A RequestError unless every lowering is safe: the target at or above each lowered topic's
    effective ``min.insync.replicas`` (``min_isr``; a topic missing or None there is unknown, and
    unknown is refused, never taken as 1), and each lowered partition keeps only replicas in its ISR
    now (``dropped_replicas`` drops the out-of-sync ones first; ``kept_in_sync`` judges the rest)."""
    rf = selection.replication_factor
    unknown = [t for t in selection.above if min_isr.get(t) is None]
    if unknown:
        raise RequestError(
            f"min.insync.replicas of topic(s) {unknown[:LISTED]} could not be read: lowering them is refused "
            "(below it no acks=all write succeeds, and unknown is not safe)"
        )
    short = {t: min_isr[t] for t in selection.above if rf < int(min_isr[t] or 0)}
    if short:
        raise RequestError(
            f"replication factor {rf} is below the effective min.insync.replicas of topic(s) "
            f"{dict(list(short.items())[:LISTED])}: every acks=all write to them would fail "
            "(NOT_ENOUGH_REPLICAS); lower min.insync.replicas first or ask for more replicas"
        )
    out = [f"{p.name} replicas {list(p.replicas)} ISR {list(p.isr)}" for p in _unsafe_drops(selection, state)]
    if out:
        raise RequestError(
            f"{len(out)} partition(s) have fewer than {rf} replicas in the ISR: lowering them would keep a "
            f"replica that lacks acknowledged messages (or drop the only in-sync one): {out[:LISTED]}; "
            "wait until they are in sync"
        )


def _unsafe_drops(selection: RfSelection, state: ClusterState) -> list:
    """The partitions above the target whose kept replicas (``dropped_replicas``) are not all in the ISR."""
    rf, racks = selection.replication_factor, {b: info.rack for b, info in state.brokers.items()}
    load = {b: [0, 0] for p in state.partitions for b in p.replicas}
    unsafe = []
    for p in state.partitions:
        if p.topic in selection.above and len(p.replicas) > rf:
            dropped = dropped_replicas(racks, p.replicas, set(p.isr), rf, load, 0)
            if not kept_in_sync(p.replicas, dropped, set(p.isr)):
                unsafe.append(p)
    return unsafe


# ---------------------------------------------------------------------------------------------
# The plan check: the planner's choice replayed with the shared units on the snapshot's figures.


def _bytes_before(model: PlanModel) -> Counter:
    """Bytes per broker as the snapshot gives them: its reports, the partition's size where none."""
    out = Counter(model.reported)
    for key, rows in model.rows_of.items():
        for r in rows:
            if r["size_bytes"] is None:
                out[int(r["replica"])] += model.size[key]
    return out


def _room(summary: Mapping[str, Any]) -> dict[int, int] | None:
    raw = summary.get("room")
    return None if raw is None else {int(b): int(n) for b, n in raw.items()}


class RfBrokers(RuleFamily):
    """A target between 1 and the live brokers; every broker holding replicas live; replicas come
    from and go to the live brokers."""

    name = "brokers named by the plan"

    def check(self, plan: Plan, model: PlanModel) -> list[Violation]:
        """Violations: a target outside 1..live brokers, a broker holding replicas that is not live,
        sources or receivers other than the live brokers."""
        scope, rf = scope_of(model), plan.summary.get("replication_factor")
        out = []
        if not isinstance(rf, int) or not 1 <= rf <= len(scope):
            out.append(
                self.broken(f"replication factor {rf!r} is not between 1 and the {len(scope)} live brokers")
            )
        down = sorted(b for b, n in model.count.items() if n and not model.alive.get(b, False))
        if down:
            out.append(self.broken(f"broker(s) {down} hold replicas but are not live"))
        for what, got in (("receivers", model.receivers), ("sources", model.failed)):
            if sorted(got) != scope:
                out.append(self.broken(f"{what} {sorted(got)} should be the live brokers {scope}"))
        return out


def expected_targets(
    plan: Plan, model: PlanModel
) -> tuple[dict[tuple[str, int], tuple[int, ...]], list[str]]:
    """Each partition of the plan's topics off its target as the rule places it: below, raised by
    ``new_replicas`` in ``raise_order`` from the snapshot's replicas and bytes per live broker; then
    above (only when the summary says lowering was allowed), lowered by ``dropped_replicas`` in
    name order keeping only in-sync replicas. Also the partitions the rules cannot place (no broker
    fits, fewer racks than ``racks_wanted``, a kept replica out of the ISR, lowering not allowed)."""
    rf, topics = int(plan.summary["replication_factor"]), set(plan.summary.get("topics") or ())
    scope, racks, room = scope_of(model), model.racks, _room(plan.summary)
    before = _bytes_before(model)
    load = {b: [model.count[b], before[b]] for b in scope}
    gained: dict[int, int] = {}
    keys = [k for k, now in model.current.items() if k[0] in topics and len(now) < rf]
    placed, stuck = {}, []
    for k in sorted(keys, key=lambda k: raise_order(model.size[k], k[0], k[1])):
        now = model.current[k]
        chosen = new_replicas(racks, now, scope, rf, load, room, gained, model.size[k])
        target = None if chosen is None else (*now, *chosen)
        if target is None or distinct_racks(racks, target) < racks_wanted(racks, now, scope, rf):
            stuck.append(f"{k[0]}-{k[1]}")
        else:
            placed[k] = target
    lowered, refused = _expected_drops(plan, model, load)
    return {**placed, **lowered}, stuck + refused


def _expected_drops(
    plan: Plan, model: PlanModel, load: dict[int, list[int]]
) -> tuple[dict[tuple[str, int], tuple[int, ...]], list[str]]:
    """The partitions of the plan's topics above the target as ``dropped_replicas`` lowers them (in
    name order, on the load after the raises), and those it cannot (lowering not allowed, or a kept
    replica out of the snapshot's ISR)."""
    rf, topics = int(plan.summary["replication_factor"]), set(plan.summary.get("topics") or ())
    allowed = plan.summary.get("allow_replication_factor_decrease") is True
    placed, stuck = {}, []
    for k in sorted(k for k, now in model.current.items() if k[0] in topics and len(now) > rf):
        now = model.current[k]
        isr = {int(r["replica"]) for r in model.rows_of.get(k, ()) if r["in_isr"]}
        dropped = dropped_replicas(model.racks, now, isr, rf, _loaded(load, now), model.size[k])
        if allowed and kept_in_sync(now, dropped, isr):
            placed[k] = tuple(b for b in now if b not in dropped)
        else:
            stuck.append(f"{k[0]}-{k[1]}")
    return placed, stuck


def _loaded(load: dict[int, list[int]], replicas) -> dict[int, list[int]]:
    """``load`` with a zero entry for any replica's broker it lacks (one not live is not in scope)."""
    for b in replicas:
        load.setdefault(b, [0, 0])
    return load


class RfTargets(RuleFamily):
    """Every partition of the named topics below the target (and above it, when lowering was
    allowed) is planned, exactly as the shared rules place it; nothing else is."""

    name = "each partition's target"

    def check(self, plan: Plan, model: PlanModel) -> list[Violation]:
        """Violations: a partition off the target left out (unless the rules could place none), one planned
        that is not, a target other than the shared rules place."""
        if not isinstance(plan.summary.get("replication_factor"), int):
            return [self.broken("the summary names no replication factor")]
        placed, stuck = expected_targets(plan, model)
        out = [
            self.broken(f"{s}: the rules find no broker, too few racks, or no safe lowering for it")
            for s in stuck[:LISTED]
        ]
        for k in sorted(set(placed) | set(model.planned)):
            name, got = f"{k[0]}-{k[1]}", model.planned.get(k)
            if got is None:
                if f"{k[0]}-{k[1]}" not in stuck:
                    side = "below" if len(model.current[k]) < plan.summary["replication_factor"] else "above"
                    out.append(self.broken(f"{name} is {side} the target but not planned", k))
            elif k not in placed:
                out.append(
                    self.broken(f"{name} is planned but is not a partition of the topics off the target", k)
                )
            elif got.replicas != placed[k]:
                out.append(
                    self.broken(f"{name}: planned {list(got.replicas)}, the rule gives {list(placed[k])}", k)
                )
        return out


class RfSummary(RuleFamily):
    """The summary's figures are the plan's: partitions, bytes, replicas added and removed, data to
    copy, the topics raised and lowered, each move."""

    name = "summary figures"

    def check(self, plan: Plan, model: PlanModel) -> list[Violation]:
        """Violations: summary figures or moves other than recomputed from the plan and the snapshot's
        sizes."""
        s, planned = plan.summary, model.planned
        added = {k: len(t.replicas) - len(model.current.get(k, ())) for k, t in planned.items()}
        up = sum(n for n in added.values() if n > 0)
        down = -sum(n for n in added.values() if n < 0)
        want = {
            "partitions": len(planned),
            "bytes": sum(model.size.get(k, 0) for k in planned),
            "replicas_added": up,
            "replicas_removed": down,
            "replica_moves": up + down,
            "bytes_copied": sum(model.size.get(k, 0) * n for k, n in added.items() if n > 0),
            "raised": dict(sorted(Counter(k[0] for k, n in added.items() if n > 0).items())),
            "lowered": dict(sorted(Counter(k[0] for k, n in added.items() if n < 0).items())),
            "replication_factor_kept": not any(added.values()),
        }
        wrong = {k: (s.get(k), v) for k, v in want.items() if s.get(k) != v}
        out = [self.broken(f"summary figures wrong (summary, recomputed): {wrong}")] if wrong else []
        moves = {(m["topic"], m["partition"]): m for m in s.get("moves", [])}
        for k, t in planned.items():
            m = moves.get(k)
            if m is None or tuple(m["to"]) != t.replicas or tuple(m["from"]) != model.current.get(k):
                out.append(
                    self.broken(f"summary move of {k[0]}-{k[1]} disagrees with plan.json or the snapshot", k)
                )
        if len(moves) != len(planned):
            out.append(self.broken(f"summary lists {len(moves)} moves for {len(planned)} planned partitions"))
        return out


RF_RULES: tuple[PlanRule, ...] = (
    RfBrokers(),
    RfTargets(),
    RfSummary(),
    RebalanceDisk(),
    Chunks(),
    PerBrokerFigures(),
)


# ---------------------------------------------------------------------------------------------
# The gate and the read-back.

MAX_ROWS = 20


def rf_markdown(summary: dict[str, Any], throttle_bytes_per_sec: int, plan_dir: str) -> str:
    """The gate's body: the topics and partitions raised (and lowered), replicas added and the
    replicas dropped, data to copy, the duration at the throttle, per broker before → after."""
    from kafka_runbooks.failed_broker.report import estimated_seconds
    from kafka_runbooks.units import format_duration, format_size

    rf, moves = summary["replication_factor"], summary.get("moves") or []
    raised = {**(summary.get("raised") or {}), **(summary.get("lowered") or {})}
    seconds = estimated_seconds(summary, throttle_bytes_per_sec)
    lines = [
        f"Replication factor **{rf}** for **{len(raised)}** topic(s): **{summary['partitions']}** partition(s) "
        f"changed, **{summary['replicas_added']}** replica(s) added, **{format_size(summary['bytes_copied'])}** "
        f"to copy, in {len(summary['chunks'])} chunk(s), about {format_duration(seconds)} at the throttle.",
        *_lowering_lines(summary),
        "",
        "| | |",
        "|---|---|",
        f"| Topics | {', '.join(f'`{t}` ({n})' for t, n in list(raised.items())[:MAX_ROWS])}"
        + (f" … and {len(raised) - MAX_ROWS} more" if len(raised) > MAX_ROWS else "")
        + " |",
        f"| Replicas added | {summary['replicas_added']} on {summary['partitions']} partition(s); the existing "
        "replicas keep their places (the preferred leader stays) |",
        f"| Data to copy | {format_size(summary['bytes_copied'])} ({summary['bytes_copied']:,} bytes) |",
        f"| Throttle | {format_size(throttle_bytes_per_sec)}/s per broker, {len(summary['chunks'])} chunk(s) |",
        f"| Estimated duration at the throttle | about {format_duration(seconds)} (the busiest receiver's share) |",
        "| Placement | a rack the partition lacks first, then the fewest replicas, then the fewest bytes, within "
        "each broker's room under the disk ceiling |",
        f"| After the chunks | every partition of the topics read back at {rf} replicas, all in the ISR, no "
        "throttle left |",
        f"| Plan files | `{plan_dir}` (`plan.json`, `chunks/NNNN.json`, `summary.json`) |",
        "",
        "**Partitions** (replicas before → after)",
        "",
        "| partition | replicas | dropped | bytes |",
        "|---|---|---|---:|",
    ]
    for m in moves[:MAX_ROWS]:
        dropped = [b for b in m["from"] if b not in m["to"]]
        lines.append(
            f"| `{m['topic']}`-{m['partition']} | {m['from']} → {m['to']} | {dropped or '-'} "
            f"| {format_size(m['bytes'])} |"
        )
    if len(moves) > MAX_ROWS:
        lines.append(f"| … {len(moves) - MAX_ROWS} more | | | |")
    return "\n".join(lines + _per_broker_rows(summary))


def _lowering_lines(summary: Mapping[str, Any]) -> list[str]:
    """The warning a lowering carries at the top of the gate: how many replicas it drops, and of
    which topics (each partition's dropped replicas are in the table below)."""
    lowered, removed = summary.get("lowered") or {}, summary.get("replicas_removed") or 0
    if not removed:
        return []
    return [
        "",
        f"**Lowering** (allow_replication_factor_decrease): **{removed}** replica(s) dropped from "
        f"{sum(lowered.values())} partition(s) of {', '.join(f'`{t}`' for t in list(lowered)[:MAX_ROWS])}; "
        "their data on those brokers is deleted. Each partition keeps only replicas in its ISR (out-of-sync "
        "ones go first, the preferred leader stays), never below the topic's min.insync.replicas.",
    ]


def _per_broker_rows(summary: dict[str, Any]) -> list[str]:
    from kafka_runbooks.units import format_size

    lines = [
        "",
        "**Per broker** (before → after)",
        "",
        "| broker | rack | replicas | bytes |",
        "|---:|---|---:|---:|",
    ]
    for broker, v in sorted(summary["per_broker"].items(), key=lambda kv: int(kv[0])):
        lines.append(
            f"| {broker} | {v.get('rack') or '-'} | {v['replicas_before']} → {v['replicas_after']} "
            f"| {format_size(v['bytes_before'])} → {format_size(v['bytes_after'])} |"
        )
    return lines


@dataclass(frozen=True)
class RfReadBack:
    """One read of the topics against the target: every partition at it, and in sync."""

    replication_factor: int
    off_target: list[str]
    isr_short: list[str]

    @property
    def done(self) -> bool:
        """Every partition of the topics is at the target and fully in sync in this read."""
        return not self.off_target and not self.isr_short

    def observed(self) -> dict[str, Any]:
        """The read for the decision record (the first 50 partitions off target and short of ISR)."""
        return {
            "replication_factor": self.replication_factor,
            "off_target": self.off_target[:50],
            "isr_short": self.isr_short[:50],
        }


def judge_rf(state: ClusterState, topics: list[str], rf: int) -> RfReadBack:
    """The topics' partitions as read now: each with ``rf`` distinct replicas, all in the ISR."""
    named = set(topics)
    parts = [p for p in state.partitions if p.topic in named]
    return RfReadBack(
        rf,
        [f"{p.name} {list(p.replicas)}" for p in parts if len(set(p.replicas)) != rf],
        [p.name for p in parts if set(p.isr) != set(p.replicas)],
    )
