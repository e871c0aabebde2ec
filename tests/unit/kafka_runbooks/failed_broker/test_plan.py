"""kafka_runbooks.failed_broker.plan: loading the planner's files and the independent rule checker.

The plan here is written by hand (figures worked out below), so the checker is tested against
known-good and deliberately broken plans without Spark.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kafka_runbooks.failed_broker.plan import (
    PartitionTarget,
    PlanImpossible,
    check_plan,
    load_plan,
    read_snapshot_rows,
)
from kafka_runbooks.snapshot import schemas

# Broker 5 is dead (rack unknown, as a real snapshot shows it); racks a/b alternate on 1-4.
RACKS = {1: "a", 2: "b", 3: "a", 4: "b"}
# (topic, partition) -> [(replica, size_bytes)] in assignment order; None: not reported.
ASSIGNMENTS = {
    ("t", 0): [(5, None), (1, 100), (2, 90)],  # size 100
    ("t", 1): [(1, 200), (5, None), (4, 200)],  # size 200
    ("t", 2): [(2, 300), (3, 290), (5, None)],  # size 300
    ("t", 3): [(4, 50), (1, 50)],  # untouched
    ("t", 4): [(5, None)],  # offline for good: nothing to copy from, never planned
}
GOOD_TARGETS = {("t", 0): [3, 1, 2], ("t", 1): [1, 2, 4], ("t", 2): [2, 3, 1]}
SIZES = {("t", 0): 100, ("t", 1): 200, ("t", 2): 300}
# Reported bytes, with the partition size where a replica reported none (broker 5: 100+200+300+0).
PER_BROKER = {
    1: (3, 4, 350, 650),  # replicas before/after, bytes before/after: gains t-2 (300)
    2: (2, 3, 390, 590),  # gains t-1 (200)
    3: (1, 2, 290, 390),  # gains t-0 (100)
    4: (2, 2, 250, 250),
    5: (4, 1, 600, 0),  # keeps the offline t-4 (size 0)
}


def replica_rows(extra_brokers: dict[int, str | None] | None = None) -> list[dict]:
    racks = {**RACKS, **(extra_brokers or {})}
    rows = []
    for (topic, partition), replicas in ASSIGNMENTS.items():
        for index, (b, size) in enumerate(replicas):
            rows.append(
                {
                    "topic": topic,
                    "partition": partition,
                    "replica": b,
                    "replica_index": index,
                    "in_isr": b != 5,
                    "broker_alive": b != 5,
                    "broker_rack": racks.get(b),
                    "size_bytes": size,
                }
            )
    rows.reverse()  # the checker must not rely on row order
    return rows


def broker_rows(extra: dict[int, str | None] | None = None) -> list[dict]:
    rows = [{"broker_id": b, "rack": r, "alive": True, "fenced": False} for b, r in RACKS.items()]
    rows += [{"broker_id": b, "rack": r, "alive": True, "fenced": False} for b, r in (extra or {}).items()]
    rows.append({"broker_id": 5, "rack": None, "alive": False, "fenced": False})
    return rows


def leaders_of(broker: int, targets: dict) -> int:
    """Preferred leaderships (first replicas) of ``broker`` once ``targets`` replace the assignments."""
    firsts = {k: [b for b, _ in v][0] for k, v in ASSIGNMENTS.items()}
    firsts.update({k: v[0] for k, v in targets.items()})
    return sum(1 for b in firsts.values() if b == broker)


def write_plan(
    out: Path,
    targets: dict,
    chunks: list[list[tuple[str, int]]],
    *,
    receivers=(1, 2, 3, 4),
    per_broker=PER_BROKER,
    max_partitions: int = 2,
    max_bytes: int = 1000,
) -> Path:
    """A plan folder in the planner's format; summary figures from the arguments."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "chunks").mkdir(exist_ok=True)

    def reassignment(keys):
        return {
            "version": 1,
            "partitions": [{"topic": t, "partition": p, "replicas": targets[(t, p)]} for t, p in keys],
        }

    entries = []
    for index, keys in enumerate(chunks, start=1):
        name = f"chunks/{index:04d}.json"
        (out / name).write_text(json.dumps(reassignment(keys)))
        entries.append(
            {
                "index": index,
                "file": name,
                "partitions": len(keys),
                "bytes": sum(SIZES.get(k, 0) for k in keys),
            }
        )
    ordered = [k for keys in chunks for k in keys]
    (out / "plan.json").write_text(json.dumps(reassignment(ordered)))
    chunk_of = {k: i for i, keys in enumerate(chunks, start=1) for k in keys}
    summary = {
        "failed_brokers": [5],
        "receivers": list(receivers),
        "partitions": len(ordered),
        "bytes": sum(SIZES.get(k, 0) for k in ordered),
        "replication_factor_kept": True,
        "max_partitions_per_chunk": max_partitions,
        "max_bytes_per_chunk": max_bytes,
        "chunks": entries,
        "per_broker": {
            str(b): {
                "replicas_before": rb,
                "replicas_after": ra,
                "bytes_before": bb,
                "bytes_after": ba,
                "leaders_before": leaders_of(b, {}),
                "leaders_after": leaders_of(b, targets),
            }
            for b, (rb, ra, bb, ba) in per_broker.items()
        },
        "moves": [
            {
                "topic": t,
                "partition": p,
                "from": [b for b, _ in ASSIGNMENTS[(t, p)]],
                "to": targets[(t, p)],
                "bytes": SIZES.get((t, p), 0),
                "chunk": chunk_of[(t, p)],
            }
            for t, p in ordered
        ],
    }
    (out / "summary.json").write_text(json.dumps(summary))
    return out


