"""Elect the chosen replicas: the "designated election" Kafka does not have yet.

What works on today's brokers (Kafka 4.x, ElectLeaders v0-2), proven on the local stack:
an UNCLEAN election elects the first acceptable replica in assignment order
(``PartitionChangeBuilder.electAnyLeader``), so

1. AlterPartitionReassignments with the same replica set, the chosen replica first
   (no replica moves: the controller only rewrites the order; no leader is elected
   because the topic does not allow unclean elections). The original order is written
   to the cluster's reorder state file *before* the request is sent;
2. right before the election, the chosen broker is asked for its log end offset: it
   must answer, with at least what it had when planned. A broker that died since the
   plan is still "unfenced" for the controller until its session times out, and an
   UNCLEAN election would then elect it (and lose it) or, once fenced, take the next
   live replica: neither was approved;
3. ElectLeaders(UNCLEAN) on those partitions;
4. read the partition back until it has a leader. Any leader but the chosen replica is
   reported loudly as a data-loss outcome;
5. settle: for the settle period (the one asked for, never shorter than the cluster's
   ``broker.session.timeout.ms``: a leader killed a moment ago stays registered and unfenced
   that long) the partition must stay online, led by the chosen replica, on a registered and
   unfenced broker, and at its end the chosen broker must answer a request itself (the
   evidence room's "serves now"). Only then is it ``elected_chosen``;
6. whatever happened (a failure, an exception, a failed request), put the original
   replica order back wherever it was changed (the leader stays: it is a valid leader),
   and mark it restored in the state file. What could not be restored stays in the state
   file, and the next run restores it first.

Controller-bound requests fail over to a live broker (kafka-python caches one and fails
once it is gone). A partition that has a leader by the time it is reached is reported as
already online and left alone. Failures that may pass (an RPC error, the chosen broker
briefly away, no leader yet) are retried up to ``attempts`` times, with a growing pause
between attempts. ``elections.json`` is rewritten after every attempt and at the end,
so it always holds the outcome of every partition attempted so far.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kafka_runbooks import decisions, retries, storage
from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.evidence import settle_period_s, silent_brokers
from kafka_runbooks.fence import Superseded  # a superseded run acts no more: never swallowed as a call error
from kafka_runbooks.model import PartitionState
from kafka_runbooks.state_file import ClusterStateFile
from kafka_runbooks.storage import StorePath
from kafka_runbooks.unclean.choose import Choice

log = logging.getLogger(__name__)

ELECTED = "elected_chosen"  # elected, and still led by the chosen replica after the settle period
NOT_HELD = "elected_not_held"  # elected, then lost (offline again, another leader, leader fenced)
ELECTED_OTHER = "elected_other_replica"
ALREADY_ONLINE = "already_online"
FAILED = "failed"
NO_CANDIDATE = "no_candidate"
PENDING = "not_attempted_yet"


@dataclass
class Outcome:
    partition: str
    status: str
    chosen: int | None
    leader: int | None = None
    leader_epoch: int | None = None  # the epoch the chosen leader was read at, after the election
    attempts: int = 0
    detail: str = ""
    seen: list[str] = field(default_factory=list)  # what was read back, for a failure

    @property
    def ok(self) -> bool:
        """Whether the partition ended with a leader: elected now, or already online before the election."""
        return self.status in (ELECTED, ALREADY_ONLINE)


@dataclass
class ElectionReport:
    outcomes: list[Outcome] = field(default_factory=list)
    method: str = ""
    settle_s: float = 0.0
    restores: dict[str, str] = field(default_factory=dict)  # partition -> restored / NOT restored: why
    finished: bool = False

    @property
    def failures(self) -> list[Outcome]:
        """Outcomes of partitions left without the leader asked for."""
        return [o for o in self.outcomes if not o.ok]

    def as_dict(self) -> dict:
        """The report as the run's decision record and XCom carry it, with each partition's outcome and the
        config restores."""
        return {
            "method": self.method,
            "settle_s": self.settle_s,
            "finished": self.finished,
            "outcomes": [asdict(o) for o in self.outcomes],
            "restores": dict(self.restores),
        }


class ReorderState(ClusterStateFile):
    """Replica orders this runbook changed and has not put back yet, per cluster.

    An entry is written before the reorder is sent and removed once the original order
    is read back, so a run that dies in between (worker killed, kill -9) leaves exactly
    what to restore; the next run of the runbook on that cluster restores it first.
    """

    kind = "unclean_reorders"
    section = "reorders"


def backoff_s(attempt: int) -> float:
    """Pause after a failed attempt: 1 s, 2 s, 4 s... at most 15 s (a broker restarting,
    a session timing out, metadata catching up all take seconds, not milliseconds)."""
    return min(15.0, 2.0 ** (attempt - 1))


def designated_election_support(admin: ClusterAdmin) -> tuple[bool, str]:
    """Does the broker advertise a designated election (ElectLeaders v3+, KIP-966)?"""
    versions = admin.elect_leaders_versions()
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


def _describe(admin: ClusterAdmin, keys: list[tuple[str, int]]) -> dict[tuple[str, int], PartitionState]:
    topics = sorted({t for t, _ in keys})
    parts = admin.describe_topic_partitions(topics)
    wanted = set(keys)
    return {(p.topic, p.partition): p for p in parts if (p.topic, p.partition) in wanted}


def _available(admin: ClusterAdmin) -> set[int]:
    return {b.broker_id for b in admin.describe_brokers().values() if b.available}


def _poll(
    admin: ClusterAdmin, keys, done, timeout_s: float, interval_s: float = 0.3
) -> dict[tuple[str, int], PartitionState]:
    """Describe ``keys`` until ``done(state)`` holds for all of them or ``timeout_s`` passes."""
    states, _ = retries.poll_until(
        lambda: _describe(admin, keys),
        lambda states: all(k in states and done(states[k]) for k in keys),
        timeout_s=timeout_s,
        interval_s=interval_s,
    )
    return states


def _probe_chosen(
    admin: ClusterAdmin, to_elect: dict[tuple[str, int], Choice], timeout_ms: int
) -> dict[tuple[str, int], str]:
    """Ask each chosen broker, right before the election, for its replica's log end offset.

    Returns why each partition must not be elected now (its broker did not answer, or
    its log is shorter than planned); partitions not in the answer are fine.
    """
    by_broker: dict[int, list[tuple[str, int]]] = {}
    for key, c in to_elect.items():
        by_broker.setdefault(c.chosen, []).append(key)
    answers, _ = admin.list_replica_log_ends(by_broker, timeout_ms=timeout_ms)
    problems: dict[tuple[str, int], str] = {}
    for broker_id, keys in by_broker.items():
        answer = answers.get(broker_id)
        if isinstance(answer, Exception) or answer is None:
            why = f"{type(answer).__name__}: {answer}" if answer is not None else "no answer"
            for key in keys:
                problems[key] = f"chosen broker {broker_id} did not answer right before the election ({why})"
            continue
        rows = {(t, p): (code, offset) for t, p, code, offset, _ in answer}
        for key in keys:
            code, offset = rows.get(key, (None, None))
            planned = to_elect[key].row(broker_id).log_end_offset if to_elect[key].row(broker_id) else None
            if code != 0 or offset is None or offset < 0:
                problems[key] = f"chosen broker {broker_id} did not report its log end offset (error {code})"
            elif planned is not None and offset < planned:
                problems[key] = (
                    f"chosen broker {broker_id} now ends at offset {offset}, below the {planned} it had "
                    "when planned: the choice no longer holds"
                )
    return problems


def _settle(
    admin: ClusterAdmin,
    elected: dict[tuple[str, int], Choice],
    settle_s: float,
    interval_s: float = 1.0,
    epochs: dict[tuple[str, int], int | None] | None = None,
) -> dict[tuple[str, int], list[str]]:
    """Watch the elected partitions for ``settle_s`` seconds; per partition, what broke the hold.

    Held = online, led by the chosen replica, whose broker is registered and unfenced, at
    every read, the last one at or after the end of the period, after which the chosen brokers
    are asked themselves (a fenced flag lags a death by the session timeout; their own answer
    does not). An empty list = held.

    A read older than the election is no evidence either way: metadata reaches the brokers
    one by one, and the broker that answers may not have the election yet (seen under load:
    "leader -1" right after another broker had shown the chosen leader). A partition read at
    a leader epoch below ``epochs[key]`` (the one the chosen leader was seen at) is read
    again; a loss after the election always comes with a newer epoch.
    """
    started = time.monotonic()
    broken: dict[tuple[str, int], list[str]] = {k: [] for k in elected}
    epochs = epochs or {}
    while True:
        now = time.monotonic() - started
        try:
            states = _describe(admin, list(elected))
            brokers = admin.describe_brokers()
        except Exception as exc:  # one failed read proves nothing either way: read again
            log.info("settle read failed at +%.1f s: %s", now, exc)
            states, brokers = None, None
        stale = []
        if states is not None:
            for key, c in elected.items():
                state = states.get(key)
                seen_at = epochs.get(key)
                if state is not None and seen_at is not None and state.leader_epoch < seen_at:
                    stale.append(key)  # from a broker without the election yet: read again
                    continue
                _note_break(broken[key], now, _hold_broken(state, brokers.get(c.chosen), c.chosen))
        if now >= settle_s and states is not None and not stale:
            return _asked_at_the_end(admin, elected, broken, now)
        if now >= settle_s + 60:  # no current read since the period ended: nothing proves it held
            for key in elected if states is None else stale:
                broken[key].append(f"+{now:.1f} s: could not read the partition after the settle period")
            return broken
        time.sleep(min(interval_s, max(0.05, settle_s - now)))


def _hold_broken(state: PartitionState | None, broker, chosen: int) -> str | None:
    """What one current read shows against the hold (None: it holds): the partition gone, another
    leader or none, or the chosen leader's broker not registered or fenced (it cannot lead)."""
    if state is None:
        return "partition not described"
    if state.leader != chosen:
        return f"leader {state.leader}" + (" (offline)" if state.leader == -1 else "")
    if broker is None or not broker.alive:
        return f"leader {state.leader}, broker {chosen} not registered"
    if not broker.available:
        return f"leader {state.leader}, broker {chosen} fenced"
    return None


