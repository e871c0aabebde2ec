"""The plan as a person reads it: the Markdown the approval gate and the task log show.

The Airflow UI renders a HITL body as GitHub-flavoured Markdown: tables come out as tables,
while a fenced code block is collapsed into one run-on line. So the plan preview is tables:
the figures, per broker before -> after (replicas, preferred leaders, bytes), the chunks, and
where the plan files are. Pure functions over the planner's ``summary.json``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka_runbooks.errors import BadInput
from kafka_runbooks.failed_broker.throttle_floor import from_dict as floor_from_dict
from kafka_runbooks.units import format_duration, format_size

MAX_CHUNK_ROWS = 40


def estimated_seconds(summary: dict[str, Any], throttle_bytes_per_sec: int) -> float:
    """Time for the busiest receiver to copy what it gains at the per-broker throttle.

    The throttle is a rate per broker and receivers copy in parallel, so the receiver that
    gains the most bytes sets the pace (on the local stack a heal took 1.2 times this figure).
    """
    gains = [
        v["bytes_after"] - v["bytes_before"]
        for b, v in summary["per_broker"].items()
        if int(b) in set(summary["receivers"])
    ]
    return max(gains, default=0) / max(throttle_bytes_per_sec, 1)


def moved_from(summary: dict[str, Any]) -> tuple[str, str]:
    """(facts key, words) for the brokers a plan moves replicas off, in the runbook's own words: a
    heal's failed brokers, a decommission's drained ones, a log-dir failure's broker (live: only its
    failed dir's replicas move), a rebalance's sources. One place, so that no gate or record calls
    a live broker being drained "failed"."""
    if summary.get("rebalance"):
        return "source_brokers", "the source brokers'"
    if summary.get("drain"):
        return "drained_brokers", "the drained brokers'"
    if summary.get("drain_replicas"):
        return "log_dir_broker", "the failed log dir's"
    return "failed_brokers", "the failed brokers'"


def broker_state(v: dict[str, Any]) -> str:
    """A broker as the plan's snapshot saw it (its registration and fence in the metadata)."""
    if not v.get("registered"):
        return "not registered"
    return "registered, unfenced" if v.get("alive") else "registered, fenced"


def _broker_label(broker: str, v: dict[str, Any], failed: set[int], drain: bool, dirs: list[str]) -> str:
    """The per-broker row's name: the brokers the runbook singles out say why, from their facts."""
    if int(broker) not in failed:
        return broker
    if drain:
        return f"**{broker}** (drained)"
    if dirs:  # a log-dir failure: the broker lives on, one of its dirs failed
        return f"**{broker}** ({broker_state(v)}; failed log dir {', '.join(f'`{d}`' for d in dirs)})"
    return f"**{broker}** (failed: {broker_state(v)})"


def headline(summary: dict[str, Any], brokers_text: str, seconds: float, when: str | None = None) -> str:
    """The gate's first line: a heal moves replicas off failed brokers; a drain (the planned
    decommission) empties live ones, and says so in the words an operator reads a proposal in."""
    moved = sum(summary.get("moved_per_receiver", {}).values())
    chunks = len(summary["chunks"])
    if summary.get("drain"):
        return (
            f"Decommission brokers **{brokers_text}**: **{moved}** replica move(s) of "
            f"**{summary['partitions']}** partition(s), **{format_size(summary['bytes'])}**, in {chunks} "
            f"chunk(s), {when or f'about {format_duration(seconds)} at the throttle'}; per broker before → after below. "
            "The drained brokers end with no replica and no leadership."
        )
    if summary.get("drain_replicas"):
        return (
            f"Move **{moved}** replica(s) of **{summary['partitions']}** partition(s) off the failed log "
            f"dir(s) of broker **{brokers_text}**, in {chunks} chunk(s), throttled; the broker and its "
            "healthy dirs' replicas stay."
        )
    return (
        f"Move **{moved}** replica(s) of **{summary['partitions']}** partition(s) off failed broker(s) "
        f"**{brokers_text}**, in {chunks} chunk(s), one at a time, throttled."
    )