GOOD_CHUNKS = [[("t", 0), ("t", 1)], [("t", 2)]]


def good_plan(tmp_path: Path, **kwargs):
    return load_plan(write_plan(tmp_path / "plan", GOOD_TARGETS, GOOD_CHUNKS, **kwargs))


def test_load_plan_reads_targets_chunks_and_bytes(tmp_path):
    plan = good_plan(tmp_path)
    assert plan.failed_brokers == (5,)
    assert plan.receivers == (1, 2, 3, 4)
    assert plan.chunk_count == 2
    assert plan.chunk(1) == [PartitionTarget("t", 0, (3, 1, 2)), PartitionTarget("t", 1, (1, 2, 4))]
    assert plan.chunk(2) == [PartitionTarget("t", 2, (2, 3, 1))]
    assert [t.key for t in plan.partitions] == [("t", 0), ("t", 1), ("t", 2)]
    assert plan.chunk_bytes(1) == 300 and plan.total_bytes == 600
    assert plan.reassignment(2) == {
        "version": 1,
        "partitions": [{"topic": "t", "partition": 2, "replicas": [2, 3, 1]}],
    }
    with pytest.raises(IndexError):
        plan.chunk(0)
    with pytest.raises(IndexError):
        plan.chunk(3)


def test_load_plan_raises_the_planners_reason(tmp_path):
    (tmp_path / "error.json").write_text(json.dumps({"error": "receivers include failed broker(s) [5]"}))
    with pytest.raises(PlanImpossible, match=r"receivers include failed broker\(s\) \[5\]") as excinfo:
        load_plan(tmp_path)
    assert excinfo.value.reason == "receivers include failed broker(s) [5]"
    with pytest.raises(FileNotFoundError, match="did not finish"):
        load_plan(tmp_path / "empty")


def test_good_plan_has_no_violations(tmp_path):
    assert check_plan(good_plan(tmp_path), replica_rows(), broker_rows()) == []
    # A one-shot iterator works too (materialised for the second pass).
    assert check_plan(good_plan(tmp_path), iter(replica_rows()), broker_rows()) == []


