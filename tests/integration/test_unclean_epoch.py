"""Unclean recovery on the real stack: the epoch each replica's log ends in, and the request count.

Its own module: the diverged scenario needs a healthy cluster to start from, which the
offline scenario of test_unclean_recovery.py keeps broken for its whole module.
"""

from __future__ import annotations

import json

import pytest

from kafka_runbooks.unclean import elect as outcomes
from kafka_runbooks.unclean.request import build_request
from kafka_runbooks.unclean.runbook import RecoveredWithLoss, plan, recover
from tests import unclean_scenario as sc
from tests.helpers import wait_until


def _request(topic: str, partitions: list[int], mode: str = "show_replica_info", **extra):
    return build_request(
        {
            "partitions_json": json.dumps({"partitions": [{"topic": topic, "partitions": partitions}]}),
            "mode": mode,
            "allow_committed_loss": True,
            **extra,
        }
    )


def _recover_with_loss(*args, **kwargs):
    """The scenario's dead broker 1 is in the ISR (it holds every committed record): electing
    another replica is allowed explicitly and every held election ends as RecoveredWithLoss."""
    with pytest.raises(RecoveredWithLoss) as caught:
        recover(*args, **kwargs)
    return caught.value.report


# -- the epoch: diverged logs built with real leader changes ----------------------------


def test_a_newer_epoch_beats_a_longer_diverged_log(local_stack, admin, tmp_path):
    """Broker 2 ends at 200 in epoch e0, broker 3 at 120 in a later epoch (a real unclean
    election, then more writes). The epoch each log ends in is read from the replica's own
    log; broker 3 is chosen, the table says broker 2 loses at least 80, and Kafka's own
    election would have taken broker 2."""
    built = sc.build_diverged(local_stack, admin, "unclean-div", partitions=1)
    try:
        doc = plan(
            admin, _request(built.topic, [0], "automated_recovery", recovery_duration_ms=10000), tmp_path
        )
        (c,) = doc["choices"]
        rows = {r["broker_id"]: r for r in c["rows"]}
        print("\n" + doc["table"])
        assert (rows[2]["log_end_offset"], rows[2]["newest_epoch"]) == (200, built.old_epoch)
        assert (rows[3]["log_end_offset"], rows[3]["newest_epoch"]) == (120, built.new_epoch)
        assert built.old_epoch < built.new_epoch < c["leader_epoch"]
        assert c["chosen"] == sc.DIVERGED_NEW and c["kafka_unclean_pick"] == sc.DIVERGED_OLD
        assert (rows[2]["truncated_if_chosen_stands"], rows[2]["at_least"]) == (80, True)
        assert (c["loss_vs_longest"], c["kafka_pick_loss_vs_longest"]) == (80, 0)
        assert f"leader epoch {built.new_epoch}" in c["reason"]
        report = _recover_with_loss(admin, doc, tmp_path, settle_s=3)  # nothing breaks the hold
        assert [(o.status, o.leader) for o in report.outcomes] == [(outcomes.ELECTED, sc.DIVERGED_NEW)]
        assert sc.count_messages(local_stack.bootstrap_servers, built.topic, 0) == 120
    finally:
        sc.restore(local_stack, admin, [built.topic], timeout=600)


def test_one_list_offsets_request_per_broker_and_kind(kafka_stack, admin):
    """1001 partitions on one broker: one LATEST and one MAX_TIMESTAMP request, not one per
    1000 partitions (the 1000 cap is the proposed GetReplicaLogInfo's, not ListOffsets')."""
    from kafka.protocol.consumer.offsets import ListOffsetsRequest

    from kafka_runbooks.unclean.loginfo import gather
    from tests.helpers import create_topic, unique_topic

    topic = unique_topic("unclean-floor")
    create_topic(kafka_stack.bootstrap_servers, topic, assignment={p: [4] for p in range(1001)})
    try:
        parts = wait_until(
            lambda: (
                len(ps := admin.describe_partitions([topic])) == 1001
                and all(p.leader == 4 for p in ps)
                and ps
            ),
            120,
            1,
            "1001 partitions led by broker 4",
        )
        # a new partition's replica may answer "not available" for a moment: wait until all do
        wait_until(
            lambda: all(
                i.answered for i in gather(admin, parts, admin.describe_brokers(), 5000).infos.values()
            ),
            120,
            1,
            "broker 4 answering for all 1001 partitions",
        )
        sent = []
        manager = admin._kafka_python._client._manager
        real_send = manager.send

        def counting_send(request, node_id=None, **kw):
            if isinstance(request, ListOffsetsRequest):
                sent.append((node_id, request.topics[0].partitions[0].timestamp))
            return real_send(request, node_id=node_id, **kw)

        manager.send = counting_send
        try:
            result = gather(admin, parts, admin.describe_brokers(), 30000)
        finally:
            manager.send = real_send
        assert sorted(sent) == [(4, -3), (4, -1)] and (result.requests_sent, result.rounds) == (2, 1)
        assert len([i for i in result.infos.values() if i.answered]) == 1001
    finally:
        from confluent_kafka.admin import AdminClient

        client = AdminClient({"bootstrap.servers": kafka_stack.bootstrap_servers})
        client.delete_topics([topic], operation_timeout=60)[topic].result(90)