def _asked_at_the_end(
    admin: ClusterAdmin, elected: dict[tuple[str, int], Choice], broken: dict, now: float
) -> dict[tuple[str, int], list[str]]:
    """The settle's last read asks each chosen leader itself: one that does not answer did not hold."""
    silent = silent_brokers(admin, {c.chosen for c in elected.values()})
    for key, c in elected.items():
        if c.chosen in silent:
            broken[key].append(f"+{now:.1f} s: broker {c.chosen} does not answer itself ({silent[c.chosen]})")
    return broken


def _note_break(broken: list[str], now: float, seen: str | None) -> None:
    """Keep the first break and up to four changes after it: enough to show what happened
    without one line per read."""
    if seen and not broken:
        broken.append(f"+{now:.1f} s after the election: {seen}")
    elif seen and len(broken) < 5 and seen not in broken[-1]:
        broken.append(f"+{now:.1f} s: {seen}")


def _restore(
    admin: ClusterAdmin,
    original: dict[tuple[str, int], tuple[int, ...]],
    state_file: ReorderState,
    report,
    timeout_s,
    logger,
) -> None:
    """Put the original replica order back wherever it differs; forget what was restored.

    The chosen replica only had to be first for the election; left first, it would stay the
    preferred leader. What cannot be read or put back stays in ``state_file`` for the next run.
    """
    if not original:
        return
    try:
        current = _describe(admin, list(original))
    except Exception as exc:
        for key in original:
            report.restores[f"{key[0]}-{key[1]}"] = (
                f"NOT restored: could not read it ({exc}); a re-run restores it"
            )
        return
    back = _orders_to_put_back(original, current, state_file, report)
    if not back:
        return
    try:
        errors = admin.reorder_replicas(back)
        restored = _poll(
            admin, list(back), lambda s: list(s.replicas) == back[(s.topic, s.partition)], timeout_s
        )
    except Superseded:
        raise
    except Exception as exc:
        errors, restored = {k: f"{type(exc).__name__}: {exc}" for k in back}, {}
    for key, order in back.items():
        _record_restore(key, order, restored.get(key), errors.get(key), state_file, report, logger)


