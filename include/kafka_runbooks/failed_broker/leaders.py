"""Leadership after healing: move leaders to the preferred replicas the plan chose, and prove it.

The plan balances *preferred* leaders (first replicas); leadership itself follows only when
the controller's auto leader rebalance gets to it (some minutes, and only when the broker's
imbalance passes its threshold) or when a preferred-leader election is asked for. The runbook
asks for it on the partitions it moved, as the run's approval approved it (the write refuses
without that proof), then reads the leaders back until every one of them is led by its
preferred replica and still is after a settle period that can see a death. A partition that is
under-replicated, or whose preferred replica does not answer itself, is never elected and never
a failure: it is named.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafka_runbooks import decisions
from kafka_runbooks.approval import NotApproved
from kafka_runbooks.approval_proof import ApprovedAction
from kafka_runbooks.evidence import ClusterTimeouts, hold_then_ask, settle_period_s
from kafka_runbooks.model import PartitionState


def leaders_per_broker(partitions: list[PartitionState]) -> dict[int, int]:
    """Partitions each broker leads now."""
    return dict(sorted(Counter(p.leader for p in partitions if p.has_leader).items()))


def preferred_per_broker(partitions: list[PartitionState]) -> dict[int, int]:
    """Partitions each broker is the preferred leader (first replica) of."""
    return dict(sorted(Counter(p.preferred_leader for p in partitions if p.replicas).items()))


def not_led_by_preferred(partitions: list[PartitionState], keys: set[str]) -> list[PartitionState]:
    """Partitions among ``keys`` ("topic:partition") whose preferred replica does not lead."""
    return [p for p in partitions if f"{p.topic}:{p.partition}" in keys and p.leader != p.preferred_leader]


@dataclass
class ElectionResult:
    """What the preferred-leader election asked, what it skipped and why, and what it read back."""

    asked: list[str]
    errors: dict[str, str]
    not_led: list[str]
    leaders_before: dict[int, int]
    leaders_after: dict[int, int]
    records: list[decisions.DecisionRecord] = field(default_factory=list)
    # never elected, never a failure: under-replicated, or a replica the election relies on is silent
    skipped: dict[str, str] = field(default_factory=dict)
    settle: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether every partition asked for, but the skipped ones, is led by its preferred leader now and
        held so for the settle period."""
        return not self.not_led and self.settle.get("held", True)


def approved_keys(approval: ApprovedAction) -> set[str]:
    """The partitions an approved reassignment may elect: its chunks' and its leader-only moves'."""
    chunks = approval.action.get("chunks") or []
    moves = approval.action.get("leader_moves") or []
    return {k for targets in chunks for k in (targets or {})} | {
        f"{m['topic']}:{m['partition']}" for m in moves
    }


def require_election(approval: ApprovedAction, keys: set[str]) -> None:
    """NotApproved unless ``approval`` approved the election (``elect_preferred_leaders``) of every
    partition of ``keys``: the write itself refuses, whoever calls it."""
    approval.require("elect_preferred_leaders", True)
    outside = sorted(keys - approved_keys(approval))
    if outside:
        raise NotApproved(
            f"the election of {len(outside)} partition(s) is not part of the approved plan {approval.digest}: "
            f"{outside[:10]}"
        )


def elect_preferred_leaders(
    read: Callable[[], list[PartitionState]],
    elect: Callable[[list[tuple[str, int]]], dict[tuple[str, int], str | None]],
    keys: set[str],
    approval: ApprovedAction,
    *,
    silent: Callable[[set[int]], dict[int, str]],
    timeouts: ClusterTimeouts,
    logger: logging.Logger | None = None,
    timeout_s: float = 120.0,
    settle_s: float = 10.0,
    poll_s: float = 2.0,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], None] | None = None,
    reask_s: float = 10.0,
) -> ElectionResult:
    """Elect the preferred leader of every partition in ``keys`` that another replica leads, as
    ``approval`` approved it (:func:`require_election`; refused before anything is asked otherwise).

    What to ask is decided on every read, not on the first alone: a read is one broker's
    metadata cache, which can still show the replica order from before a reorder (then the
    partition looks led by its preferred replica and would never be asked). A partition
    seen not led by its preferred replica is asked again every ``reask_s`` (the controller
    answers ElectionNotNeeded where it already is). Never asked, never a failure, but named: a
    partition that is under-replicated, or whose preferred replica does not answer itself
    (``silent``: a broker killed a second ago is still registered, unfenced and in its ISRs).
    Success is read back: the others led by their preferred replica for the settle period (never
    shorter than ``broker.session.timeout.ms``), its last read asking their leaders and ISR members.
    """
    require_election(approval, keys)
    clock = clock or time.monotonic
    partitions = read()
    before = leaders_per_broker(partitions)
    asking = _Elections(elect, clock, reask_s)
    skips = _Skips(keys, silent)
    asking.ask(skips.to_elect(partitions))
    partitions, pending, held = _read_until_settled(
        read, skips, asking, timeouts, timeout_s, settle_s, poll_s, clock, sleep
    )
    result = ElectionResult(
        asked=list(asking.asked_at),
        errors=asking.errors_of(pending),
        not_led=[f"{p.topic}:{p.partition}" for p in pending],
        leaders_before=before,
        leaders_after=leaders_per_broker(partitions),
        skipped=dict(skips.skipped),
        settle=_settle(settle_s, timeouts, held),
    )
    result.records.append(_record_outcome(result, partitions, len(keys), timeout_s, logger))
    return result