def _arrow(before: Any, after: Any) -> str:
    return f"{before} → {after}" if before != after else f"{before}"


def plan_markdown(
    summary: dict[str, Any],
    throttle_bytes_per_sec: int,
    plan_dir: str,
    elect_preferred_leaders: bool,
    failed_dirs: list[str] = (),
    throttle_floor: dict | None = None,
) -> str:
    """The gate's body: what will be done, in tables the Airflow UI renders. ``failed_dirs``: a
    log-dir failure's offline dirs (its broker's DescribeLogDirs answer), named on the broker's row.

    A replication-factor plan's body is ``kafka_runbooks.replication_factor.rf_markdown`` (that
    module builds on this one, so the caller picks it: the reassignment glue's review does)."""
    if summary.get("rebalance") == "replication-factor":
        raise BadInput(
            "a replication-factor plan's gate body is kafka_runbooks.replication_factor.rf_markdown"
        )
    if summary.get("rebalance"):
        return rebalance_markdown(
            summary, throttle_bytes_per_sec, plan_dir, elect_preferred_leaders, throttle_floor
        )
    failed = {int(b) for b in summary["failed_brokers"]}
    seconds = estimated_seconds(summary, throttle_bytes_per_sec)
    drain = bool(summary.get("drain"))
    lines = [
        headline(
            summary,
            _failed_text(failed, summary["per_broker"]),
            seconds,
            at_the_throttle(seconds, throttle_bytes_per_sec, throttle_floor),
        ),
        "",
        *_heal_table(
            summary, throttle_bytes_per_sec, seconds, plan_dir, elect_preferred_leaders, throttle_floor
        ),
        *per_broker_rows(
            summary["per_broker"],
            lambda broker, v: _broker_label(broker, v, failed, drain, list(failed_dirs)),
        ),
    ]
    return "\n".join(lines + chunk_rows(summary["chunks"]))


def _failed_text(failed: set[int], per_broker: dict[str, Any]) -> str:
    """The moved-off brokers with their racks, for the headline (a rack not known is said so)."""
    racks = {b: per_broker.get(str(b), {}).get("rack") for b in sorted(failed)}
    return ", ".join(
        f"{b} (rack {racks[b]})" if racks[b] is not None else f"{b} (rack unknown)" for b in sorted(failed)
    )


def _heal_table(
    summary: dict[str, Any],
    throttle_bytes_per_sec: int,
    seconds: float,
    plan_dir: str,
    elect_preferred_leaders: bool,
    throttle_floor: dict | None = None,
) -> list[str]:
    """The heal's and the drain's figures: what moves, how much, how fast, what follows the moves."""
    moved = sum(summary.get("moved_per_receiver", {}).values())
    return [
        "| | |",
        "|---|---|",
        f"| Partitions to move | {summary['partitions']} |",
        f"| Replicas to copy | {moved} (only {moved_from(summary)[1]} replicas: the floor) |",
        _data_row(summary["bytes"]),
        f"| Chunks | {len(summary['chunks'])} |",
        *_throttle_rows(throttle_bytes_per_sec, seconds, throttle_floor),
        f"| Receivers | {', '.join(str(b) for b in summary['receivers'])} |",
        f"| Preferred leaders changed | {summary.get('leaders_changed', 0)} partition(s) whose failed "
        "replica led get a new first replica (no extra data moves) |",
        "| After healing | "
        + (
            "a preferred-leader election on the moved partitions, leaders read back |"
            if elect_preferred_leaders
            else "no preferred-leader election (`elect_preferred_leaders` is off) |"
        ),
        f"| Not movable | {summary.get('not_moved_count', 0)} partition(s) with no live replica to copy "
        "from |",
        _plan_files_row(plan_dir),
    ]


def _data_row(n: int) -> str:
    return f"| Data to copy | {format_size(n)} ({n:,} bytes) |"