def _orders_to_put_back(
    original: dict[tuple[str, int], tuple[int, ...]],
    current: dict[tuple[str, int], PartitionState],
    state_file: ReorderState,
    report,
) -> dict[tuple[str, int], list[int]]:
    """The partitions whose order still differs from the original, over the same replicas. One
    gone, reassigned by someone else (its replica set changed) or already back is reported and
    forgotten: reordering it would undo someone else's change or do nothing."""
    back = {}
    for key, order in original.items():
        name = f"{key[0]}-{key[1]}"
        state = current.get(key)
        if state is None:
            report.restores[name] = "partition gone: nothing to restore"
            _forget(state_file, [name])
        elif set(state.replicas) != set(order):
            report.restores[name] = (
                f"NOT restored: its replica set changed to {list(state.replicas)} (someone else reassigned it)"
            )
            _forget(state_file, [name])
        elif tuple(state.replicas) == tuple(order):
            report.restores[name] = "order unchanged"
            _forget(state_file, [name])
        else:
            back[key] = list(order)
    return back


def _record_restore(
    key: tuple[str, int],
    order: list[int],
    state: PartitionState | None,
    error: str | None,
    state_file: ReorderState,
    report,
    logger,
) -> None:
    """One partition's restore, proven by the order read back: forgotten only then, kept in the
    state file otherwise so the next run restores it; a decision record either way."""
    name = f"{key[0]}-{key[1]}"
    ok = state is not None and list(state.replicas) == order and not error
    report.restores[name] = (
        "restored"
        if ok
        else f"NOT restored ({error or 'order not read back'}): kept in {state_file.path}, "
        "the next run restores it"
    )
    if ok:
        _forget(state_file, [name])
    decisions.record(
        "restore-order",
        "original replica order restored" if ok else "replica order NOT restored",
        "the chosen replica only had to be first for the election",
        observed={
            "replicas": list(state.replicas) if state else None,
            "original": order,
            "leader": state.leader if state else None,
            "error": error,
        },
        subject=name,
        logger=logger,
        level=logging.INFO if ok else logging.ERROR,
    )


