"""Stopping a reassignment on the real stack: a throttled chunk in flight is stopped cleanly.

Broker 4 is killed for good; the executor submits a chunk moving its replicas under a low
throttle (minutes of copying). Then a reassignment nobody in the run started is put in
flight, and the run is stopped: exactly the run's reassignments are cancelled (read back:
none of them in flight, the partitions back on their replicas before the move, in their order:
Kafka's cancel brings [4, 2] -> [1, 2] back as [2, 4], and the stop reorders it), its
throttle configs are gone (an unrelated rate set before on a broker is put back, not
deleted), the foreign reassignment is untouched, and the stopped state is final: the
executor refuses to go on with it and a new run would not adopt any of it.
"""

from __future__ import annotations

import logging

import pytest

from kafka_runbooks.failed_broker.execute import (
    MOVING,
    ChunkExecutor,
    ExecState,
    ReassignStopped,
    chunks_from_plan_dir,
    load_state,
    save_state,
)
from kafka_runbooks.failed_broker.stop import (
    STOPPED,
    StopRequest,
    request_path,
    stop,
    to_stop,
    verify_stopped,
    write_request,
)
from kafka_runbooks.failed_broker.throttle import FOLLOWER_RATE, LEADER_RATE, leftover_throttles
from tests.helpers import create_topic, produce, unique_topic, wait_until
from tests.integration.test_failed_broker_executor import clear_throttles, moves_off, write_plan

pytestmark = pytest.mark.timeout(900)
DEAD = 4


@pytest.fixture
def cleanup(admin):
    foreign: list[tuple[str, int]] = []
    yield foreign
    if foreign:
        admin.alter_partition_reassignments(dict.fromkeys(foreign))
    admin.incremental_alter_configs("broker", {"1": {LEADER_RATE: ("DELETE", None)}})
    clear_throttles(admin)


@pytest.mark.compat
def test_stop_cancels_only_this_runs_reassignments_and_removes_its_throttle(
    restore_stack, admin, tmp_path, caplog, cleanup
):
    stack = restore_stack
    bs = stack.bootstrap_servers
    caplog.set_level(logging.INFO, logger="kafka_runbooks")
    topic, foreign_topic = unique_topic("stop-ours"), unique_topic("stop-foreign")
    create_topic(bs, topic, assignment={0: [1, 4], 1: [4, 2], 2: [3, 4]})
    create_topic(bs, foreign_topic, assignment={0: [1, 2]})
    assert produce(bs, topic, 60000, size=200) == 60000  # ~4 MB per partition: minutes at 50 kB/s
    # a rate someone set on broker 1 before the run: a stop must put it back, not delete it
    assert admin.incremental_alter_configs("broker", {"1": {LEADER_RATE: ("SET", "7777777")}}) == {"1": "OK"}
    before = {p.partition: list(p.replicas) for p in admin.describe_partitions([topic])}
    stack.kill(f"broker-{DEAD}")
    wait_until(
        lambda: not admin.describe_brokers().get(DEAD) or admin.describe_brokers()[DEAD].fenced,
        60,
        1,
        f"broker {DEAD} fenced",
    )

    # the run's chunk in flight under its throttle
    plan = write_plan(tmp_path / "plan", [moves_off(admin, [topic], DEAD)])
    root = tmp_path / "kafka_failed_broker_reassignment"
    path = root / "run-1" / "exec-state.json"
    path.parent.mkdir(parents=True)
    state = ExecState(
        run_id="run-1",
        failed_brokers=[DEAD],
        throttle_bytes_per_sec=50_000,
        chunks=chunks_from_plan_dir(plan),
    )
    save_state(path, state)
    ChunkExecutor(admin, checkpoint=lambda s: save_state(path, s)).step(state)
    assert state.chunks[0].status == MOVING and state.throttle is not None
    ours = {tuple(k.rsplit(":", 1)) for k in state.chunks[0].moving}
    ours = {(t, int(p)) for t, p in ours}
    assert len(ours) == 3 and ours <= set(admin.list_reassignments())
    assert leftover_throttles(admin, [1, 2, 3], [topic]), "the chunk moves under its throttle"

    # a reassignment this run did not start (towards the dead broker: it stays in flight)
    assert admin.alter_partition_reassignments({(foreign_topic, 0): [1, 2, DEAD]}) == {
        (foreign_topic, 0): None
    }
    cleanup.append((foreign_topic, 0))

    # the stop, as the executing task or the stop DAG does it
    request = StopRequest("kafka_default", "alice", "maintenance window over", 1, request_id="stop-1")
    write_request(request_path(root, "kafka_default"), request)
    inflight = {f"{t}:{p}": v for (t, p), v in admin.list_reassignments().items()}
    chosen = to_stop({"run-1": load_state(path)}, inflight, "stop-1")
    assert list(chosen) == ["run-1"]
    stopping = chosen["run-1"]
    done = stop(admin, stopping, request, checkpoint=lambda s: save_state(path, s))
    assert sorted(done["cancelled"]) == sorted(f"{t}:{p}" for t, p in ours) and done["errors"] == {}
    assert verify_stopped(admin, {"run-1": (stopping, done["throttle"])}, settle_s=2) == {}

    # read back: nothing of ours in flight, the foreign one untouched, the throttle gone
    inflight = admin.list_reassignments()
    assert not ours & set(inflight), inflight
    assert inflight.get((foreign_topic, 0), {}).get("adding") == [DEAD], inflight
    assert leftover_throttles(admin, [1, 2, 3], [topic]) == {"broker 1": {LEADER_RATE: "7777777"}}, (
        "only the rate set before the run is left, back at its value"
    )
    assert admin.describe_config_values("broker", ["1"], [FOLLOWER_RATE])["1"] == {}
    # the cancelled partitions are back on their replicas before the move IN ORDER: Kafka's cancel
    # restores the set only ([4, 2] moving to [1, 2] comes back as [2, 4], broker 2 then preferred),
    # so the stop puts the order back with a reorder-only reassignment (issues #27/#28)
    assert {int(k.rsplit(":", 1)[1]): v for k, v in stopping.chunks[0].origin.items()} == before
    wait_until(
        lambda: {p.partition: list(p.replicas) for p in admin.describe_partitions([topic])} == before,
        30,
        1,
        "the partitions back on their replicas before the move, in their order",
    )
    decisions = [r.getMessage() for r in caplog.records if "DECISION stop" in r.getMessage()]
    assert any("cancel the reassignments this run started" in m and "alice" in m for m in decisions)
    assert any("restored replica order of 1 partition(s)" in m for m in decisions), decisions
    assert done["order"]["reorder"] == {f"{topic}:1": [4, 2]}, done["order"]
    assert sorted(done["order"]["in_order"]) == [f"{topic}:0", f"{topic}:2"], done["order"]

    # a stopped state is final: not resumed, not adopted by a new run, not stopped twice
    final = load_state(path)
    assert final.stopped == "stopped by alice: maintenance window over"
    assert final.chunks[0].status == STOPPED and final.throttle is None
    assert final.stop_request["request_id"] == "stop-1" and final.stop_request["throttle_removed"]
    assert final.in_flight_targets() == {}, "a new run must not adopt what was stopped"
    with pytest.raises(ReassignStopped, match="stopped by alice"):
        ChunkExecutor(admin, checkpoint=lambda s: save_state(path, s)).step(final)
    assert not ours & set(admin.list_reassignments()), "the refused resume submitted nothing"
    inflight = {f"{t}:{p}": v for (t, p), v in admin.list_reassignments().items()}
    assert to_stop({"run-1": final}, inflight, "a-later-stop") == {}


