"""Unclean recovery on the real stack: the longest live log is found, chosen and elected.

One scenario (tests/unclean_scenario.py) serves the module: three offline partitions
assigned [1, 3, 2]; broker 1 (300 messages) is dead, broker 3 holds 100, broker 2 holds
200 and neither is in the ISR or ELR. Kafka's own unclean election would take broker 3.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from kafka_runbooks.unclean import elect as outcomes
from kafka_runbooks.unclean.request import RecoveryInputError, build_request
from kafka_runbooks.unclean.runbook import plan, recover
from tests import unclean_scenario as sc
from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def scenario(local_stack):
    from kafka_runbooks.admin import ClusterAdmin

    with ClusterAdmin({"bootstrap.servers": local_stack.bootstrap_servers}, timeout_s=15) as admin:
        built = sc.build(local_stack, admin, "unclean-it", partitions=3)
        try:
            yield built
        finally:
            sc.restore(local_stack, admin, [built.topic], timeout=600)


def _request(topic: str, partitions: list[int], mode: str = "show_replica_info", **extra):
    return build_request(
        {
            "partitions_json": json.dumps({"partitions": [{"topic": topic, "partitions": partitions}]}),
            "mode": mode,
            **extra,
        }
    )


def _leader(admin, topic, partition):
    return next(p for p in admin.describe_partitions([topic]) if p.partition == partition)


def test_plan_names_the_longest_replica_and_writes_the_recovery_file(scenario, admin, tmp_path):
    doc = plan(
        admin,
        _request(scenario.topic, [0, 1, 2], "manual_recovery_file", recovery_duration_ms=10000),
        tmp_path,
    )
    assert [c["chosen"] for c in doc["choices"]] == [sc.LONGEST] * 3
    assert [c["kafka_unclean_pick"] for c in doc["choices"]] == [sc.KAFKA_PICK] * 3
    for c in doc["choices"]:
        rows = {r["broker_id"]: r for r in c["rows"]}
        assert rows[2]["log_end_offset"] == 200 and rows[3]["log_end_offset"] == 100
        assert rows[3]["offsets_lost_vs_choice"] == 100 and rows[2]["offsets_lost_vs_choice"] == 0
        assert rows[1]["candidate"] is False and rows[1]["log_end_offset"] is None  # dead: fenced
        assert rows[1]["note"] in ("broker fenced: cannot lead", "broker not registered (down)")
    file = json.loads(Path(doc["artifacts"]["recovery_file"]).read_text())
    assert file == {
        "partitions": [
            {"topic": scenario.topic, "partition": p, "designatedLeader": sc.LONGEST} for p in range(3)
        ]
    }
    table = Path(doc["artifacts"]["table"]).read_text()
    assert f"{scenario.topic}-0  2       1             200             0                CHOSEN" in table
    print("\n" + table)
    # planning never elects
    assert all(p.leader == -1 for p in admin.describe_partitions([scenario.topic]))


def test_bad_input_fails_before_any_election(scenario, admin, tmp_path):
    with pytest.raises(RecoveryInputError, match="unknown topic.*no-such-topic"):
        plan(
            admin,
            build_request(
                {
                    "partitions_json": json.dumps(
                        {
                            "partitions": [
                                {"topic": "no-such-topic", "partitions": [0]},
                                {"topic": scenario.topic, "partitions": [0]},
                            ]
                        }
                    ),
                    "mode": "automated_recovery",
                }
            ),
            tmp_path,
        )
    with pytest.raises(RecoveryInputError, match=rf"unknown partition.*{scenario.topic}-7"):
        plan(admin, _request(scenario.topic, [0, 7], "automated_recovery"), tmp_path)
    assert all(p.leader == -1 for p in admin.describe_partitions([scenario.topic]))


def test_a_broker_that_does_not_answer_in_time_is_excluded(scenario, local_stack, admin, tmp_path):
    # precondition: broker 2 is registered and unfenced, so it is asked (and then cannot answer)
    # A frozen broker stops heartbeating: if the plan's metadata reads are slow (they may
    # land on the frozen broker first), the controller fences it (session timeout 6 s)
    # before it is asked, and then it is rightly not a candidate but not "unanswered"
    # either. That race is the environment's, not the behaviour's: try again.
    for _ in range(3):
        wait_until(lambda: admin.describe_brokers()[2].available, 60, 0.5, "broker 2 unfenced")
        pid = local_stack.pid(2)
        os.kill(pid, signal.SIGSTOP)
        try:
            doc = plan(admin, _request(scenario.topic, [2], recovery_duration_ms=1500), tmp_path)
        finally:
            os.kill(pid, signal.SIGCONT)
        if "2" in doc["unanswered_brokers"]:
            break
    # leave broker 2 as found: unfenced again (the controller fenced it while it was frozen)
    wait_until(lambda: admin.describe_brokers()[2].available, 90, 0.5, "broker 2 unfenced after SIGCONT")
    assert "2" in doc["unanswered_brokers"] and "1500 ms" in doc["unanswered_brokers"]["2"]
    (choice,) = doc["choices"]
    rows = {r["broker_id"]: r for r in choice["rows"]}
    assert rows[2]["candidate"] is False and rows[2]["log_end_offset"] is None
    assert "no answer within 1500 ms" in rows[2]["note"]
    assert choice["chosen"] == 3  # the only replica that answered
    assert "no answer within 1500 ms" in doc["table"]


def test_the_runbook_keeps_the_longest_log_and_kafka_unclean_election_does_not(
    scenario, local_stack, admin, tmp_path
):
    topic = scenario.topic
    # a broker frozen by an earlier test may still be fenced for a few seconds after SIGCONT: a fenced
    # broker is rightly not a candidate, which is not what this test is about
    wait_until(
        lambda: all((b := admin.describe_brokers().get(i)) and b.available for i in (2, 3)),
        90,
        0.5,
        "brokers 2 and 3 registered and unfenced",
    )
    doc = plan(admin, _request(topic, [0], "automated_recovery", recovery_duration_ms=10000), tmp_path)
    report = recover(admin, doc, tmp_path)
    (outcome,) = report.outcomes
    assert (outcome.status, outcome.leader) == (outcomes.ELECTED, sc.LONGEST)
    after = _leader(admin, topic, 0)
    assert after.leader == sc.LONGEST and after.replicas == tuple(sc.ASSIGNMENT)  # order put back

    # the twin partition, through Kafka's own tool (kafka-leader-election --election-type unclean)
    proc = subprocess.run(
        [
            "java",
            "-cp",
            str(ROOT / ".stack" / "lib" / "*"),
            "org.apache.kafka.tools.LeaderElectionCommand",
            "--bootstrap-server",
            local_stack.bootstrap_servers,
            "--election-type",
            "unclean",
            "--topic",
            topic,
            "--partition",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    twin = wait_until(lambda: (p := _leader(admin, topic, 1)).leader != -1 and p, 30, 0.5, "twin elected")
    assert twin.leader == sc.KAFKA_PICK

    kept_runbook = sc.count_messages(local_stack.bootstrap_servers, topic, 0)
    kept_kafka = sc.count_messages(local_stack.bootstrap_servers, topic, 1)
    max_live = max(sc.HELD[b] for b in sc.ASSIGNMENT if b != sc.LOST)
    print(
        f"\nmessages kept: runbook {kept_runbook}, kafka unclean election {kept_kafka}, "
        f"most held by a live replica {max_live}, produced {sc.HELD[sc.LOST]}"
    )
    assert kept_runbook == max_live == 200
    assert kept_kafka == 100

    # idempotent: a second run finds it online and leaves it alone
    again = recover(admin, doc, tmp_path)
    assert [(o.status, o.leader) for o in again.outcomes] == [(outcomes.ALREADY_ONLINE, sc.LONGEST)]