def _remember(state_file: ReorderState, entries: dict[str, dict]) -> None:
    with state_file.locked():
        current = state_file.read_entries()
        for name, entry in entries.items():
            current.setdefault(name, entry)  # the first recorded order is the original one
        state_file.write_entries(current)


def _forget(state_file: ReorderState, names: list[str]) -> None:
    with state_file.locked():
        current = state_file.read_entries()
        if any(n in current for n in names):
            state_file.write_entries({k: v for k, v in current.items() if k not in names})


def _write_report(path: StorePath | Path | None, report: ElectionReport, outcomes, choices) -> None:
    """``elections.json``, whole, in the data store: every outcome so far, whatever happens next."""
    if path is None:
        return
    import json

    report.outcomes = [outcomes[(c.topic, c.partition)] for c in choices]
    storage.locate(path).write_text(json.dumps(report.as_dict(), indent=2) + "\n")


Key = tuple[str, int]


@dataclass
class _Run:
    """What the steps of one election run share, passed as one instead of name by name."""

    admin: ClusterAdmin
    choices: list[Choice]
    outcomes: dict[Key, Outcome]
    original_order: dict[Key, tuple[int, ...]]  # partitions reordered (by this run or one before)
    state_file: ReorderState
    settle_timeout_s: float
    logger: logging.Logger
    between_steps: Callable[[str, list[tuple[str, int]]], None] | None = None


