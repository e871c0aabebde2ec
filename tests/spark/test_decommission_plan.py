"""The planner's ``--drain`` (kafka_broker_decommission) on the shared in-process Spark session.

A drained broker is live: its replicas are the copy source (a partition held only by it still
moves), every one of its replicas moves exactly once, the racks and the preferred-leader
balance of the rest are kept, and the independent ``check_plan`` agrees.
"""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path

from kafka_runbooks.failed_broker.plan import PlanImpossible, check_plan, load_plan, read_snapshot_rows

JOB_PATH = Path(__file__).resolve().parents[2] / "spark_jobs" / "failed_broker_plan.py"
RACK = {1: "a", 2: "b", 3: "c", 4: "a", 5: "b", 6: "c"}
DRAINED = 4


def _load_job():
    spec = importlib.util.spec_from_file_location("spark_jobs_failed_broker_plan_drain", JOB_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


job = _load_job()


def part(topic: str, partition: int, replicas: list[int]) -> dict:
    return {
        "topic": topic,
        "partition": partition,
        "replicas": replicas,
        "isr": replicas,
        "leader": replicas[0],
    }


def cluster() -> list[dict]:
    """Six live brokers in three racks; RF 3 and RF 2 spread round the ring; one RF 1 partition on 4 only."""
    parts = [part("rf3", p, [(p + i) % 6 + 1 for i in range(3)]) for p in range(36)]
    parts += [part("rf2", p, [(p + i) % 6 + 1 for i in range(2)]) for p in range(12)]
    parts.append(part("rf1", 0, [DRAINED]))
    return parts


def racks(replicas) -> int:
    return len({RACK[b] for b in replicas})


def test_a_drain_moves_exactly_the_live_brokers_replicas_keeping_racks_and_leaders(
    spark, make_snapshot, tmp_path
):
    parts = cluster()
    snapshot = make_snapshot([{"id": b, "rack": RACK[b]} for b in RACK], parts)
    out = tmp_path / "plan"
    code = job.run(
        spark, ["--snapshot", str(snapshot), "--out", str(out), "--failed", str(DRAINED), "--drain"]
    )
    assert code == 0, (out / "error.json").read_text() if (out / "error.json").exists() else code
    plan = load_plan(out)
    assert plan.summary["drain"] is True and plan.summary["not_moved_count"] == 0
    assert check_plan(plan, *read_snapshot_rows(snapshot)) == []

    current = {(p["topic"], p["partition"]): p["replicas"] for p in parts}
    on_drained = {k for k, r in current.items() if DRAINED in r}
    # exactly the drained broker's partitions, the RF 1 one held by it alone included
    assert {t.key for t in plan.partitions} == on_drained and ("rf1", 0) in on_drained
    for t in plan.partitions:
        old = current[t.key]
        assert set(old) - set(t.replicas) == {DRAINED}, t  # only the drained replica leaves
        assert len(set(t.replicas) - set(old)) == 1 and len(t.replicas) == len(old), t  # moved once, RF kept
        assert racks(t.replicas) >= racks(old), t  # the rack spread kept

    after = dict(current) | {t.key: list(t.replicas) for t in plan.partitions}
    assert not any(DRAINED in r for r in after.values())
    # leadership: only what the drained broker led moves (no other partition's first replica
    # changes), each to the target replica with the fewest preferred leaderships (within 1)
    leaders = Counter(r[0] for r in after.values())
    assert leaders[DRAINED] == 0 and sum(leaders.values()) == len(current)
    for t in plan.partitions:
        old = current[t.key]
        if old[0] != DRAINED:
            assert t.replicas[0] == old[0], t
        else:
            assert all(leaders[t.replicas[0]] - leaders[b] <= 1 for b in t.replicas), (t, leaders)
    # racks force the receiver of an RF 3 replica here (broker 1, the only other rack-a broker); the
    # receivers' balance where racks leave a choice is check_plan's ReceiverBalance rule, which held
    assert plan.summary["moved_per_receiver"]["1"] == sum(1 for k in on_drained if k[0] == "rf3")


def test_a_drain_of_a_broker_that_is_not_live_is_refused(spark, make_snapshot, tmp_path):
    """The heal's case: a dead broker is not drained (its replicas are no copy source)."""
    parts = cluster()
    brokers = [{"id": b, "rack": RACK[b], "alive": b != DRAINED} for b in RACK]
    snapshot = make_snapshot(brokers, parts)
    out = tmp_path / "plan"
    code = job.run(
        spark, ["--snapshot", str(snapshot), "--out", str(out), "--failed", str(DRAINED), "--drain"]
    )
    assert code == job.EXIT_IMPOSSIBLE
    try:
        load_plan(out)
    except PlanImpossible as exc:
        assert "to drain are not live and registered" in str(exc)
    else:
        raise AssertionError("a plan was written for a dead broker's drain")