def _settle(asked_s: float, timeouts: ClusterTimeouts, held: bool) -> dict[str, Any]:
    """The settle as the record says it: asked, held (never shorter than the session timeout), and whether
    it held with every node answering."""
    return {
        "asked_s": asked_s,
        "held_s": settle_period_s(asked_s, timeouts),
        "held": held,
        **timeouts.as_dict(),
    }


class _Skips:
    """The partitions of ``keys`` the election leaves alone (sticky, with why): under-replicated, or a
    replica it relies on does not answer itself."""

    def __init__(self, keys: set[str], silent: Callable[[set[int]], dict[int, str]]) -> None:
        self.keys, self._silent = set(keys), silent
        self.skipped: dict[str, str] = {}

    def judged(self, partitions: list[PartitionState]) -> list[PartitionState]:
        """The partitions of ``keys`` in this read that are not skipped; an under-replicated one is skipped now."""
        out = []
        for p in partitions:
            name = f"{p.topic}:{p.partition}"
            if name not in self.keys or name in self.skipped:
                continue
            if len(set(p.isr)) < len(p.replicas):
                self.skipped[name] = f"under-replicated: ISR {sorted(p.isr)} of replicas {list(p.replicas)}"
                continue
            out.append(p)
        return out

    def to_elect(self, partitions: list[PartitionState]) -> list[PartitionState]:
        """The judged partitions not led by their preferred replica whose preferred replica answers itself."""
        pending = [p for p in self.judged(partitions) if p.leader != p.preferred_leader]
        quiet = self._silent({p.preferred_leader for p in pending}) if pending else {}
        for p in pending:
            if p.preferred_leader in quiet:
                self.skipped[f"{p.topic}:{p.partition}"] = (
                    f"preferred replica {p.preferred_leader} does not answer itself: {quiet[p.preferred_leader]}"
                )
        return [p for p in pending if p.preferred_leader not in quiet]

    def ask_nodes(self, partitions: list[PartitionState]) -> dict[int, str]:
        """The settle's last read: the leaders and ISR members of the judged partitions asked themselves;
        the partitions of one that does not answer are skipped from now on."""
        judged = self.judged(partitions)
        nodes = {p.leader for p in judged if p.has_leader} | {b for p in judged for b in p.isr}
        quiet = self._silent(nodes) if nodes else {}
        for p in judged:
            relied = sorted(({p.leader} | set(p.isr)) & set(quiet))
            if relied:
                self.skipped[f"{p.topic}:{p.partition}"] = (
                    f"broker(s) {relied} it relies on do not answer themselves: {quiet[relied[0]]}"
                )
        return quiet


