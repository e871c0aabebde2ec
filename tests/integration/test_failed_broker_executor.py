"""The chunk executor against the real stack, with plans written by hand in the contract's format.

One broker is killed for good; the executor moves its replicas chunk by chunk under a
throttle. Along the way: a foreign reassignment in flight is refused, a task "killed"
mid-chunk resumes (and a new run adopts the in-flight partitions) without submitting
anything twice, and a failed broker that comes back stops the run before the next chunk.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest

from kafka_runbooks.failed_broker.execute import (
    MOVING,
    ChunkExecutor,
    ExecState,
    ReassignError,
    ReassignStopped,
    Superseded,
    chunks_from_plan_dir,
    claim,
    fenced_checkpoint,
    load_state,
    save_state,
)
from kafka_runbooks.failed_broker.throttle import leftover_throttles
from tests.helpers import create_topic, produce, unique_topic, wait_until

pytestmark = pytest.mark.timeout(900)
DEAD = 4


def write_plan(folder: Path, chunks: list[list[dict]]) -> Path:
    """kafka-reassign-partitions JSON per chunk + summary.json, as the planner writes them."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "chunks").mkdir(exist_ok=True)
    moves, entries = [], []
    for i, chunk in enumerate(chunks, start=1):
        name = f"chunks/{i:04d}.json"
        body = {
            "version": 1,
            "partitions": [
                {"topic": m["topic"], "partition": m["partition"], "replicas": m["to"]} for m in chunk
            ],
        }
        (folder / name).write_text(json.dumps(body))
        entries.append(
            {"index": i, "file": name, "partitions": len(chunk), "bytes": sum(m["bytes"] for m in chunk)}
        )
        moves.extend({**m, "chunk": i} for m in chunk)
    all_parts = [{"topic": m["topic"], "partition": m["partition"], "replicas": m["to"]} for m in moves]
    (folder / "plan.json").write_text(json.dumps({"version": 1, "partitions": all_parts}))
    summary = {
        "failed_brokers": [DEAD],
        "receivers": [],
        "partitions": len(moves),
        "bytes": sum(m["bytes"] for m in moves),
        "replication_factor_kept": True,
        "chunks": entries,
        "per_broker": {},
        "moves": moves,
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def moves_off(admin, topics: list[str], dead: int) -> list[dict]:
    """Replace ``dead`` in each partition by the live broker not yet in it with the fewest new replicas."""
    state = admin.read_state(topics=topics)
    sizes = {}
    for r in state.log_dirs:
        sizes[(r.topic, r.partition)] = max(sizes.get((r.topic, r.partition), 0), r.size_bytes)
    live = [b for b in state.alive_broker_ids() if b != dead]
    given = dict.fromkeys(live, 0)
    out = []
    for p in sorted(state.partitions, key=lambda p: (p.topic, p.partition)):
        if dead not in p.replicas:
            continue
        receiver = min((b for b in live if b not in p.replicas), key=lambda b: (given[b], b))
        given[receiver] += 1
        to = [receiver if b == dead else b for b in p.replicas]
        out.append(
            {
                "topic": p.topic,
                "partition": p.partition,
                "from": list(p.replicas),
                "to": to,
                "bytes": sizes.get((p.topic, p.partition), 0),
            }
        )
    return out


def clear_throttles(admin) -> None:
    """After a failed test: no throttle may leak into later tests (they would read it as someone else's)."""
    live = [b.broker_id for b in admin.describe_brokers().values() if b.available]
    for name, keys in leftover_throttles(admin, live, admin.list_topics()).items():
        kind, resource = name.split(" ", 1)
        admin.incremental_alter_configs(kind, {resource: {k: ("DELETE", None) for k in keys}})


@pytest.fixture
def no_leftover_throttles(admin):
    yield
    clear_throttles(admin)


@pytest.fixture
def no_throttle_once_back(admin):
    """Listed before ``restore_stack``, so torn down after it restarted what the test killed: a
    throttle left on a broker that was dead at the test's end is cleared once it answers again."""
    yield
    wait_until(
        lambda: all(b.available for b in admin.describe_brokers().values()), 120, 1, "every broker back"
    )
    clear_throttles(admin)


def run(executor: ChunkExecutor, state: ExecState, until=lambda s: s.finished, timeout: float = 300) -> None:
    def advance():
        executor.step(state)
        return until(state)

    wait_until(advance, timeout, 1, "the executor to get there")


def test_chunks_move_a_dead_brokers_replicas_resume_after_a_kill_and_stop_when_it_is_back(
    restore_stack, admin, tmp_path, caplog, no_leftover_throttles
):
    stack = restore_stack
    bs = stack.bootstrap_servers
    caplog.set_level(logging.INFO, logger="kafka_runbooks")
    topics = [unique_topic("heal-a"), unique_topic("heal-b"), unique_topic("heal-c")]
    create_topic(bs, topics[0], assignment={0: [1, 4], 1: [4, 2], 2: [3, 4], 3: [2, 3]})
    create_topic(bs, topics[1], assignment={0: [4, 1, 2], 1: [2, 3, 4], 2: [1, 2, 3]})
    create_topic(bs, topics[2], assignment={0: [4, 3], 1: [1, 4]})
    # the first chunk holds ~3 MB per partition: more than one fetch (1 MB), so the throttle shows
    for t, count in zip(topics, (60000, 20000, 20000), strict=True):
        assert produce(bs, t, count, size=200) == count
    stack.kill(f"broker-{DEAD}")
    wait_until(
        lambda: not admin.describe_brokers().get(DEAD, None) or admin.describe_brokers()[DEAD].fenced,
        60,
        1,
        f"broker {DEAD} fenced",
    )

    # 1. a reassignment nobody in this run started (to the dead broker: it never finishes) is refused
    foreign_topic = unique_topic("foreign")
    create_topic(bs, foreign_topic, assignment={0: [1, 2]})
    assert admin.alter_partition_reassignments({(foreign_topic, 0): [1, 2, DEAD]}) == {
        (foreign_topic, 0): None
    }
    plan_ab = write_plan(
        tmp_path / "plan-ab", [moves_off(admin, [topics[0]], DEAD), moves_off(admin, [topics[1]], DEAD)]
    )
    path = tmp_path / "exec-state.json"
    state = ExecState(
        run_id="r1",
        failed_brokers=[DEAD],
        throttle_bytes_per_sec=50_000,
        chunks=chunks_from_plan_dir(plan_ab),
    )
    save_state(path, state)
    executor = ChunkExecutor(admin, checkpoint=lambda s: save_state(path, s), progress_every_s=0)
    with pytest.raises(ReassignError, match="not started by this run"):
        executor.step(state)
    assert state.throttle is None and all(c.status != MOVING for c in state.chunks)
    admin.alter_partition_reassignments({(foreign_topic, 0): None})
    wait_until(
        lambda: (foreign_topic, 0) not in admin.list_reassignments(), 30, 1, "the foreign one cancelled"
    )

    # 2. the first chunk starts under a low throttle; the "task" is killed mid-chunk
    executor.step(state)
    assert state.chunks[0].status == MOVING and state.throttle is not None
    # the copy rate counts from this submission (nothing of the new replicas existed before)
    assert state.chunks[0].copied_at_start == 0 and state.chunks[0].started_ms is not None
    submitted = set(state.chunks[0].moving)
    assert len(submitted) == 3
    throttled = leftover_throttles(admin, [1, 2, 3], topics)
    assert throttled, "the throttle is set while the chunk moves"
    # the killed run's throttle stays on until its cleanup task runs (below, after the new run took
    # over), so the chunk is still copying at 50 kB/s when the new run looks. Taking it off first
    # let the copy finish before the new run's first look on a loaded machine (nothing to adopt).
    assert load_state(path).throttle is not None  # recorded: whoever cleans up knows what to take off
    # a NEW run with the same targets adopts the partitions in flight instead of submitting them again
    caplog.clear()
    other = ExecState(
        run_id="r2",
        failed_brokers=[DEAD],
        throttle_bytes_per_sec=2_000_000,
        chunks=chunks_from_plan_dir(plan_ab),
    )
    other_path = tmp_path / "exec-state-r2.json"
    second = ChunkExecutor(
        admin,
        checkpoint=lambda s: save_state(other_path, s),
        progress_every_s=0,
        progress_file=tmp_path / "progress.json",
    )
    second.step(other)
    inflight_now = {f"{t}:{p}" for t, p in admin.list_reassignments()}
    adopted = [
        r
        for r in caplog.records
        if "DECISION execute" in r.getMessage() and ": adopt because" in r.getMessage()
    ]
    submits = [
        r for r in caplog.records if "DECISION execute" in r.getMessage() and ": submit" in r.getMessage()
    ]
    assert adopted, "nothing was still in flight to adopt (the chunk finished too fast: more data)"
    assert len(adopted) >= len(inflight_now & submitted)
    assert submits == [], "a new run submitted again what was already in flight"
    run(second, other)
    progress = [r.getMessage() for r in caplog.records if ": progress because" in r.getMessage()]
    assert progress and all("time left" in line or "| done" in line for line in progress)
    # chunk 1 was adopted: its rate counts from this run's first look, not from a submission it did not make
    assert "chunk 1 of 2" in progress[0] and "since adopted" in progress[0], progress
    assert "chunk 1 of 2" in progress[0] and "% bytes" in progress[0] and "% partitions" in progress[0]
    assert any("chunk 2 of 2" in line and "B/s since submission" in line for line in progress), progress
    written = json.loads((tmp_path / "progress.json").read_text())  # what the Kafka page shows
    assert written["finished"] and written["percent_bytes"] == 100.0 and written["chunks"] == 2
    # the killed run's cleanup task runs late: it takes off what it recorded (the new run put back
    # the rates it had found, the killed run's); only then is the cluster clean
    resumed = load_state(path)
    ChunkExecutor(admin, checkpoint=lambda s: save_state(path, s)).remove_throttle(resumed)
    assert load_state(path).throttle is None

    # the result: nothing names the dead broker, full ISR, no throttle left
    parts = admin.describe_partitions(topics[:2])
    assert all(DEAD not in p.replicas for p in parts), [(p.name, p.replicas) for p in parts]
    assert all(set(p.isr) == set(p.replicas) for p in parts)
    assert leftover_throttles(admin, [1, 2, 3], topics) == {}
    # the killed run's state, resumed, finds everything in place: nothing moves twice
    caplog.clear()
    resumed = load_state(path)
    run(ChunkExecutor(admin, checkpoint=lambda s: save_state(path, s)), resumed)
    assert not [r for r in caplog.records if ": submit" in r.getMessage()]

    # 3. the failed broker comes back between chunks: the run stops before the next one, saying why
    moves_c = moves_off(admin, [topics[2]], DEAD)
    plan_c = write_plan(tmp_path / "plan-c", [moves_c[:1], moves_c[1:]])
    path_c = tmp_path / "exec-state-c.json"
    state_c = ExecState(
        run_id="r3",
        failed_brokers=[DEAD],
        throttle_bytes_per_sec=10_000_000,
        chunks=chunks_from_plan_dir(plan_c),
    )
    exec_c = ChunkExecutor(admin, checkpoint=lambda s: save_state(path_c, s))
    run(exec_c, state_c, until=lambda s: s.chunks[0].status == "done")
    stack.start_node(f"broker-{DEAD}")
    stack.wait_ready([f"broker-{DEAD}"], 180)
    wait_until(
        lambda: admin.describe_brokers().get(DEAD) and admin.describe_brokers()[DEAD].available,
        60,
        1,
        "broker back",
    )
    with pytest.raises(ReassignStopped, match="came back before chunk 2"):
        exec_c.step(state_c)
    assert load_state(path_c).stopped and state_c.throttle is None
    assert leftover_throttles(admin, [1, 2, 3, 4], topics) == {}


def test_a_superseded_process_acts_no_more(restore_stack, admin, tmp_path, caplog, no_leftover_throttles):
    """A task Airflow marked failed or cleared runs on for seconds (Airflow 3.3.2: until the next
    heartbeat, then SIGTERM only calls on_kill, then SIGKILL 5 s later). Once a newer attempt or
    the cleanup claimed the run's state, its next step must fail before it acts: no chunk
    submitted, no throttle set or taken off. Seen on the real stack before the fence: a killed
    poke submitted the next chunk and set a throttle that outlived both attempts."""
    stack = restore_stack
    bs = stack.bootstrap_servers
    topics = [unique_topic("fence-a"), unique_topic("fence-b")]
    create_topic(bs, topics[0], assignment={0: [1, 4], 1: [4, 2]})
    create_topic(bs, topics[1], assignment={0: [4, 3], 1: [2, 4]})
    for t in topics:
        assert produce(bs, t, 2000, size=200) == 2000
    stack.kill(f"broker-{DEAD}")
    wait_until(
        lambda: not admin.describe_brokers().get(DEAD, None) or admin.describe_brokers()[DEAD].fenced,
        60,
        1,
        f"broker {DEAD} fenced",
    )
    plan = write_plan(
        tmp_path / "plan", [moves_off(admin, [topics[0]], DEAD), moves_off(admin, [topics[1]], DEAD)]
    )
    path = tmp_path / "exec-state.json"
    save_state(
        path,
        ExecState(
            run_id="r",
            failed_brokers=[DEAD],
            throttle_bytes_per_sec=10_000_000,
            chunks=chunks_from_plan_dir(plan),
        ),
    )

    # attempt 1 claims and submits chunk 1 under its throttle
    first = claim(path, "attempt 1")
    zombie = ChunkExecutor(admin, checkpoint=fenced_checkpoint(path, first.fence), progress_every_s=0)
    zombie.step(first)
    assert first.chunks[0].status == MOVING and first.throttle is not None
    # the cleanup (or a newer attempt) claims, takes the throttle off; attempt 1 is still running
    cleanup = claim(path, "throttle cleanup")
    ChunkExecutor(admin, checkpoint=fenced_checkpoint(path, cleanup.fence)).remove_throttle(cleanup)
    assert leftover_throttles(admin, [1, 2, 3], topics) == {}
    # chunk 1 finishes (10 MB/s): attempt 1's next steps would verify it and start chunk 2
    wait_until(
        lambda: not set(admin.list_reassignments()) & {(topics[0], 0), (topics[0], 1)},
        120,
        1,
        "chunk 1 copied",
    )
    # stepped until its next write (a step that only waits for chunk 1's replicas writes nothing:
    # on 4.0.2 five steps were not enough to get past that wait)
    with pytest.raises(Superseded, match="throttle cleanup claimed this run's state"):
        wait_until(lambda: zombie.step(first) and False, 120, 0.5, "the superseded process's next write")
    assert not [tp for tp in admin.list_reassignments() if tp[0] == topics[1]], (
        "the superseded process submitted"
    )
    assert leftover_throttles(admin, [1, 2, 3], topics) == {}, "the superseded process set a throttle"
    on_disk = load_state(path)
    assert on_disk.claimed_by == "throttle cleanup" and on_disk.chunks[1].status == "pending"

    # a process told to stop by on_kill (halted) acts no more either, even holding the latest claim
    second = claim(path, "attempt 2")
    killed = ChunkExecutor(
        admin,
        checkpoint=fenced_checkpoint(path, second.fence, lambda: "this task was killed"),
        progress_every_s=0,
    )
    with pytest.raises(Superseded, match="this task was killed"):
        killed.step(second)
    assert not [tp for tp in admin.list_reassignments() if tp[0] == topics[1]]

    # the live claimant goes on and finishes: chunk 1 verified, chunk 2 moved, nothing left
    third = claim(path, "attempt 3")
    run(ChunkExecutor(admin, checkpoint=fenced_checkpoint(path, third.fence), progress_every_s=0), third)
    parts = admin.describe_partitions(topics)
    assert all(DEAD not in p.replicas for p in parts)
    assert leftover_throttles(admin, [1, 2, 3], topics) == {}


def test_a_receiver_killed_mid_chunk_ends_the_run_with_a_decision_and_no_throttle_is_left(
    no_throttle_once_back, restore_stack, admin, tmp_path, caplog
):
    """Issue #37, seen on the real stack: receiver 3 killed -9 in the middle of a chunk left the run
    waiting with no end ("chunk 1 of 2 | 0 % bytes" four minutes on), and once broker 3 was back its
    leader/follower.replication.throttled.rate were still set. Now every poll says it (WARNING, how
    long, the bytes waiting), and past broker.session.timeout.ms (6 s here) plus 60 s the run cancels
    its move to broker 3, puts the replica order back, fails naming the receiver; its other move goes
    on; every throttle comes off, broker 3's once it answers again."""
    stack = restore_stack
    bs = stack.bootstrap_servers
    caplog.set_level(logging.INFO, logger="kafka_runbooks")
    big, small = unique_topic("silent-big"), unique_topic("silent-small")
    create_topic(bs, big, assignment={0: [4, 1]})
    create_topic(bs, small, assignment={0: [2, 4]})
    assert produce(bs, big, 15000, size=200) == 15000  # ~3 MB: a minute at 50 kB/s
    assert produce(bs, small, 200, size=200) == 200
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
            [
                {"topic": big, "partition": 0, "from": [4, 1], "to": [3, 1], "bytes": 3_000_000},
                {"topic": small, "partition": 0, "from": [2, 4], "to": [2, 1], "bytes": 40_000},
            ],
            [{"topic": big, "partition": 0, "from": [3, 1], "to": [3, 2], "bytes": 3_000_000}],
        ],
    )
    path = tmp_path / "exec-state.json"
    state = ExecState(
        run_id="silent",
        failed_brokers=[DEAD],
        throttle_bytes_per_sec=50_000,
        chunks=chunks_from_plan_dir(plan),
    )
    save_state(path, state)
    executor = ChunkExecutor(admin, checkpoint=lambda s: save_state(path, s), progress_every_s=0)
    executor.step(state)
    assert state.chunks[0].status == MOVING and (big, 0) in admin.list_reassignments()
    assert leftover_throttles(admin, [3], [])["broker 3"], "the receiver's rates are set"

    stack.kill("broker-3")  # kill -9, mid-chunk
    killed = time.monotonic()
    with pytest.raises(ReassignError, match=r"receiver\(s\) \[3\] stopped answering") as ended:
        wait_until(lambda: executor.step(state) and False, 240, 1, "the run to decide on the silent receiver")
    waited = time.monotonic() - killed
    assert 60 <= waited <= 150, f"decided {waited:.0f} s after the kill (6 s session + 60 s bound)"
    assert "broker 3 for" in str(ended.value) and "trigger a new run" in str(ended.value)
    said = [
        r.getMessage()
        for r in caplog.records
        if "a receiver does not answer itself because" in r.getMessage()
    ]
    assert len(said) >= 10, "said every poll"
    assert any("3000000 bytes planned" in m for m in said), said[-1]

    # the move to broker 3 is cancelled and back in its order; the other move was not touched
    assert (big, 0) not in admin.list_reassignments()
    wait_until(
        lambda: list(admin.describe_partitions([big])[0].replicas) == [4, 1], 30, 1, "big-0 back as [4, 1]"
    )
    small_now = admin.describe_partitions([small])[0]
    assert (small, 0) in admin.list_reassignments() or list(small_now.replicas) == [2, 1]
    final = load_state(path)
    assert final.gave_up and final.chunks[0].cancelled == {f"{big}:0": "receiver(s) [3] silent"}
    assert final.chunks[1].status == "pending", "no further chunk"
    # the throttle is off every live broker and the topics; broker 3's is recorded until it answers
    assert leftover_throttles(admin, [1, 2], [big, small]) == {}
    assert list(final.throttle.brokers) == ["3"]

    # the cleanup task while broker 3 is dead leaves it recorded; once broker 3 is back its rates are
    # still set on it, and the cleanup (or any later run's validate) takes them off
    live = {b.broker_id for b in admin.describe_brokers().values() if b.available}
    assert list(
        ChunkExecutor(admin, checkpoint=lambda s: save_state(path, s)).remove_throttle(final, live)
    ) == ["broker 3"]
    stack.start_node("broker-3")
    stack.wait_ready(["broker-3"], 180)
    wait_until(lambda: admin.broker_answers(3) is None, 60, 1, "broker 3 answering")
    assert leftover_throttles(admin, [3], [])["broker 3"], "the run's rates outlived broker 3's death"
    leftover = load_state(path)
    live = {b.broker_id for b in admin.describe_brokers().values() if b.available}
    assert (
        ChunkExecutor(admin, checkpoint=lambda s: save_state(path, s)).remove_throttle(leftover, live) == {}
    )
    assert leftover_throttles(admin, [1, 2, 3], [big, small]) == {}
    assert load_state(path).throttle is None
    with pytest.raises(ReassignStopped, match="does not go on"):
        executor.step(load_state(path))
