"""kafka_rebalance's steps on the session's real stack (4 brokers, racks a/b/a/b): a topic placed
only on brokers 1-3 is rebalanced onto broker 4 (add-brokers), and a topic of replication factor 1
is raised to 3 (mode replication-factor) and, asked to, lowered back to 2, each under an acks=all
producer, with
the library calls the DAG's tasks make: the request and broker choice, broker 4's room from its
own DescribeLogDirs answer, the planner's ``--rebalance`` in-process, the independent plan check,
the chunk executor under a throttle, the leader-only moves, the preferred-leader election, and
the spreads read back until they hold.

The session stack carries other tests' topics; the plan here sees the test topic only (the
cluster state filtered to it before the snapshot), so the run moves nothing of theirs and the
spreads judged are the topic's.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from kafka_runbooks.balance_rules import bytes_spread_limit, within_bytes_spread
from kafka_runbooks.evidence import silent_brokers
from kafka_runbooks.failed_broker import runbook
from kafka_runbooks.failed_broker.execute import ChunkExecutor, ExecState, chunks_from_plan_dir, save_state
from kafka_runbooks.failed_broker.leaders import elect_preferred_leaders
from kafka_runbooks.failed_broker.plan import load_plan, read_snapshot_rows
from kafka_runbooks.failed_broker.report import plan_markdown
from kafka_runbooks.failed_broker.request import RequestError
from kafka_runbooks.failed_broker.throttle import leftover_throttles
from kafka_runbooks.health import BALANCED, OUT_OF_SPREAD, judge_balance, log_findings
from kafka_runbooks.log_dir_failure import await_holding
from kafka_runbooks.rebalance import (
    BYTES_WITHIN,
    apply_leader_moves,
    build_rebalance_request,
    judge_bytes,
    judge_spread,
    record_bytes,
    resolve_rebalance,
    room,
    spread_now,
)
from kafka_runbooks.replication_factor import (
    build_rf_request,
    check_lowering,
    judge_rf,
    rf_markdown,
    select_topics,
)
from kafka_runbooks.snapshot import write_snapshot
from tests.e2e.test_broker_restart_dag import Producer
from tests.helpers import SHARED_DISK_CEILING, create_topic, produce, unique_topic, wait_until
from tests.unclean_scenario import count_messages

ROOT = Path(__file__).resolve().parents[2]
PAIRS = ([1, 2], [2, 3], [3, 1])  # racks (a, b), (b, a), (a, a): 8 replicas and 4 leaderships each
ASSIGNMENT = {p: PAIRS[p % 3] for p in range(12)}

pytestmark = pytest.mark.timeout(300)


def _planner(name: str = "failed_broker_plan"):
    path = ROOT / "spark_jobs" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"spark_jobs_{name}_rebalance_it", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _only(state, topic: str):
    """The cluster as the plan sees it: the test's topic only (its log dirs listing only its replicas)."""
    return dataclasses.replace(
        state,
        partitions=[p for p in state.partitions if p.topic == topic],
        log_dirs=[r for r in state.log_dirs if r.topic == topic],
        log_dir_states={
            b: tuple(
                dataclasses.replace(d, replicas=tuple(r for r in d.replicas if r.topic == topic))
                for d in dirs
            )
            for b, dirs in state.log_dir_states.items()
        },
    )


