"""The planner's ``--rebalance`` (kafka_rebalance) on the shared in-process Spark session.

add-brokers moves replicas only onto the new brokers, full evens out every live broker; both
reach the target spread with the lower bound's number of moves where racks and disks allow,
keep racks, prefer small partitions, and say why and how close when the target is out of
reach. The independent ``check_plan`` agrees with every plan, and catches a plan that breaks
a shared rule.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import random
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from kafka_runbooks.balance_rules import distinct_racks
from kafka_runbooks.failed_broker.plan import PlanImpossible, check_plan, load_plan, read_snapshot_rows
from kafka_runbooks.failed_broker.report import plan_markdown

JOB_PATH = Path(__file__).resolve().parents[2] / "spark_jobs" / "failed_broker_plan.py"


def _load_job():
    spec = importlib.util.spec_from_file_location("spark_jobs_failed_broker_plan_rebalance", JOB_PATH)
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


def on_three(partitions: int = 24) -> list[dict]:
    """RF 3 partitions on brokers 1-3 only, preferred leaders round the three."""
    return [part("t", p, [(p + i) % 3 + 1 for i in range(3)]) for p in range(partitions)]


def plan_of(spark, snapshot, out, *args: str):
    code = job.run(spark, ["--snapshot", str(snapshot), "--out", str(out), *args])
    if code != 0:
        raise PlanImpossible(json.loads((out / "error.json").read_text())["error"])
    return load_plan(out)


def after(parts: list[dict], plan) -> dict[tuple[str, int], list[int]]:
    done = {(p["topic"], p["partition"]): list(p["replicas"]) for p in parts}
    done |= {t.key: list(t.replicas) for t in plan.partitions}
    done |= {(m["topic"], m["partition"]): m["to"] for m in plan.summary["leader_moves"]}
    return done


def test_add_brokers_moves_replicas_only_onto_the_new_broker_within_the_spread(
    spark, make_snapshot, tmp_path
):
    parts = on_three()
    snapshot = make_snapshot([1, 2, 3, 4], parts)
    plan = plan_of(
        spark, snapshot, tmp_path / "plan", "--rebalance", "add-brokers", "--new-brokers", "4",
        "--max-replica-spread", "1", "--max-leader-spread", "1",
    )  # fmt: skip
    assert check_plan(plan, *read_snapshot_rows(snapshot)) == []
    s = plan.summary
    assert s["reached"] and s["receivers"] == [4] and s["sources"] == [1, 2, 3]
    for t in plan.partitions:  # one replica each, from an old broker onto broker 4
        old = next(p["replicas"] for p in parts if p["partition"] == t.partition)
        assert set(t.replicas) - set(old) == {4} and len(set(old) - set(t.replicas)) == 1
    replicas = Counter(b for r in after(parts, plan).values() for b in r)
    leaders = Counter(r[0] for r in after(parts, plan).values())
    assert max(replicas.values()) - min(replicas.values()) <= 1 and replicas[4] == 18
    assert max(leaders.values()) - min(leaders.values()) <= 1 and leaders[4] == 6
    # as few moves as the target allows: the lower bound (72 replicas over 4 brokers: 18 onto broker 4)
    assert s["replica_moves"] == s["spread"]["replicas"]["lower_bound_moves"] == 18
    assert s["leader_changes"] == s["spread"]["leaders"]["lower_bound_moves"] == 6
    gate = plan_markdown(s, 10 << 20, "plan", True)  # the proposal as the operator reads it at the gate
    assert "**18** replica move(s), **6** leader move(s)" in gate and "The plan reaches the target." in gate
    assert "| replicas | 24 | 0 | 1 (`1`) | 18 | 18 |" in gate  # spread before, after, target, moves, bound
    assert "| **4** (new) | - | 0 → 18 | 0 → 6 |" in gate


def test_full_rebalance_evens_a_skewed_cluster_keeping_racks_and_moving_small_partitions(
    spark, make_snapshot, tmp_path
):
    rack = {1: "a", 2: "b", 3: "c", 4: "a", 5: "b", 6: "c"}
    parts = [part("skew", p, [1, 2, 3]) for p in range(12)] + [part("even", p, [4, 5, 6]) for p in range(3)]
    snapshot = make_snapshot([{"id": b, "rack": rack[b]} for b in rack], parts)
    plan = plan_of(spark, snapshot, tmp_path / "plan", "--rebalance", "full", "--max-replica-spread", "1")
    assert check_plan(plan, *read_snapshot_rows(snapshot)) == []
    done = after(parts, plan)
    assert all(distinct_racks(rack, r) == 3 for r in done.values())  # never two replicas on one rack
    replicas = Counter(b for r in done.values() for b in r)
    assert max(replicas.values()) - min(replicas.values()) <= 1
    moved = {t.partition for t in plan.partitions}
    assert moved and max(moved) < 11  # replica_size grows with the partition: the small ones moved
    assert plan.summary["replica_moves"] == plan.summary["spread"]["replicas"]["lower_bound_moves"]


def test_a_target_the_racks_forbid_says_why_and_how_close(spark, make_snapshot, tmp_path):
    # the new broker shares rack a with broker 1: every partition already spans a, b, c, so no
    # replica of b or c may go to it, and only broker 1's may
    rack = {1: "a", 2: "b", 3: "c", 4: "a"}
    snapshot = make_snapshot([{"id": b, "rack": rack[b]} for b in rack], on_three(12))
    plan = plan_of(
        spark, snapshot, tmp_path / "plan", "--rebalance", "add-brokers", "--new-brokers", "4",
        "--max-replica-spread", "1",
    )  # fmt: skip
    assert check_plan(plan, *read_snapshot_rows(snapshot)) == []
    s = plan.summary
    assert not s["reached"] and "rack rule" in s["why_not"]
    assert s["spread"]["replicas"]["after"] < s["spread"]["replicas"]["before"]  # as close as it gets
    assert s["replica_moves"] == 6 < s["spread"]["replicas"]["lower_bound_moves"] == 9


def test_refusals_and_the_disk_room(spark, make_snapshot, tmp_path):
    snapshot = make_snapshot([1, 2, 3, {"id": 4, "alive": False}, 5], on_three(6))
    with pytest.raises(PlanImpossible, match="needs --new-brokers"):
        plan_of(spark, snapshot, tmp_path / "a", "--rebalance", "add-brokers")
    with pytest.raises(PlanImpossible, match=r"new broker\(s\) \[4\] are not live"):
        plan_of(spark, snapshot, tmp_path / "b", "--rebalance", "add-brokers", "--new-brokers", "4")
    # broker 5 may take 2 partitions' worth (sizes 1001.. 6005): the smallest first, then no room
    plan = plan_of(
        spark, snapshot, tmp_path / "c", "--rebalance", "add-brokers", "--new-brokers", "5",
        "--max-replica-spread", "0", "--room", "1=0,2=0,3=0,5=3100",
    )  # fmt: skip
    assert check_plan(plan, *read_snapshot_rows(snapshot)) == []
    assert {t.partition for t in plan.partitions} == {0, 1}
    assert not plan.summary["reached"] and "disk room" in plan.summary["why_not"]
    with pytest.raises(PlanImpossible, match="no move brings the cluster closer"):
        plan_of(
            spark, snapshot, tmp_path / "d", "--rebalance", "add-brokers", "--new-brokers", "5",
            "--max-replica-spread", "0", "--max-leader-spread", "6", "--room", "1=0,2=0,3=0",
        )  # fmt: skip


def test_check_plan_catches_a_rebalance_that_breaks_a_shared_rule(spark, make_snapshot, tmp_path):
    rack = {1: "a", 2: "b", 3: "c", 4: "a"}
    snapshot = make_snapshot([{"id": b, "rack": rack[b]} for b in rack], on_three(12))
    out = tmp_path / "plan"
    plan = plan_of(spark, snapshot, out, "--rebalance", "add-brokers", "--new-brokers", "4")
    first = plan.partitions[0]
    old = next(p["replicas"] for p in on_three(12) if p["partition"] == first.partition)
    broken = [4 if b == 3 else b for b in old]  # rack c left for broker 4's rack a: three racks become two
    for name in ["plan.json", plan.summary["chunks"][0]["file"]]:
        content = json.loads((out / name).read_text())
        content["partitions"][0]["replicas"] = broken
        (out / name).write_text(json.dumps(content))
    summary = json.loads((out / "summary.json").read_text())
    summary["moves"][0]["to"] = broken
    (out / "summary.json").write_text(json.dumps(summary))
    violations = check_plan(load_plan(out), *read_snapshot_rows(snapshot))
    assert any("spans fewer racks" in v for v in violations), violations


def test_leaderships_reach_the_target_along_a_chain_with_two_replicas_per_partition(
    spark, make_snapshot, tmp_path
):
    # seen on the real stack: racks a/b/a/b, RF 2 on brokers 1-3; broker 1's leader replicas cannot
    # go to broker 4 (rack b twice) and its partitions' other replica leads 3: a direct handover
    # stalls at spread 2; 1 hands one to 2 and 2 one of its own to 3 (a chain) reaches 1
    rack = {1: "a", 2: "b", 3: "a", 4: "b"}
    parts = [part("rf2", p, [[1, 2], [2, 3], [3, 1]][p % 3]) for p in range(12)]
    snapshot = make_snapshot([{"id": b, "rack": rack[b]} for b in rack], parts)
    plan = plan_of(
        spark, snapshot, tmp_path / "plan", "--rebalance", "add-brokers", "--new-brokers", "4",
        "--max-replica-spread", "1", "--max-leader-spread", "1",
    )  # fmt: skip
    assert check_plan(plan, *read_snapshot_rows(snapshot)) == []
    assert plan.summary["reached"], plan.summary["why_not"]
    leaders = Counter(r[0] for r in after(parts, plan).values())
    assert max(leaders.values()) - min(leaders.values()) <= 1 and set(leaders) == {1, 2, 3, 4}


class CountingBrokers(dict):
    """The planner's broker table, counting every lookup of a broker (work, not time)."""

    lookups = 0

    def __getitem__(self, broker_id):
        self.lookups += 1
        return super().__getitem__(broker_id)