def at_the_throttle(seconds: float, throttle_bytes_per_sec: int, throttle_floor: dict | None) -> str:
    """The headline's duration: "about X at the throttle", or "at most X" where Kafka does not hold
    the throttle (the copy runs faster: :mod:`~kafka_runbooks.failed_broker.throttle_floor`)."""
    floor = floor_from_dict(throttle_floor)
    if floor and floor.warning(throttle_bytes_per_sec):
        return f"at most {format_duration(seconds)} at the throttle (below what Kafka holds: it will copy faster)"
    return f"about {format_duration(seconds)} at the throttle"


def _throttle_rows(
    throttle_bytes_per_sec: int, seconds: float, throttle_floor: dict | None = None
) -> list[str]:
    """The throttle and the time it gives: the same two rows in every reassigning runbook's gate,
    said as the longest the copy should take when the throttle is below what Kafka holds
    (:mod:`~kafka_runbooks.failed_broker.throttle_floor`, read from the receivers)."""
    floor = floor_from_dict(throttle_floor)
    warning = floor.warning(throttle_bytes_per_sec) if floor else None
    how = "the busiest receiver's share at the throttle"
    if warning:
        return [
            f"| Throttle | {format_size(throttle_bytes_per_sec)}/s per broker: **{warning}** |",
            f"| Longest duration at the throttle | {format_duration(seconds)} ({how}; Kafka will copy faster) |",
        ]
    return [
        f"| Throttle | {format_size(throttle_bytes_per_sec)}/s per broker |",
        f"| Estimated duration at the throttle | about {format_duration(seconds)} ({how}) |",
    ]


def _plan_files_row(plan_dir: str) -> str:
    return f"| Plan files | `{plan_dir}` (`plan.json`, `chunks/NNNN.json`, `summary.json`) |"


def per_broker_rows(per_broker: dict[str, Any], label: Callable[[str, dict[str, Any]], str]) -> list[str]:
    """Per broker before → after (replicas, preferred leaders, bytes); ``label`` marks the brokers
    the runbook singles out (failed, drained, new)."""
    lines = [
        "",
        "**Per broker** (before → after)",
        "",
        "| broker | rack | replicas | preferred leaders | bytes |",
        "|---:|---|---:|---:|---:|",
    ]
    for broker, v in sorted(per_broker.items(), key=lambda kv: int(kv[0])):
        lines.append(
            f"| {label(broker, v)} | {v.get('rack') or '-'} "
            f"| {_arrow(v['replicas_before'], v['replicas_after'])} "
            f"| {_arrow(v.get('leaders_before', '?'), v.get('leaders_after', '?'))} "
            f"| {_arrow(format_size(v['bytes_before']), format_size(v['bytes_after']))} |"
        )
    return lines


def _spread_row(what: str, figures: dict[str, Any], moves: Any) -> str:
    bound = figures.get("lower_bound_moves")
    return (
        f"| {what} | {figures['before']} | {figures['after']} | {figures['limit']} (`{figures['target']}`) "
        f"| {moves} | {'-' if bound is None else bound} |"
    )


def _bytes_row(figures: dict[str, Any]) -> str:
    """The bytes spread before and after beside its target (``max_bytes_spread_percent`` of the mean,
    shown as its limit); unknown bytes (a broker's log dirs reported no size) say so, never 0."""

    def size(n: Any) -> str:
        """A size as the gate prints it; None (not reported) stays "unknown", never 0."""
        return "unknown" if n is None else format_size(n)

    limit = figures.get("limit")
    target = figures.get("target")
    said = "-" if target is None else f"{size(limit)} (`{str(target).strip().removesuffix('%')}%`)"
    unknown = figures.get("unknown") or []
    note = f" (broker(s) {', '.join(map(str, unknown))}: size unknown)" if unknown else ""
    return f"| bytes{note} | {size(figures['before'])} | {size(figures['after'])} | {said} | - | - |"


