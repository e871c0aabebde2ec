"""Unclean recovery core: input validation, the choice, the table and the recovery file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_runbooks.model import Broker, ClusterState, PartitionState
from kafka_runbooks.unclean.choose import Choice, choose
from kafka_runbooks.unclean.loginfo import GatherResult, ReplicaLogInfo
from kafka_runbooks.unclean.render import (
    manual_files,
    manual_markdown,
    manual_steps,
    markdown_table,
    replica_table,
)
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


def _unclean(partition, gathered, brokers):
    """The choice among replicas not known to hold every committed record (these partitions'
    ISR, ELR and last known ELR are empty), which the operator has to allow explicitly."""
    return choose(partition, gathered, brokers, allow_committed_loss=True)


def test_newest_epoch_wins_then_longest_log_and_every_cost_is_shown():
    state = _state()
    p = state.partitions[0]  # replicas (1, 3, 2); 1 is fenced
    c = _unclean(
        p,
        _gathered([(1, None, None, "broker fenced: cannot lead"), (3, 100, 4, None), (2, 200, 4, None)]),
        state.brokers,
    )
    assert (c.chosen, c.kafka_unclean_pick) == (2, 3)
    assert {r.broker_id: r.truncated_if_chosen_stands for r in c.rows} == {1: None, 3: 0, 2: 0}
    assert (c.longest_log_end_offset, c.loss_vs_longest, c.kafka_pick_loss_vs_longest) == (200, 0, 100)
    assert "longest log among the candidates (log end offset 200)" in c.reason
    # A newer epoch beats a longer log: the longer one holds 80 offsets beyond the choice,
    # truncated if the choice stands, at least (it ended in an older epoch: it may have
    # diverged earlier). The choice loses 80 against the longest log.
    c = _unclean(p, _gathered([(3, 120, 5, None), (2, 200, 4, None)]), state.brokers)
    assert c.chosen == 3 and c.epoch_known
    rows = {r.broker_id: r for r in c.rows}
    assert (rows[2].truncated_if_chosen_stands, rows[2].at_least) == (80, True)
    assert (rows[3].truncated_if_chosen_stands, rows[3].at_least) == (0, False)
    assert (c.longest_log_end_offset, c.loss_vs_longest) == (200, 80)
    assert "leader epoch 5" in c.reason and "broker 2: epoch 4, log end offset 200" in c.reason
    table = replica_table([c])
    assert any(line.split()[:5] == ["foo-0", "2", "4", "200", ">=80"] for line in table.splitlines())
    assert "choice broker 3: acknowledged records lost: unknown" in table
    assert "loses 80 vs the longest answered log (200)" in table


def test_an_unknown_epoch_means_the_log_end_offset_alone_decides_and_says_so():
    state = _state()
    p = state.partitions[0]
    c = _unclean(p, _gathered([(3, 120, 5, None), (2, 200, None, None)]), state.brokers)
    assert c.chosen == 2 and not c.epoch_known
    assert "by log end offset only: epoch unknown for broker(s) 2" in c.reason
    assert "epoch" not in c.reason.split(";")[0]  # no claim about epochs the data does not support
    rows = {r.broker_id: r for r in c.rows}
    assert rows[3].truncated_if_chosen_stands == 0
    table = replica_table([c])
    assert any(line.split()[:3] == ["foo-0", "2", "?"] for line in table.splitlines())
    assert "epoch unknown: by log end offset only" in table


def test_ties_go_to_assignment_order_and_no_answer_means_no_candidate():
    state = _state()
    p = state.partitions[0]
    c = _unclean(p, _gathered([(3, 150, 4, None), (2, 150, 4, None)]), state.brokers)
    assert c.chosen == 3 and "tie with broker 2" in c.reason
    c = _unclean(p, _gathered([(3, None, None, "no answer within 10 ms (KafkaTimeoutError)")]), state.brokers)
    assert c.chosen is None and "no candidate" in c.reason
    assert "NO CANDIDATE" in replica_table([c])


def test_table_markdown_and_plan_round_trip():
    state = _state()
    c = _unclean(state.partitions[0], _gathered([(3, 100, 4, None), (2, 200, 4, None)]), state.brokers)
    none = _unclean(state.partitions[2], _gathered([], "bar", 0), state.brokers)
    table = replica_table([c, none], ["foo-1"])
    lines = table.splitlines()
    assert lines[0].split() == [
        "partition",
        "broker",
        "newest_epoch",
        "log_end_offset",
        "truncated_if_choice_stands",
        "choice",
        "note",
    ]
    assert any(line.split()[:6] == ["foo-0", "2", "4", "200", "0", "CHOSEN"] for line in lines)
    assert any(line.split()[:6] == ["foo-0", "3", "4", "100", "0", "kafka-unclean-pick"] for line in lines)
    assert "Kafka's unclean election: broker 3, loses 100" in table
    assert any(line.split()[:2] == ["foo-1", "-"] and "ONLINE" in line for line in lines)
    md = markdown_table([c, none], ["foo-1"]).split("\n\n")[0].splitlines()
    # a GFM table: header, separator, one row per replica / summary / online partition
    assert md[0].startswith("| partition | broker | newest_epoch |") and md[1] == "|" + "---|" * 7
    assert all(line.startswith("| ") and line.endswith(" |") and line.count(" | ") == 6 for line in md[2:])
    assert "| foo-0 | 2 | 4 | 200 | 0 | CHOSEN | ok |" in md
    assert "```" not in markdown_table([c, none])
    assert Choice.from_dict(json.loads(json.dumps(c.as_dict()))) == c


def test_manual_files_carry_only_what_todays_tools_read():
    state = _state()
    brokers = state.brokers
    reorder = _unclean(state.partitions[0], _gathered([(3, 100, 4, None), (2, 200, 4, None)]), brokers)
    direct = _unclean(state.partitions[2], _gathered([(4, 50, 4, None), (3, 10, 4, None)], "bar", 0), brokers)
    assert (reorder.chosen, reorder.kafka_unclean_pick, direct.chosen, direct.kafka_unclean_pick) == (
        2,
        3,
        4,
        4,
    )
    files = manual_files([reorder, direct])
    assert files["elect.json"] == {"partitions": [{"topic": "bar", "partition": 0}]}
    assert files["elect-after-reorder.json"] == {"partitions": [{"topic": "foo", "partition": 0}]}
    assert files["reorder.json"]["partitions"] == [{"topic": "foo", "partition": 0, "replicas": [2, 1, 3]}]
    assert files["restore.json"]["partitions"] == [{"topic": "foo", "partition": 0, "replicas": [1, 3, 2]}]
    assert "designatedLeader" not in json.dumps(files)
    steps = manual_steps([reorder, direct], "b:9092", Path("/m"))
    commands = [" ".join(s["command"]) for s in steps]
    assert [c.split()[0] for c in commands] == [
        "kafka-topics.sh",
        "kafka-leader-election.sh",
        "kafka-topics.sh",
        "kafka-reassign-partitions.sh",
        "kafka-topics.sh",
        "kafka-leader-election.sh",
        "kafka-topics.sh",
        "kafka-reassign-partitions.sh",
    ]
    assert "--path-to-json-file /m/elect.json" in commands[1] and "--election-type unclean" in commands[1]
    assert "--execute --reassignment-json-file /m/reorder.json" in commands[3]
    assert "--path-to-json-file /m/elect-after-reorder.json" in commands[5]
    assert "--reassignment-json-file /m/restore.json" in commands[7]
    assert "Unknown broker id" in steps[3]["step"]  # said, not hidden
    assert "foo-0: Leader 2" in steps[6]["verify"] and "bar-0: Leader 4" in steps[2]["verify"]
    assert "kafka-leader-election.sh" in manual_markdown(steps)


def _offline(isr=(), elr=(), last_known_elr=()) -> PartitionState:
    """foo-0 assigned (1, 3, 2), offline; what the controller records as clean is given."""
    return PartitionState(
        "foo", 0, -1, 9, (1, 3, 2), tuple(isr), elr=tuple(elr), last_known_elr=tuple(last_known_elr)
    )


def test_a_stale_replica_is_not_offered_as_loss_free_while_a_clean_one_is_down():
    """Issue 23.1: broker 1 (down) is in the ELR, broker 3 (live, longest live log) is not:
    the plan proposes the clean path, elects nothing and states what the stale one would lose."""
    state = _state()
    gathered = _gathered(
        [(1, None, None, "broker fenced: cannot lead"), (3, 1000, 4, None), (2, 900, 4, None)]
    )
    for clean in ({"elr": (1,)}, {"isr": (1,)}):
        c = choose(_offline(**clean), gathered, state.brokers)
        assert (c.chosen, c.unclean_option, c.clean_replicas) == (None, 3, (1,))
        assert "CLEAN PATH" in c.clean_path and "broker(s) 1 (fenced)" in c.clean_path
        assert c.committed_loss.startswith("unknown") and not c.loses_committed
        summary = [line for line in replica_table([c]).splitlines() if "SUMMARY" in line][0]
        assert "CLEAN PATH" in summary and "Unclean option (NOT chosen): broker 3" in summary
        assert " 0 " not in summary.replace("(0)", "")


def test_a_live_clean_replica_is_chosen_over_a_longer_stale_log():
    state = _state()
    gathered = _gathered([(3, 1000, 4, None), (2, 900, 4, None)])
    c = choose(_offline(elr=(2,)), gathered, state.brokers)
    assert (c.chosen, c.chosen_is_clean, c.loses_committed) == (2, True, False)
    assert c.committed_loss.startswith("0: broker 2 holds every committed record")
    assert {r.broker_id: r.candidate for r in c.rows} == {1: False, 3: False, 2: True}


def test_allowed_unclean_choice_names_the_loss_and_never_says_zero_when_unknown():
    """Issue 24.5: with a clean replica unread, the summary never states the loss as 0."""
    state = _state()
    gathered = _gathered(
        [(1, None, None, "broker fenced: cannot lead"), (3, 1000, 4, None), (2, 900, 4, None)]
    )
    c = choose(_offline(elr=(1,)), gathered, state.brokers, allow_committed_loss=True)
    assert (c.chosen, c.loses_committed, c.loss_vs_longest) == (3, True, 0)
    summary = [line for line in replica_table([c]).splitlines() if "SUMMARY" in line][0]
    assert "LACKS COMMITTED RECORDS: choice broker 3: acknowledged records lost: unknown" in summary
    assert "not read: broker(s) 1, may hold more" in summary
    assert "loses 0 vs the longest log" not in summary
    assert Choice.from_dict(json.loads(json.dumps(c.as_dict()))) == c


def test_partitions_as_topic_colon_partition_items_are_read_like_the_json_list():
    """The form's friendlier list (one topic:partition per line) names what partitions_json names."""
    request = build_request({"partitions": ["foo:3", " bar : 1", "foo:0", "foo:3"]})
    assert request.partitions == parse_partitions(LIST) == (("bar", 1), ("foo", 0), ("foo", 3))


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"partitions": ["orders"]}, r"partitions\[0\] must be topic:partition, e.g. orders:0, not 'orders'"),
        ({"partitions": ["orders:-1"]}, r"partitions\[0\] must be topic:partition"),
        ({"partitions": ["orders:0", "a b:1"]}, r"partitions\[1\] must be topic:partition"),
        ({"partitions": [3]}, r"partitions\[0\] must be topic:partition"),
        ({"partitions": ["orders:0"], "partitions_json": LIST}, "not both: partitions and partitions_json"),
        ({"partitions": ["orders:0"], "all_offline_partitions": True}, "not both"),
        ({"partitions": ["a:0"], "partitions_json": LIST, "all_offline_partitions": True}, "not all three"),
        ({"partitions": []}, "neither"),
        ({"all_offline_partitions": True, "recovery_duration_ms": "-5s"}, "recovery_duration_ms must be"),
        ({"all_offline_partitions": True, "recovery_duration_ms": "2h"}, "at most 1 h"),
        ({"all_offline_partitions": True, "settle_period_s": "soon"}, "settle_period_s must be a duration"),
    ],
)
def test_bad_partition_items_and_durations_are_refused_with_a_clear_message(params, message):
    with pytest.raises(RecoveryInputError, match=message):
        build_request(params)


