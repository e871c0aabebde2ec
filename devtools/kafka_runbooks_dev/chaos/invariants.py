"""The invariants a runbook keeps whatever happens around it, as pure functions of what was seen.

Each returns the violations it finds (empty: kept), each in words with the times and nodes that
show it, so a reader of the campaign's record sees why without the samples:

- ``acknowledged_loss``: no acknowledged record lost unless the run's outcome names the loss and
  an approval allowed it;
- ``leaderless``: never a moment without a quorum leader beyond one election (spans while the
  schedule itself kept a majority of the controllers away are the schedule's, not the runbook's);
- ``min_isr_broken``: min.insync.replicas never broken by the runbook's own action: a partition
  below it whose replicas out of the ISR include one no fault (and no incident) touched and that
  the watcher saw in the ISR before (a replica a reassignment is adding was never in it: its
  absence is the copy, not a replica the runbook pushed out), unless a fault that began only after
  that replica had left took the others: the runbook's action alone left the partition at its
  floor, judged sound before the fault existed (campaign restart:27, round 8: broker 1 restarted
  after its check, broker 4 frozen 1.1 s later);
- ``false_success``: "success" only where a read of the cluster, made after
  ``broker.session.timeout.ms``, agrees;
- ``leftovers``: no throttle, replica reorder or cordon left behind once the run ended;
- ``unapproved_write``: no destructive write without a valid approval of exactly that write: no
  change the runbook made to the cluster before the gate approved, or at all without approval;
- ``no_end``: the run ends (a run that waits with no end is a fault too).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kafka_runbooks_dev.chaos.watch import Sample, Watch

LEADERLESS_BOUND_S = 10.0  # one KRaft election on this machine, with room for a loaded one


@dataclass(frozen=True)
class Away:
    """A node a fault (or the scenario's incident) kept away: ``node`` from ``start`` to ``end``
    (the watcher's clock; ``end`` None: until the end of the schedule)."""

    node: int
    start: float
    end: float | None
    why: str


def acknowledged_loss(
    lost: dict[str, tuple[int, int]], outcome_names_loss: bool, loss_allowed: bool
) -> list[str]:
    """Lost acknowledged records are a violation unless the outcome named them and an approval allowed it."""
    if not lost or (outcome_names_loss and loss_allowed):
        return []
    sample = sorted(lost.items(), key=lambda kv: kv[1])[:5]
    named = "the outcome named no loss" if not outcome_names_loss else "no approval allowed a loss"
    return [f"{len(lost)} acknowledged record(s) lost ({named}); e.g. {sample}"]


def leaderless(
    samples: list[Sample], controllers_away: list[Away], majority: int, bound_s: float = LEADERLESS_BOUND_S
) -> list[str]:
    """Spans where the quorum's own answer named no leader for longer than ``bound_s``, outside the
    times the schedule kept ``majority`` or more controllers away."""
    out, start = [], None
    for s in samples:
        if s.leader == -1 and start is None:
            start = s.at
        elif s.leader is not None and s.leader >= 0 and start is not None:
            out += _long_span(start, s.at, controllers_away, majority, bound_s)
            start = None
    if start is not None and samples:
        out += _long_span(start, samples[-1].at, controllers_away, majority, bound_s)
    return out


def _long_span(start: float, end: float, away: list[Away], majority: int, bound_s: float) -> list[str]:
    if end - start <= bound_s or _majority_away(start, end, away, majority):
        return []
    return [f"no quorum leader for {end - start:.1f} s (from +{start:.1f} s)"]


def _majority_away(start: float, end: float, away: list[Away], majority: int) -> bool:
    """Whether at some moment of [start, end] ``majority`` controllers were away at once."""
    for a in away:
        moment = max(start, a.start)
        at_once = {b.node for b in away if b.start <= moment and (b.end is None or b.end >= moment)}
        if moment <= end and len(at_once) >= majority:
            return True
    return False


def min_isr_broken(samples: list[Sample], min_isr: dict[str, int], away: list[Away]) -> list[str]:
    """Moments a partition was below its min ISR with a replica out of the ISR that no fault touched
    and that was in it before (seen in an earlier sample's ISR)."""
    touched = {a.node for a in away}
    seen: set[tuple[str, tuple[int, ...]]] = set()
    was_in_isr: dict[str, set[int]] = {}
    left_at: dict[str, dict[int, float]] = {}  # when each replica was last seen leaving the ISR
    out = []
    for s in samples:
        for name, p in (s.partitions or {}).items():
            was = was_in_isr.setdefault(name, set())
            was.update(p.isr)
            left = left_at.setdefault(name, {})
            for b in p.isr:
                left.pop(b, None)
            for b in (set(p.replicas) - set(p.isr)) & was:
                left.setdefault(b, s.at)
            floor = min_isr.get(name.rsplit("-", 1)[0])
            if floor is None or p.leader < 0 or len(p.isr) >= floor or len(p.replicas) <= floor:
                continue
            untouched = tuple(sorted((set(p.replicas) - set(p.isr) - touched) & was))
            since = max((left[b] for b in untouched), default=s.at)
            later = [
                b for b in set(p.replicas) - set(p.isr) if b in touched and _away_since(away, b, s.at) > since
            ]
            if untouched and len(p.isr) + len(later) < floor and (name, untouched) not in seen:
                seen.add((name, untouched))
                out.append(
                    f"{name} at +{s.at:.1f} s: ISR {list(p.isr)} below min.insync.replicas={floor}, "
                    f"broker(s) {list(untouched)} out of it that no fault touched"
                )
    return out


def _away_since(away: list[Away], node: int, at: float) -> float:
    """When the fault keeping ``node`` away at ``at`` began (the latest one begun by then; -inf if none)."""
    return max((a.start for a in away if a.node == node and a.start <= at), default=float("-inf"))


def false_success(run_state: str, final_check: list[str]) -> list[str]:
    """A run that says success while the cluster, read after the session timeout, disagrees."""
    if run_state != "success" or not final_check:
        return []
    return [f"the run succeeded but the cluster read back disagrees: {'; '.join(final_check)}"]


def leftovers(throttles: dict, reorders: dict, cordons: dict | None = None) -> list[str]:
    """Throttles, replica reorders or cordons still set after the run ended."""
    out = []
    if throttles:
        out.append(f"throttle(s) left: {throttles}")
    if reorders:
        out.append(f"replica order(s) left changed: {reorders}")
    if cordons:
        out.append(f"cordon(s) left: {cordons}")
    return out


def unapproved_write(changes: Iterable[tuple[float, str]], approved_at: float | None) -> list[str]:
    """Changes the runbook made to the cluster before the gate approved (or with no approval)."""
    out = []
    for at, what in changes:
        if approved_at is None or at < approved_at:
            when = (
                "with no approval" if approved_at is None else f"{approved_at - at:.1f} s before the approval"
            )
            out.append(f"{what} at +{at:.1f} s, {when}")
    return out[:5]


def no_end(ended: bool, waited_s: float) -> list[str]:
    """A run still not ended after ``waited_s`` since its last fault."""
    return [] if ended else [f"the run had not ended {waited_s:.0f} s after its last fault"]


def restarts(watch: Watch, away: list[Away]) -> list[tuple[float, str]]:
    """When each node no fault touched first ran a new process: the runbook's restarts as the
    processes show them."""
    touched = {a.node for a in away}
    if not watch.pids:
        return []
    first, out = watch.pids[0][1], []
    seen: set[int] = set()
    for at, pids in watch.pids:
        for node, pid in pids.items():
            if node not in touched and node not in seen and pid != first.get(node):
                seen.add(node)
                out.append((at, f"node {node} restarted (pid {first.get(node)} -> {pid})"))
    return out


def replica_set_changes(watch: Watch, away: list[Away]) -> list[tuple[float, str]]:
    """When each watched partition's replica set first changed, or a reassignment was in flight: the
    runbook's writes as the cluster shows them (a fault changes ISRs and leaders, never replica sets)."""
    first = next((s for s in watch.samples if s.partitions), None)
    if first is None:
        return []
    changes = [(at, f"reassignment of {list(names)[:3]} in flight") for at, names in watch.reassigning[:1]]
    for s in watch.samples:
        for name, p in (s.partitions or {}).items():
            before = first.partitions.get(name)
            if before is not None and set(p.replicas) != set(before.replicas):
                changes.append((s.at, f"{name} replicas {list(before.replicas)} -> {list(p.replicas)}"))
                return sorted(changes)
    return sorted(changes)
