"""The failed-broker reassignment's decisions, Airflow-free: the runbook's one home for them.

``validate`` decides, from the cluster and what runs of this runbook recorded, whether the
run adopts reassignments an earlier run left in flight, refuses because someone else's are
in flight, or has nothing to do. ``review`` checks the Spark job's plan independently of
it. ``verify`` holds the rule for "healed". The plugin
(``kafka_runbooks_airflow.failed_broker``) turns params into a request, gives the state files
their Airflow paths and turns these results into XCom.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_runbooks import decisions
from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.errors import RunbookFailed, SafetyRefusal
from kafka_runbooks.evidence import ClusterTimeouts, hold_then_ask
from kafka_runbooks.failed_broker.plan import Plan, check_plan
from kafka_runbooks.failed_broker.report import moved_from
from kafka_runbooks.failed_broker.request import ReassignRequest, RequestError, foreign_reassignments
from kafka_runbooks.model import ClusterState

log = logging.getLogger("kafka_runbooks.failed_broker")


class NotHealed(RunbookFailed):
    """After the last chunk the cluster does not read back as healed."""


def in_flight(admin: ClusterAdmin) -> dict[str, dict[str, list[int]]]:
    """The partition reassignments the controller has in flight, keyed ``topic:partition``."""
    from kafka_runbooks.failed_broker.execute import key

    return {key(t, p): v for (t, p), v in admin.list_reassignments().items()}


def adopt_or_refuse(
    inflight: dict[str, dict[str, list[int]]], owned: dict[str, list[int]], dry_run: bool
) -> dict[str, list[int]]:
    """The in-flight reassignments this run takes over (each one a run of this runbook submitted).

    Refuses (RequestError) when any reassignment in flight is not exactly one of ours: moving
    partitions under someone else's reassignment would fight it. A dry run refuses to plan
    from a half-moved cluster.
    """
    foreign = foreign_reassignments(inflight, owned)
    if foreign:
        raise RequestError(
            f"{len(foreign)} partition reassignment(s) not started by this runbook are in flight "
            f"({dict(list(foreign.items())[:10])}); let them finish or cancel them, then run again"
        )
    adopt = {k: owned[k] for k in inflight}  # after the refusal: every key is one of ours now
    if adopt and dry_run:
        raise RequestError(
            f"{len(adopt)} partition(s) of an earlier run are still being reassigned; a dry run would "
            "plan from a half-moved cluster: run again when they are done, or without dry_run to finish them"
        )
    return adopt


def nothing_to_do(state: ClusterState, failed: list[int]) -> bool:
    """True when no failed broker hosts a replica: there is nothing to move."""
    return not failed or not any(b in p.replicas for p in state.partitions for b in failed)


@dataclass(frozen=True)
class Validation:
    """What ``validate`` decided: the brokers, the adopted partitions, whether anything is to do."""

    failed: list[int]
    receivers: list[int]
    adopt: dict[str, list[int]]
    nothing_to_do: bool
    partitions_on_failed: int = 0
    adopted_from: dict[str, str] = field(default_factory=dict)  # partition -> run folder that submitted it

    def record(self, request: ReassignRequest, logger: logging.Logger | None = None) -> None:
        """The ``validate`` DECISION: nothing to do, or go on to the plan (after adoption is saved)."""
        if request.rebalance:
            self._record_rebalance(request, logger or log)
            return
        decisions.record(
            "validate",
            "nothing to do" if self.nothing_to_do else "go on to the plan",
            (
                "no broker to drain hosts a replica"
                if request.drain
                else "no broker hosting replicas is failed"
            )
            if self.nothing_to_do
            else (
                "the brokers to drain are registered and live and the brokers left can hold their replicas "
                "(replication factor, racks); "
                if request.drain
                else "the failed brokers are known and not available; "
            )
            + "the receivers are available; no foreign reassignment is in flight",
            observed={
                "failed_brokers": self.failed,
                "receivers": self.receivers,
                "partitions_on_failed": self.partitions_on_failed,
                "adopted_in_flight": {
                    k: {"target": v, "from": self.adopted_from[k]} for k, v in self.adopt.items()
                },
                "request": request.as_dict(),
            },
            logger=logger or log,
        )

    def _record_rebalance(self, request: ReassignRequest, logger: logging.Logger) -> None:
        """A rebalance's ``validate`` DECISION (the brokers it takes from and gives to are live)."""
        decisions.record(
            "validate",
            "go on to the plan",
            f"rebalance {request.rebalance}: every broker holding replicas is live, the receivers are live "
            "registered brokers; no foreign reassignment is in flight",
            observed={
                "sources": self.failed,
                "receivers": self.receivers,
                "adopted_in_flight": {
                    k: {"target": v, "from": self.adopted_from[k]} for k, v in self.adopt.items()
                },
                "request": request.as_dict(),
            },
            logger=logger,
        )


