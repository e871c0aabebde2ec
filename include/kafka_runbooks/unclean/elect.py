"""Elect the chosen replicas: the "designated election" Kafka does not have yet.

What works on today's brokers (Kafka 4.x, ElectLeaders v0-2), proven on the local stack:
an UNCLEAN election elects the first acceptable replica in assignment order
(``PartitionChangeBuilder.electAnyLeader``), so

1. AlterPartitionReassignments with the same replica set, the chosen replica first
   (no replica moves: the controller only rewrites the order; no leader is elected
   because the topic does not allow unclean elections);
2. ElectLeaders(UNCLEAN) on those partitions;
3. read the partition back: the leader must be the chosen replica. Any other leader is
   reported loudly as a data-loss outcome;
4. put the original replica order back (the leader stays: it is a valid leader).

A partition that has a leader by the time it is reached is reported as already online
and left alone. Failures that may pass (an RPC error, the chosen broker briefly away, no
leader yet) are retried up to ``attempts`` times.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field

from kafka_runbooks import decisions
from kafka_runbooks.model import PartitionState
from kafka_runbooks.unclean.choose import Choice

log = logging.getLogger(__name__)

ELECTED = "elected_chosen"
ELECTED_OTHER = "elected_other_replica"
ALREADY_ONLINE = "already_online"
FAILED = "failed"
NO_CANDIDATE = "no_candidate"


@dataclass
class Outcome:
    partition: str
    status: str
    chosen: int | None
    leader: int | None = None
    attempts: int = 0
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status in (ELECTED, ALREADY_ONLINE)


@dataclass
class ElectionReport:
    outcomes: list[Outcome] = field(default_factory=list)
    method: str = ""

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.ok]

    def as_dict(self) -> dict:
        return {"method": self.method, "outcomes": [asdict(o) for o in self.outcomes]}


def designated_election_support(admin) -> tuple[bool, str]:
    """Does the broker advertise a designated election (ElectLeaders v3+, KIP-966)?"""
    from kafka_runbooks.kafka_python_gaps import ELECT_LEADERS_API_KEY, advertised_api_versions

    versions = admin._gap_call(
        "ApiVersions", lambda: advertised_api_versions(admin.gaps, ELECT_LEADERS_API_KEY)
    )
    if versions is None:
        return False, "broker does not advertise ElectLeaders"
    low, high = versions
    if high >= 3:
        return True, f"broker advertises ElectLeaders v{low}-{high} (v3+ carries DesignatedLeaders)"
    return (
        False,
        f"broker advertises ElectLeaders v{low}-{high}: PREFERRED and UNCLEAN only, no designated election",
    )


def _already_online(outcome: Outcome, c: Choice, leader: int, detail: str, logger) -> None:
    """A partition that has a leader without us is reported and left alone."""
    outcome.status, outcome.leader, outcome.detail = ALREADY_ONLINE, leader, detail
    decisions.record(
        "elect",
        "leave alone: already online",
        detail,
        observed={"leader": leader, "chosen": c.chosen},
        subject=c.name,
        logger=logger,
    )


def _describe(admin, keys: list[tuple[str, int]]) -> dict[tuple[str, int], PartitionState]:
    topics = sorted({t for t, _ in keys})
    parts = admin._gap_call("DescribeTopicPartitions", lambda: admin.gaps.describe_partitions(topics))
    wanted = set(keys)
    return {(p.topic, p.partition): p for p in parts if (p.topic, p.partition) in wanted}


def _available(admin) -> set[int]:
    return {b.broker_id for b in admin.describe_brokers().values() if b.available}


def _poll(
    admin, keys, done, timeout_s: float, interval_s: float = 0.3
) -> dict[tuple[str, int], PartitionState]:
    """Describe ``keys`` until ``done(state)`` holds for all of them or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        states = _describe(admin, keys)
        if all(k in states and done(states[k]) for k in keys) or time.monotonic() >= deadline:
            return states
        time.sleep(interval_s)