def test_the_unclean_durations_take_units():
    request = build_request({"all_offline_partitions": True, "recovery_duration_ms": "2m"})
    assert request.recovery_duration_ms == 120000
    assert (
        build_request({"all_offline_partitions": True, "recovery_duration_ms": 1500}).recovery_duration_ms
        == 1500
    )


def test_a_last_known_elr_replica_back_after_a_crash_is_never_clean():
    """Issue #37, point 1: broker 1, the ELR member, is down; broker 3 is only in the last known ELR
    (Kafka's controller dropped it from the ELR: it shut down uncleanly, its unflushed acknowledged
    tail may be gone) and is back, answering with the longest live log. It is not "loses 0": the
    plan elects nothing, offers Kafka's clean path (bring broker 1 back) and names 3 an unclean
    option; allowed, its loss stays unknown and the run must name it."""
    state = _state()
    gathered = _gathered(
        [(1, None, None, "broker not registered (down)"), (3, 1000, 4, None), (2, 900, 4, None)]
    )
    partition = _offline(elr=(1,), last_known_elr=(3,))
    c = choose(partition, gathered, state.brokers)
    assert (c.chosen, c.unclean_option, c.clean_replicas, c.chosen_is_clean) == (None, 3, (1,), False)
    assert "CLEAN PATH" in c.clean_path and "broker(s) 1" in c.clean_path
    assert not c.committed_loss.startswith("0")
    allowed = choose(partition, gathered, state.brokers, allow_committed_loss=True)
    assert (allowed.chosen, allowed.chosen_is_clean, allowed.loses_committed) == (3, False, True)
    assert allowed.committed_loss.startswith("unknown, may be above 0")
    only_hint = choose(_offline(last_known_elr=(3,)), gathered, state.brokers, allow_committed_loss=True)
    assert only_hint.chosen == 3 and only_hint.loses_committed
    assert "only in the last known ELR" in only_hint.committed_loss


def test_on_a_cluster_without_elr_the_loss_is_unknown_in_words_that_say_why():
    """Issue #38: with eligible.leader.replicas.version not finalized (Kafka 4.0's default) the
    controller keeps no ELR: "the controller names no replica" would read as "none are clean"."""
    from kafka_runbooks.evidence import ClusterFeatures, no_elr_words

    no_elr = no_elr_words(
        ClusterFeatures({"metadata.version": 22, "eligible.leader.replicas.version": 0}, {})
    )
    state = _state()
    gathered = _gathered([(3, 1000, 4, None), (2, 900, 4, None)])
    c = choose(_offline(), gathered, state.brokers, allow_committed_loss=True, no_elr=no_elr)
    assert c.committed_loss.startswith(
        "unknown: the cluster keeps no record of clean replicas beyond the ISR"
    )
