"""Tests of spark_jobs/cluster_health.py on synthetic snapshots.

Most tests call the pure DataFrame functions on a shared local session; the whole job through
spark-submit, as production does, is tests/spark/test_jobs_on_s3a.py's (on the object store,
compared with a run of the same job here).
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

JOB_PATH = Path(__file__).resolve().parents[2] / "spark_jobs" / "cluster_health.py"
FLAGS = ("offline", "under_replicated", "under_min_isr", "at_min_isr", "min_isr_unknown")


def _load_job():
    """Import the job by path: spark_jobs/ is shipped as loose files, not an installed package."""
    spec = importlib.util.spec_from_file_location("spark_jobs_cluster_health", JOB_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


job = _load_job()


def part(topic, partition, replicas, isr, leader, min_isr=2, **extra):
    return {
        "topic": topic,
        "partition": partition,
        "replicas": replicas,
        "isr": isr,
        "leader": leader,
        "min_isr": min_isr,
        **extra,
    }


def analyse(spark, snapshot: Path, max_listed: int = 1000):
    """(report, {(topic, partition): row dict}) computed with the job's own functions."""
    replicas, brokers, meta = job.load_snapshot(spark, str(snapshot))
    partitions = job.partition_health(replicas, brokers).cache()
    report = job.build_report(
        partitions, job.broker_load(replicas, brokers), max_listed=max_listed, meta=meta
    )
    rows = {(r["topic"], r["partition"]): r.asDict() for r in partitions.collect()}
    partitions.unpersist()
    return report, rows


def flagged(rows, flag):
    return {key for key, row in rows.items() if row[flag]}


def listed(report, flag):
    return [(entry["topic"], entry["partition"]) for entry in report[flag]]


def brokers_by_id(report):
    return {b["broker_id"]: b for b in report["brokers"]}


def rotated(n_brokers, rf, p):
    """Round-robin assignment of partition p over brokers 1..n_brokers, preferred leader first."""
    return [(p + i) % n_brokers + 1 for i in range(rf)]


def test_healthy_cluster(spark, make_snapshot):
    brokers = [{"id": i, "rack": f"rack-{i}"} for i in (1, 2, 3, 4)]  # 4: alive, hosts nothing
    parts = [part("orders", p, rotated(3, 3, p), rotated(3, 3, p), rotated(3, 3, p)[0]) for p in range(6)]
    parts += [part("audit", p, [p + 1], [p + 1], p + 1, min_isr=1) for p in range(3)]
    report, rows = analyse(spark, make_snapshot(brokers, parts))

    assert report["partitions"] == 9
    assert report["counts"] == dict.fromkeys(FLAGS, 0)
    assert report["truncated"] == dict.fromkeys(FLAGS, False)
    for flag in FLAGS:
        assert report[flag] == []
    assert report["cluster_id"] == make_snapshot.cluster_id
    assert report["taken_at_ms"] == make_snapshot.taken_at_ms
    assert all(row["leader_alive"] and not any(row[f] for f in FLAGS) for row in rows.values())
    # Assignment order survives the shuffle (rows are written in reverse order).
    assert rows[("orders", 1)]["replicas"] == [2, 3, 1]
    assert rows[("orders", 1)]["isr"] == [2, 3, 1]
    assert rows[("orders", 1)]["leader"] == 2

    sizes = {b: 0 for b in (1, 2, 3)}
    for p in parts:
        for b in p["replicas"]:
            sizes[b] += make_snapshot.replica_size(p["partition"], b)
    expected = {
        b: {
            "broker_id": b,
            "host": f"broker-{b}.test",
            "port": 9092,
            "rack": f"rack-{b}",
            "alive": True,
            "fenced": False,
            "replica_count": 6 + 1,  # every orders partition has all 3 brokers, plus 1 audit partition
            "leader_count": 2 + 1,  # 6 orders leaders round-robin, plus its audit partition
            "preferred_leader_count": 2 + 1,  # first in the replica list: the same partitions here
            "size_bytes": sizes[b],
        }
        for b in (1, 2, 3)
    }
    expected[4] = {**expected[1], "broker_id": 4, "host": "broker-4.test", "rack": "rack-4"}
    expected[4].update(replica_count=0, leader_count=0, preferred_leader_count=0, size_bytes=0)  # idle: 0
    assert report["brokers"] == [expected[b] for b in (1, 2, 3, 4)]
    # the minimum is min(3, 4 live brokers); audit's factor is 1
    assert report["replication"] == {
        "minimum": 3,
        "minimum_from": "min(3, live brokers)",
        "live_brokers": 4,
        "topics": 2,
        "below_minimum": 1,
        "listed": [{"topic": "audit", "replication_factor": 1, "partitions": 3}],
        "truncated": False,
    }


