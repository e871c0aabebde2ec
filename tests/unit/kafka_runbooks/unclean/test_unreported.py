"""After an elections task that ended without reporting, the last step says what the cluster says.

Fault campaign, round 3, unclean:13 (allow-loss, the elections task killed -9 1.7 s in): the UNCLEAN
election had reached the controller; the partition was back, led by the plan's lossy choice, 100
acknowledged records gone, and the run ended "the offline partitions were not recovered", naming no
loss.
"""

from __future__ import annotations

import logging

from kafka_runbooks.errors import ClusterUnreachable
from kafka_runbooks.model import PartitionState
from kafka_runbooks.unclean.choose import Choice
from kafka_runbooks.unclean.unreported import LOSS_WORDS, partitions_now


def choice(partition, chosen, clean=(), epoch=4):
    return Choice(
        topic="t",
        partition=partition,
        replicas=(1, 2, 3),
        leader_epoch=epoch,
        rows=(),
        chosen=chosen,
        reason="longest live log",
        kafka_unclean_pick=chosen,
        clean_replicas=tuple(clean),
        chosen_is_clean=chosen in clean,
        committed_loss="up to 100 offsets" if chosen not in clean else "0",
    )


class Cluster:
    def __init__(self, parts=None, error=None):
        self.parts, self.error = parts or [], error

    def describe_partitions(self, topics):
        if self.error:
            raise self.error
        return self.parts


def document(*choices):
    return {"choices": [c.as_dict() for c in choices]}


def test_a_lossy_choice_elected_by_the_killed_task_is_named_recovered_with_loss(caplog):
    caplog.set_level(logging.INFO)
    cluster = Cluster([PartitionState("t", 0, 2, 5, (1, 2, 3), (2,))])
    now = partitions_now(cluster, document(choice(0, 2, clean=(1,))))
    assert now["t-0"].startswith(LOSS_WORDS) and "leader epoch 4 -> 5" in now["t-0"]
    assert "acknowledged records lost: up to 100 offsets" in now["t-0"]
    assert any(LOSS_WORDS in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)


def test_offline_other_leader_clean_choice_and_unread_are_each_said_as_they_are():
    parts = [
        PartitionState("t", 0, -1, 4, (1, 2, 3), ()),
        PartitionState("t", 1, 3, 6, (1, 2, 3), (3,)),
        PartitionState("t", 2, 1, 5, (1, 2, 3), (1,)),
    ]
    doc = document(choice(0, 2), choice(1, 2), choice(2, 1, clean=(1,)), choice(3, None))
    now = partitions_now(Cluster(parts), doc)
    assert now["t-0"] == "still offline (no leader)"
    assert "led by broker 3" in now["t-1"] and "elected by someone else" in now["t-1"]
    assert now["t-2"].startswith("recovered:") and LOSS_WORDS not in now["t-2"]
    assert "t-3" not in now  # nothing was chosen there: nothing to judge
    unread = partitions_now(Cluster(error=ClusterUnreachable("no broker answers")), doc)
    assert all(v.startswith("unknown") for v in unread.values())


def test_the_plans_choice_at_the_planned_epoch_was_not_elected_by_anyone():
    """Led by the chosen replica at the epoch the plan read: that is not an election after the plan."""
    now = partitions_now(Cluster([PartitionState("t", 0, 2, 4, (1, 2, 3), (2,))]), document(choice(0, 2)))
    assert now["t-0"] == "online, led by broker 2 at the planned leader epoch 4"
