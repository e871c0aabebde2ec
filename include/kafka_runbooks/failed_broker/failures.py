"""Which brokers have failed, and since when: the sweep's memory, kept outside Airflow.

A broker has *failed* when the cluster's assignments still name it but it is not
available (not registered, or registered but fenced). The time it was first seen failed
is kept in a JSON file under the runbooks' data dir
(``state/failed_brokers/<conn id>.json`` in the data store), so the countdown
survives a scheduler restart, an Airflow upgrade and a cleared run, and is forgotten the
moment the broker is back: a bounce shorter than the failure threshold never starts a
reassignment (the KIP's "a broker being bounced must not count as a failure").

A broker can also come back *between* two sweeps and fail again before the next one: every
sweep sees it failed. The evidence that survives is in the KRaft metadata quorum: every
running broker fetches the metadata log from the active controller, which reports each
observer's last fetch time (DescribeQuorum; kept for 5 minutes after the last fetch, reset
when controller leadership moves). The sweep remembers the last fetch it saw (with the
quorum's leader epoch); a fetch newer than that one means the broker's process ran since
the last sweep, so the countdown starts again. (DescribeCluster does not report the broker
epoch, and a dead broker's exporter cannot be scraped, so these are the readable traces.)

Too many brokers failed at once is an outage, not a broker failure: moving replicas then
would only add load to a cluster that is already in trouble, so nothing is started.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from kafka_runbooks import decisions
from kafka_runbooks.errors import BadInput
from kafka_runbooks.evidence import CatchUp, FetchMark, QuorumView
from kafka_runbooks.model import ClusterState
from kafka_runbooks.state_file import ClusterStateFile, StateEntry

OFF = -1.0


@dataclass(frozen=True)
class Thresholds:
    """When to alert, when to act, and when to refuse (times in seconds).

    ``failure_threshold_s`` < 0 turns the automation off (the sweep still tracks and
    alerts). ``max_failed_fraction``: more failed brokers than this share of all brokers
    is an outage. ``retrigger_after_s``: how long after starting a reassignment for a
    broker the sweep may start another one if the broker is still failed (e.g. the
    approval was rejected); defaults to the failure threshold.
    """

    alert_after_s: float = 15 * 60
    failure_threshold_s: float = 30 * 60
    max_failed_fraction: float = 1 / 3
    retrigger_after_s: float | None = None

    def __post_init__(self) -> None:
        if self.alert_after_s < 0 and self.alert_after_s != OFF:
            raise BadInput(f"alert_after must be >= 0 or -1 (off), not {self.alert_after_s}")
        if self.failure_threshold_s < 0 and self.failure_threshold_s != OFF:
            raise BadInput(f"failure_threshold must be >= 0 or -1 (off), not {self.failure_threshold_s}")
        if not 0 < self.max_failed_fraction <= 1:
            raise BadInput(f"max_failed_fraction must be in (0, 1], not {self.max_failed_fraction}")

    @property
    def automation_on(self) -> bool:
        """Off (-1), the sweep still tracks and alerts but never starts a reassignment."""
        return self.failure_threshold_s >= 0

    @property
    def retrigger_s(self) -> float:
        """How long after a started run another may start for the same broker (a rejected
        approval must not be asked again at once); unset, the failure threshold."""
        return (
            self.retrigger_after_s if self.retrigger_after_s is not None else max(self.failure_threshold_s, 0)
        )


@dataclass
class FailedBroker(StateEntry):
    """One failed broker as the sweeps remember it (times on the worker's clock, compared only with
    each other; the quorum epoch and last fetch on the controller's, compared only by the evidence
    room's :class:`~kafka_runbooks.evidence.FetchMark`)."""

    broker_id: int
    first_seen_ms: int
    alerted_ms: int | None = None
    triggered_ms: int | None = None
    triggered_run_id: str | None = None
    # the quorum's leader epoch and the broker's last metadata fetch (controller clock) seen by the
    # last sweep; quorum_epoch None: nothing read yet (no baseline to compare with). Kept in the
    # state file as "last_fetch_ms" (to_dict / from_dict), the name earlier versions wrote.
    quorum_epoch: int | None = None
    seen_fetch_ms: int | None = None

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> FailedBroker:
        """The entry from its JSON object; the fetch seen is stored under ``last_fetch_ms``."""
        return super().from_dict({**raw, "seen_fetch_ms": raw.get("last_fetch_ms", raw.get("seen_fetch_ms"))})

    def to_dict(self) -> dict[str, Any]:
        """The entry as its JSON object (the state file's names)."""
        out = asdict(self)
        out["last_fetch_ms"] = out.pop("seen_fetch_ms")
        return out


@dataclass(frozen=True)
class MetadataFetch:
    """What the active controller says of one broker's metadata fetches (DescribeQuorum), judged by
    the evidence room: where its fetches stand (:class:`FetchMark`) and whether it fetches now."""

    mark: FetchMark
    now: CatchUp | None  # None: not an observer now (no fetch for 5 minutes, or a new leader)

    @property
    def quorum_epoch(self) -> int:
        """The quorum leader epoch of the answer."""
        return self.mark.epoch

    def ran_since(self, entry: FailedBroker) -> bool:
        """A fetch newer than the one the last sweep saw: the broker's process ran in between."""
        return self.mark.fetched_since(entry.quorum_epoch, entry.seen_fetch_ms)

    @property
    def running_now(self) -> bool:
        """A fenced broker the leader sees fetching within the cluster's fetch timeout is starting or
        stuck, not dead: its countdown must not run on."""
        return self.now is not None and self.now.fetching is True

    @property
    def fetch_ms_ago(self) -> int | None:
        """Its last fetch's age by the leader's clock (None: unknown)."""
        return None if self.now is None else self.now.fetch_ms_ago


def metadata_fetch(state: ClusterState, broker_id: int) -> MetadataFetch | None:
    """The broker's last metadata fetch as the quorum reports it; None without a quorum read."""
    quorum = state.quorum
    if quorum is None:
        return None
    return MetadataFetch(mark=FetchMark.of(quorum, broker_id), now=QuorumView(quorum).observer(broker_id))


@dataclass
class Assessment:
    """What one sweep saw and decided."""

    now_ms: int
    brokers: int
    failed: dict[int, FailedBroker]
    recovered: list[int] = field(default_factory=list)
    bounced: list[int] = field(default_factory=list)
    alerts: list[int] = field(default_factory=list)
    new_alerts: list[int] = field(default_factory=list)  # alerted by this sweep for the first time
    due: list[int] = field(default_factory=list)
    outage: bool = False
    records: list[decisions.DecisionRecord] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The sweep's assessment as its report and decision record show it (``now_ms``: the clock it was
        judged by)."""
        return {
            "now_ms": self.now_ms,
            "brokers": self.brokers,
            "failed": {str(b): f.to_dict() for b, f in sorted(self.failed.items())},
            "recovered": self.recovered,
            "bounced": self.bounced,
            "alerts": self.alerts,
            "due": self.due,
            "outage": self.outage,
        }


def failed_brokers(state: ClusterState) -> list[int]:
    """Brokers named by some partition's replicas that are not available (down or fenced)."""
    named = {r for p in state.partitions for r in p.replicas}
    return sorted(b for b in named if not state.is_available(b))


