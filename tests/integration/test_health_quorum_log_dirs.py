"""The health sweep's quorum and log-dir sections read from the real stack (issue #28): three
voters with a spare, then a controller killed and the report says there is no spare and names
the voter as not caught up (on the leader's clock); every broker's healthy log dir is read
from its real DescribeLogDirs answer."""

from __future__ import annotations

import json

from kafka_runbooks.health import log_findings
from kafka_runbooks.snapshot import write_snapshot
from kafka_runbooks.snapshot_contract import META_FILE
from tests.helpers import wait_until


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