def elect_chosen(
    admin: ClusterAdmin,
    choices: list[Choice],
    attempts: int = 3,
    restore_order: bool = True,
    settle_s: float = 30.0,
    settle_timeout_s: float = 60.0,
    state_file: ReorderState | None = None,
    report_path: StorePath | Path | None = None,
    logger: logging.Logger | None = None,
    sleep: Callable[[float], None] = time.sleep,
    between_steps: Callable[[str, list[tuple[str, int]]], None] | None = None,
) -> ElectionReport:
    """Elect every choice's chosen replica (see the module docstring for the steps).

    Attempts until nothing is pending or ``attempts`` are used, verifies the elections that
    happened over the settle period, and whatever happens puts the replica orders back
    (``_finish``). ``between_steps(step, partitions)`` is called after "reordered" and after
    "elected": the seam through which the tests inject faults between the runbook's steps.
    """
    logger = logger or log
    state_file = state_file or ReorderState("default")
    report = ElectionReport(settle_s=settle_s)
    outcomes, pending = _start_outcomes(choices)
    original_order = _orders_left_changed(state_file, logger)
    run = _Run(admin, choices, outcomes, original_order, state_file, settle_timeout_s, logger, between_steps)
    try:
        _record_method(admin, report, settle_s, logger)
        elected: dict[Key, Choice] = {}
        for attempt in range(1, attempts + 1):
            if not pending:
                break
            if attempt > 1:
                sleep(backoff_s(attempt - 1))
            _attempt(run, pending, elected, attempt)
            _write_report(report_path, report, outcomes, choices)
        if elected:
            _verify_settled(admin, elected, outcomes, settle_s, logger)
    finally:
        _finish(run, report, restore_order)
        _write_report(report_path, report, outcomes, choices)
    return report


def _start_outcomes(choices: list[Choice]) -> tuple[dict[Key, Outcome], dict[Key, Choice]]:
    """Every choice's outcome, and the choices to elect: those with a chosen replica.

    A partition without a candidate is an outcome from the start, so the report names it.
    """
    outcomes: dict[Key, Outcome] = {}
    pending: dict[Key, Choice] = {}
    for c in choices:
        key = (c.topic, c.partition)
        if c.chosen is None:
            outcomes[key] = Outcome(c.name, NO_CANDIDATE, None, detail=c.reason)
        else:
            outcomes[key] = Outcome(c.name, PENDING, c.chosen)
            pending[key] = c
    return outcomes, pending


def _orders_left_changed(state_file: ReorderState, logger) -> dict[Key, tuple[int, ...]]:
    """Orders a run before this one changed and could not put back: this run restores them too."""
    original_order: dict[Key, tuple[int, ...]] = {
        (e["topic"], e["partition"]): tuple(e["original"]) for e in state_file.read_entries().values()
    }
    if original_order:
        decisions.record(
            "restore-order",
            "restore replica orders left changed by an earlier run",
            f"{len(original_order)} partition(s) recorded in {state_file.path}",
            observed={"partitions": sorted(f"{t}-{p}" for t, p in original_order)},
            logger=logger,
            level=logging.WARNING,
        )
    return original_order


def _record_method(admin: ClusterAdmin, report: ElectionReport, settle_s: float, logger) -> None:
    """Say how the chosen leader is reached on these brokers (no designated election in Kafka yet)."""
    designated, why = designated_election_support(admin)
    report.method = "reorder replicas (chosen first) + UNCLEAN election"
    decisions.record(
        "elect",
        "reach the chosen leader by reordering the replicas, then an UNCLEAN election",
        why + ("; this client does not send DesignatedLeaders yet" if designated else ""),
        observed={"designated_election_advertised": designated, "settle_s": settle_s},
        logger=logger,
    )