class FailureStore(ClusterStateFile):
    """First-seen times of failed brokers of one cluster, in one JSON file (atomic writes)."""

    kind = "failed_brokers"
    section = "brokers"

    def load(self) -> dict[int, FailedBroker]:
        """The remembered failures by broker id (JSON keys are strings)."""
        return {int(b): FailedBroker.from_dict(e) for b, e in self.read_entries().items()}

    def save(self, failed: dict[int, FailedBroker]) -> None:
        """Replace the whole file: a broker no longer listed is forgotten."""
        self.write_entries({str(b): f.to_dict() for b, f in sorted(failed.items())})


class Triggered(Protocol):
    """An entry a sweep may start a run for (a failed broker, an offline dir)."""

    triggered_ms: int | None
    triggered_run_id: str | None


K = TypeVar("K")
T = TypeVar("T", bound=Triggered)


class EntryStore(Protocol[K, T]):
    """A sweep's state file of such entries (``FailureStore``, ``OfflineDirStore``)."""

    def locked(self) -> Any:
        """Hold the cluster's lock for a whole load, decide, save."""
        ...

    def load(self) -> dict[K, T]:
        """Every remembered entry."""
        ...

    def save(self, entries: dict[K, T]) -> None:
        """Replace the file with ``entries``."""
        ...