class _Elections:
    """The PREFERRED elections asked so far: when each partition was last asked, and the
    controller's last error for it. An election not needed (the preferred replica already
    leads by the time it arrives) is no error."""

    def __init__(
        self,
        elect: Callable[[list[tuple[str, int]]], dict[tuple[str, int], str | None]],
        clock: Callable[[], float],
        reask_s: float,
    ) -> None:
        self._elect, self._clock, self._reask_s = elect, clock, reask_s
        self.asked_at: dict[str, float] = {}
        self._errors: dict[str, str] = {}

    def ask(self, pending: list[PartitionState]) -> None:
        """One election for the partitions of ``pending`` not asked within ``reask_s``."""
        now = self._clock()
        due = [
            p for p in pending if now - self.asked_at.get(f"{p.topic}:{p.partition}", -1e18) >= self._reask_s
        ]
        if not due:
            return
        for p in due:
            self.asked_at[f"{p.topic}:{p.partition}"] = now
        for (topic, partition), err in self._elect([(p.topic, p.partition) for p in due]).items():
            if err and not err.startswith("ElectionNotNeededError"):
                self._errors[f"{topic}:{partition}"] = err
            else:
                self._errors.pop(f"{topic}:{partition}", None)

    def errors_of(self, pending: list[PartitionState]) -> dict[str, str]:
        """The last error of each partition still not led by its preferred replica."""
        still = {f"{p.topic}:{p.partition}" for p in pending}
        return {key: err for key, err in self._errors.items() if key in still}


def _read_until_settled(
    read: Callable[[], list[PartitionState]],
    skips: _Skips,
    asking: _Elections,
    timeouts: ClusterTimeouts,
    timeout_s: float,
    settle_s: float,
    poll_s: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None] | None,
) -> tuple[list[PartitionState], list[PartitionState], bool]:
    """Read the leaders until every judged partition has been led by its preferred replica for the
    settle period (leadership can move again right after an election; never shorter than the
    session timeout) and its leader and ISR answer themselves, or ``timeout_s`` has passed, asking
    for the election of each partition a read shows not led by its preferred replica; (the
    partitions as last read, the judged ones not led by their preferred replica then, held)."""

    def read_and_ask() -> tuple[list[PartitionState], list[PartitionState]]:
        """One read of the leaders; an election asked for each partition not led by its preferred one."""
        partitions = read()
        pending = [p for p in skips.judged(partitions) if p.leader != p.preferred_leader]
        electable = skips.to_elect(partitions) if pending else []
        if electable:
            asking.ask(electable)
        return partitions, [p for p in pending if f"{p.topic}:{p.partition}" not in skips.skipped]

    (last, pending), held, _ = hold_then_ask(
        read_and_ask,
        lambda seen: not seen[1],
        lambda seen: skips.ask_nodes(seen[0]),
        requested_settle_s=settle_s,
        timeouts=timeouts,
        timeout_s=timeout_s,
        interval_s=poll_s,
        clock=clock,
        sleep=sleep,
    )
    return last, pending, held


def _record_outcome(
    result: ElectionResult,
    partitions: list[PartitionState],
    moved: int,
    timeout_s: float,
    logger: logging.Logger | None,
) -> decisions.DecisionRecord:
    """The election's decision record, with the leaders per broker before and after, the partitions
    left alone and why, and the settle (asked, held, the session timeout): a failure names the
    partitions still led by another replica, for whoever fails the task on it."""
    settle = result.settle
    held = (
        f"asked {settle['asked_s']:g} s, held {settle['held_s']:g} s"
        + (" because broker.session.timeout.ms" if settle["held_s"] > settle["asked_s"] else "")
        + f" ({settle['broker.session.timeout.ms']} ms)"
    )
    skipped = (
        f"; {len(result.skipped)} left alone (not elected, no failure: see skipped)" if result.skipped else ""
    )
    return decisions.record(
        "elect preferred leaders",
        "leaders balanced" if result.ok else "leaders NOT on the preferred replicas",
        (
            f"{len(result.asked)} of {moved} moved partition(s) were led by another replica; after the "
            f"election every moved partition is led by its preferred replica (settle {held}){skipped}"
        )
        if result.ok
        else (
            f"{len(result.not_led)} moved partition(s) still led by another replica, or their leaders did not "
            f"answer themselves, after {timeout_s:.0f}s (a preferred replica out of the ISR cannot lead; "
            f"settle {held}){skipped}"
        ),
        observed={
            "leaders_per_broker_before": result.leaders_before,
            "leaders_per_broker_after": result.leaders_after,
            "preferred_per_broker": preferred_per_broker(partitions),
            "election_errors": dict(list(result.errors.items())[:20]),
            "not_led_by_preferred": result.not_led[:50],
            "skipped": dict(list(result.skipped.items())[:50]),
            "settle": settle,
        },
        action=f"ElectLeaders(PREFERRED) on {len(result.asked)} partition(s)",
        logger=logger,
        level=logging.INFO if result.ok else logging.ERROR,
    )