def elect_chosen(
    admin,
    choices: list[Choice],
    attempts: int = 3,
    restore_order: bool = True,
    settle_timeout_s: float = 60.0,
    logger: logging.Logger | None = None,
) -> ElectionReport:
    from kafka_runbooks.kafka_python_gaps import elect_unclean, reorder_replicas

    logger = logger or log
    report = ElectionReport()
    designated, why = designated_election_support(admin)
    report.method = "reorder replicas (chosen first) + UNCLEAN election"
    decisions.record(
        "elect",
        "reach the chosen leader by reordering the replicas, then an UNCLEAN election",
        why + ("; this client does not send DesignatedLeaders yet" if designated else ""),
        observed={"designated_election_advertised": designated},
        logger=logger,
    )
    outcomes: dict[tuple[str, int], Outcome] = {}
    pending: dict[tuple[str, int], Choice] = {}
    for c in choices:
        key = (c.topic, c.partition)
        if c.chosen is None:
            outcomes[key] = Outcome(c.name, NO_CANDIDATE, None, detail=c.reason)
        else:
            outcomes[key] = Outcome(c.name, FAILED, c.chosen)
            pending[key] = c
    original_order: dict[tuple[str, int], tuple[int, ...]] = {}
    for attempt in range(1, attempts + 1):
        if not pending:
            break
        for key in pending:
            outcomes[key].attempts = attempt
        try:
            states = _describe(admin, list(pending))
            live = _available(admin)
        except Exception as exc:
            for key in pending:
                outcomes[key].detail = f"describe failed: {exc}"
            time.sleep(attempt)
            continue
        to_elect: dict[tuple[str, int], Choice] = {}
        for key, c in list(pending.items()):
            state = states.get(key)
            if state is None:
                outcomes[key].status, outcomes[key].detail = FAILED, "partition no longer exists"
                del pending[key]
            elif state.has_leader and state.leader in live:
                _already_online(
                    outcomes[key],
                    c,
                    state.leader,
                    "came online meanwhile, led by the chosen replica"
                    if state.leader == c.chosen
                    else f"came online meanwhile, led by broker {state.leader}: left alone",
                    logger,
                )
                del pending[key]
            elif set(state.replicas) != set(c.replicas):
                outcomes[key].detail = f"replica set changed since planning: {list(state.replicas)}"
                del pending[key]
            elif c.chosen not in live:
                outcomes[key].detail = f"chosen broker {c.chosen} is not available now"
            else:
                original_order.setdefault(key, state.replicas)
                to_elect[key] = c
        if not to_elect:
            continue
        # 1. chosen replica first, the others in their current order
        reorder = {}
        for key, c in to_elect.items():
            current = states[key].replicas
            if current[0] != c.chosen:
                reorder[key] = [c.chosen] + [b for b in current if b != c.chosen]
        if reorder:
            errors = admin._gap_call(
                "AlterPartitionReassignments", lambda reorder=reorder: reorder_replicas(admin.gaps, reorder)
            )
            for key, err in errors.items():
                if err:
                    outcomes[key].detail = f"reorder refused: {err}"
                    to_elect.pop(key, None)
            ordered = _poll(
                admin,
                list(to_elect),
                lambda s, te=to_elect: s.replicas[:1] == (te[(s.topic, s.partition)].chosen,),
                settle_timeout_s,
            )
            for key in list(to_elect):
                if key not in ordered or ordered[key].replicas[0] != to_elect[key].chosen:
                    outcomes[key].detail = "replica order did not change in time"
                    to_elect.pop(key)
        if not to_elect:
            time.sleep(attempt)
            continue
        # 2. UNCLEAN election
        results = admin._gap_call("ElectLeaders", lambda keys=list(to_elect): elect_unclean(admin.gaps, keys))
        not_needed = set()
        for key, err in results.items():
            if err and err.startswith("ElectionNotNeeded"):
                not_needed.add(key)  # it got a leader between our check and the election
            elif err and key in to_elect:
                outcomes[key].detail = f"election refused: {err}"
        # 3. verify
        after = _poll(admin, list(to_elect), lambda s: s.has_leader, settle_timeout_s)
        for key, c in to_elect.items():
            state = after.get(key)
            if state is None or not state.has_leader:
                outcomes[key].detail = outcomes[key].detail or "no leader after the election"
                continue
            outcomes[key].leader = state.leader
            del pending[key]
            if state.leader == c.chosen:
                outcomes[key].status = ELECTED
                outcomes[key].detail = f"broker {c.chosen} leads at epoch {state.leader_epoch}"
                decisions.record(
                    "elect",
                    f"elected broker {c.chosen}",
                    "the leader read back is the chosen replica",
                    observed={
                        "leader": state.leader,
                        "leader_epoch": state.leader_epoch,
                        "replicas": list(state.replicas),
                    },
                    action="reorder + UNCLEAN election",
                    subject=c.name,
                    logger=logger,
                )
            elif key in not_needed:
                _already_online(
                    outcomes[key],
                    c,
                    state.leader,
                    f"came online before the election (ElectionNotNeeded), led by broker {state.leader}: left alone",
                    logger,
                )
            else:
                outcomes[key].status = ELECTED_OTHER
                row = c.row(state.leader)
                lost = row.offsets_lost_vs_choice if row else None
                outcomes[key].detail = (
                    f"DATA LOSS: broker {state.leader} was elected, not the chosen broker {c.chosen}; "
                    f"it held {lost if lost is not None else 'an unknown number of'} offsets fewer"
                )
                decisions.record(
                    "elect",
                    "WRONG LEADER ELECTED",
                    outcomes[key].detail,
                    observed={"leader": state.leader, "chosen": c.chosen, "offsets_lost": lost},
                    subject=c.name,
                    logger=logger,
                    level=logging.ERROR,
                )
        if pending:
            time.sleep(attempt)
    # 4. restore the original replica order where we changed it (the leader stays)
    if restore_order:
        back = {
            k: list(original_order[k])
            for k, o in outcomes.items()
            if o.status in (ELECTED, ELECTED_OTHER)
            and k in original_order
            and original_order[k][0] != o.chosen
        }
        if back:
            try:
                errors = admin._gap_call(
                    "AlterPartitionReassignments", lambda: reorder_replicas(admin.gaps, back)
                )
                restored = _poll(
                    admin,
                    list(back),
                    lambda s: list(s.replicas) == back[(s.topic, s.partition)],
                    settle_timeout_s,
                )
                for key in back:
                    state = restored.get(key)
                    ok = state is not None and list(state.replicas) == back[key] and not errors.get(key)
                    decisions.record(
                        "restore-order",
                        "original replica order restored" if ok else "replica order NOT restored",
                        "the chosen replica only had to be first for the election",
                        observed={
                            "replicas": list(state.replicas) if state else None,
                            "leader": state.leader if state else None,
                            "error": errors.get(key),
                        },
                        subject=outcomes[key].partition,
                        logger=logger,
                        level=logging.INFO if ok else logging.WARNING,
                    )
            except Exception as exc:  # the elections stand; the order is cosmetic
                log.warning("could not restore the original replica order: %s", exc)
    for o in outcomes.values():
        if o.status == FAILED and not o.detail:
            o.detail = "not elected within the attempts"
    report.outcomes = [outcomes[(c.topic, c.partition)] for c in choices]
    return report