def test_preferred_leaders_apart_from_leaders_and_topics_below_the_minimum(spark, make_snapshot):
    """Preferred leaders are the first replicas (what leadership converges to), counted apart from
    where leadership is now; the minimum replication factor is the live brokers when fewer than 3,
    or the run's setting, and a topic's factor is its smallest partition's (lowest listed first)."""
    brokers = [1, 2, {"id": 3, "alive": False}]
    parts = [part("a", p, [1, 2], [1, 2], 2) for p in range(3)]  # preferred 1, leading 2
    parts += [part("b", 0, [2], [2], 2, min_isr=1), part("c", 0, [1], [1], 1, min_isr=1)]
    parts += [part("c", 1, [1, 2], [1, 2], 1)]
    replicas, broker_df, meta = job.load_snapshot(spark, str(make_snapshot(brokers, parts)))
    partitions = job.partition_health(replicas, broker_df).cache()  # two reports read it
    load = job.broker_load(replicas, broker_df).cache()
    report = job.build_report(partitions, load, meta=meta, max_listed=1)
    by_id = brokers_by_id(report)
    assert {b: (by_id[b]["leader_count"], by_id[b]["preferred_leader_count"]) for b in (1, 2)} == {
        1: (2, 5),
        2: (4, 1),
    }
    rf = report["replication"]
    assert (rf["minimum"], rf["minimum_from"], rf["live_brokers"]) == (2, "min(3, live brokers)", 2)
    assert (rf["below_minimum"], rf["truncated"]) == (2, True)
    assert rf["listed"] == [{"topic": "b", "replication_factor": 1, "partitions": 1}]
    set_to_3 = job.build_report(partitions, load, meta=meta, min_replication_factor=3)["replication"]
    assert (set_to_3["minimum"], set_to_3["minimum_from"], set_to_3["below_minimum"]) == (3, "setting", 3)
    assert [t["topic"] for t in set_to_3["listed"]] == ["b", "c", "a"]
    partitions.unpersist()
    load.unpersist()


def test_leadership_now_is_judged_from_the_jobs_counts_by_the_rebalances_one_rule(spark, make_snapshot):
    """Every broker holds every partition (replicas balanced), each broker first in 10 replica lists
    (preferred leaders balanced); leaders now 6 / 10 / 14 of 30. The job
    counts; ``kafka_runbooks.health`` judges with kafka_rebalance's max_leader_spread (one rule for
    both leader kinds, no threshold of the job's own), and nothing is proposed for it."""
    from kafka_runbooks.health import BALANCED, OUT_OF_SPREAD, judge_balance

    brokers = [{"id": i, "rack": f"rack-{i}"} for i in (1, 2, 3)]
    leaders = [1] * 6 + [2] * 10 + [3] * 14
    order = ([1, 2, 3], [2, 3, 1], [3, 1, 2])
    parts = [part("orders", p, order[p % 3], [1, 2, 3], leaders[p]) for p in range(30)]
    report, _ = analyse(spark, make_snapshot(brokers, parts))
    assert "imbalance" not in report
    assert {b["broker_id"]: b["leader_count"] for b in report["brokers"]} == {1: 6, 2: 10, 3: 14}
    targets = {"max_replica_spread": "2", "max_leader_spread": "2", "max_bytes_spread_percent": "20"}
    judged = judge_balance(report, targets)
    assert (judged.leaders.state, judged.leaders.spread, judged.leaders.limit) == (OUT_OF_SPREAD, 8, 2)
    assert {k.state for k in judged.kinds} == {BALANCED} and judged.out_of_spread() == []
    assert judge_balance(report, {**targets, "max_leader_spread": "8"}).leaders.state == BALANCED