def _finish(run: _Run, report: ElectionReport, restore_order: bool) -> None:
    """Whatever happened: what is still pending failed, and the replica orders go back (step 6).

    With ``restore_order`` off the new orders stay, and nothing is left for a later run to
    put back.
    """
    outcomes, original_order = run.outcomes, run.original_order
    for o in outcomes.values():
        if o.status == PENDING:
            o.status = FAILED
            o.detail = o.detail or "not elected within the attempts"
    if restore_order:
        _restore(run.admin, original_order, run.state_file, report, run.settle_timeout_s, run.logger)
    elif original_order:
        _forget(run.state_file, [f"{t}-{p}" for t, p in original_order])
        report.restores = {
            f"{t}-{p}": "left chosen-first (restore_replica_order=false)" for t, p in original_order
        }
    report.finished = True
    report.outcomes = [outcomes[(c.topic, c.partition)] for c in run.choices]


def _attempt(run: _Run, pending: dict[Key, Choice], elected: dict[Key, Choice], attempt: int) -> None:
    """One attempt at every pending partition, steps 1-4; what is settled leaves ``pending``."""
    admin, outcomes, logger = run.admin, run.outcomes, run.logger
    for key in pending:
        outcomes[key].attempts = attempt
    try:
        states = _describe(admin, list(pending))
        live = _available(admin)
    except Exception as exc:
        for key in pending:
            outcomes[key].detail = f"describe failed: {exc}"
        return
    to_elect = _still_to_elect(pending, outcomes, states, live, logger)
    if not to_elect:
        return
    _reorder_chosen_first(run, to_elect, states)
    if to_elect:
        _drop_unready_chosen(admin, to_elect, pending, outcomes, logger)
    if not to_elect:
        return
    not_needed = _elect_unclean(admin, to_elect, outcomes, run.between_steps)
    _read_back(admin, to_elect, pending, outcomes, elected, not_needed, run.settle_timeout_s, logger)


def _still_to_elect(
    pending: dict[Key, Choice],
    outcomes: dict[Key, Outcome],
    states: dict[Key, PartitionState],
    live: set[int],
    logger,
) -> dict[Key, Choice]:
    """The pending partitions to elect now, from a fresh read of the cluster.

    A partition that is gone or whose replica set changed since planning fails (the approval
    was for another layout); one that got a leader meanwhile is left alone; one whose chosen
    broker is away now waits for the next attempt.
    """
    to_elect: dict[Key, Choice] = {}
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
            outcomes[key].status = FAILED
            outcomes[key].detail = f"replica set changed since planning: {list(state.replicas)}"
            del pending[key]
        elif c.chosen not in live:
            outcomes[key].detail = f"chosen broker {c.chosen} is not available now"
        else:
            to_elect[key] = c
    return to_elect


def _reorder_chosen_first(run: _Run, to_elect: dict[Key, Choice], states: dict[Key, PartitionState]) -> None:
    """Step 1: the chosen replica first, the others in their current order.

    The original order is on disk before the request leaves, so a crash at any point leaves
    it for the next run to put back. A partition whose order did not change in time is not
    elected this attempt (an UNCLEAN election would take another replica).
    """
    admin, outcomes, original_order = run.admin, run.outcomes, run.original_order
    reorder = {}
    for key, c in to_elect.items():
        current = states[key].replicas
        if current[0] != c.chosen:
            reorder[key] = [c.chosen] + [b for b in current if b != c.chosen]
            original_order.setdefault(key, current)
    if not reorder:
        return
    _remember(
        run.state_file,
        {
            f"{t}-{p}": {"topic": t, "partition": p, "original": list(original_order[(t, p)])}
            for (t, p) in reorder
        },
    )
    try:
        errors = admin.reorder_replicas(reorder)
    except Superseded:
        raise
    except Exception as exc:
        errors = {k: f"{type(exc).__name__}: {exc}" for k in reorder}
    for key, err in errors.items():
        if err:
            outcomes[key].detail = f"reorder refused: {err}"
            to_elect.pop(key, None)
    if run.between_steps:
        run.between_steps("reordered", list(to_elect))
    ordered = _poll(
        admin,
        list(to_elect),
        lambda s, te=to_elect: s.replicas[:1] == (te[(s.topic, s.partition)].chosen,),
        run.settle_timeout_s,
    )
    for key in list(to_elect):
        if key not in ordered or ordered[key].replicas[0] != to_elect[key].chosen:
            outcomes[key].detail = "replica order did not change in time"
            to_elect.pop(key)