def test_add_brokers_onto_broker_4_under_acks_all_ends_within_the_spread(restore_stack, admin, tmp_path):
    bs = restore_stack.bootstrap_servers
    topic = unique_topic("rebal")
    create_topic(bs, topic, assignment=ASSIGNMENT)
    assert produce(bs, topic, 2000, size=200) == 2000
    producer = Producer(bs, topic)
    producer.start()
    try:
        request = build_rebalance_request(
            {
                "mode": "add-brokers",
                "new_brokers": "4",
                "max_replica_spread": "1",
                "max_leader_spread": "1",
                "max_disk_usage_percent": SHARED_DISK_CEILING,
            }
        )
        state = _only(admin.read_state(), topic)
        assert resolve_rebalance(request, state) == ([1, 2, 3], [4])
        dirs, _ = admin.describe_log_dir_states([4])
        room_bytes = room(dirs, [4], float(request.max_disk_usage_percent))
        assert room_bytes.get(4, 0) > 0  # broker 4 reports its dir's total and usable bytes
        snapshot = write_snapshot(state, tmp_path / "snapshot")
        out = tmp_path / "plan"
        job = _planner()
        flags = [
            "--rebalance=add-brokers",
            "--new-brokers=4",
            "--max-replica-spread=1",
            "--max-leader-spread=1",
        ]
        argv = ["--snapshot", str(snapshot), "--out", str(out), "--failed", "1,2,3", "--receivers", "4"]
        assert job.run(job.get_spark(), [*argv, *flags, f"--room=4={room_bytes[4]}"]) == 0
        plan = load_plan(out)
        runbook.review(plan, *read_snapshot_rows(snapshot), plan.summary)  # the independent check agrees
        summary = plan.summary
        assert (
            summary["reached"]
            and summary["replica_moves"] == summary["spread"]["replicas"]["lower_bound_moves"]
        )
        assert "lower bound of moves" in plan_markdown(summary, 10 << 20, str(out), True)
        for t in plan.partitions:  # replicas only onto the new broker
            assert set(t.replicas) - set(ASSIGNMENT[t.partition]) == {4}

        state = ExecState("rebal", [1, 2, 3], 10 << 20, chunks_from_plan_dir(out), drain=True)
        executor = ChunkExecutor(
            admin, checkpoint=lambda s: save_state(tmp_path / "exec.json", s), progress_every_s=0
        )
        wait_until(lambda: executor.step(state), 120, 1, "the executor to finish every chunk")
        proof = _approved(
            {"chunks": [c.targets for c in state.chunks], "leader_moves": summary["leader_moves"]}
        )  # what the approval check hands the write functions for this plan
        moves = apply_leader_moves(admin, summary["leader_moves"], proof)
        assert moves.errors == {} and moves.skipped == {}
        keys = {f"{t.topic}:{t.partition}" for t in plan.partitions} | set(moves.submitted)
        elected = elect_preferred_leaders(
            read=lambda: admin.describe_topic_partitions([topic]),
            elect=admin.elect_preferred,
            keys=keys,
            approval=proof,
            silent=lambda brokers: silent_brokers(admin, brokers),
            timeouts=admin.cluster_timeouts(),
            settle_s=2,
            poll_s=1,
        )
        assert elected.ok, elected

        def judged(read):
            in_sync = all(len(set(p.isr)) == len(p.replicas) for p in read.partitions)
            seen = judge_spread(read, summary)
            return dataclasses.replace(seen, done=seen.done and in_sync)

        seen = await_holding(
            lambda: _only(admin.read_state(include_log_dirs=False), topic),
            judged,
            timeout_s=60,
            settle_s=5,
            poll_s=1,
        )
        assert seen.done and seen.now.figures["replicas"] <= 1 and seen.now.figures["leaders"] <= 1, seen
        assert seen.now.replicas[4] == 6 and seen.now.leaders[4] >= 2, seen  # 24 replicas, 12 leaders over 4
        assert leftover_throttles(admin, [1, 2, 3, 4], [topic]) == {}
    finally:
        producer.stop_event.set()
        producer.join(300)
    assert producer.failed == [] and producer.acked > 0
    total = sum(count_messages(bs, topic, p) for p in ASSIGNMENT)
    assert total >= 2000 + producer.acked  # no acknowledged message lost
    _full_rebalance_by_bytes(bs, admin, tmp_path / "bytes")


# replication factor 1, two partitions a broker: brokers 1 and 2 hold the large ones, 3 and 4 the small
BYTES_SKEW = {p: [p % 4 + 1] for p in range(8)}
LARGE = {0, 1, 4, 5}


def _topic_bytes(admin, topic: str) -> dict[int, int | None]:
    """Bytes of ``topic`` each broker holds, as its own DescribeLogDirs answer has them."""
    dirs, errors = admin.describe_log_dir_states([1, 2, 3, 4])
    return {
        b: None if b in errors else sum(r.size_bytes for d in dirs[b] for r in d.replicas if r.topic == topic)
        for b in (1, 2, 3, 4)
    }


