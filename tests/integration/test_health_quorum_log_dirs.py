"""The health sweep's quorum and log-dir sections read from the real stack (issue #28): three
voters with a spare, then a controller killed and the report says there is no spare and names
the voter as not caught up (on the leader's clock); every broker's healthy log dir is read
from its real DescribeLogDirs answer; and on the lane's JBOD stack (tests/integration/conftest.py,
shared with test_log_dir_failure.py), a log dir failed under a live broker is reported with the
replicas that sat in it."""

from __future__ import annotations

import json
from pathlib import Path

from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.health import log_findings
from kafka_runbooks.log_dirs import log_dirs_report
from kafka_runbooks.snapshot import write_snapshot
from kafka_runbooks.snapshot_contract import META_FILE
from tests.helpers import create_topic, produce, wait_until

ROOT = Path(__file__).resolve().parents[2]


def _sections(admin, folder) -> dict:
    """What the sweep's snapshot writes for the report: its quorum and log-dir sections."""
    meta = json.loads((write_snapshot(admin.read_state(), folder) / META_FILE).read_text())
    return {"quorum": meta["quorum"], "log_dirs": meta["log_dirs"]}


def test_the_report_loses_its_spare_voter_when_a_controller_dies(restore_stack, admin, tmp_path):
    stack = restore_stack
    voters = [n.node_id for n in stack.topology.controller_nodes]
    healthy = _sections(admin, tmp_path / "before")
    quorum = healthy["quorum"]
    assert sorted(v["node_id"] for v in quorum["voters"]) == voters
    assert quorum["has_spare"] is True and quorum["majority"] == 2, quorum
    assert quorum["leader_id"] in voters and quorum["leader_epoch"] >= 1
    assert {o["node_id"] for o in quorum["observers"]} >= {n.node_id for n in stack.topology.broker_nodes}
    dirs = {b["broker_id"]: b for b in healthy["log_dirs"]["brokers"]}
    for node in stack.topology.broker_nodes:  # the real answer of a healthy single-dir broker
        assert dirs[node.node_id]["state"] == "ok", dirs[node.node_id]
        assert dirs[node.node_id]["online_dirs"] == [str(stack.node_dir(node) / "data")]
    assert healthy["log_dirs"]["offline_dirs"] == 0 and healthy["log_dirs"]["unknown_brokers"] == []

    victim = next(v for v in voters if v != quorum["leader_id"])
    stack.kill(victim)

    def no_spare():
        sections = _sections(admin, tmp_path / "after")
        return sections if sections["quorum"]["has_spare"] is False else None

    after = wait_until(no_spare, 60, 1, f"the report to see no spare voter once controller {victim} died")
    assert after["quorum"]["not_caught_up_voters"] == [victim], after["quorum"]
    assert len(after["quorum"]["caught_up_voters"]) == 2
    records = log_findings({"counts": {}, **after})
    assert any(
        "no spare voter" in r.decision and r.observed["not_caught_up_voters"] == [victim] for r in records
    )


def test_a_failed_log_dir_is_reported_with_the_replicas_that_sat_in_it(healthy_jbod_stack):
    stack = healthy_jbod_stack
    create_topic(stack.bootstrap_servers, "jbod", 4, 2)
    assert produce(stack.bootstrap_servers, "jbod", 40, size=100) == 40
    with ClusterAdmin({"bootstrap.servers": stack.bootstrap_servers}, timeout_s=15) as admin:
        state = admin.read_state()
        failing = str(stack.log_dirs(stack.node(1))[1])
        before = next(d for d in state.log_dir_states[1] if d.path == failing)  # the real answer
        in_it = sorted(f"{r.topic}-{r.partition}" for r in before.replicas)
        assert in_it, "the broker put no replica in its second log dir"
        assert log_dirs_report(state)["offline_dirs"] == 0

        stack.fail_log_dir(1, 2)

        def offline():
            state = admin.read_state()
            report = log_dirs_report(state)
            # DescribeLogDirs (the broker) and the metadata's offline replicas (the controller,
            # once the broker reported the dir) answer a moment apart: wait for both
            broker = {b["broker_id"]: b for b in report["brokers"]}.get(1, {})
            return (state, report) if report["offline_dirs"] and broker.get("metadata_offline") else None

        state, report = wait_until(
            offline, 60, 0.5, "broker 1's failed log dir in DescribeLogDirs and in the metadata"
        )
    assert state.brokers[1].available  # the broker lives on: the failed-broker sweep sees nothing
    broker = {b["broker_id"]: b for b in report["brokers"]}
    assert broker[1]["offline_dirs"] == [{"path": failing, "error": "KAFKA_STORAGE_ERROR"}]
    assert broker[1]["partitions"] == in_it == broker[1]["metadata_offline"]
    assert broker[2]["state"] == "ok" and len(broker[2]["online_dirs"]) == 2
    records = log_findings({"counts": {}, "log_dirs": report})
    assert [r.decision for r in records] == [
        f"broker 1: 1 log dir(s) offline, {len(in_it)} replica(s) in them"
    ]