def test_bytes_per_broker_are_judged_with_the_planners_rule_and_a_missing_size_is_unknown(
    spark, make_snapshot
):
    """The broker table's bytes are the sum of each broker's replica sizes (the planner's figure);
    judged by ``kafka_runbooks.health`` with ``bytes_spread_limit`` / ``within_bytes_spread``, a
    topic of one big replica on broker 1 puts the bytes out of the 20 % target while replicas and
    preferred leaders stay within theirs. One replica whose size its log dir did not report makes
    that broker's bytes null (not the partial sum) and the bytes unknown, named."""
    from pyspark.sql import functions as F

    from kafka_runbooks.balance_rules import bytes_spread_limit
    from kafka_runbooks.health import BALANCED, OUT_OF_SPREAD, UNKNOWN, judge_balance
    from kafka_runbooks.rebalance import DEFAULT_BYTES_SPREAD_PERCENT

    targets = {"max_replica_spread": "2", "max_leader_spread": "2", "max_bytes_spread_percent": "20"}
    assert targets["max_bytes_spread_percent"] == DEFAULT_BYTES_SPREAD_PERCENT
    parts = [part("orders", p, rotated(3, 3, p), rotated(3, 3, p), rotated(3, 3, p)[0]) for p in range(6)]
    parts.append(part("big", 9, [1], [1], 1, min_isr=1))  # 10,001 bytes on broker 1 alone
    replicas, brokers, meta = job.load_snapshot(spark, str(make_snapshot([1, 2, 3], parts)))
    health = job.partition_health(replicas, brokers)
    report = job.build_report(health, job.broker_load(replicas, brokers), meta=meta)
    sizes = {b["broker_id"]: b["size_bytes"] for b in report["brokers"]}
    assert sizes == {
        b: sum(1000 * (p + 1) + b for p in range(6)) + (10001 if b == 1 else 0) for b in (1, 2, 3)
    }
    judged = judge_balance(report, targets)
    assert [k.state for k in judged.kinds] == [BALANCED, BALANCED]
    assert judged.bytes.limit == bytes_spread_limit("20", sizes, [1, 2, 3])
    assert (judged.bytes.state, judged.bytes.spread, judged.state) == (
        OUT_OF_SPREAD,
        sizes[1] - sizes[2],
        OUT_OF_SPREAD,
    )

    unsized = (F.col("topic") == "orders") & (F.col("partition") == 0) & (F.col("replica") == 2)
    replicas = replicas.withColumn("size_bytes", F.when(unsized, F.lit(None)).otherwise(F.col("size_bytes")))
    report = job.build_report(health, job.broker_load(replicas, brokers), meta=meta)
    assert {b["broker_id"]: b["size_bytes"] for b in report["brokers"]} == {**sizes, 2: None}
    judged = judge_balance(report, targets)
    assert (judged.bytes.state, judged.bytes.limit, judged.bytes.spread) == (UNKNOWN, None, None)
    assert judged.bytes.unknown == {2: "no size_bytes in the report"} and judged.bytes.per_broker[2] is None
    assert judged.state == UNKNOWN  # nothing else out: never "balanced" on a size nobody read


def test_one_dead_broker(spark, make_snapshot):
    brokers = [1, 2, {"id": 3, "alive": False}]
    parts = []
    for p in range(6):  # RF 3 / min ISR 2: losing broker 3 leaves exactly min ISR
        replicas = rotated(3, 3, p)
        alive = [b for b in replicas if b != 3]
        parts.append(part("orders", p, replicas, alive, alive[0]))
    for p in range(3):  # RF 2 / min ISR 2: losing broker 3 drops below min ISR
        replicas = rotated(3, 2, p)
        alive = [b for b in replicas if b != 3]
        parts.append(part("payments", p, replicas, alive, alive[0]))
    report, rows = analyse(spark, make_snapshot(brokers, parts))

    orders = {("orders", p) for p in range(6)}
    payments_hit = {("payments", p) for p in range(3) if 3 in rotated(3, 2, p)}
    assert payments_hit == {("payments", 1), ("payments", 2)}
    assert flagged(rows, "offline") == set()
    assert flagged(rows, "under_replicated") == orders | payments_hit
    assert flagged(rows, "at_min_isr") == orders
    assert flagged(rows, "under_min_isr") == payments_hit
    assert report["counts"] == {
        "offline": 0,
        "under_replicated": 8,
        "under_min_isr": 2,
        "at_min_isr": 6,
        "min_isr_unknown": 0,
    }
    assert listed(report, "at_min_isr") == sorted(orders)
    assert listed(report, "under_min_isr") == [("payments", 1), ("payments", 2)]
    assert report["at_min_isr"][1] == {
        "topic": "orders",
        "partition": 1,
        "leader": 2,
        "replicas": [2, 3, 1],
        "isr": [2, 1],
        "replication_factor": 3,
        "min_insync_replicas": 2,
    }

    by_id = brokers_by_id(report)
    assert by_id[3]["alive"] is False
    assert by_id[3]["replica_count"] == 6 + 2
    assert by_id[3]["leader_count"] == 0
    assert by_id[3]["size_bytes"] is None  # dead: unknown, not zero
    assert by_id[1]["alive"] is True and by_id[2]["alive"] is True
    assert by_id[1]["leader_count"] + by_id[2]["leader_count"] == 9
    assert by_id[1]["replica_count"] == 6 + 2