def _full_rebalance_by_bytes(bs: str, admin, tmp_path: Path) -> None:
    """A full rebalance of a topic whose replicas are even per broker but whose bytes are not (600 KB
    on brokers 1 and 2, 20 KB on 3 and 4): the health job's report on its snapshot flags the bytes
    alone out of the 20 % target (the planner's rule unit); the plan swaps a large replica for a
    small one twice (counts kept), and the verification's read-back (``judge_bytes`` on
    DescribeLogDirs, ``record_bytes``) finds the bytes within the target the plan reached."""
    topic = unique_topic("rebal-bytes")
    create_topic(bs, topic, assignment=BYTES_SKEW, config={"min.insync.replicas": "1"})
    for p in BYTES_SKEW:
        assert produce(bs, topic, 300 if p in LARGE else 10, partition=p, size=1000) == (
            300 if p in LARGE else 10
        )
    request = build_rebalance_request(
        {"mode": "full", "max_replica_spread": "1", "max_leader_spread": "1", "max_bytes_spread_percent": 20}
    )
    now = spread_now(admin.read_state(), request)  # validate's reading: every live broker's log dirs
    assert sorted(now.bytes) == [1, 2, 3, 4] and None not in now.bytes.values(), now.bytes
    assert now.bytes_limit is not None and now.figures["bytes"] is not None
    sizes = _topic_bytes(admin, topic)
    limit = bytes_spread_limit(request.max_bytes_spread_percent, sizes, [1, 2, 3, 4])
    assert within_bytes_spread(sizes, [1, 2, 3, 4], limit) is False, (sizes, limit)  # skewed by bytes
    state = _only(admin.read_state(), topic)
    snapshot, out = write_snapshot(state, tmp_path / "snapshot"), tmp_path / "plan"
    _health_flags_the_bytes_alone(snapshot, tmp_path / "health", sizes)
    _run_plan(
        snapshot,
        out,
        [
            "--rebalance=full",
            "--max-replica-spread=1",
            "--max-leader-spread=1",
            f"--max-bytes-spread-percent={request.max_bytes_spread_percent}",
        ],
    )
    plan = load_plan(out)
    runbook.review(plan, *read_snapshot_rows(snapshot), plan.summary)  # the bytes family agrees
    assert plan.summary["reached"] and plan.summary["replica_moves"] == 4, plan.summary  # two swaps
    exec_state = ExecState("rebal-bytes", [1, 2, 3, 4], 10 << 20, chunks_from_plan_dir(out), drain=True)
    executor = ChunkExecutor(
        admin, checkpoint=lambda s: save_state(tmp_path / "exec.json", s), progress_every_s=0
    )
    wait_until(lambda: executor.step(exec_state), 120, 1, "the executor to finish the swaps")
    seen = await_holding(  # the verify step's read-back, on the topic's bytes: held, as after its settle
        lambda: _only(admin.read_state(), topic),
        lambda read: judge_bytes(read, plan.summary),
        timeout_s=60,
        settle_s=2,
        poll_s=1,
    )
    assert record_bytes(seen)["state"] == BYTES_WITHIN and seen.plan_reached, seen.observed()
    assert seen.limit == bytes_spread_limit("20", seen.sizes, [1, 2, 3, 4]) and seen.spread <= seen.limit
    assert seen.sizes == _topic_bytes(
        admin, topic
    )  # the topic's bytes as each broker's DescribeLogDirs has them
    replicas = admin.read_state([topic], include_log_dirs=False).partitions
    assert sorted(b for p in replicas for b in p.replicas) == [1, 1, 2, 2, 3, 3, 4, 4]  # counts kept
    assert leftover_throttles(admin, [1, 2, 3, 4], [topic]) == {}