def test_the_planner_work_per_move_does_not_grow_with_the_brokers():
    # issue #27's scale (a million partitions on 1000 brokers in under a minute) needs each move to
    # cost the same on 1000 brokers as on 10: the planner sorted every broker for each replica move
    # and each leadership handover (~2000 broker lookups per move here, ~300,000 moves there)
    rng = random.Random(3)
    brokers = CountingBrokers({b: job.BrokerInfo(b, f"r{(b - 1) % 20}", True, True) for b in range(1, 1001)})
    affected = []
    for p in range(3000):  # RF 3 in three racks, on the first 900 brokers only: a skewed cluster
        replicas = tuple(r + 1 + 20 * rng.randrange(45) for r in rng.sample(range(20), 3))
        affected.append(job.Affected("t", p, replicas, (p + 1,) * 3, (True,) * 3, (True,) * 3, p + 1))
        for i, b in enumerate(replicas):
            info = dict.__getitem__(brokers, b)
            info.replicas, info.bytes, info.leaders = (
                info.replicas + 1,
                info.bytes + p + 1,
                info.leaders + (i == 0),
            )
    moves, _, figures = job.rebalance(job.Inputs(brokers, affected), "full", None, ("2", "2"), None)
    assert (
        figures["reached"]
        and figures["spread"]["replicas"]["after"] <= 2 >= figures["spread"]["leaders"]["after"]
    )
    work = figures["replica_moves"] + figures["leader_changes"]
    assert work > 1000 and 0 < len(moves) <= figures["replica_moves"]
    assert brokers.lookups < 50 * work, brokers.lookups / work


