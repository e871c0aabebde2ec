"""The per-cluster lease: one disruptive runbook per cluster, never two winners, never stuck.

The races run real processes against one folder, started at once by a barrier: the
local store's create and compare-and-swap must let exactly one of them win. A store that
checks then writes (the obvious mistake) is raced the same way and lets two win, so the
race test can fail.
"""

from __future__ import annotations

import json
import multiprocessing
import time
from pathlib import Path

import pytest

from kafka_runbooks.lease import (
    HOLDER_ACTIVE,
    HOLDER_FINISHED,
    HOLDER_UNKNOWN,
    ClusterLease,
    Holder,
    LeaseHeld,
    LeaseLost,
    LeaseRecord,
)
from kafka_runbooks.storage import Records, Store


def FileLeaseStore(directory: Path) -> Records:  # noqa: N802 - reads like the store it builds
    """The data store's lease records on a local folder (what a deployment without S3 uses)."""
    return Records(Store(str(directory)), "leases")


RESTART = Holder("kafka_broker_restart", "manual__1")
REASSIGN = Holder("kafka_failed_broker_reassignment", "manual__2")
UNCLEAN = Holder("kafka_unclean_recovery", "manual__3")


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def lease(store, holder, cluster="kafka_a", clock=None, state=None, ttl=600):
    return ClusterLease(
        store,
        cluster,
        holder,
        ttl_s=ttl,
        clock=clock or Clock(),
        holder_state=state or (lambda h: HOLDER_ACTIVE),
    )


def test_different_runbooks_on_one_cluster_exclude_each_other(tmp_path):
    store = FileLeaseStore(tmp_path)
    first = lease(store, REASSIGN).acquire()
    assert first.acquired and first.how == "new"
    for other in (RESTART, UNCLEAN):
        outcome = lease(store, other).acquire()
        assert not outcome.acquired and outcome.how == "held"
        assert outcome.record.holder == REASSIGN
    with pytest.raises(LeaseHeld, match="kafka_failed_broker_reassignment run manual__2 since"):
        lease(store, RESTART).acquire_or_raise()


def test_other_clusters_are_free(tmp_path):
    store = FileLeaseStore(tmp_path)
    assert lease(store, REASSIGN, cluster="kafka_a").acquire().acquired
    assert lease(store, RESTART, cluster="kafka_b").acquire().acquired
    assert {p.name for p in (tmp_path / "leases").glob("*.json")} == {"kafka_a.json", "kafka_b.json"}


def test_the_same_run_gets_it_again_and_keeps_since(tmp_path):
    clock = Clock()
    store = FileLeaseStore(tmp_path)
    first = lease(store, RESTART, clock=clock).acquire()
    clock.now += 100
    again = lease(store, RESTART, clock=clock).acquire()  # a cleared or retried task
    assert again.acquired and again.how == "already ours"
    assert again.record.since == first.record.since and again.record.token == first.record.token
    assert again.record.expires_at == clock.now + 600


def test_release_frees_it_and_only_the_holder_can(tmp_path):
    store = FileLeaseStore(tmp_path)
    lease(store, RESTART).acquire()
    assert lease(store, REASSIGN).release() is False  # not its lease: left alone
    assert not lease(store, REASSIGN).acquire().acquired
    assert lease(store, RESTART).release() is True
    assert lease(store, REASSIGN).acquire().acquired


def test_a_finished_holders_lease_is_taken_over_with_a_decision(tmp_path, caplog):
    store = FileLeaseStore(tmp_path)
    lease(store, RESTART).acquire()
    outcome = lease(
        store, REASSIGN, state=lambda h: HOLDER_FINISHED if h == RESTART else HOLDER_ACTIVE
    ).acquire()
    assert outcome.acquired and outcome.how == "taken over" and outcome.previous.holder == RESTART
    assert "take over a stale lease" in caplog.text and "kafka_broker_restart run manual__1" in caplog.text
    # the old holder, if it ever wakes up, finds it lost and must not act
    with pytest.raises(LeaseLost, match="kafka_failed_broker_reassignment run manual__2 holds it"):
        lease(store, RESTART).renew()