def rebalance_markdown(
    summary: dict[str, Any],
    throttle_bytes_per_sec: int,
    plan_dir: str,
    elect_preferred_leaders: bool,
    throttle_floor: dict | None = None,
) -> str:
    """A rebalance's proposal the way an operator reads one: moves, data, the spreads before and
    after against the target with the moves' lower bound, per broker before → after, chunks."""
    s = summary["spread"]
    seconds = estimated_seconds(summary, throttle_bytes_per_sec)
    new = summary.get("new_brokers") or []
    onto = f"onto new broker(s) **{', '.join(map(str, new))}**" if new else "over every live broker"
    reached = (
        "The plan reaches the target."
        if summary.get("reached")
        else f"**The target is out of reach**: {summary.get('why_not')}. The plan gets as close as the table shows."
    )
    lines = [
        f"Rebalance **{summary['rebalance']}** {onto}: **{summary['replica_moves']}** replica move(s), "
        f"**{summary.get('leader_changes', 0)}** leader move(s), **{format_size(summary['bytes_copied'])}** to "
        f"copy, in {len(summary['chunks'])} chunk(s), {at_the_throttle(seconds, throttle_bytes_per_sec, throttle_floor)}. "
        f"{reached}",
        "",
        "| spread (most − least per broker) | before | after | target | moves | lower bound of moves |",
        "|---|---:|---:|---:|---:|---:|",
        _spread_row("replicas", s["replicas"], summary["replica_moves"]),
        _spread_row("preferred leaders", s["leaders"], summary.get("leader_changes", 0)),
        _bytes_row(s["bytes"]),
        "",
        *_rebalance_table(
            summary, throttle_bytes_per_sec, seconds, plan_dir, elect_preferred_leaders, throttle_floor
        ),
        *per_broker_rows(summary["per_broker"], lambda b, _: f"**{b}** (new)" if int(b) in new else b),
    ]
    return "\n".join(lines + chunk_rows(summary["chunks"]))


def _rebalance_table(
    summary: dict[str, Any],
    throttle_bytes_per_sec: int,
    seconds: float,
    plan_dir: str,
    elect_preferred_leaders: bool,
    throttle_floor: dict | None = None,
) -> list[str]:
    """The rebalance's figures: moves, data, chunks, throttle, duration, what follows the moves."""
    return [
        "| | |",
        "|---|---|",
        f"| Replica moves | {summary['replica_moves']} of {summary['partitions']} partition(s) |",
        f"| Leader moves | {summary.get('leader_changes', 0)} ({len(summary.get('leader_moves') or [])} by "
        "reordering replicas only, after the chunks: no data) |",
        _data_row(summary["bytes_copied"]),
        f"| Chunks | {len(summary['chunks'])} |",
        *_throttle_rows(throttle_bytes_per_sec, seconds, throttle_floor),
        "| After the moves | "
        + (
            "the leader-only moves, a preferred-leader election on every changed partition, the spreads read back |"
            if elect_preferred_leaders
            else "the leader-only moves; no election (`elect_preferred_leaders` is off) |"
        ),
        _plan_files_row(plan_dir),
    ]


def chunk_rows(chunks: list[dict[str, Any]]) -> list[str]:
    """The chunks in order, the first ``MAX_CHUNK_ROWS`` one a row and the rest summed up (not cut)."""
    lines = [
        "",
        f"**Chunks** (in order; {len(chunks)} in all)",
        "",
        "| chunk | partitions | bytes |",
        "|---|---:|---:|",
    ]
    for entry in chunks[:MAX_CHUNK_ROWS]:
        lines.append(
            f"| {entry['index']} of {len(chunks)} | {entry['partitions']} | {format_size(entry['bytes'])} |"
        )
    if len(chunks) > MAX_CHUNK_ROWS:
        rest = chunks[MAX_CHUNK_ROWS:]
        lines.append(
            f"| … {len(rest)} more | {sum(e['partitions'] for e in rest)} | {format_size(sum(e['bytes'] for e in rest))} |"
        )
    return lines
