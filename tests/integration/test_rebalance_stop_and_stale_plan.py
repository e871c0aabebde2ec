"""kafka_rebalance's stop and stale-plan guarantees on the real stack (issue #27's "Done means").

A stop mid-chunk: the rebalance's chunk moves under its throttle between live brokers (no broker
failed: every live broker is a source, as in mode full); the stop cancels exactly its
reassignments, the partitions are back on the replicas they had before the move, the throttle is
gone, and the stopped state is final (the executor refuses to go on; nothing is left to adopt).

A plan gone stale between its gate and its execution: after the plan was approved, someone else changed the replicas of one of its
partitions. The executor refuses the chunk before it submits anything or sets a throttle, with a
decision record naming the partition, its replicas now and the ones the approved plan moves it
from; the other partition of the chunk is not moved either (the approval was for the whole plan).
Once the cluster holds what was approved again, the same run goes on and lands on the plan.

A receiver killed mid-chunk (SIGKILL of the broker the chunk copies onto, under an acks=all
producer): while it is down the run never reports the chunk done, the reassignments stay in
flight and the partitions keep their in-sync replicas; once it returns the same run finishes on
the plan with no throttle left and no acknowledged message lost.

The plan is written in the planner's own format (summary.json with each move's ``from`` and
``to``, one kafka-reassign-partitions file per chunk) and executed as kafka_rebalance executes it:
a drain over every live broker (mode full: every live broker is a source)."""

from __future__ import annotations

import logging

import pytest

from kafka_runbooks.failed_broker.execute import (
    MOVING,
    ChunkExecutor,
    ExecState,
    ReassignError,
    ReassignStopped,
    chunks_from_plan_dir,
    load_state,
    save_state,
)
from kafka_runbooks.failed_broker.stop import STOPPED, StopRequest, stop, verify_stopped
from kafka_runbooks.failed_broker.throttle import leftover_throttles
from tests.e2e.test_broker_restart_dag import Producer
from tests.helpers import create_topic, produce, unique_topic, wait_until
from tests.integration.test_failed_broker_executor import clear_throttles, run, write_plan

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def no_throttle_left(admin):
    yield
    clear_throttles(admin)


def _replicas(admin, topic: str) -> dict[int, list[int]]:
    return {p.partition: list(p.replicas) for p in admin.read_state(topics=[topic]).partitions}


def _move(admin, topic: str, partition: int, replicas: list[int]) -> None:
    """Someone else's reassignment (kafka-reassign-partitions by hand), waited for to the end."""
    admin.alter_partition_reassignments({(topic, partition): replicas})
    wait_until(
        lambda: _replicas(admin, topic)[partition] == replicas and not admin.list_reassignments(),
        30,
        0.5,
        f"{topic}-{partition} on {replicas}",
    )


def test_a_plan_changed_under_it_after_approval_is_refused_before_any_submission(
    restore_stack, admin, tmp_path, caplog, no_throttle_left
):
    bs = restore_stack.bootstrap_servers
    caplog.set_level(logging.INFO, logger="kafka_runbooks")
    topic = unique_topic("stale-plan")
    create_topic(bs, topic, assignment={0: [1, 2], 1: [2, 3]})
    assert produce(bs, topic, 200, size=100) == 200
    plan = write_plan(
        tmp_path / "plan",
        [
            [
                {"topic": topic, "partition": 0, "from": [1, 2], "to": [3, 2], "bytes": 10_000},
                {"topic": topic, "partition": 1, "from": [2, 3], "to": [2, 4], "bytes": 10_000},
            ]
        ],
    )
    state = ExecState("rebalance-stale", [1, 2, 3, 4], 10 << 20, chunks_from_plan_dir(plan), drain=True)
    executor = ChunkExecutor(admin, progress_every_s=0)

    _move(admin, topic, 0, [1, 4])  # after the gate: not what the approved plan moves from
    with pytest.raises(ReassignError, match="stale"):
        executor.step(state)
    refused = [r for r in caplog.records if "the plan is stale" in r.getMessage()]
    assert refused and refused[-1].levelno == logging.ERROR
    assert f"{topic}:0" in refused[-1].getMessage() and "[1, 4]" in refused[-1].getMessage()
    assert not admin.list_reassignments()  # nothing submitted: neither partition moved
    assert _replicas(admin, topic) == {0: [1, 4], 1: [2, 3]}
    assert leftover_throttles(admin, [1, 2, 3, 4], [topic]) == {}  # no throttle was set

    _move(admin, topic, 0, [1, 2])  # the cluster holds what was approved again
    run(executor, state, timeout=60)
    assert {k: sorted(v) for k, v in _replicas(admin, topic).items()} == {0: [2, 3], 1: [2, 4]}


