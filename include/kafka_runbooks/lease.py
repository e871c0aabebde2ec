"""One disruptive runbook per cluster at a time: a lease per cluster, kept in the state store.

A broker restart, an unclean recovery and a failed-broker reassignment each change which
replicas are in sync, who leads, or where data lives; two of them on the same cluster at
once can break availability that each one checked on its own (Cruise Control's executor
and Strimzi's reconciler serialise such work per cluster for the same reason). Runs on
different clusters never touch each other.

The lease is a small JSON record per cluster (the connection id):
``state/leases/<cluster>.json`` in the data store, naming its holder (dag_id,
run_id), when it was taken (``since``) and until when it holds (``expires_at``). Three
ways out, so a crashed worker never keeps a cluster locked for good:

- the holder releases it (the run's teardown task, whatever happened to the run);
- the holder's run is finished (the Airflow adapter reads its state): a new run takes
  it over, with a DECISION record naming the old holder;
- nobody renewed it before ``expires_at`` (the holder renews at every step and before
  its approval gate for as long as the gate may wait): a new run takes it over, with a
  DECISION record. The holder checks the lease before every disruptive step and stops
  if it lost it, so a taken-over holder never acts again.

Storage goes through :class:`LeaseStore` (create-if-absent and compare-and-swap, the two
operations an object store offers as conditional writes), so two runs racing for a free
lease can never both win. ``kafka_runbooks.storage.Records(store(), "state/leases")`` is
the store of the configured data location (a local path: link + flock; S3: If-None-Match
and If-Match).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from kafka_runbooks import decisions
from kafka_runbooks.errors import BadInput, RunbookFailed, SafetyRefusal

log = logging.getLogger("kafka_runbooks.lease")

LEASE_VERSION = 1
DEFAULT_TTL_S = 15 * 60
# what the Airflow adapter reports about the holder's run
HOLDER_ACTIVE = "active"
HOLDER_FINISHED = "finished"
HOLDER_UNKNOWN = "unknown"


class LeaseStore(Protocol):
    """Where lease records live. Each method is atomic on its own."""

    def create(self, key: str, text: str) -> bool:
        """Write ``text`` under ``key`` only if nothing is there; False if something is."""

    def read(self, key: str) -> str | None:
        """The text under ``key``, or None."""

    def swap(self, key: str, expected: str, text: str | None) -> bool:
        """Replace (or delete, ``text=None``) only if the current text is ``expected``."""


@dataclass(frozen=True)
class Holder:
    """Who holds (or wants) a lease: one run of one runbook."""

    dag_id: str
    run_id: str

    def __str__(self) -> str:
        return f"{self.dag_id}/{self.run_id}"


@dataclass(frozen=True)
class LeaseRecord:
    cluster: str
    dag_id: str
    run_id: str
    since: float  # epoch seconds the holder took it
    renewed_at: float
    expires_at: float
    token: str  # new at every take-over: tells two holders of the same run apart
    version: int = LEASE_VERSION

    @property
    def holder(self) -> Holder:
        """The run holding the lease (dag id and run id)."""
        return Holder(self.dag_id, self.run_id)

    def to_json(self) -> str:
        """The record as stored (sorted keys, so the text a compare-and-set expects is stable)."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> LeaseRecord:
        """Read a stored record; fields it does not know are ignored."""
        raw = json.loads(text)
        return cls(**{k: raw[k] for k in cls.__dataclass_fields__ if k in raw})

    def describe(self) -> dict[str, Any]:
        """Who holds it and since when, for messages and decision records."""
        return {
            "cluster": self.cluster,
            "dag_id": self.dag_id,
            "run_id": self.run_id,
            "since": _iso(self.since),
            "expires_at": _iso(self.expires_at),
        }


class LeaseHeld(SafetyRefusal):
    """Another run holds the cluster's lease; ``record`` says who, since when."""

    def __init__(self, record: LeaseRecord) -> None:
        d = record.describe()
        super().__init__(
            f"cluster {d['cluster']} is held by {d['dag_id']} run {d['run_id']} since {d['since']} "
            f"(lease valid until {d['expires_at']} unless renewed)"
        )
        self.record = record


class LeaseLost(SafetyRefusal):
    """This run does not hold the cluster's lease (any more): it must not act."""


@dataclass(frozen=True)
class Outcome:
    """What ``acquire`` found and did."""

    acquired: bool
    record: LeaseRecord  # ours when acquired, else the holder's
    how: str  # "new", "already ours", "taken over", "held"
    previous: LeaseRecord | None = None