def _drop_unready_chosen(admin: ClusterAdmin, to_elect, pending, outcomes, logger) -> None:
    """Step 2: the chosen broker must answer, with at least the log it had when planned.

    A broker that died since the plan still looks unfenced until its session times out; an
    UNCLEAN election would elect it and lose it, or take the next replica: neither was approved.
    """
    try:
        problems = _probe_chosen(admin, to_elect, timeout_ms=5000)
    except Exception as exc:
        problems = {k: f"could not ask the chosen broker ({exc})" for k in to_elect}
    for key, why in problems.items():
        outcomes[key].detail = why
        to_elect.pop(key)
        decisions.record(
            "elect",
            "do not elect now",
            why,
            observed={"chosen": pending[key].chosen},
            subject=outcomes[key].partition,
            logger=logger,
            level=logging.WARNING,
        )


def _elect_unclean(admin: ClusterAdmin, to_elect, outcomes, between_steps) -> set[Key]:
    """Step 3: ElectLeaders(UNCLEAN); returns the partitions that needed no election.

    ElectionNotNeeded means the partition got a leader between the check and the election;
    the read-back decides what that leader means.
    """
    try:
        results = admin.elect_unclean(list(to_elect))
    except Superseded:
        raise
    except Exception as exc:
        results = {k: f"{type(exc).__name__}: {exc}" for k in to_elect}
    if between_steps:
        between_steps("elected", list(to_elect))
    not_needed = set()
    for key, err in results.items():
        if err and err.startswith("ElectionNotNeeded"):
            not_needed.add(key)
        elif err and key in to_elect:
            outcomes[key].detail = f"election refused: {err}"
    return not_needed


def _read_back(
    admin: ClusterAdmin, to_elect, pending, outcomes, elected, not_needed, settle_timeout_s, logger
) -> None:
    """Step 4: read the partitions back until a leader shows; judge each leader found.

    Without a leader yet the partition stays pending for the next attempt.
    """
    after = _poll(admin, list(to_elect), lambda s: s.has_leader, settle_timeout_s)
    for key, c in to_elect.items():
        state = after.get(key)
        if state is None or not state.has_leader:
            outcomes[key].detail = outcomes[key].detail or "no leader after the election"
            continue
        del pending[key]
        if _judge_leader(outcomes[key], c, state, key in not_needed, logger):
            elected[key] = c


def _judge_leader(outcome: Outcome, c: Choice, state: PartitionState, not_needed: bool, logger) -> bool:
    """What the leader read back means; True when it is the chosen replica (it settles next).

    A leader that came without our election is left alone; any other leader after our
    election is reported loudly as data loss.
    """
    outcome.leader = state.leader
    if state.leader == c.chosen:
        outcome.leader_epoch = state.leader_epoch
        outcome.detail = f"broker {c.chosen} leads at epoch {state.leader_epoch}; settling"
        return True
    if not_needed:
        _already_online(
            outcome,
            c,
            state.leader,
            f"came online before the election (ElectionNotNeeded), led by broker {state.leader}: left alone",
            logger,
        )
        return False
    outcome.status = ELECTED_OTHER
    row = c.row(state.leader)
    lost = row.truncated_if_chosen_stands if row else None
    ours = c.row(c.chosen)
    theirs = row.log_end_offset if row else None
    outcome.detail = (
        f"DATA LOSS: broker {state.leader} was elected, not the chosen broker {c.chosen}; "
        f"it ends at offset {theirs if theirs is not None else 'unknown'}, the chosen one at "
        f"{ours.log_end_offset if ours else 'unknown'}"
    )
    decisions.record(
        "elect",
        "WRONG LEADER ELECTED",
        outcome.detail,
        observed={"leader": state.leader, "chosen": c.chosen, "truncated_row": lost},
        subject=c.name,
        logger=logger,
        level=logging.ERROR,
    )
    return False


