"""kafka_log_dir_failure's steps on the lane's real JBOD stack (issue #28; tests/integration/conftest.py): broker 1's second log
dir fails under an acks=all producer; the runbook's library calls (the ones its DAG tasks make)
select the failed dir's replicas from the broker's own DescribeLogDirs answer, the planner plans
with ``--drain-replicas`` in-process, the plan check agrees, the chunk executor moves them under a
throttle, and the cluster read back shows exactly those replicas gone from broker 1, its
healthy dir's replicas still there, everything in sync, no throttle left, no acknowledged
message lost."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.failed_broker import runbook
from kafka_runbooks.failed_broker.execute import ChunkExecutor, ExecState, chunks_from_plan_dir, save_state
from kafka_runbooks.failed_broker.plan import load_plan, read_snapshot_rows
from kafka_runbooks.failed_broker.throttle import leftover_throttles
from kafka_runbooks.log_dir_failure import await_holding, failed_dir_replicas, moved_off
from kafka_runbooks.snapshot import write_snapshot
from tests.e2e.test_broker_restart_dag import Producer
from tests.helpers import create_topic, produce, wait_until
from tests.unclean_scenario import count_messages

ROOT = Path(__file__).resolve().parents[2]
TOPIC = "ldf"
ASSIGNMENT = {0: [1, 2], 1: [2, 1], 2: [1, 3], 3: [3, 1], 4: [1, 2], 5: [2, 3], 6: [1, 3], 7: [3, 1]}
pytestmark = pytest.mark.timeout(600)


def _planner():
    path = ROOT / "spark_jobs" / "failed_broker_plan.py"
    spec = importlib.util.spec_from_file_location("spark_jobs_failed_broker_plan_log_dir", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _with_log_dirs(admin: ClusterAdmin, broker: int):
    state = admin.read_state(include_log_dirs=False)
    state.log_dir_states, state.log_dir_errors = admin.describe_log_dir_states([broker])
    return state


@pytest.mark.compat
def test_exactly_the_failed_dirs_replicas_move_under_acks_all(healthy_jbod_stack, tmp_path):
    stack = healthy_jbod_stack
    bs = stack.bootstrap_servers
    create_topic(bs, TOPIC, assignment=ASSIGNMENT)
    assert produce(bs, TOPIC, 4000, size=200) == 4000
    producer = Producer(bs, TOPIC)
    producer.start()
    with ClusterAdmin({"bootstrap.servers": bs}, timeout_s=15) as admin:
        failing = str(stack.log_dirs(stack.node(1))[1])
        before = {d.path: d for d in _with_log_dirs(admin, 1).log_dir_states[1]}
        truth = sorted((r.topic, r.partition) for r in before[failing].replicas)
        stayed = sorted((r.topic, r.partition) for p, d in before.items() if p != failing for r in d.replicas)
        assert truth and stayed, "broker 1 should hold replicas in both dirs"

        stack.fail_log_dir(1, 2)
        found = wait_until(
            lambda: (f := failed_dir_replicas(_with_log_dirs(admin, 1), 1, None)).offline_dirs and f,
            60,
            0.5,
            "broker 1's failed log dir in its DescribeLogDirs answer",
        )
        assert found.replicas == truth and found.in_healthy_dirs == stayed  # from the broker's own answer
        assert found.chosen_dirs == [failing]

        snapshot = write_snapshot(admin.read_state(), tmp_path / "snapshot")
        out = tmp_path / "plan"
        job = _planner()
        argv = ["--snapshot", str(snapshot), "--out", str(out), "--failed", "1"]
        assert job.run(job.get_spark(), [*argv, "--drain-replicas", found.selection_csv]) == 0
        plan = load_plan(out)
        runbook.review(plan, *read_snapshot_rows(snapshot), plan.summary)  # the independent check agrees
        assert sorted(t.key for t in plan.partitions) == truth
        assert all(1 not in t.replicas for t in plan.partitions)

        state = ExecState(
            run_id="ldf",
            failed_brokers=[1],
            throttle_bytes_per_sec=10 << 20,
            chunks=chunks_from_plan_dir(out),
            drain=True,
        )
        executor = ChunkExecutor(
            admin, checkpoint=lambda s: save_state(tmp_path / "exec.json", s), progress_every_s=0
        )
        wait_until(lambda: executor.step(state), 300, 1, "the executor to finish every chunk")

        kept = stayed

        def settled():
            read = admin.read_state(include_log_dirs=False)
            return moved_off(read, 1, truth, kept)

        result = await_holding(lambda: None, lambda _: settled(), timeout_s=120, settle_s=5, poll_s=1)
        assert result.done, result
        assert leftover_throttles(admin, [1, 2, 3], [TOPIC]) == {}
        after = {(p.topic, p.partition): p for p in admin.read_state(include_log_dirs=False).partitions}
        assert all(1 not in after[k].replicas for k in truth)
        assert all(1 in after[k].replicas for k in stayed)  # the healthy dir's replicas never moved
    producer.stop_event.set()
    producer.join(300)
    assert producer.failed == [] and producer.acked > 0
    total = sum(count_messages(bs, TOPIC, p) for p in ASSIGNMENT)
    assert total >= 4000 + producer.acked  # no acknowledged message lost
