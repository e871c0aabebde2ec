"""The planner's receiver choice balances the bytes moved to each receiver where it has a choice
(the driver part of spark_jobs/failed_broker_plan.py, no Spark session needed).

Each receiver copies under its own throttle, so a heal lasts as long as the busiest receiver's
bytes / throttle; among receivers with as many replicas moved to them, the one with fewer bytes
moved to it so far takes the next (largest remaining) partition.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

JOB_PATH = Path(__file__).resolve().parents[2] / "spark_jobs" / "failed_broker_plan.py"


def _load_job():
    spec = importlib.util.spec_from_file_location("spark_jobs_failed_broker_plan_bytes", JOB_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


job = _load_job()
FAILED = 9


def _inputs(sizes: list[int], existing: dict[int, int]):
    """Partitions [9, 3] of the given sizes; receivers 1 and 2 hold ``existing`` bytes already."""
    brokers = {b: job.BrokerInfo(b, None, True, True, bytes=existing.get(b, 0)) for b in (1, 2, 3)}
    brokers[FAILED] = job.BrokerInfo(FAILED, None, False, True)
    affected = [
        job.Affected("t", p, (FAILED, 3), (None, size), (False, True), (False, True), size)
        for p, size in enumerate(sizes)
    ]
    return job.Inputs(brokers, affected)


def test_equal_counts_go_to_the_receiver_with_fewer_bytes_moved_to_it():
    # broker 1 holds far more data already; that must not pile the moved bytes on broker 2
    inputs = _inputs([100, 10, 10, 1], existing={1: 10_000, 2: 0})
    moves, not_moved, balancer = job.assign(inputs, [FAILED], [1, 2])
    assert not not_moved and sorted(balancer.moved.values()) == [2, 2]
    moved_bytes = {b: sum(m.size for m in moves if b in m.target) for b in (1, 2)}
    # 100 and 1 on one receiver, 10 and 10 on the other: the busiest copies 101 bytes, not 110
    assert sorted(moved_bytes.values()) == [20, 101]
    assert balancer.moved_bytes == moved_bytes