class CountingTargets(dict):
    """A plan's targets, counting every partition read (work, not time)."""

    reads = 0

    def __getitem__(self, key):
        self.reads += 1
        return super().__getitem__(key)


def test_the_leader_pass_reads_a_partition_once_not_once_per_handover():
    # a million-partition full plan hands ~43,000 leaderships over from the broker leading the
    # most; each handover re-read from the start the partitions that broker leads whose followers
    # lead as many as it (hundreds): most of the leader pass. Skewed preferred leaders on 40
    # brokers; the same handovers must come out, reading each partition about once
    rng = random.Random(5)
    brokers = {b: job.BrokerInfo(b, f"r{(b - 1) % 10}", True, True) for b in range(1, 41)}
    parts = {}
    for p in range(20000):
        first = rng.choices(range(1, 41), [1 + 2 * (b - 1) / 39 for b in range(1, 41)])[0]
        replicas = (first, *rng.sample([b for b in range(1, 41) if b != first], 2))
        parts[("t", p)] = job.Affected("t", p, replicas, (1,) * 3, (True,) * 3, (True,) * 3, 1)
        for i, b in enumerate(replicas):
            brokers[b].replicas, brokers[b].leaders = brokers[b].replicas + 1, brokers[b].leaders + (i == 0)
    scope = sorted(brokers)
    bal = job.Balance(brokers, scope, scope, scope, {b: i.rack for b, i in brokers.items()}, None, parts)
    bal.target = CountingTargets({k: list(p.replicas) for k, p in parts.items()})
    assert job.balance_leaders_within(bal, 2) is None
    leaders = bal.leaders()
    assert max(leaders.values()) - min(leaders.values()) <= 2
    changes = sum(1 for k, t in bal.target.items() if t[0] != parts[k].replicas[0])
    assert changes > 2000 and all(sorted(t) == sorted(parts[k].replicas) for k, t in bal.target.items())
    # one read per partition to list who leads what, a few per handover
    assert bal.target.reads - len(parts) < 10 * changes, (bal.target.reads - len(parts)) / changes