class ClusterLease:
    """The lease of one cluster, for one holder.

    :param holder_state: tells ``HOLDER_ACTIVE``, ``HOLDER_FINISHED`` or ``HOLDER_UNKNOWN``
        for another holder's run (the Airflow adapter asks Airflow); None: always unknown,
        so only expiry frees a lease.
    """

    def __init__(
        self,
        store: LeaseStore,
        cluster: str,
        holder: Holder,
        *,
        ttl_s: float = DEFAULT_TTL_S,
        holder_state: Callable[[Holder], str] | None = None,
        clock: Callable[[], float] = time.time,
        logger: logging.Logger | None = None,
    ) -> None:
        if not cluster:
            raise BadInput("a lease needs the cluster's name (its connection id)")
        if ttl_s <= 0:
            raise BadInput(f"the lease TTL must be above zero, not {ttl_s}")
        self.store = store
        self.cluster = cluster
        self.holder = holder
        self.ttl_s = float(ttl_s)
        self.holder_state = holder_state or (lambda _h: HOLDER_UNKNOWN)
        self.clock = clock
        self.log = logger or log

    # ------------------------------------------------------------------ reading

    def current(self) -> tuple[LeaseRecord | None, str | None]:
        """The record and the exact text it was read from (for a compare-and-swap)."""
        text = self.store.read(self.cluster)
        if text is None:
            return None, None
        try:
            return LeaseRecord.from_json(text), text
        except (ValueError, KeyError, TypeError) as exc:
            raise BadInput(
                f"the lease of cluster {self.cluster} is unreadable ({exc}); see the production guide "
                "on releasing a stuck lease by hand"
            ) from exc

    def stale_reason(self, record: LeaseRecord) -> str | None:
        """Why another holder's lease may be taken over, or None while it holds."""
        state = self.holder_state(record.holder)
        if state == HOLDER_FINISHED:
            return f"its run {record.holder} is finished (the run's teardown did not release it)"
        now = self.clock()
        if now >= record.expires_at:
            return (
                f"it expired at {_iso(record.expires_at)} ({now - record.expires_at:.0f}s ago): "
                f"its holder stopped renewing it (run state: {state})"
            )
        return None

    # ------------------------------------------------------------------ taking it

    def acquire(self, hold_for_s: float | None = None) -> Outcome:
        """Take the lease if it is free, ours, or stale; else report who holds it.

        Never raises for a held lease (the caller decides to wait or fail); a lost race is
        read again, so the answer is always about the record that is there now.
        """
        for _ in range(10):
            record, text = self.current()
            now = self.clock()
            if record is None:
                mine = self._record(now, now, hold_for_s, token=uuid.uuid4().hex)
                if self.store.create(self.cluster, mine.to_json()):
                    self._decide("take the lease", "no runbook holds this cluster", mine)
                    return Outcome(True, mine, "new")
                continue  # someone was faster: read what they wrote
            if record.holder == self.holder:  # a retried or cleared task of the same run
                mine = self._record(record.since, now, hold_for_s, token=record.token)
                if self.store.swap(self.cluster, text, mine.to_json()):
                    return Outcome(True, mine, "already ours", record)
                continue
            reason = self.stale_reason(record)
            if reason is None:
                return Outcome(False, record, "held")
            mine = self._record(now, now, hold_for_s, token=uuid.uuid4().hex)
            if self.store.swap(self.cluster, text, mine.to_json()):
                self._decide(
                    "take over a stale lease",
                    f"{record.dag_id} run {record.run_id} held it since {_iso(record.since)}; {reason}",
                    mine,
                    previous=record,
                    level=logging.WARNING,
                )
                return Outcome(True, mine, "taken over", record)
        raise SafetyRefusal(f"the lease of cluster {self.cluster} changed 10 times while reading it")

    def acquire_or_raise(self, hold_for_s: float | None = None) -> Outcome:
        """Take the cluster's lease or raise LeaseHeld naming the run that holds it."""
        outcome = self.acquire(hold_for_s)
        if not outcome.acquired:
            raise LeaseHeld(outcome.record)
        return outcome

    def renew(self, hold_for_s: float | None = None) -> LeaseRecord:
        """Push the expiry out (``hold_for_s``, default the TTL); LeaseLost unless ours.

        Called before every disruptive step: it is also the check that this run still
        holds the cluster.
        """
        for _ in range(10):
            record, text = self.current()
            if record is None or record.holder != self.holder:
                self._lost(record)
            now = self.clock()
            mine = self._record(record.since, now, hold_for_s, token=record.token)
            if self.store.swap(self.cluster, text, mine.to_json()):
                return mine
        raise SafetyRefusal(f"the lease of cluster {self.cluster} changed 10 times while renewing it")

    def release(self) -> bool:
        """Give the lease back if ours; True when released, False when it was not ours."""
        for _ in range(10):
            record, text = self.current()
            if record is None or record.holder != self.holder:
                decisions.record(
                    "lease",
                    "nothing to release",
                    "this run does not hold the lease of this cluster"
                    + (f" ({record.dag_id} run {record.run_id} does)" if record else " (nobody does)"),
                    subject=f"cluster {self.cluster}",
                    observed={"holder": record.describe() if record else None},
                    logger=self.log,
                )
                return False
            if self.store.swap(self.cluster, text, None):
                decisions.record(
                    "lease",
                    "release the lease",
                    f"{self.holder} is done with cluster {self.cluster}",
                    subject=f"cluster {self.cluster}",
                    observed={"held": record.describe()},
                    logger=self.log,
                )
                return True
        raise SafetyRefusal(f"the lease of cluster {self.cluster} changed 10 times while releasing it")

    # ------------------------------------------------------------------ helpers

    def _record(self, since: float, now: float, hold_for_s: float | None, token: str) -> LeaseRecord:
        hold = self.ttl_s if hold_for_s is None else max(float(hold_for_s), self.ttl_s)
        return LeaseRecord(
            cluster=self.cluster,
            dag_id=self.holder.dag_id,
            run_id=self.holder.run_id,
            since=since,
            renewed_at=now,
            expires_at=now + hold,
            token=token,
        )

    def _lost(self, record: LeaseRecord | None) -> None:
        who = (
            f"{record.dag_id} run {record.run_id} holds it since {_iso(record.since)}"
            if record
            else "nobody holds it"
        )
        reason = f"{self.holder} does not hold the lease of cluster {self.cluster}: {who}"
        decisions.record(
            "lease",
            "stop: lease lost",
            reason + "; nothing more is done on the cluster by this run",
            subject=f"cluster {self.cluster}",
            observed={"holder": record.describe() if record else None},
            logger=self.log,
            level=logging.ERROR,
        )
        raise LeaseLost(reason)

    def _decide(
        self,
        decision: str,
        reason: str,
        mine: LeaseRecord,
        previous: LeaseRecord | None = None,
        level: int = logging.INFO,
    ) -> None:
        decisions.record(
            "lease",
            decision,
            reason,
            subject=f"cluster {self.cluster}",
            observed={"lease": mine.describe(), "previous": previous.describe() if previous else None},
            logger=self.log,
            level=level,
        )


