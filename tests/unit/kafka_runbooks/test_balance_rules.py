"""The balancing units the rebalance planner and ``check_plan`` share.

The Spark job carries a verbatim copy of the rules block (it is submitted as one file); these
tests fail when the copy drifts, and pin each unit's meaning: racks never fewer, a target as a
count or a percentage of the mean, the moves' lower bound, unknown disk room is no room.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kafka_runbooks import balance_rules as rules

ROOT = Path(__file__).resolve().parents[3]
JOB = ROOT / "spark_jobs" / "failed_broker_plan.py"


def test_the_planner_carries_the_rules_verbatim_and_the_block_imports_nothing():
    source = Path(rules.__file__).read_text()
    block = rules.block(source)
    assert block.startswith(rules.BEGIN) and block.endswith(rules.END)
    assert not [n for n in ast.walk(ast.parse(block)) if isinstance(n, ast.Import | ast.ImportFrom)]
    assert rules.block(JOB.read_text()) == block, (
        "spark_jobs/failed_broker_plan.py's balance rules differ from include/kafka_runbooks/balance_rules.py: "
        "change them there and copy the block between the marker lines into the job"
    )


def test_racks_never_fewer_and_a_broker_without_a_rack_is_a_rack_of_its_own():
    racks = {1: "a", 2: "b", 3: "c", 4: "a"}
    assert rules.racks_kept(racks, [1, 2, 3], [4, 2, 3])  # a for a
    assert not rules.racks_kept(racks, [1, 2, 3], [1, 2, 4])  # c for a second a
    assert rules.racks_kept(racks, [1, 4], [1, 2])  # a duplicate may be mended
    assert rules.distinct_racks(racks, [1, 7, 8]) == 3


@pytest.mark.parametrize(
    ("text", "mean", "limit"),
    [("2", 100, 2), ("0", 5, 0), ("10%", 30, 3), ("10%", 5, 1), (" 50 % ", 10, 5), ("0%", 40, 1)],
)
def test_a_target_is_a_count_or_a_share_of_the_mean(text, mean, limit):
    assert rules.spread_limit(text, mean) == limit


@pytest.mark.parametrize("text", ["", "ten", "-1", "1.5", "-5%", "nan"])
def test_a_target_that_is_neither_has_no_limit(text):
    assert rules.spread_limit(text, 10) is None


@pytest.mark.parametrize(
    ("values", "limit", "bound"),
    [
        ([12, 12, 12, 0], 1, 9),  # one new broker: 9 replicas onto it
        ([12, 12, 12, 0], 0, 9),
        ([5, 5], 0, 0),
        ([10, 0, 0], 0, None),  # 10 over 3 cannot be even: no window, no number of moves reaches it
        ([10, 0, 0], 1, 6),  # 4, 3, 3
        ([], 2, 0),
    ],
)
def test_the_lower_bound_is_the_fewest_unit_moves_into_a_window(values, limit, bound):
    assert rules.moves_lower_bound(values, limit) == bound


def test_unknown_disk_room_is_no_room():
    assert rules.fits(None, 4, 10**12)  # no disk rule asked for
    assert rules.fits({4: 100}, 4, 100) and not rules.fits({4: 100}, 4, 101)
    assert not rules.fits({4: 100}, 5, 1) and rules.fits({4: 100}, 5, -10)  # giving bytes away is fine


RF_RACKS = {1: "a", 2: "b", 3: "a", 4: "b", 5: "c"}


def test_a_raised_partition_wants_one_new_rack_per_added_replica_while_the_pool_has_one():
    assert rules.racks_wanted(RF_RACKS, [1], [1, 2, 3, 4, 5], 3) == 3  # a, then b and c
    assert rules.racks_wanted(RF_RACKS, [1], [1, 2, 3, 4, 5], 2) == 2
    assert rules.racks_wanted(RF_RACKS, [1], [1, 3], 2) == 1  # only rack a can take it
    assert rules.racks_wanted({1: "a", 6: None}, [1], [1, 6], 2) == 2  # no rack is a rack of its own
    assert rules.racks_wanted(RF_RACKS, [1, 2, 3], [1, 2, 3, 4, 5], 3) == 2  # nothing to add


def test_new_replicas_go_to_a_rack_the_partition_lacks_before_a_less_loaded_broker():
    load = {1: [5, 0], 2: [9, 0], 3: [0, 0], 4: [8, 0]}
    gained: dict[int, int] = {}
    chosen = rules.new_replicas(RF_RACKS, [1], [1, 2, 3, 4], 3, load, None, gained, 100)
    # 4 (rack b, 8 replicas) before 3 (rack a, 0 replicas); then every rack is there: the least loaded
    assert chosen == [4, 3]
    assert load[4] == [9, 100] and load[3] == [1, 100] and gained == {4: 100, 3: 100}


def test_new_replicas_go_to_the_fewest_replicas_then_the_fewest_bytes_then_the_lowest_id():
    racks = {1: "a", 2: "a", 3: "a", 4: "a"}
    assert rules.new_replicas(
        racks, [1], [1, 2, 3, 4], 2, {1: [0, 0], 2: [3, 0], 3: [2, 9], 4: [2, 5]}, None, {}, 1
    ) == [4]
    assert rules.new_replicas(
        racks, [1], [1, 2, 3, 4], 2, {1: [0, 0], 2: [2, 5], 3: [2, 5], 4: [2, 5]}, None, {}, 1
    ) == [2]


def test_new_replicas_stay_within_the_disk_room_and_unknown_room_takes_nothing():
    load = {b: [0, 0] for b in (1, 2, 3, 4)}
    # 2 has room for 50 only, 4 is missing from the room map (unknown): 3 takes it though rack a is there
    assert rules.new_replicas(RF_RACKS, [1], [1, 2, 3, 4], 2, load, {2: 50, 3: 1000}, {}, 100) == [3]
    # what a broker already gained in this plan counts against its room
    load = {b: [0, 0] for b in (1, 2, 3, 4)}
    assert rules.new_replicas(RF_RACKS, [1], [1, 2, 3, 4], 2, load, {2: 150, 3: 1000}, {2: 100}, 100) == [3]
    assert rules.new_replicas(RF_RACKS, [1], [1, 2, 3, 4], 2, load, {}, {}, 100) is None  # nobody fits
    assert rules.new_replicas(RF_RACKS, [1, 2], [1, 2], 3, {1: [0, 0], 2: [0, 0]}, None, {}, 1) is None


def test_partitions_are_raised_largest_first_then_by_name():
    keys = [(10, "b", 0), (30, "a", 1), (10, "a", 2)]
    assert sorted(keys, key=lambda k: rules.raise_order(*k)) == [(30, "a", 1), (10, "a", 2), (10, "b", 0)]


def test_a_lowered_partition_drops_out_of_sync_replicas_first_then_never_its_preferred_leader():
    load = {b: [0, 0] for b in (1, 2, 3, 4)}
    # 3 is out of the ISR: it goes first although 4 is the most loaded and its rack b is shared
    assert rules.dropped_replicas(RF_RACKS, [1, 2, 3], {1, 2}, 2, load, 10) == [3]
    assert load[3] == [-1, -10]  # each drop leaves the broker's load
    # the preferred leader 1 is the most loaded, yet another in-sync replica goes
    load = {1: [9, 0], 2: [1, 0], 3: [1, 0], 4: [1, 0]}
    assert rules.dropped_replicas({1: "a", 2: "a", 3: "a", 4: "a"}, [1, 2, 3], {1, 2, 3}, 2, load, 1) == [3]
    # out of the ISR goes even when it is the preferred leader
    assert rules.dropped_replicas(RF_RACKS, [1, 2, 4], {2, 4}, 2, {b: [0, 0] for b in RF_RACKS}, 1) == [1]


def test_a_lowered_partition_keeps_the_most_racks_then_drops_the_most_loaded_broker():
    # [1 (a), 2 (b), 3 (a)] down to 2: dropping 2 would leave rack a only, so 3 goes though 2 holds more
    load = {1: [0, 0], 2: [9, 0], 3: [1, 0], 4: [0, 0]}
    assert rules.dropped_replicas(RF_RACKS, [1, 2, 3], {1, 2, 3}, 2, load, 1) == [3]
    # same racks lost either way: the most replicas, then the most bytes, then the highest id
    racks = {1: "a", 2: "a", 3: "a", 4: "a"}
    assert rules.dropped_replicas(
        racks, [1, 2, 3, 4], {1, 2, 3, 4}, 2, {1: [0, 0], 2: [5, 1], 3: [5, 9], 4: [2, 0]}, 1
    ) == [3, 2]
    assert rules.dropped_replicas(racks, [1, 2, 3], {1, 2, 3}, 2, {b: [0, 0] for b in racks}, 1) == [3]


def test_a_lowering_keeps_only_in_sync_replicas():
    assert rules.kept_in_sync([1, 2, 3], [3], {1, 2})
    assert not rules.kept_in_sync([1, 2, 3], [3], {1})  # 2 kept out of sync
    assert not rules.kept_in_sync([1, 2], [1], {1})  # the only in-sync replica dropped


@pytest.mark.parametrize(
    ("percent", "sizes", "limit"),
    [
        ("20", {1: 100, 2: 300}, 40),  # 20 % of the mean 200
        ("20%", {1: 100, 2: 300}, 40),
        (" 0 ", {1: 5, 2: 5}, 0),
        (10, {1: 0, 2: 0}, 0),  # an empty cluster: nothing to spread
    ],
)
def test_the_bytes_spread_is_a_percentage_of_the_mean_bytes_per_broker(percent, sizes, limit):
    assert rules.bytes_spread_limit(percent, sizes, [1, 2]) == limit


@pytest.mark.parametrize("percent", ["", "ten", "-1", "nan", "2 GiB"])
def test_a_bytes_spread_that_is_not_a_percentage_has_no_limit(percent):
    assert rules.bytes_spread_limit(percent, {1: 100, 2: 300}, [1, 2]) is None


def test_unknown_bytes_are_never_within_the_spread_nor_zero():
    # broker 3's log dirs did not answer: no mean, no limit, no judgement either way
    assert rules.bytes_spread_limit("20", {1: 100, 2: 100, 3: None}, [1, 2, 3]) is None
    assert rules.bytes_spread_limit("20", {1: 100, 2: 100}, [1, 2, 3]) is None  # missing is unknown too
    assert rules.within_bytes_spread({1: 100, 2: 100, 3: None}, [1, 2, 3], 1000) is None
    assert rules.within_bytes_spread({1: 100, 2: 140}, [1, 2], 40) is True
    assert rules.within_bytes_spread({1: 100, 2: 141}, [1, 2], 40) is False
    assert rules.within_bytes_spread({1: 100, 2: 141}, [1, 2], None) is None