def test_the_cycle_collector_stays_off_while_a_rebalance_loads_and_plans(
    spark, make_snapshot, tmp_path, monkeypatch
):
    # a million partitions are millions of objects, none in a cycle: each automatic collection
    # walks them (a third of a 200,000-partition plan's time); collections are made frequent
    # here, and none may run from loading the snapshot to the written plan
    snapshot = make_snapshot([1, 2, 3, 4], on_three(60))
    collections = []
    planned = job.run_rebalance

    def counted(*args):
        gc.callbacks.append(
            lambda phase, info: collections.append(info["generation"]) if phase == "start" else None
        )
        try:
            return planned(*args)
        finally:
            gc.callbacks.pop()

    monkeypatch.setattr(job, "run_rebalance", counted)
    threshold = gc.get_threshold()
    gc.set_threshold(50, 2, 2)
    try:
        plan = plan_of(spark, snapshot, tmp_path / "plan", "--rebalance", "add-brokers", "--new-brokers", "4")
    finally:
        gc.set_threshold(*threshold)
    assert plan.summary["replica_moves"] > 0
    assert collections == [] and gc.isenabled()


def test_a_plan_into_a_local_folder_is_written_by_the_driver_not_through_hadoops_local_file_system(
    spark, make_snapshot, tmp_path, monkeypatch
):
    # Hadoop's local file system forks chmod for every file it creates (~6 ms each here): a
    # million-partition rebalance writes ~6000 chunk files. A local folder is the driver's own
    # disk, so the driver writes there itself, each file whole or not at all
    through_hadoop = []
    hadoop_write = job._HADOOP_FILES["write_text"]
    monkeypatch.setitem(
        job._HADOOP_FILES, "write_text", lambda *args: through_hadoop.append(args[1]) or hadoop_write(*args)
    )
    snapshot = make_snapshot([1, 2, 3, 4], on_three(24))
    out = tmp_path / "plan"
    plan = plan_of(
        spark,
        snapshot,
        out,
        "--rebalance",
        "add-brokers",
        "--new-brokers",
        "4",
        "--max-partitions-per-chunk",
        "1",
    )
    assert len(plan.summary["chunks"]) == plan.summary["partitions"] >= 6 and len(plan.chunks) >= 6
    assert through_hadoop == []
    assert not [p for p in out.rglob("*") if p.name.startswith(".")]  # no temporary file left


def test_a_large_plan_is_written_compact_and_a_small_one_indented(spark, make_snapshot, tmp_path):
    # Python's indenting JSON encoder is its pure-Python one: ~3 s of a million-partition
    # rebalance's summary and plan; past LARGE_JSON_ITEMS partitions nobody reads them by eye
    large = plan_of(
        spark, make_snapshot([1, 2, 3, 4], on_three(1400)), tmp_path / "large",
        "--rebalance", "add-brokers", "--new-brokers", "4", "--max-partitions-per-chunk", "2000",
        "--max-replica-spread", "1",
    )  # fmt: skip
    assert large.summary["partitions"] > job.LARGE_JSON_ITEMS
    for name in ("summary.json", "plan.json", large.summary["chunks"][0]["file"]):
        assert (tmp_path / "large" / name).read_text().count("\n") == 1, name
    small = plan_of(
        spark, make_snapshot([1, 2, 3, 4], on_three(24)), tmp_path / "small", "--rebalance", "full"
    )
    assert (tmp_path / "small" / "summary.json").read_text().startswith('{\n "failed_brokers"')
    assert len(small.partitions) > 0


def _bytes_after(plan) -> dict[int, int]:
    return {int(b): v["bytes_after"] for b, v in plan.summary["per_broker"].items()}