def validate(
    request: ReassignRequest,
    state: ClusterState,
    failed: list[int],
    receivers: list[int],
    inflight: dict[str, dict[str, list[int]]],
    owned: dict[str, tuple[list[int], Path]],
) -> Validation:
    """Adopt our own in-flight reassignments or refuse foreign ones (RequestError); nothing to do?

    ``owned`` maps each partition some run of this runbook submitted and has not seen finish
    to its target and the state file that recorded it. The caller saves the adoption, then
    records the outcome (``Validation.record``).
    """
    adopt = adopt_or_refuse(inflight, {k: v[0] for k, v in owned.items()}, request.dry_run)
    return Validation(
        failed=failed,
        receivers=receivers,
        adopt=adopt,
        nothing_to_do=nothing_to_do(state, failed),
        partitions_on_failed=sum(1 for p in state.partitions if set(p.replicas) & set(failed)),
        adopted_from={k: str(owned[k][1].parent.name) for k in adopt},
    )


@dataclass(frozen=True)
class Healing:
    """What the cluster read back after the last chunk, against the "healed" rule."""

    partitions: int
    naming_failed: list[str] = field(default_factory=list)
    isr_short: list[str] = field(default_factory=list)
    off_plan: list[str] = field(default_factory=list)
    throttles_left: dict[str, Any] = field(default_factory=dict)
    # a drain (decommission) also proves the drained brokers lead nothing and hold nothing on disk
    led_by_failed: list[str] = field(default_factory=list)
    on_disk: list[str] = field(default_factory=list)  # "broker 4: t-0" or "broker 4: log dirs unknown"

    @property
    def healed(self) -> bool:
        """The heal's done rule: no replica on a failed broker, all in sync and on the plan, no throttle
        left, no partition led by a failed broker, nothing left on a drained disk."""
        return (
            not self.naming_failed
            and not self.isr_short
            and not self.off_plan
            and not self.throttles_left
            and not self.led_by_failed
            and not self.on_disk
        )


def left_on_disk(state: ClusterState, brokers: set[int]) -> list[str]:
    """The replicas each drained broker still reports in its own log dirs (DescribeLogDirs, in
    ``state.log_dir_states``); a broker that did not answer is unknown, and unknown is not empty."""
    out = []
    for b in sorted(brokers):
        dirs = state.log_dir_states.get(b)
        if dirs is None:
            out.append(f"broker {b}: log dirs unknown ({state.log_dir_errors.get(b) or 'not read'})")
            continue
        out += [f"broker {b}: {r.topic}-{r.partition} in {r.log_dir}" for d in dirs for r in d.replicas]
    return out


