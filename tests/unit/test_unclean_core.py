"""Unclean recovery core: input validation, the choice, the table and the recovery file."""

from __future__ import annotations

import json

import pytest

from kafka_runbooks.model import Broker, ClusterState, PartitionState
from kafka_runbooks.unclean.choose import Choice, choose
from kafka_runbooks.unclean.loginfo import GatherResult, ReplicaLogInfo
from kafka_runbooks.unclean.render import recovery_file, replica_table
from kafka_runbooks.unclean.request import RecoveryInputError, build_request, parse_partitions, resolve

LIST = json.dumps(
    {"partitions": [{"topic": "foo", "partitions": [3, 0, 0]}, {"topic": "bar", "partitions": [1]}]}
)


def test_the_proposals_input_format_is_parsed_sorted_and_deduplicated():
    assert parse_partitions(LIST) == (("bar", 1), ("foo", 0), ("foo", 3))


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"partitions_json": LIST, "all_offline_partitions": True}, "not both"),
        ({}, "neither"),
        ({"partitions_json": "   "}, "neither"),
        ({"partitions_json": "{not json"}, "not valid JSON"),
        ({"partitions_json": "[1, 2]"}, "must be an object"),
        ({"partitions_json": '{"partitions": []}'}, "empty"),
        ({"partitions_json": '{"partitions": [{"topic": "", "partitions": [0]}]}'}, "non-empty string"),
        ({"partitions_json": '{"partitions": [{"topic": "a", "partitions": []}]}'}, "non-empty list"),
        (
            {"partitions_json": '{"partitions": [{"topic": "a", "partitions": [-1]}]}'},
            "not a partition number",
        ),
        (
            {"partitions_json": '{"partitions": [{"topic": "a", "partitions": ["0"]}]}'},
            "not a partition number",
        ),
        (
            {"partitions_json": '{"partitions": [{"topic": "a", "partitions": [true]}]}'},
            "not a partition number",
        ),
        ({"all_offline_partitions": True, "mode": "elect_everything"}, "mode must be one of"),
        ({"all_offline_partitions": True, "recovery_election_attempts": 0}, "attempts"),
        ({"all_offline_partitions": True, "recovery_duration_ms": 0}, "recovery_duration_ms"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(params, message):
    with pytest.raises(RecoveryInputError, match=message):
        build_request(params)


def test_defaults_are_a_dry_run():
    request = build_request({"all_offline_partitions": True})
    assert request.mode == "show_replica_info" and request.all_offline
    assert (request.recovery_duration_ms, request.recovery_election_attempts) == (30000, 3)


def _state() -> ClusterState:
    brokers = {b: Broker(b) for b in (2, 3, 4)} | {1: Broker(1, fenced=True), 5: Broker(5, alive=False)}
    parts = [
        PartitionState("foo", 0, -1, 4, (1, 3, 2), ()),
        PartitionState("foo", 1, 2, 4, (2, 3, 4), (2, 3, 4)),
        PartitionState("bar", 0, -1, 4, (5, 4, 3), ()),
    ]
    return ClusterState(None, brokers, None, parts)


def test_resolve_splits_offline_from_online_and_names_every_unknown():
    state = _state()
    targets = resolve(build_request({"all_offline_partitions": True}), state)
    assert [p.name for p in targets.offline] == ["bar-0", "foo-0"] and targets.online == []
    listed = build_request({"partitions_json": '{"partitions": [{"topic": "foo", "partitions": [0, 1]}]}'})
    targets = resolve(listed, state)
    assert [p.name for p in targets.offline] == ["foo-0"] and [p.name for p in targets.online] == ["foo-1"]
    bad = build_request(
        {
            "partitions_json": '{"partitions": [{"topic": "foo", "partitions": [9]}, {"topic": "x", "partitions": [0]}]}'
        }
    )
    with pytest.raises(RecoveryInputError, match=r"unknown topic\(s\): x; unknown partition\(s\): foo-9"):
        resolve(bad, state)


def _gathered(rows: list[tuple[int, int | None, int | None, str | None]], topic="foo", partition=0):
    result = GatherResult()
    for broker, leo, epoch, error in rows:
        result.infos[(topic, partition, broker)] = ReplicaLogInfo(broker, topic, partition, leo, epoch, error)
    return result


def test_highest_epoch_wins_then_longest_log_and_losses_are_counted():
    state = _state()
    p = state.partitions[0]  # replicas (1, 3, 2); 1 is fenced
    c = choose(
        p,
        _gathered([(1, None, None, "broker fenced: cannot lead"), (3, 100, 4, None), (2, 200, 4, None)]),
        state.brokers,
    )
    assert (c.chosen, c.kafka_unclean_pick) == (2, 3)
    assert {r.broker_id: r.offsets_lost_vs_choice for r in c.rows} == {1: None, 3: 100, 2: 0}
    # a higher leader epoch beats a longer log
    c = choose(p, _gathered([(3, 100, 5, None), (2, 200, 4, None)]), state.brokers)
    assert c.chosen == 3
    assert {r.broker_id: r.offsets_lost_vs_choice for r in c.rows}[2] == 0


def test_ties_go_to_assignment_order_and_no_answer_means_no_candidate():
    state = _state()
    p = state.partitions[0]
    c = choose(p, _gathered([(3, 150, 4, None), (2, 150, 4, None)]), state.brokers)
    assert c.chosen == 3 and "tie with broker 2" in c.reason
    c = choose(p, _gathered([(3, None, None, "no answer within 10 ms (KafkaTimeoutError)")]), state.brokers)
    assert c.chosen is None and "no candidate" in c.reason
    assert "NO CANDIDATE" in replica_table([c])


def test_table_file_and_plan_round_trip():
    state = _state()
    c = choose(state.partitions[0], _gathered([(3, 100, 4, None), (2, 200, 4, None)]), state.brokers)
    none = choose(state.partitions[2], _gathered([], "bar", 0), state.brokers)
    table = replica_table([c, none], ["foo-1"])
    lines = table.splitlines()
    assert lines[0].split() == [
        "partition",
        "broker",
        "leader_epoch",
        "log_end_offset",
        "lost_if_elected",
        "choice",
        "note",
    ]
    assert any(line.split()[:6] == ["foo-0", "2", "4", "200", "0", "CHOSEN"] for line in lines)
    assert any(line.split()[:6] == ["foo-0", "3", "4", "100", "100", "kafka-unclean-pick"] for line in lines)
    assert lines[-1].split()[:2] == ["foo-1", "-"] and "ONLINE" in lines[-1]
    assert recovery_file([c, none]) == {
        "partitions": [{"topic": "foo", "partition": 0, "designatedLeader": 2}]
    }
    assert Choice.from_dict(json.loads(json.dumps(c.as_dict()))) == c