def test_checker_reads_a_snapshot_from_parquet(tmp_path):
    replicas_schema, brokers_schema = schemas()
    snap = tmp_path / "snap"
    snap.mkdir()
    full = [
        {**r, "taken_at_ms": 1, "replication_factor": len(ASSIGNMENTS[(r["topic"], r["partition"])])}
        for r in replica_rows()
    ]
    pq.write_table(pa.Table.from_pylist(full, schema=replicas_schema), snap / "replicas.parquet")
    pq.write_table(pa.Table.from_pylist(broker_rows(), schema=brokers_schema), snap / "brokers.parquet")
    rows, brokers = read_snapshot_rows(snap)
    assert check_plan(good_plan(tmp_path), rows, brokers) == []
    broken = {**GOOD_TARGETS, ("t", 1): [4, 2, 1]}
    plan = load_plan(write_plan(tmp_path / "broken", broken, GOOD_CHUNKS))
    assert any("preferred leader 1 at position 0 moved to 4" in v for v in check_plan(plan, rows, brokers))


def broken(tmp_path, targets=None, chunks=GOOD_CHUNKS, **kwargs) -> list[str]:
    plan = load_plan(write_plan(tmp_path / "broken", {**GOOD_TARGETS, **(targets or {})}, chunks, **kwargs))
    return check_plan(plan, replica_rows(), broker_rows())


@pytest.mark.parametrize(
    ("targets", "expected"),
    [
        ({("t", 1): [2, 1, 4]}, "preferred leader 1 at position 0 moved to 2"),
        ({("t", 2): [2, 4, 1]}, "replica 3 at position 1 moved to 4"),
        ({("t", 0): [3, 1]}, "replication factor 3 becomes 2"),
        ({("t", 0): [2, 1, 2]}, "names a broker twice"),
        ({("t", 0): [6, 1, 2]}, "replaced by 6, not a receiver"),
        ({("t", 0): [5, 1, 2]}, "replaced by 5, not a receiver"),
    ],
)
def test_checker_catches_a_wrong_target(tmp_path, targets, expected):
    violations = broken(tmp_path, targets)
    assert any(expected in v for v in violations), violations


def test_checker_catches_missing_extra_and_unchunked_partitions(tmp_path):
    violations = broken(tmp_path, chunks=[[("t", 0), ("t", 1)]])
    assert any("t-2 [2, 3, 5] has a replica on a failed broker but is not planned" in v for v in violations)

    violations = broken(tmp_path, {("t", 3): [4, 1]}, chunks=[*GOOD_CHUNKS, [("t", 3)]])
    assert any("t-3 [4, 1] is planned but has no failed replica" in v for v in violations), violations

    violations = broken(tmp_path, {("t", 4): [1]}, chunks=[*GOOD_CHUNKS, [("t", 4)]])
    assert any("t-4 [5] is planned but has no failed replica to replace" in v for v in violations), violations


def test_checker_catches_chunks_over_the_limits(tmp_path):
    violations = broken(tmp_path, max_partitions=1)
    assert any("chunk 1 has 2 partitions, more than 1" in v for v in violations), violations
    violations = broken(tmp_path, max_bytes=250)
    assert any("chunk 1 holds 300 bytes, more than 250" in v for v in violations), violations
    # A single partition over the byte limit is fine in a chunk of its own.
    assert broken(tmp_path, chunks=[[("t", 0)], [("t", 1)], [("t", 2)]], max_bytes=150) == []


def test_checker_catches_wrong_summary_figures(tmp_path):
    per_broker = {**PER_BROKER, 1: (3, 4, 350, 651)}
    violations = broken(tmp_path, per_broker=per_broker)
    assert violations == [
        "summary per-broker figures of broker 1 wrong (summary, snapshot): {'bytes_after': (651, 650)}"
    ]


def test_checker_catches_an_unbalanced_plan(tmp_path):
    # Receiver 3 gets two replicas while 2 gets none although t-1 could go there (racks a,b either way).
    targets = {("t", 0): [3, 1, 2], ("t", 1): [1, 3, 4], ("t", 2): [2, 3, 4]}
    per_broker = {
        1: (3, 3, 350, 350),
        2: (2, 2, 390, 390),
        3: (1, 3, 290, 590),
        4: (2, 3, 250, 550),
        5: (4, 1, 600, 0),
    }
    violations = broken(tmp_path, targets, per_broker=per_broker)
    assert violations == ["unbalanced: receiver 3 gets 2 replicas, t-1 could go to receiver 2 with 0"]