def healing(
    state: ClusterState,
    failed: set[int],
    planned: dict[str, list[int]],
    throttles_left: dict[str, Any],
    drain: bool = False,
) -> Healing:
    """Healed: no partition names a failed broker, every partition has its full RF in the ISR,
    every planned partition is on its plan's target, and no throttle config remains. Drained
    (``drain``): also no partition led by a drained broker, and none left in its own log dirs."""
    return Healing(
        partitions=len(state.partitions),
        naming_failed=[p.name for p in state.partitions if set(p.replicas) & failed],
        isr_short=[p.name for p in state.partitions if len(set(p.isr)) < len(p.replicas)],
        off_plan=[
            p.name
            for p in state.partitions
            if f"{p.topic}:{p.partition}" in planned
            and set(p.replicas) != set(planned[f"{p.topic}:{p.partition}"])
        ],
        throttles_left=throttles_left,
        led_by_failed=[p.name for p in state.partitions if p.leader in failed] if drain else [],
        on_disk=left_on_disk(state, failed) if drain else [],
    )


def verify(
    state: ClusterState,
    failed: set[int],
    planned: dict[str, list[int]],
    throttles_left: dict[str, Any],
    logger: logging.Logger | None = None,
    drain: bool = False,
) -> Healing:
    """Record whether the cluster read back healed (drained); raise NotHealed with what was seen if not."""
    logger = logger or log
    seen = healing(state, failed, planned, throttles_left, drain)
    ok = seen.healed
    word = "drained" if drain else "healed"
    decisions.record(
        "verify",
        word if ok else f"NOT {word}",
        f"no partition names a{' drained' if drain else ' failed'} broker"
        + (", none is led by one, their log dirs hold no replica" if drain else "")
        + ", every partition has its full replication factor in the ISR, "
        "every planned partition is on its target, no throttle config remains"
        if ok
        else "see observed",
        observed=_seen(seen),
        logger=logger,
        level=logging.INFO if ok else logging.ERROR,
    )
    if not ok:
        drained = (
            f", led by drained brokers {seen.led_by_failed[:10]}, left on their disks {seen.on_disk[:10]}"
            if drain
            else ""
        )
        raise NotHealed(
            f"not {word}: naming {'drained' if drain else 'failed'} brokers {seen.naming_failed[:10]}"
            f"{drained}, ISR short {seen.isr_short[:10]}, off the plan {seen.off_plan[:10]}, "
            f"throttles left {seen.throttles_left}"
        )
    return seen


Reading = tuple[ClusterState, dict[str, Any]]  # the cluster, and the throttle configs left on it


def await_healed(
    read: Callable[[], Reading],
    failed: set[int],
    planned: dict[str, list[int]],
    *,
    timeouts: ClusterTimeouts,
    ask: Callable[[Reading], dict[int, str]],
    timeout_s: float = 600.0,
    settle_s: float = 15.0,
    poll_s: float = 5.0,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], None] | None = None,
    logger: logging.Logger | None = None,
    drain: bool = False,
) -> Healing:
    """Healed only when the rule holds on every read for the settle period and the nodes the last
    read relies on answer themselves (``ask``: the leaders and ISR members).

    Right after the last chunk a follower may still be joining the ISR of a partition the run
    did not touch (a broker restarted a minute ago), or the cleanup task may be taking the
    run's throttles off: one read would call that a failure, and one lucky read would call a
    cluster healed that is about to lose an ISR member. So it reads until the rule holds for the
    settle period (``settle_s``, never shorter than ``broker.session.timeout.ms``: a broker killed a
    moment ago is registered, unfenced, leader and in its ISRs until then; a silent one starts it
    again) or ``timeout_s`` passes; ``verify`` records the last read (NotHealed with what was seen)."""
    logger = logger or log
    said_wait: list[Healing] = []  # the first read not healed, said once as a "wait" record

    def healed(answer: tuple[ClusterState, Any, Healing]) -> bool:
        """Whether this read is healed; the first one that is not says the runbook waits."""
        if not answer[2].healed and not said_wait:
            said_wait.append(answer[2])
            _say_wait(answer[2], poll_s, timeout_s, logger)
        return answer[2].healed

    (state, left, _), _, silent = hold_then_ask(
        lambda: _judged(read(), failed, planned, drain),
        healed,
        lambda answer: ask((answer[0], answer[1])),
        requested_settle_s=settle_s,
        timeouts=timeouts,
        timeout_s=timeout_s,
        interval_s=poll_s,
        clock=clock,
        sleep=sleep,
    )
    _refuse_silent(silent, logger)
    return verify(state, failed, planned, left, logger, drain)