def _verify_settled(admin: ClusterAdmin, elected, outcomes, asked_s, logger) -> None:
    """An election counts only if it still holds after the settle period (never shorter than the
    cluster's session timeout) and its chosen leader answers itself at the end."""
    settle_s = settle_period_s(asked_s, admin.cluster_timeouts())
    if settle_s > asked_s:
        decisions.record(
            "verify",
            f"settle {settle_s:g} s",
            f"the settle period asked ({asked_s:g} s) is shorter than broker.session.timeout.ms: a leader "
            f"that died meanwhile would still look registered and unfenced; holding {settle_s:g} s",
            observed={"asked_s": asked_s, "settle_s": settle_s},
            logger=logger,
        )
    broken = _settle(admin, elected, settle_s, epochs={k: outcomes[k].leader_epoch for k in elected})
    for key, c in elected.items():
        outcome = outcomes[key]
        if broken[key]:
            outcome.status = NOT_HELD
            outcome.seen = broken[key]
            outcome.detail = (
                f"broker {c.chosen} was elected but did not hold for {settle_s:g} s: "
                + "; ".join(broken[key])
            )
            decisions.record(
                "verify",
                "election did NOT hold",
                outcome.detail,
                observed={"chosen": c.chosen, "seen": broken[key]},
                subject=c.name,
                logger=logger,
                level=logging.ERROR,
            )
        else:
            outcome.status = ELECTED
            outcome.detail = (
                f"broker {c.chosen} led, unfenced, for the whole {settle_s:g} s settle period, and answered "
                "itself at its end"
            )
            decisions.record(
                "verify",
                f"elected broker {c.chosen}",
                outcome.detail,
                observed={"leader": c.chosen, "settle_s": settle_s},
                action="reorder + UNCLEAN election",
                subject=c.name,
                logger=logger,
            )


def pending_restores(state_file: ReorderState) -> dict[str, dict]:
    """Replica orders this runbook changed on the cluster and has not put back yet, by partition.

    For the health report and the console: a non-empty answer means a run died between a
    reorder and its restore; the next run of the runbook on that cluster restores them first.
    """
    return state_file.read_entries()


def restore_pending(
    admin: ClusterAdmin,
    state_file: ReorderState,
    logger: logging.Logger | None = None,
    timeout_s: float = 60.0,
) -> dict[str, str]:
    """Put back every replica order an earlier run left changed, before this run does anything else.

    The journal entry was written before the reorder was sent, so it holds the order the
    operator had. Restoring it is not a new destructive act (no plan, no approval): the
    leader stays, only the preferred order comes back. Returns partition -> what happened.
    """
    logger = logger or log
    original = _orders_left_changed(state_file, logger)
    if not original:
        return {}
    report = ElectionReport()
    _restore(admin, original, state_file, report, timeout_s, logger)
    decisions.record(
        "restore-order",
        "restored first: replica orders left changed by an earlier run",
        "an earlier run died between a reorder and its restore; this run puts the operator's order back "
        "before planning",
        observed={"restores": dict(report.restores)},
        logger=logger,
        level=logging.INFO
        if not any(v.startswith("NOT") for v in report.restores.values())
        else logging.ERROR,
    )
    return dict(report.restores)