def test_offline_partitions_get_no_other_flag(spark, make_snapshot):
    brokers = [1, {"id": 2, "alive": False}, {"id": 3, "alive": False}, {"id": 4, "fenced": True}]
    parts = [
        # Leaderless with a stale 2-member ISR: ungated, it would be under-replicated and at min ISR.
        part("dead", 0, [2, 3, 5], [2, 3], -1),
        # Leaderless, last ISR member kept (KRaft), ELR set: ungated, under min ISR too.
        part("dead", 1, [2, 3], [3], -1, elr=[2]),
        # Stale metadata: a leader id whose broker is dead still means offline.
        part("dead", 2, [2, 3, 1], [2, 3, 1], 2),
        # Leader id unknown to brokers.parquet (5 is only in assignments, dead replica row).
        part("dead", 3, [5, 1], [5, 1], 5, min_isr=1),
        # Fenced leader.
        part("dead", 4, [4, 1], [4, 1], 4, min_isr=1),
        part("live", 0, [1], [1], 1, min_isr=1),
    ]
    report, rows = analyse(spark, make_snapshot(brokers, parts))

    offline = {("dead", p) for p in range(5)}
    assert flagged(rows, "offline") == offline
    for flag in ("under_replicated", "under_min_isr", "at_min_isr"):
        assert flagged(rows, flag) == set(), flag
    assert report["counts"] == {
        "offline": 5,
        "under_replicated": 0,
        "under_min_isr": 0,
        "at_min_isr": 0,
        "min_isr_unknown": 0,
    }
    assert listed(report, "offline") == sorted(offline)
    assert report["offline"][0] == {
        "topic": "dead",
        "partition": 0,
        "leader": -1,
        "replicas": [2, 3, 5],
        "isr": [2, 3],
        "replication_factor": 3,
        "min_insync_replicas": 2,
    }
    assert rows[("dead", 1)]["elr"] == [2]
    assert rows[("live", 0)]["leader_alive"] is True
    assert not any(rows[("live", 0)][f] for f in FLAGS)


def test_leader_alive_isr_below_min(spark, make_snapshot):
    parts = [
        part("t", 0, [1, 2, 3], [1], 1),  # RF 3, min 2, ISR 1
        part("t", 1, [2, 3, 1], [2, 3], 2, min_isr=3),  # RF 3, min 3, ISR 2
        part("t", 2, [3, 1, 2], [3, 1, 2], 3),  # healthy
    ]
    report, rows = analyse(spark, make_snapshot([1, 2, 3], parts))

    assert flagged(rows, "under_min_isr") == {("t", 0), ("t", 1)}
    assert flagged(rows, "under_replicated") == {("t", 0), ("t", 1)}
    assert flagged(rows, "at_min_isr") == set()
    assert flagged(rows, "offline") == set()
    assert report["counts"] == {
        "offline": 0,
        "under_replicated": 2,
        "under_min_isr": 2,
        "at_min_isr": 0,
        "min_isr_unknown": 0,
    }
    assert report["under_min_isr"][0]["isr"] == [1]


def test_an_unread_min_isr_is_counted_as_unknown_never_as_within(spark, make_snapshot):
    """A topic whose min.insync.replicas DescribeConfigs did not answer: neither under nor at min
    ISR can be judged, and the report says how many partitions that leaves out (it used to read
    them as fine: 0 under min ISR)."""
    parts = [
        part("unread", 0, [1, 2, 3], [1], 1, min_isr=None),  # would be under min ISR at 2
        part("unread", 1, [2, 3, 1], [2, 3, 1], 2, min_isr=None),
        part("unread", 2, [3, 1, 2], [3, 1, 2], 4, min_isr=None),  # offline: counted there only
        part("read", 0, [1, 2, 3], [1], 1),
    ]
    report, rows = analyse(spark, make_snapshot([1, 2, 3], parts))

    assert flagged(rows, "min_isr_unknown") == {("unread", 0), ("unread", 1)}
    assert flagged(rows, "under_min_isr") == {("read", 0)}
    assert report["counts"] == {
        "offline": 1,
        "under_replicated": 2,
        "under_min_isr": 1,
        "at_min_isr": 0,
        "min_isr_unknown": 2,
    }
    assert listed(report, "min_isr_unknown") == [("unread", 0), ("unread", 1)]
    assert report["min_isr_unknown"][0]["min_insync_replicas"] is None