def _iso(epoch_s: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch_s))


class LeaseQueue:
    """The runs that asked for a cluster's lease, before they wait for it (one record per cluster).

    The lease names its holder only; a run still waiting for it is invisible there. A sweep
    deciding whether a runbook is already on its way for a cluster (say, a manual
    reassignment waiting behind a restart) reads this queue. Entries are added with
    compare-and-set (runs register concurrently) and dropped after ``keep_s``; whether an
    entry's run still goes on is Airflow's to say, not this record's.
    """

    def __init__(self, store: LeaseStore, keep_s: float = 7 * 24 * 3600, clock=time.time) -> None:
        self.store = store
        self.keep_s = keep_s
        self.clock = clock

    def _entries(self, text: str | None) -> list[dict[str, Any]]:
        try:
            return list(json.loads(text)["runs"]) if text else []
        except (ValueError, KeyError, TypeError):
            return []  # unreadable: rewritten by the next registration

    def register(self, cluster: str, holder: Holder) -> None:
        """Add ``holder`` to ``cluster``'s queue (idempotent), dropping entries older than ``keep_s``."""
        for _ in range(50):
            now = self.clock()
            text = self.store.read(cluster)
            runs = [
                e
                for e in self._entries(text)
                if now - float(e.get("at", 0)) < self.keep_s
                and (e.get("dag_id"), e.get("run_id")) != (holder.dag_id, holder.run_id)
            ]
            runs.append({"dag_id": holder.dag_id, "run_id": holder.run_id, "at": now})
            new = json.dumps({"cluster": cluster, "runs": runs})
            if text is None and self.store.create(cluster, new):
                return
            if text is not None and self.store.swap(cluster, text, new):
                return
        raise RunbookFailed(
            f"could not register {holder} in the lease queue of {cluster}: too much contention"
        )

    def runs(self, cluster: str, dag_id: str) -> list[str]:
        """Run ids of ``dag_id`` that asked for ``cluster``'s lease within ``keep_s``."""
        now = self.clock()
        return [
            str(e["run_id"])
            for e in self._entries(self.store.read(cluster))
            if e.get("dag_id") == dag_id and now - float(e.get("at", 0)) < self.keep_s
        ]