def test_a_stop_after_the_last_chunk_is_done_stops_nothing_and_the_run_finishes(
    restore_stack, admin, tmp_path, caplog, cleanup
):
    """Issue #39 point 1: a Stop that reached the state between the last chunk's completion and the
    step that finishes the run marked a complete heal stopped, failed it and skipped its
    verification. Now the stop finds every partition on its target (the read-back settles the
    chunk done), says so, and the executor's next step finishes the run complete."""
    bs = restore_stack.bootstrap_servers
    caplog.set_level(logging.INFO, logger="kafka_runbooks")
    topic = unique_topic("stop-late")
    create_topic(bs, topic, assignment={0: [1, 4], 1: [4, 2]})
    assert produce(bs, topic, 100, size=100) == 100
    plan = write_plan(tmp_path / "plan", [moves_off(admin, [topic], DEAD)])
    path = tmp_path / "kafka_broker_decommission" / "run-1" / "exec-state.json"
    path.parent.mkdir(parents=True)
    state = ExecState(
        run_id="run-1",
        failed_brokers=[DEAD],  # a live broker drained, as the decommission does
        throttle_bytes_per_sec=10_000_000,
        chunks=chunks_from_plan_dir(plan),
        drain=True,
    )
    save_state(path, state)
    executor = ChunkExecutor(admin, checkpoint=lambda s: save_state(path, s))
    wait_until(
        lambda: executor.step(state) or all(c.status == "done" for c in state.chunks),
        120,
        1,
        "the only chunk done, the run not finished yet",
    )
    assert not state.finished, "the window this test is about: every chunk done, the run not finished"
    request = StopRequest("kafka_default", "alice", "late", 1, request_id="stop-late")
    stopping = load_state(path)
    done = stop(admin, stopping, request, checkpoint=lambda s: save_state(path, s))
    assert (
        done["cancelled"] == []
        and verify_stopped(admin, {"run-1": (stopping, done["throttle"])}, settle_s=2) == {}
    )
    from kafka_runbooks.failed_broker.stop import ending, stop_headline

    end = ending(stopping)
    assert end.complete and end.line().startswith("NOTHING TO STOP (stopped by alice: late)"), end.line()
    assert stop_headline([{"complete": end.complete}]).startswith("Nothing to stop")
    resumed = load_state(path)
    assert ChunkExecutor(admin, checkpoint=lambda s: save_state(path, s)).step(resumed) is True
    final = load_state(path)
    assert final.finished and final.stopped is None and final.stop_request["after_the_last_chunk"]
    assert leftover_throttles(admin, [1, 2, 3, 4], [topic]) == {}
    assert any("came after the last chunk: nothing was stopped" in r.getMessage() for r in caplog.records)