class SweepTracker(Generic[K, T]):
    """What the failed-broker and the offline-dir trackers share: their state file, thresholds,
    clock (the worker's: its times are compared only with each other) and decision log, and the
    mark that a run was started, written under the file's lock like every sweep's update, and the
    rule that a run an operator stopped on purpose is not started again for the same failure.

    ``stopped_runs``: run id -> how that run was stopped on purpose (its state's "stopped by <user>:
    <reason>"), or None when it was not; when that cannot be read it says so (unknown is not "not
    stopped"). Left out, no run counts as stopped."""

    def __init__(
        self,
        store: EntryStore[K, T],
        thresholds: Thresholds,
        clock: Callable[[], float] = time.time,
        logger: logging.Logger | None = None,
        stopped_runs: Callable[[str], str | None] | None = None,
    ) -> None:
        self.store = store
        self.thresholds = thresholds
        self.clock = clock
        self.log = logger
        self.stopped_runs = stopped_runs or (lambda run_id: None)

    def _stopped_on_purpose(
        self, records: list[decisions.DecisionRecord], entries: list[T], subject: str, runbook: str
    ) -> bool:
        """The run last started for exactly this failure (every one of ``entries``: a failure seen
        since is a new one) was stopped on purpose: the operator's stop stands, and re-triggering it
        after ``retrigger_after`` would undo it. The same failure starts again only by hand; a new
        failure (the entry forgotten and seen again) starts afresh. Recorded in ``records``."""
        runs = {e.triggered_run_id for e in entries}
        run_id = next(iter(runs)) if len(runs) == 1 else None
        stopped = self.stopped_runs(run_id) if run_id else None
        if stopped is None:
            return False
        records.append(
            self._record(
                "sweep",
                f"do not start another {runbook}",
                f"run {run_id}, started for this same failure, was {stopped}: a run stopped on purpose "
                "is not started again by the sweep for the same failure (start it by hand; a new failure "
                "starts afresh)",
                subject=subject,
                observed={"run_id": run_id, "stopped": stopped},
                level=logging.WARNING,
            )
        )
        return True

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _mark_triggered_where(self, started_for: Callable[[K, T], bool], run_id: str) -> None:
        """Remember ``run_id`` (and now) on every remembered entry the run was started for."""
        now_ms = self._now_ms()
        with self.store.locked():
            known = self.store.load()
            for key, entry in known.items():
                if started_for(key, entry):
                    entry.triggered_ms, entry.triggered_run_id = now_ms, run_id
            self.store.save(known)

    def _record(self, step, decision, reason, level=logging.INFO, **kwargs) -> decisions.DecisionRecord:
        return decisions.record(step, decision, reason, logger=self.log, level=level, **kwargs)


