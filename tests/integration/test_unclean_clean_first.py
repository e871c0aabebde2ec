"""Unclean recovery on the real stack: clean before unclean (#23.1), and a run killed between
the election and the restore of the replica order leaves the next run to restore it first (#23.3).

What the tests check is read from the cluster (DescribeTopicPartitions), not the runbook's log.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from kafka_runbooks.unclean.elect import ReorderState, pending_restores
from kafka_runbooks.unclean.request import build_request
from kafka_runbooks.unclean.runbook import plan
from tests import unclean_scenario as sc
from tests.helpers import create_topic, produce, unique_topic, wait_until

ROOT = Path(__file__).resolve().parents[2]


def _request(topic: str, partitions: list[int], mode: str = "show_replica_info", **extra):
    return build_request(
        {
            "partitions_json": json.dumps({"partitions": [{"topic": topic, "partitions": partitions}]}),
            "mode": mode,
            "recovery_duration_ms": 10000,
            **extra,
        }
    )


def _partition(admin, topic: str, partition: int = 0):
    return next(p for p in admin.describe_topic_partitions([topic]) if p.partition == partition)


def _partition_or_none(admin, topic: str, partition: int = 0):
    return next((p for p in admin.describe_topic_partitions([topic]) if p.partition == partition), None)


def test_a_stale_live_replica_is_not_offered_while_the_elr_replicas_are_down(restore_stack, admin, tmp_path):
    """[1, 3, 2], min ISR 2: broker 3 stops at 100 records; 100 more are acknowledged by 1 and 2;
    2 and then 1 stop cleanly (they stay in the ELR); 3 comes back. The only live replica lacks
    100 acknowledged records: the plan elects nothing and proposes the clean path."""
    stack = restore_stack
    topic = unique_topic("unclean-elr")
    create_topic(
        stack.bootstrap_servers, topic, assignment={0: [1, 3, 2]}, config={"min.insync.replicas": "2"}
    )
    # a topic just created may not be described yet (UNKNOWN_TOPIC_OR_PARTITION): wait for it too
    wait_until(lambda: len(getattr(_partition_or_none(admin, topic), "isr", ())) == 3, 60, 0.5, "full ISR")
    assert produce(stack.bootstrap_servers, topic, 100, partition=0) == 100
    stack.stop_node(3)
    wait_until(lambda: 3 not in _partition(admin, topic).isr, 60, 0.5, "3 out of the ISR")
    assert produce(stack.bootstrap_servers, topic, 100, partition=0) == 100
    stack.stop_node(2)
    stack.stop_node(1)
    stack.start_node(3, wait=True)

    def offline_with_elr_down():
        p = _partition(admin, topic)
        broker = admin.describe_brokers().get(3)
        return p.leader == -1 and broker is not None and broker.available and 3 not in p.isr + p.elr

    wait_until(offline_with_elr_down, 120, 1, "offline, the ELR replicas down, broker 3 live")
    seen = _partition(admin, topic)
    assert set(seen.isr + seen.elr + seen.last_known_elr) & {1, 2}, seen
    doc = plan(admin, _request(topic, [0], "automated_recovery"), tmp_path)
    [choice] = doc["choices"]
    assert choice["chosen"] is None and choice["unclean_option"] == 3, choice
    assert "CLEAN PATH" in choice["clean_path"] and not choice["committed_loss"].startswith("0")
    assert "Unclean option (NOT chosen): broker 3" in doc["table"]
    allowed = plan(admin, _request(topic, [0], "automated_recovery", allow_committed_loss=True), tmp_path)
    assert allowed["choices"][0]["chosen"] == 3 and "LACKS COMMITTED RECORDS" in allowed["table"]
    assert _partition(admin, topic).leader == -1  # planning elected nothing


def test_a_run_killed_after_the_election_is_restored_first_by_the_next_run(local_stack, admin, tmp_path):
    """kill -9 between the unclean election and the restore: the partition is online with the
    order changed. The next run (a dry run, nothing offline) puts the order back first."""
    built = sc.build(local_stack, admin, "unclean-restore", partitions=1)
    try:
        doc = plan(
            admin, _request(built.topic, [0], "automated_recovery", allow_committed_loss=True), tmp_path
        )
        (tmp_path / "doc.json").write_text(json.dumps(doc))
        script = f"""
import json, os, signal, sys
sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / "include")!r}]
from pathlib import Path
from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.unclean.elect import ReorderState
from kafka_runbooks.unclean.runbook import recover
doc = json.loads(Path({str(tmp_path / "doc.json")!r}).read_text())
def die(step, keys):
    if step == "elected":
        os.kill(os.getpid(), signal.SIGKILL)
with ClusterAdmin({{"bootstrap.servers": {local_stack.bootstrap_servers!r}}}, timeout_s=15) as admin:
    recover(admin, doc, Path({str(tmp_path)!r}), state_file=ReorderState("it", directory=Path({str(tmp_path)!r})),
            between_steps=die)
"""
        proc = subprocess.run([os.sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
        assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
        wait_until(
            lambda: _partition(admin, built.topic).leader == sc.LONGEST, 60, 0.5, "the election happened"
        )
        assert _partition(admin, built.topic).replicas == (2, 1, 3)  # left changed by the dead run
        journal = ReorderState("it", directory=tmp_path)
        assert sorted(pending_restores(journal)) == [f"{built.topic}-0"]
        again = plan(admin, _request(built.topic, [0]), tmp_path / "rerun", state_file=journal)
        assert again["restored_first"] == {f"{built.topic}-0": "restored"}
        assert again["choices"] == [] and again["online"] == [f"{built.topic}-0"]
        after = _partition(admin, built.topic)
        assert after.replicas == tuple(sc.ASSIGNMENT) and after.leader == sc.LONGEST
        assert pending_restores(journal) == {}
    finally:
        sc.restore(local_stack, admin, [built.topic], timeout=600)
