"""Overlapping chunks on the real stack: the next chunk starts while the one before still copies,
when one of its receivers has room, and the run's throttle stays on until the last chunk is done.

Chunk 1 copies 3 MB to receiver 1 under 100 kB/s (about 30 s); chunk 2 adds a small replica to
receiver 2, which has nothing coming. Chunk-by-chunk, receiver 2 idled until chunk 1 was
verified; now it starts on the step after chunk 1, adding broker 3 (a source) to the throttle.
Broker 3 had a replication rate of its own before the run: the run records it before adding
broker 3 to its throttle and puts it back at the end.
"""

from __future__ import annotations

import pytest

from kafka_runbooks.failed_broker.execute import (
    DONE,
    MOVING,
    RECEIVER_SLOTS,
    ChunkExecutor,
    ExecState,
    chunks_from_plan_dir,
    save_state,
)
from kafka_runbooks.failed_broker.throttle import BROKER_KEYS, LEADER_RATE, leftover_throttles
from tests.helpers import create_topic, produce, unique_topic, wait_until
from tests.integration.test_failed_broker_executor import clear_throttles, write_plan

pytestmark = pytest.mark.timeout(600)
DEAD = 4
THEIRS = "77777777"  # a rate someone set on broker 3 before the run


@pytest.fixture
def broker3_rate(admin):
    """Broker 3 has a leader replication rate of its own; no throttle of any kind is left after."""
    admin.incremental_alter_configs("broker", {"3": {LEADER_RATE: ("SET", THEIRS)}})
    yield
    admin.incremental_alter_configs("broker", {"3": {k: ("DELETE", None) for k in BROKER_KEYS}})
    clear_throttles(admin)


def _throttled(admin, topics: list[str]) -> dict:
    live = [b.broker_id for b in admin.describe_brokers().values() if b.available]
    return leftover_throttles(admin, live, topics)


def test_the_next_chunk_starts_while_the_first_copies_and_the_throttle_stays_until_both_are_done(
    restore_stack, admin, tmp_path, broker3_rate
):
    stack = restore_stack
    bs = stack.bootstrap_servers
    big, small = unique_topic("overlap-big"), unique_topic("overlap-small")
    create_topic(bs, big, assignment={0: [4, 2]})
    create_topic(bs, small, assignment={0: [3, 4]})
    assert produce(bs, big, 15000, size=200) == 15000
    assert produce(bs, small, 500, size=200) == 500
    stack.kill(f"broker-{DEAD}")
    wait_until(
        lambda: not admin.describe_brokers().get(DEAD) or admin.describe_brokers()[DEAD].fenced,
        60,
        1,
        f"broker {DEAD} fenced",
    )
    plan = write_plan(
        tmp_path / "plan",
        [
            [{"topic": big, "partition": 0, "from": [4, 2], "to": [1, 2], "bytes": 3_000_000}],
            [{"topic": small, "partition": 0, "from": [3, 4], "to": [3, 2], "bytes": 100_000}],
        ],
    )
    path = tmp_path / "exec-state.json"
    state = ExecState(
        run_id="overlap",
        failed_brokers=[DEAD],
        throttle_bytes_per_sec=100_000,
        chunks=chunks_from_plan_dir(plan),
    )
    assert [c.receivers for c in state.chunks] == [[1], [2]]
    executor = ChunkExecutor(admin, checkpoint=lambda s: save_state(path, s), receiver_slots=RECEIVER_SLOTS)
    executor.step(state)
    assert [c.status for c in state.chunks] == [MOVING, "pending"]
    executor.step(state)  # receiver 2 has nothing coming: chunk 2 starts while chunk 1 copies
    assert [c.status for c in state.chunks] == [MOVING, MOVING]
    # one throttle for both: broker 3 added with the rate it had before, recorded before it was set
    assert set(state.throttle.brokers) == {"1", "2", "3"}
    assert state.throttle.previous("3")[LEADER_RATE] == THEIRS
    assert state.throttle.topics[small].follower == ["0:2"]
    on_cluster = _throttled(admin, [big, small])
    assert on_cluster[f"topic {small}"]["follower.replication.throttled.replicas"] == "0:2"
    assert on_cluster["broker 3"][LEADER_RATE] == "100000"

    def chunk2_done_and_throttle_kept() -> bool:
        executor.step(state)
        if state.chunks[0].status == MOVING:  # while anything of the run copies, its throttle is on
            assert state.throttle is not None and _throttled(admin, [big])[f"topic {big}"]
        return state.chunks[1].status == DONE

    wait_until(chunk2_done_and_throttle_kept, 120, 0.5, "chunk 2 verified")

    def finished() -> bool:
        return executor.step(state)

    wait_until(finished, 300, 1, "every chunk done")
    parts = admin.describe_partitions([big, small])
    assert all(DEAD not in p.replicas and set(p.isr) == set(p.replicas) for p in parts)
    # only broker 3's own rate is left, as it was before the run
    assert _throttled(admin, [big, small]) == {"broker 3": {LEADER_RATE: THEIRS}}