class FailureTracker(SweepTracker[int, FailedBroker]):
    """Update the persisted failures from one read of the cluster and decide what is due."""

    def observe(self, state: ClusterState) -> Assessment:
        """Compare the cluster with the remembered failures; persist; return the decisions.

        Brokers in ``due`` are past the failure threshold, not already given a run within
        ``retrigger_after``, and the cluster is not in an outage. The caller starts the
        reassignment and then calls :meth:`mark_triggered`.
        """
        now_ms = self._now_ms()
        with self.store.locked():
            known = self.store.load()
            now_failed = failed_brokers(state)
            a = Assessment(now_ms=now_ms, brokers=len(state.brokers), failed={})
            self._forget_recovered(a, state, known, now_failed)
            self._track_failed(a, state, known, now_failed)
            self._check_outage(a, now_failed)
            for broker_id, entry in sorted(a.failed.items()):
                self._decide(a, broker_id, entry)
            self.store.save(a.failed)
        return a

    def _forget_recovered(
        self, a: Assessment, state: ClusterState, known: dict[int, FailedBroker], now_failed: list[int]
    ) -> None:
        """A remembered broker that is no longer failed is forgotten: back (a bounce) or reassigned."""
        for broker_id, entry in sorted(known.items()):
            if broker_id in now_failed:
                continue
            a.recovered.append(broker_id)
            gone_s = (a.now_ms - entry.first_seen_ms) / 1000
            back = state.is_available(broker_id)
            a.records.append(
                self._record(
                    "failure tracking",
                    "forget the failure",
                    (
                        f"broker {broker_id} is available again after {gone_s:.0f}s: a bounce, "
                        "not a failure; nothing is started for it"
                        if back
                        else f"broker {broker_id} no longer hosts any replica (reassigned)"
                    ),
                    subject=f"broker {broker_id}",
                    observed={"first_seen_ms": entry.first_seen_ms, "available": back},
                )
            )

    def _track_failed(
        self, a: Assessment, state: ClusterState, known: dict[int, FailedBroker], now_failed: list[int]
    ) -> None:
        """Each failed broker's entry: the remembered one, or a new countdown when it is new or it
        bounced between two sweeps (its controller fetches ran since: the clock starts again)."""
        for broker_id in now_failed:
            entry = known.get(broker_id)
            fetch = metadata_fetch(state, broker_id)
            if entry is not None and fetch is not None and fetch.ran_since(entry):
                a.records.append(self._bounced(broker_id, entry, fetch, a.now_ms))
                a.bounced.append(broker_id)
                entry = None
            if entry is None:
                entry = FailedBroker(broker_id=broker_id, first_seen_ms=a.now_ms)
                if broker_id not in a.bounced:
                    a.records.append(self._countdown(state, broker_id, a.now_ms))
            if fetch is not None:
                entry.quorum_epoch, entry.seen_fetch_ms = fetch.mark.epoch, fetch.mark.fetch_ms
            a.failed[broker_id] = entry

    def _check_outage(self, a: Assessment, now_failed: list[int]) -> None:
        """More than ``max_failed_fraction`` of the brokers failed is an outage: nothing moves."""
        th, total = self.thresholds, a.brokers
        a.outage = total > 0 and len(now_failed) > th.max_failed_fraction * total
        if a.outage:
            a.records.append(
                self._record(
                    "failure tracking",
                    "refuse to move replicas",
                    f"{len(now_failed)} of {total} brokers are failed (more than "
                    f"{th.max_failed_fraction:.0%}): this is an outage, not a broker failure; moving "
                    "replicas would add load to a cluster in trouble. Fix the outage; no reassignment "
                    "is started",
                    subject="cluster",
                    observed={"failed": now_failed, "brokers": total},
                    level=logging.WARNING,
                )
            )

    def _decide(self, a: Assessment, broker_id: int, entry: FailedBroker) -> None:
        """One failed broker: alert when due, then wait, hold back, or add it to ``a.due``."""
        th = self.thresholds
        failed_s = (a.now_ms - entry.first_seen_ms) / 1000
        if th.alert_after_s >= 0 and failed_s >= th.alert_after_s:
            self._alert(a, broker_id, entry, failed_s)
        if not th.automation_on:
            a.records.append(
                self._record(
                    "failure tracking",
                    "do not reassign",
                    "the failure threshold is -1: automatic reassignment is off",
                    subject=f"broker {broker_id}",
                )
            )
            return
        if failed_s < th.failure_threshold_s:
            a.records.append(
                self._record(
                    "failure tracking",
                    "wait",
                    f"broker {broker_id} failed {failed_s:.0f}s ago; reassignment after "
                    f"{th.failure_threshold_s:.0f}s if it does not come back",
                    subject=f"broker {broker_id}",
                )
            )
            return
        if a.outage or self._stopped_on_purpose(a.records, [entry], f"broker {broker_id}", "reassignment"):
            return
        if self._started_recently(a, broker_id, entry):
            return
        a.due.append(broker_id)

    def _alert(self, a: Assessment, broker_id: int, entry: FailedBroker, failed_s: float) -> None:
        """Failed past the alert threshold: alerted in every sweep (the first time remembered)."""
        a.alerts.append(broker_id)
        if entry.alerted_ms is None:
            entry.alerted_ms = a.now_ms
            a.new_alerts.append(broker_id)
        a.records.append(
            self._record(
                "failure tracking",
                "alert",
                f"broker {broker_id} failed {failed_s:.0f}s ago (alert after {self.thresholds.alert_after_s:.0f}s)",
                subject=f"broker {broker_id}",
                observed={"first_seen_ms": entry.first_seen_ms},
                level=logging.WARNING,
            )
        )

    def _started_recently(self, a: Assessment, broker_id: int, entry: FailedBroker) -> bool:
        """A run was started for it within ``retrigger_after``: no second one yet (recorded)."""
        retrigger_s = self.thresholds.retrigger_s
        if entry.triggered_ms is None or a.now_ms - entry.triggered_ms >= retrigger_s * 1000:
            return False
        a.records.append(
            self._record(
                "failure tracking",
                "do not start another reassignment",
                f"one was started for broker {broker_id} "
                f"{(a.now_ms - entry.triggered_ms) / 1000:.0f}s ago (run {entry.triggered_run_id}); "
                f"the next may start {retrigger_s:.0f}s after it",
                subject=f"broker {broker_id}",
            )
        )
        return True

    def _countdown(self, state: ClusterState, broker_id: int, now_ms: int) -> decisions.DecisionRecord:
        broker = state.brokers.get(broker_id)
        rack = f" (rack {broker.rack})" if broker and broker.rack else " (rack unknown)"
        how = (
            "registered and fenced (a killed broker stays registered, its rack known)"
            if broker and broker.alive
            else "not registered"
        )
        return self._record(
            "failure tracking",
            "start the countdown",
            f"broker {broker_id}{rack} hosts {len(state.hosted_by(broker_id))} replica(s) but is {how}",
            subject=f"broker {broker_id}",
            observed={
                "first_seen_ms": now_ms,
                "failure_threshold_s": self.thresholds.failure_threshold_s,
                "rack": broker.rack if broker else None,
            },
        )

    def _bounced(
        self, broker_id: int, entry: FailedBroker, fetch: MetadataFetch, now_ms: int
    ) -> decisions.DecisionRecord:
        failed_s = (now_ms - entry.first_seen_ms) / 1000
        if fetch.running_now:
            reason = (
                f"broker {broker_id} is fenced but its process runs (it fetched cluster metadata "
                f"{fetch.fetch_ms_ago / 1000:.0f}s ago): starting, recovering "
                "its logs or stuck, not dead; the countdown starts again while it runs"
            )
        else:
            reason = (
                f"broker {broker_id} fetched cluster metadata at {fetch.mark.fetch_ms} (controller clock), after "
                f"the last sweep: it ran between two sweeps (a bounce) and failed again; its {failed_s:.0f}s "
                "failed are forgotten and the countdown starts again"
            )
        return self._record(
            "failure tracking",
            "restart the countdown",
            reason,
            subject=f"broker {broker_id}",
            observed={
                "first_seen_ms_was": entry.first_seen_ms,
                "first_seen_ms": now_ms,
                "last_fetch_ms_was": entry.seen_fetch_ms,
                "last_fetch_ms": fetch.mark.fetch_ms,
                "quorum_epoch_was": entry.quorum_epoch,
                "quorum_epoch": fetch.quorum_epoch,
            },
            level=logging.WARNING if fetch.running_now else logging.INFO,
        )

    def mark_triggered(self, broker_ids: list[int], run_id: str) -> None:
        """Remember that a reassignment run was started for these brokers."""
        self._mark_triggered_where(lambda broker_id, _: broker_id in broker_ids, run_id)