def test_an_expired_lease_is_taken_over_even_when_the_run_looks_alive(tmp_path):
    clock = Clock()
    store = FileLeaseStore(tmp_path)
    lease(store, RESTART, clock=clock, ttl=60).acquire()
    clock.now += 59
    assert not lease(store, REASSIGN, clock=clock, state=lambda h: HOLDER_UNKNOWN).acquire().acquired
    clock.now += 1
    outcome = lease(store, REASSIGN, clock=clock, state=lambda h: HOLDER_ACTIVE).acquire()
    assert outcome.acquired and "expired" in lease(store, REASSIGN, clock=clock).stale_reason(
        outcome.previous
    )


def test_renewal_keeps_it_and_hold_for_covers_the_gate(tmp_path):
    clock = Clock()
    store = FileLeaseStore(tmp_path)
    mine = lease(store, RESTART, clock=clock, ttl=60)
    mine.acquire(hold_for_s=3600)  # before the approval gate: held for as long as the gate waits
    clock.now += 3000
    assert not lease(store, REASSIGN, clock=clock).acquire().acquired
    renewed = mine.renew()
    assert renewed.expires_at == clock.now + 60
    clock.now += 61
    assert lease(store, REASSIGN, clock=clock).acquire().acquired


def test_an_unreadable_lease_is_an_error_naming_the_file(tmp_path):
    store = FileLeaseStore(tmp_path)
    (tmp_path / "leases").mkdir()
    (tmp_path / "leases" / "kafka_a.json").write_text("{half")
    with pytest.raises(ValueError, match="unreadable"):
        lease(store, RESTART).acquire()


def test_the_record_says_who_and_since(tmp_path):
    store = FileLeaseStore(tmp_path)
    lease(store, RESTART, cluster="prod/eu").acquire()
    raw = json.loads(next((tmp_path / "leases").glob("*.json")).read_text())
    assert raw["dag_id"] == "kafka_broker_restart" and raw["run_id"] == "manual__1"
    assert raw["cluster"] == "prod/eu" and raw["since"] <= raw["renewed_at"] < raw["expires_at"]
    assert LeaseRecord.from_json(json.dumps(raw)).holder == RESTART


# ------------------------------------------------------------------ races between processes


class CheckThenWriteStore:
    """The mistake the real store avoids: look, then write, with a gap in between."""

    def __init__(self, directory: Path) -> None:
        self.real = FileLeaseStore(directory)
        self.read, self.swap = self.real.read, self.real.swap

    def create(self, key: str, text: str) -> bool:
        if self.read(key) is not None:
            return False
        time.sleep(0.2)
        self.real.store.write_text(self.real.key(key), text)
        return True


def _race(directory, store_cls, index, barrier, expired_holder, results) -> None:
    store = store_cls(Path(directory))
    holder = Holder("kafka_broker_restart" if index % 2 else "kafka_unclean_recovery", f"run_{index}")
    contender = lease(
        store, holder, state=lambda h: HOLDER_FINISHED if h == expired_holder else HOLDER_ACTIVE
    )
    barrier.wait()
    results.put(contender.acquire().acquired)


def _run_race(directory: Path, store_cls, contenders: int, expired_holder=None) -> list[bool]:
    """``contenders`` processes (forked, so they share nothing but the folder) acquire at once."""
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(contenders)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_race, args=(str(directory), store_cls, i, barrier, expired_holder, results))
        for i in range(contenders)
    ]
    for proc in procs:
        proc.start()
    outcomes = [results.get(timeout=60) for _ in procs]
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0
    return outcomes


def test_racing_processes_for_a_free_lease_one_wins(tmp_path):
    for round_ in range(10):
        results = _run_race(tmp_path / f"r{round_}", FileLeaseStore, 4)
        assert results.count(True) == 1, results


def test_racing_processes_for_a_stale_lease_one_takes_it_over(tmp_path):
    for round_ in range(10):
        folder = tmp_path / f"r{round_}"
        lease(FileLeaseStore(folder), REASSIGN).acquire()
        results = _run_race(folder, FileLeaseStore, 4, expired_holder=REASSIGN)
        assert results.count(True) == 1, results
        assert LeaseRecord.from_json(FileLeaseStore(folder).read("kafka_a")).holder != REASSIGN


def test_the_race_test_catches_a_check_then_write_store(tmp_path):
    results = _run_race(tmp_path, CheckThenWriteStore, 4)
    assert results.count(True) > 1, results