def test_checker_rack_rules(tmp_path):
    """Broker 6 is the only one in rack c: it may take everything when only it keeps the racks."""
    extra = {6: "c"}
    rows, brokers = replica_rows(extra), broker_rows(extra)
    # Every partition had 3 distinct racks (5's unknown rack counts as its own): only 6 keeps that.
    targets = {("t", 0): [6, 1, 2], ("t", 1): [1, 6, 4], ("t", 2): [2, 3, 6]}
    per_broker = {
        1: (3, 3, 350, 350),
        2: (2, 2, 390, 390),
        3: (1, 1, 290, 290),
        4: (2, 2, 250, 250),
        5: (4, 1, 600, 0),
        6: (0, 3, 0, 600),
    }
    plan = load_plan(
        write_plan(tmp_path / "p1", targets, GOOD_CHUNKS, receivers=(1, 2, 3, 4, 6), per_broker=per_broker)
    )
    assert check_plan(plan, rows, brokers) == []  # all 3 on one receiver, but racks forbid better

    # The hand-made good plan drops to two racks while 6 would have kept three.
    per_broker = {**PER_BROKER, 6: (0, 0, 0, 0)}
    plan = load_plan(
        write_plan(
            tmp_path / "p2", GOOD_TARGETS, GOOD_CHUNKS, receivers=(1, 2, 3, 4, 6), per_broker=per_broker
        )
    )
    violations = check_plan(plan, rows, brokers)
    assert "t-0: racks go from 3 to 2 although receiver 6 would keep them" in violations
    assert "t-2: racks go from 3 to 2 although receiver 6 would keep them" in violations


def test_checker_flags_bad_receivers(tmp_path):
    plan = good_plan(tmp_path, receivers=(1, 2, 3, 4, 5))
    violations = check_plan(plan, replica_rows(), broker_rows())
    assert "receivers include failed broker(s) [5]" in violations
    assert "receiver(s) [5] not live brokers" in violations


def test_checker_accepts_a_chosen_first_replica_and_flags_piled_up_preferred_leaders(tmp_path):
    """t-0's failed preferred leader (5): the planner may move a target replica to the front."""
    # 3 takes 5's place and goes first (the hand-made good plan): every live broker leads one.
    assert broken(tmp_path) == []
    # 1, a survivor, goes first and 3 takes 5's place: allowed by position, but 1 then leads 2
    # partitions while 3, a replica of the same partition, leads none.
    violations = broken(tmp_path, {("t", 0): [1, 3, 2]})
    assert violations == [
        "preferred leaders unbalanced: t-0 gets preferred leader 1 with 2 preferred leaderships, "
        "its replica 3 has 0"
    ]
    # 2 goes first, the others keep their order: positions hold, but 2 then leads t-0 and t-2.
    assert broken(tmp_path, {("t", 0): [2, 3, 1]}) == [
        "preferred leaders unbalanced: t-0 gets preferred leader 2 with 2 preferred leaderships, "
        "its replica 3 has 0"
    ]
    # A list whose survivors change order beyond the chosen first one is a moved replica.
    violations = broken(tmp_path, {("t", 0): [3, 2, 1]})
    assert any("replica 1 at position 1 moved to 2" in v for v in violations), violations
    # A preferred leader that did not fail still never moves.
    violations = broken(tmp_path, {("t", 1): [2, 1, 4]})
    assert any("preferred leader 1 at position 0 moved to 2" in v for v in violations), violations


def test_checker_catches_wrong_preferred_leader_figures(tmp_path):
    plan = good_plan(tmp_path)
    summary = json.loads((plan.directory / "summary.json").read_text())
    summary["per_broker"]["3"]["leaders_after"] = 0
    (plan.directory / "summary.json").write_text(json.dumps(summary))
    violations = check_plan(load_plan(plan.directory), replica_rows(), broker_rows())
    assert violations == [
        "summary per-broker figures of broker 3 wrong (summary, snapshot): {'leaders_after': (0, 1)}"
    ]