def test_rf_equal_to_min_isr_is_not_at_min(spark, make_snapshot):
    parts = [
        part("strict2", 0, [1, 2], [1, 2], 1, min_isr=2),  # RF == min == ISR
        part("strict3", 0, [1, 2, 3], [1, 2, 3], 1, min_isr=3),
        part("single", 0, [1], [1], 1, min_isr=1),
        part("normal", 0, [1, 2, 3], [1, 2], 1, min_isr=2),  # contrast: RF > min, ISR == min
        part("pair", 0, [1, 2], [1], 1, min_isr=1),
    ]
    report, rows = analyse(spark, make_snapshot([1, 2, 3], parts))

    assert flagged(rows, "at_min_isr") == {("normal", 0), ("pair", 0)}
    assert flagged(rows, "under_replicated") == {("normal", 0), ("pair", 0)}
    assert flagged(rows, "under_min_isr") == set()
    assert listed(report, "at_min_isr") == [("normal", 0), ("pair", 0)]


def test_lists_are_capped_and_sorted(spark, make_snapshot):
    # 15 under-replicated (and at-min) partitions; partition numbers >= 10 catch a string sort.
    parts = [part("b", p, [1, 2, 3], [1, 2], 1) for p in range(3)]
    parts += [part("a", p, [1, 2, 3], [1, 2], 1) for p in range(12)]
    parts.append(part("c", 0, [1, 2, 3], [1, 2, 3], 1))
    snapshot = make_snapshot([1, 2, 3], parts)
    everything = [("a", p) for p in range(12)] + [("b", p) for p in range(3)]

    report, _ = analyse(spark, snapshot, max_listed=5)
    assert report["max_listed"] == 5
    assert report["counts"]["under_replicated"] == 15  # counts are never capped
    assert listed(report, "under_replicated") == [("a", 0), ("a", 1), ("a", 2), ("a", 3), ("a", 4)]
    assert listed(report, "at_min_isr") == everything[:5]
    assert report["truncated"] == {
        "offline": False,
        "under_replicated": True,
        "under_min_isr": False,
        "at_min_isr": True,
        "min_isr_unknown": False,
    }

    report, _ = analyse(spark, snapshot, max_listed=15)  # exactly the count: not truncated
    assert listed(report, "under_replicated") == everything
    assert report["truncated"]["under_replicated"] is False

    report, _ = analyse(spark, snapshot, max_listed=0)
    assert report["under_replicated"] == []
    assert report["truncated"]["under_replicated"] is True
    assert report["truncated"]["offline"] is False


def test_taken_at_falls_back_to_data_without_meta(spark, make_snapshot):
    snapshot = make_snapshot([1], [part("t", 0, [1], [1], 1, min_isr=1)], write_meta=False)
    report, _ = analyse(spark, snapshot)
    assert report["cluster_id"] is None
    assert report["taken_at_ms"] == make_snapshot.taken_at_ms


def test_job_imports_only_pyspark_and_stdlib():
    """The job ships as one file: any other import would break it on a bare Spark cluster. The one
    exception is the Spark Connect client side (``_client_path``): it runs in the runbooks' own
    worker, never on a cluster, and reaches the data store through kafka_runbooks."""
    tree = ast.parse(JOB_PATH.read_text())
    client = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_client_path"]
    inside = {id(n) for f in client for n in ast.walk(f)}
    roots: set[str] = set()
    client_roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = {node.module.split(".")[0]}
        else:
            continue
        (client_roots if id(node) in inside else roots).update(names)
    assert roots - set(sys.stdlib_module_names) - {"__future__"} == {"pyspark"}
    assert client_roots == {"kafka_runbooks"}


@pytest.mark.parametrize(
    "bad", [["--snapshot", "x"], ["--snapshot", "x", "--output", "y", "--max-listed", "-1"]]
)
def test_cli_rejects_bad_arguments(bad):
    with pytest.raises(SystemExit) as excinfo:
        job.parse_args(bad)
    assert excinfo.value.code == 2