class _Clock:
    """The trackers' clock, moved on by the test instead of waiting out the thresholds."""

    def __init__(self) -> None:
        import time

        self.t = time.time()

    def __call__(self) -> float:
        return self.t


def test_the_sweep_reads_the_failed_dir_alerts_then_starts_the_runbook_with_its_conf(jbod_stack, tmp_path):
    """The failed-broker sweep's log-dir logic on the real DescribeLogDirs answer (issue #28): the live
    broker is no failed broker, its offline dir is counted down, alerted, then due; by default the
    sweep alerts only; with the setting on it starts kafka_log_dir_failure for broker 1 with a conf
    that the runbook's own parser and selection read as exactly the replicas the sweep saw."""
    from kafka_runbooks.failed_broker.failures import FailureStore, FailureTracker, Thresholds
    from kafka_runbooks.failed_broker.offline_dirs import (
        OfflineDirStore,
        OfflineDirTracker,
        choose_log_dir_start,
        read_with_log_dirs,
    )
    from kafka_runbooks.log_dir_failure import build_log_dir_request, failed_dir_replicas

    stack, bs = jbod_stack, jbod_stack.bootstrap_servers
    failing = str(stack.log_dirs(stack.node(1))[1])
    if Path(failing).is_dir():  # alone; after the test above, broker 1's dir 2 is failed already
        create_topic(bs, "jbod", 4, 2)
        assert produce(bs, "jbod", 40, size=100) == 40
        stack.fail_log_dir(1, 2)
    clock, th = _Clock(), Thresholds(alert_after_s=60, failure_threshold_s=300)
    # a folder each: given a folder, a state file is <cluster>.json in it (the data store adds state/<kind>/)
    heal = FailureTracker(FailureStore("jbod", tmp_path / "failed"), th, clock=clock)
    dirs = OfflineDirTracker(OfflineDirStore("jbod", tmp_path / "dirs"), th, clock=clock)
    with ClusterAdmin({"bootstrap.servers": bs}, timeout_s=15) as admin:

        def offline():
            state = read_with_log_dirs(admin)  # the sweep's read: every live broker's DescribeLogDirs
            broker = {b["broker_id"]: b for b in log_dirs_report(state)["brokers"]}[1]
            return state if broker.get("offline_dirs") and broker.get("metadata_offline") else None

        state = wait_until(
            offline, 60, 0.5, "broker 1's failed log dir in DescribeLogDirs and in the metadata"
        )
        failed, seen = heal.observe(state), dirs.observe(state)
        assert failed.failed == {} and seen.unknown == {}  # a live broker: no failed broker, both answered
        assert (
            list(seen.offline) == [f"1:{failing}"]
            and seen.offline[f"1:{failing}"].error == "KAFKA_STORAGE_ERROR"
        )
        in_it = {b["broker_id"]: b for b in log_dirs_report(state)["brokers"]}[1]["partitions"]
        assert seen.replicas == {1: in_it} and in_it
        assert seen.alerts == [] and seen.due == []
        clock.t += 61
        seen = dirs.observe(read_with_log_dirs(admin))
        assert seen.alerts == [f"1:{failing}"] and seen.due == []
        clock.t += 240
        state = read_with_log_dirs(admin)
        failed, seen = heal.observe(state), dirs.observe(state)
    assert seen.due == [1]
    assert choose_log_dir_start(seen, sorted(failed.failed), lambda: [], enabled=False) is None
    assert seen.records[-1].decision == "alert only"
    start = choose_log_dir_start(seen, sorted(failed.failed), lambda: [], enabled=True)
    conf = start.conf("jbod", {"max_partitions_per_chunk": 50, "require_approval": True})
    assert conf == {
        "broker_id": 1,
        "log_dir": failing,
        "mode": "move",
        "receivers": "all",
        "max_partitions_per_chunk": 50,
        "require_approval": True,
        "dry_run": False,
        "kafka_config_id": "jbod",
    }
    request = build_log_dir_request(conf)  # what the started run parses, then selects on the cluster
    selected = failed_dir_replicas(state, request.broker_id, request.log_dir)
    assert [f"{t}-{p}" for t, p in selected.replicas] == in_it
    assert start.record("sweep__jbod__x", conf, th.failure_threshold_s).action.startswith(
        "trigger kafka_log_dir_failure run sweep__jbod__x"
    )
