"""Leadership after healing: move leaders to the preferred replicas the plan chose, and prove it.

The plan balances *preferred* leaders (first replicas); leadership itself follows only when
the controller's auto leader rebalance gets to it (some minutes, and only when the broker's
imbalance passes its threshold) or when a preferred-leader election is asked for. The runbook
asks for it on the partitions it moved, then reads the leaders back until every one of them
is led by its preferred replica and still is after a settle period.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from kafka_runbooks import decisions, retries
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
    asked: list[str]
    errors: dict[str, str]
    not_led: list[str]
    leaders_before: dict[int, int]
    leaders_after: dict[int, int]
    records: list[decisions.DecisionRecord] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether every partition asked for is led by its preferred leader now."""
        return not self.not_led


def elect_preferred_leaders(
    read: Callable[[], list[PartitionState]],
    elect: Callable[[list[tuple[str, int]]], dict[tuple[str, int], str | None]],
    keys: set[str],
    logger: logging.Logger | None = None,
    timeout_s: float = 120.0,
    settle_s: float = 10.0,
    poll_s: float = 2.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    reask_s: float = 10.0,
) -> ElectionResult:
    """Elect the preferred leader of every partition in ``keys`` that another replica leads.

    What to ask is decided on every read, not on the first alone: a read is one broker's
    metadata cache, which can still show the replica order from before a reorder (then the
    partition looks led by its preferred replica and would never be asked). A partition
    seen not led by its preferred replica is asked again every ``reask_s`` (the controller
    answers ElectionNotNeeded where it already is). Success is read back: each of them led
    by its preferred replica, still so ``settle_s`` later. A preferred replica out of the
    ISR cannot be elected (Kafka refuses): it stays in ``not_led`` and the caller fails with
    what was seen.
    """
    partitions = read()
    before = leaders_per_broker(partitions)
    asking = _Elections(elect, clock, reask_s)
    asking.ask(not_led_by_preferred(partitions, keys))
    partitions, pending = _read_until_settled(read, keys, asking, timeout_s, settle_s, poll_s, clock, sleep)
    result = ElectionResult(
        asked=list(asking.asked_at),
        errors=asking.errors_of(pending),
        not_led=[f"{p.topic}:{p.partition}" for p in pending],
        leaders_before=before,
        leaders_after=leaders_per_broker(partitions),
    )
    result.records.append(_record_outcome(result, partitions, len(keys), settle_s, timeout_s, logger))
    return result


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
    keys: set[str],
    asking: _Elections,
    timeout_s: float,
    settle_s: float,
    poll_s: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> tuple[list[PartitionState], list[PartitionState]]:
    """Read the leaders until every partition of ``keys`` has been led by its preferred replica for
    ``settle_s`` (leadership can move again right after an election) or ``timeout_s`` has passed,
    asking for the election of each partition a read shows not led by its preferred replica;
    (the partitions as last read, those of ``keys`` not led by their preferred replica then)."""

    def read_and_ask() -> tuple[list[PartitionState], list[PartitionState]]:
        """One read of the leaders; an election asked for each partition not led by its preferred one."""
        partitions = read()
        pending = not_led_by_preferred(partitions, keys)
        if pending:
            asking.ask(pending)
        return partitions, pending

    last, _ = retries.hold_until(
        read_and_ask,
        lambda seen: not seen[1],
        settle_s=settle_s,
        timeout_s=timeout_s,
        interval_s=poll_s,
        clock=clock,
        sleep=sleep,
    )
    return last


def _record_outcome(
    result: ElectionResult,
    partitions: list[PartitionState],
    moved: int,
    settle_s: float,
    timeout_s: float,
    logger: logging.Logger | None,
) -> decisions.DecisionRecord:
    """The election's decision record, with the leaders per broker before and after: a failure
    names the partitions still led by another replica, for whoever fails the task on it."""
    return decisions.record(
        "elect preferred leaders",
        "leaders balanced" if result.ok else "leaders NOT on the preferred replicas",
        (
            f"{len(result.asked)} of {moved} moved partition(s) were led by another replica; after the "
            f"election every moved partition is led by its preferred replica ({settle_s:.0f}s settled)"
        )
        if result.ok
        else (
            f"{len(result.not_led)} moved partition(s) still led by another replica after "
            f"{timeout_s:.0f}s (a preferred replica out of the ISR cannot lead)"
        ),
        observed={
            "leaders_per_broker_before": result.leaders_before,
            "leaders_per_broker_after": result.leaders_after,
            "preferred_per_broker": preferred_per_broker(partitions),
            "election_errors": dict(list(result.errors.items())[:20]),
            "not_led_by_preferred": result.not_led[:50],
        },
        action=f"ElectLeaders(PREFERRED) on {len(result.asked)} partition(s)",
        logger=logger,
        level=logging.INFO if result.ok else logging.ERROR,
    )