def test_full_rebalance_brings_a_cluster_skewed_by_bytes_within_the_bytes_spread_by_swaps(
    spark, make_snapshot, tmp_path
):
    # ten partitions a broker (replicas even), but broker 1 holds the ten smallest and broker 4 the
    # ten largest: 55 kB against 355 kB (replica_size grows with the partition)
    parts = [part("t", p, [p // 10 + 1]) for p in range(40)]
    snapshot = make_snapshot([1, 2, 3, 4], parts)
    plan = plan_of(
        spark, snapshot, tmp_path / "plan", "--rebalance", "full", "--max-replica-spread", "1",
        "--max-bytes-spread-percent", "20",
    )  # fmt: skip
    assert check_plan(plan, *read_snapshot_rows(snapshot)) == []
    s = plan.summary
    b = s["spread"]["bytes"]
    # 20 % of the mean 205,025 bytes (replica_size adds the broker id): 41,005
    assert b["target"] == "20" and b["limit"] == 41_005 and b["before"] == 300_030 and b["unknown"] == []
    after_bytes = _bytes_after(plan)
    assert b["after"] == max(after_bytes.values()) - min(after_bytes.values()) <= 41_005
    assert s["reached"] and s["why_not"] is None
    replicas = Counter(b for r in after(parts, plan).values() for b in r)
    assert set(replicas.values()) == {10}  # swapped: the replica counts stay even
    gate = plan_markdown(s, 10 << 20, "plan", True)
    assert "| bytes | 293.0 KiB | 27.3 KiB | 40.0 KiB (`20%`) |" in gate


def test_add_brokers_gives_the_new_broker_data_not_only_the_smallest_partitions(
    spark, make_snapshot, tmp_path
):
    parts = [part("t", p, [p % 3 + 1]) for p in range(36)]
    snapshot = make_snapshot([1, 2, 3, 4], parts)
    args = ["--rebalance", "add-brokers", "--new-brokers", "4", "--max-replica-spread", "1"]
    counts_only = plan_of(spark, snapshot, tmp_path / "counts", *args)
    plan = plan_of(spark, snapshot, tmp_path / "plan", *args, "--max-bytes-spread-percent", "20")
    assert check_plan(plan, *read_snapshot_rows(snapshot)) == []
    s = plan.summary
    assert s["reached"] and s["spread"]["bytes"]["after"] <= s["spread"]["bytes"]["limit"]
    mean = sum(_bytes_after(plan).values()) / 4
    assert _bytes_after(counts_only)[4] < 0.3 * mean  # replicas only: the smallest nine, little data
    assert _bytes_after(plan)[4] > 0.8 * mean  # with the bytes target: its share of the data
    assert all(set(t.replicas) - {4} == set() for t in plan.partitions)  # still only onto broker 4
    replicas = Counter(b for r in after(parts, plan).values() for b in r)
    assert max(replicas.values()) - min(replicas.values()) <= 1


def test_unknown_bytes_leave_the_bytes_target_unjudged_and_the_plan_says_so(spark, make_snapshot, tmp_path):
    import pyarrow.parquet as pq

    parts = [part("t", p, [p // 10 + 1]) for p in range(40)] + [part("u", p, [4]) for p in range(4)]
    snapshot = make_snapshot([1, 2, 3, 4], parts)
    table = pq.read_table(snapshot / "replicas.parquet").to_pylist()
    for row in table:  # broker 2's log dirs did not answer DescribeLogDirs: no size for its replicas
        if row["replica"] == 2:
            row["size_bytes"] = row["log_dir"] = None
    schema = pq.read_schema(snapshot / "replicas.parquet")
    pq.write_table(pa.Table.from_pylist(table, schema=schema), snapshot / "replicas.parquet")
    plan = plan_of(
        spark, snapshot, tmp_path / "plan", "--rebalance", "full", "--max-replica-spread", "1",
        "--max-leader-spread", "1", "--max-bytes-spread-percent", "20",
    )  # fmt: skip
    assert check_plan(plan, *read_snapshot_rows(snapshot)) == []
    s = plan.summary
    b = s["spread"]["bytes"]
    assert b["unknown"] == [2] and b["before"] is None and b["after"] is None and b["limit"] is None
    assert not s["reached"] and "unknown for broker(s) [2]" in s["why_not"]
    # the replicas are evened (broker 4's four extra), nothing is moved for bytes it cannot see
    assert s["replica_moves"] == s["spread"]["replicas"]["lower_bound_moves"] == 3
    assert "| bytes (broker(s) 2: size unknown) | unknown | unknown |" in plan_markdown(
        s, 10 << 20, "plan", True
    )
    evened = [p for p in parts if p["topic"] == "t"]  # the same with the replicas even: nothing to do but
    snapshot = make_snapshot([1, 2, 3, 4], evened)  # the bytes, which it cannot see: refused before the gate
    table = [
        dict(r, size_bytes=None) if r["replica"] == 2 else r
        for r in pq.read_table(snapshot / "replicas.parquet").to_pylist()
    ]
    pq.write_table(pa.Table.from_pylist(table, schema=schema), snapshot / "replicas.parquet")
    with pytest.raises(PlanImpossible, match=r"unknown for broker\(s\) \[2\]"):
        plan_of(
            spark, snapshot, tmp_path / "evened", "--rebalance", "full", "--max-bytes-spread-percent", "20"
        )