def _health_flags_the_bytes_alone(snapshot: Path, out: Path, sizes: dict[int, int | None]) -> None:
    """The health job on the skewed topic's snapshot (the real DescribeLogDirs sizes): each broker's
    bytes in the report are the topic's bytes on it, and the sweep's judgement flags the bytes alone
    out of the 20 % target with the planner's unit (replicas and preferred leaders even)."""
    job = _planner("cluster_health")
    assert job.run(job.get_spark(), ["--snapshot", str(snapshot), "--output", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    report["log_dirs"] = json.loads((snapshot / "meta.json").read_text())["log_dirs"]  # as the sweep adds it
    assert {b["broker_id"]: b["size_bytes"] for b in report["brokers"] if b["broker_id"] in sizes} == sizes
    targets = {"max_replica_spread": "1", "max_leader_spread": "1", "max_bytes_spread_percent": "20"}
    judged = judge_balance(report, targets)
    assert [k.state for k in judged.kinds] == [BALANCED, BALANCED], judged
    assert (judged.bytes.state, judged.state) == (OUT_OF_SPREAD, OUT_OF_SPREAD), judged.bytes
    report["balance"] = judged.as_dict()
    assert any(r.decision.startswith("out of the target spread: bytes spread") for r in log_findings(report))


RF_ONE = {p: [p + 1] for p in range(4)}  # replication factor 1, one partition on each broker


def _run_plan(snapshot: Path, out: Path, flags: list[str]) -> None:
    job = _planner()
    argv = ["--snapshot", str(snapshot), "--out", str(out), "--failed", "1,2,3,4", "--receivers", "1,2,3,4"]
    assert job.run(job.get_spark(), [*argv, *flags]) == 0


def test_replication_factor_1_to_3_under_acks_all_spreads_racks_and_loses_nothing(
    restore_stack, admin, tmp_path
):
    bs = restore_stack.bootstrap_servers
    topic = unique_topic("rf")
    # min ISR 1: the stack's cluster-wide 2 would refuse every acks=all write to one replica
    create_topic(bs, topic, assignment=RF_ONE, config={"min.insync.replicas": "1"})
    assert produce(bs, topic, 2000, size=200) == 2000
    producer = Producer(bs, topic)
    producer.start()
    try:
        params = {"mode": "replication-factor", "replication_factor": 3, "topics": topic}
        request = build_rebalance_request({**params, "max_disk_usage_percent": SHARED_DISK_CEILING})
        state = _only(admin.read_state(), topic)
        assert resolve_rebalance(request, state) == ([1, 2, 3, 4], [1, 2, 3, 4])
        assert select_topics(build_rf_request(params), state).below == {topic: 4}
        with pytest.raises(RequestError, match=r"replication factor 5 is above the 4 live broker\(s\)"):
            select_topics(build_rf_request({**params, "replication_factor": 5}), state)
        dirs, _ = admin.describe_log_dir_states([1, 2, 3, 4])
        room_bytes = room(dirs, [1, 2, 3, 4], float(request.max_disk_usage_percent))
        assert sorted(room_bytes) == [1, 2, 3, 4]  # every broker reports its dirs' total and usable bytes
        snapshot, out = write_snapshot(state, tmp_path / "snapshot"), tmp_path / "plan"
        room_flag = ",".join(f"{b}={n}" for b, n in sorted(room_bytes.items()))
        _run_plan(
            snapshot,
            out,
            [
                "--rebalance=replication-factor",
                "--replication-factor=3",
                f"--topics={topic}",
                f"--room={room_flag}",
            ],
        )
        plan = load_plan(out)
        runbook.review(plan, *read_snapshot_rows(snapshot), plan.summary)  # the check replays the rule
        assert plan.summary["replicas_added"] == 8 and plan.summary["raised"] == {topic: 4}
        assert "**8** replica(s) added" in rf_markdown(plan.summary, 10 << 20, str(out))

        after, racks = _execute_rf_plan(admin, topic, out, tmp_path / "exec.json", 3, 120)
        for p in after.partitions:
            assert p.replicas[0] == RF_ONE[p.partition][0]  # the existing replica keeps its place
            assert len({racks[b] for b in p.replicas}) == 2, (p, racks)  # both racks of the stack
            assert len(set(p.isr)) == 3, p
        assert leftover_throttles(admin, [1, 2, 3, 4], [topic]) == {}
        _lower_to_2(restore_stack, admin, topic, tmp_path)
    finally:
        producer.stop_event.set()
        producer.join(300)
    assert producer.failed == [] and producer.acked > 0
    total = sum(count_messages(bs, topic, p) for p in RF_ONE)
    assert total >= 2000 + producer.acked  # no acknowledged message lost


def _execute_rf_plan(admin, topic: str, out: Path, checkpoint: Path, rf: int, timeout_s: float):
    """Run the plan's chunks to the end, then read back until every partition of ``topic`` holds
    ``rf`` replicas through a settle period: the cluster read after, and each broker's rack."""
    exec_state = ExecState(f"rf-{rf}", [1, 2, 3, 4], 10 << 20, chunks_from_plan_dir(out), drain=True)
    executor = ChunkExecutor(admin, checkpoint=lambda s: save_state(checkpoint, s), progress_every_s=0)
    wait_until(lambda: executor.step(exec_state), timeout_s, 1, f"the executor to reach RF {rf}")
    seen = await_holding(
        lambda: admin.read_state([topic], include_log_dirs=False),
        lambda read: judge_rf(read, [topic], rf),
        timeout_s=60,
        settle_s=3,
        poll_s=1,
    )
    assert seen.done, seen.observed()
    after = admin.read_state([topic], include_log_dirs=False)
    return after, {b: info.rack for b, info in after.brokers.items()}


def _lower_to_2(stack, admin, topic: str, tmp_path: Path) -> None:
    """The raised topic lowered from 3 to 2 replicas under the same producer: refused unless asked;
    a target below a topic's effective min.insync.replicas (the stack's cluster-wide 2, read from
    the broker) is refused; the planner drops one replica per partition keeping the preferred leader
    and both racks, the check replays it, the gate names the dropped replicas, the executor submits
    the smaller set and the read-back sees it (not a run that calls a subset of its replicas done)."""
    params = {"mode": "replication-factor", "replication_factor": 2, "topics": topic}
    with pytest.raises(RequestError, match="set allow_replication_factor_decrease"):
        select_topics(build_rf_request(params), _only(admin.read_state(), topic))
    strict = unique_topic("rf-strict")
    create_topic(stack.bootstrap_servers, strict, partitions=1, replication_factor=3)
    wait_until(lambda: admin.read_state([strict], include_log_dirs=False).partitions, 30, 0.5, "the topic")
    low = build_rf_request(
        {**params, "replication_factor": 1, "topics": strict, "allow_replication_factor_decrease": True}
    )
    chosen = select_topics(low, admin.read_state([strict], include_log_dirs=False))
    with pytest.raises(
        RequestError, match=r"below the effective min.insync.replicas of topic\(s\) \{'rf-strict"
    ):
        check_lowering(chosen, admin.read_state([strict]), admin.min_insync_replicas([strict]))

    request = build_rf_request({**params, "allow_replication_factor_decrease": True})
    state = _only(admin.read_state(), topic)
    selection = select_topics(request, state)
    assert selection.above == {topic: 4} and selection.below == {}
    check_lowering(selection, state, admin.min_insync_replicas([topic]))  # min ISR 1, all in sync
    snapshot, out = write_snapshot(state, tmp_path / "snapshot-low"), tmp_path / "plan-low"
    flags = ["--rebalance=replication-factor", "--replication-factor=2", f"--topics={topic}"]
    _run_plan(snapshot, out, [*flags, "--allow-replication-factor-decrease=true"])
    plan = load_plan(out)
    runbook.review(plan, *read_snapshot_rows(snapshot), plan.summary)  # the check replays the drop rule
    assert plan.summary["replicas_removed"] == 4 and plan.summary["lowered"] == {topic: 4}
    text = rf_markdown(plan.summary, 10 << 20, str(out))
    assert "**4** replica(s) dropped" in text and "| dropped |" in text

    after, racks = _execute_rf_plan(admin, topic, out, tmp_path / "low.json", 2, 60)
    for p in after.partitions:
        assert p.replicas[0] == RF_ONE[p.partition][0]  # the preferred leader stays
        assert len({racks[b] for b in p.replicas}) == 2 and set(p.isr) == set(p.replicas), (p, racks)
    assert leftover_throttles(admin, [1, 2, 3, 4], [topic]) == {}


def _approved(action: dict) -> object:
    """The proof of an approval of ``action`` (a reassignment with the election on), as the approval
    check hands it out after the gate approved the plan's digest."""
    from kafka_runbooks.approval import APPROVED, plan_digest
    from kafka_runbooks.approval_proof import approved_action

    action = {**action, "elect_preferred_leaders": True, "dry_run": False}
    digest = plan_digest(action)
    return approved_action({"outcome": APPROVED, "digest": digest, "by": {"id": "test"}}, digest, action)