def _refuse_silent(silent: dict[int, str], logger: logging.Logger) -> None:
    """NotHealed (recorded) when nodes the settle's last read relies on did not answer themselves."""
    if silent:
        why = f"broker(s) the last read relies on (leaders, ISR members) do not answer themselves: {silent}"
        decisions.record("verify", "NOT healed", why, logger=logger, level=logging.ERROR)
        raise NotHealed(f"not healed: {why}")


def _judged(reading: Reading, failed: set[int], planned: dict[str, list[int]], drain: bool):
    """One read of the cluster and of the throttles left, with the healed rule's verdict on it."""
    state, left = reading
    return state, left, healing(state, failed, planned, left, drain)


def _say_wait(seen: Healing, poll_s: float, timeout_s: float, logger: logging.Logger) -> None:
    """The "wait" decision record of the first read that is not healed (said once per verify)."""
    decisions.record(
        "verify",
        "wait",
        f"not healed yet; reading again every {poll_s:g} s for up to {timeout_s:g} s",
        observed=_seen(seen),
        logger=logger,
    )


def _seen(seen: Healing) -> dict[str, Any]:
    return {
        "partitions_naming_failed": seen.naming_failed[:50],
        "isr_short": seen.isr_short[:50],
        "not_on_plan_target": seen.off_plan[:50],
        "throttles_left": seen.throttles_left,
        "partitions": seen.partitions,
    } | (
        {"led_by_drained": seen.led_by_failed[:50], "left_on_disk": seen.on_disk[:50]}
        if seen.on_disk or seen.led_by_failed
        else {}
    )


class PlanRefused(SafetyRefusal):
    """The planning job's plan breaks a rule the runbook checks independently of it."""


def review(
    plan: Plan,
    replica_rows: Iterable[Mapping],
    broker_rows: Iterable[Mapping],
    summary: dict[str, Any],
    logger: logging.Logger | None = None,
) -> None:
    """Check the plan against the snapshot it was made from; refuse it (PlanRefused) if a rule breaks.

    The plan comes from a Spark job: the runbook trusts it only after its own check.
    """
    from kafka_runbooks.failed_broker.plan import RULES
    from kafka_runbooks.replication_factor import RF_RULES

    logger = logger or log
    rules = RF_RULES if plan.summary.get("rebalance") == "replication-factor" else RULES
    violations = check_plan(plan, replica_rows, broker_rows, rules)
    if violations:
        decisions.record(
            "plan",
            "refuse",
            f"the plan breaks {len(violations)} rule(s): {violations[:10]}",
            logger=logger,
            level=logging.ERROR,
        )
        raise PlanRefused(f"the plan breaks the rules: {violations[:20]}")
    decisions.record(
        "plan",
        "plan checked",
        "every rule holds (each partition of the topics below the target raised exactly as the shared rule "
        "places it and nothing else, disk room, chunks, the summary's and per-broker figures)"
        if summary.get("rebalance") == "replication-factor"
        else "every rule holds (RF kept, no broker twice, racks never fewer, replicas only from sources onto "
        "receivers, disk room, the spreads, targets and lower bounds as the snapshot gives them)"
        if summary.get("rebalance")
        else f"every rule holds (RF kept, no broker twice, racks, only {moved_from(summary)[1]} replicas "
        "move, a live preferred leader kept, preferred leaders balanced where a moved one led)",
        observed={moved_from(summary)[0]: summary["failed_brokers"]}
        | {k: summary[k] for k in ("receivers", "partitions", "bytes")}
        | {
            "chunks": len(summary["chunks"]),
            "preferred_leaders": {
                b: f"{v['leaders_before']} -> {v['leaders_after']}" for b, v in summary["per_broker"].items()
            },
            "per_broker": summary["per_broker"],
        },
        logger=logger,
    )