def test_a_stop_mid_chunk_cancels_the_rebalances_moves_and_is_final(
    restore_stack, admin, tmp_path, no_throttle_left
):
    bs = restore_stack.bootstrap_servers
    topic = unique_topic("rebal-stop")
    create_topic(bs, topic, assignment={0: [1, 2], 1: [2, 3]})
    assert produce(bs, topic, 30000, size=200) == 30000  # ~3 MB per partition: minutes at 20 kB/s
    plan = write_plan(
        tmp_path / "plan",
        [
            [
                {"topic": topic, "partition": 0, "from": [1, 2], "to": [3, 4], "bytes": 3_000_000},
                {"topic": topic, "partition": 1, "from": [2, 3], "to": [4, 3], "bytes": 3_000_000},
            ]
        ],
    )
    path = tmp_path / "kafka_rebalance" / "run-1" / "exec-state.json"
    path.parent.mkdir(parents=True)
    state = ExecState("run-1", [1, 2, 3, 4], 20_000, chunks_from_plan_dir(plan), drain=True)
    save_state(path, state)
    ChunkExecutor(admin, checkpoint=lambda s: save_state(path, s)).step(state)
    assert state.chunks[0].status == MOVING and state.throttle is not None
    ours = {(topic, 0), (topic, 1)}
    assert ours <= set(admin.list_reassignments())

    request = StopRequest("kafka_default", "alice", "rebalance paused for the sale", 1, request_id="stop-r")
    done = stop(admin, load_state(path), request, checkpoint=lambda s: save_state(path, s))
    assert sorted(done["cancelled"]) == [f"{topic}:0", f"{topic}:1"] and done["errors"] == {}
    assert verify_stopped(admin, {"run-1": (load_state(path), done["throttle"])}, settle_s=2) == {}
    assert not ours & set(admin.list_reassignments())
    wait_until(
        lambda: {p: set(r) for p, r in _replicas(admin, topic).items()} == {0: {1, 2}, 1: {2, 3}},
        30,
        0.5,
        "the partitions back on their replicas before the move",
    )
    assert leftover_throttles(admin, [1, 2, 3, 4], [topic]) == {}
    final = load_state(path)
    assert final.chunks[0].status == STOPPED and final.throttle is None and final.in_flight_targets() == {}
    with pytest.raises(ReassignStopped, match="stopped by alice"):
        ChunkExecutor(admin, checkpoint=lambda s: save_state(path, s)).step(final)
    assert not ours & set(admin.list_reassignments()), "the refused resume submitted nothing"


def test_a_receiver_killed_mid_chunk_holds_the_run_until_it_returns_and_loses_nothing(
    restore_stack, admin, tmp_path, no_throttle_left
):
    from tests.unclean_scenario import count_messages

    stack, bs = restore_stack, restore_stack.bootstrap_servers
    topic = unique_topic("rebal-kill")
    create_topic(bs, topic, assignment={0: [1, 2], 1: [2, 3]})
    assert produce(bs, topic, 30000, size=200) == 30000  # ~3 MB per partition: seconds at 300 kB/s
    plan = write_plan(
        tmp_path / "plan",
        [
            [
                {"topic": topic, "partition": 0, "from": [1, 2], "to": [1, 4], "bytes": 3_000_000},
                {"topic": topic, "partition": 1, "from": [2, 3], "to": [2, 4], "bytes": 3_000_000},
            ]
        ],
    )
    state = ExecState("rebal-kill", [1, 2, 3, 4], 300_000, chunks_from_plan_dir(plan), drain=True)
    executor = ChunkExecutor(admin, checkpoint=lambda s: save_state(tmp_path / "exec.json", s))
    producer = Producer(bs, topic)
    producer.start()
    try:
        assert executor.step(state) is False and state.chunks[0].status == MOVING
        stack.kill("broker-4")
        wait_until(
            lambda: 4 not in admin.read_state([topic], include_log_dirs=False).alive_broker_ids(),
            30,
            0.5,
            "broker 4 fenced",
        )
        for _ in range(3):  # the receiver is down: the run waits, it never calls the chunk done
            assert executor.step(state) is False and state.chunks[0].status == MOVING
        assert {(topic, 0), (topic, 1)} <= set(admin.list_reassignments())
        kept = {p.partition: set(p.isr) for p in admin.read_state([topic], include_log_dirs=False).partitions}
        assert kept[0] >= {1, 2} and kept[1] >= {2, 3}, kept  # the old replicas stay in sync meanwhile
        stack.start_node("broker-4")
        run(executor, state, timeout=120)
    finally:
        producer.stop_event.set()
        producer.join(300)
    after = {p.partition: p for p in admin.read_state([topic]).partitions}
    assert {k: set(p.replicas) for k, p in after.items()} == {0: {1, 4}, 1: {2, 4}}
    assert all(set(p.isr) == set(p.replicas) for p in after.values())
    assert leftover_throttles(admin, [1, 2, 3, 4], [topic]) == {}
    assert producer.failed == [] and producer.acked > 0
    assert sum(count_messages(bs, topic, p) for p in (0, 1)) >= 30000 + producer.acked  # nothing lost
