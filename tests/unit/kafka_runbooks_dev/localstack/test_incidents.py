"""The log-recovery incident's edit of a stopped broker's ``recovery-point-offset-checkpoint``.

Kafka reads the file as a version line, an entry count, then ``topic partition offset`` lines,
and a count that does not match the lines makes it reset the recovery point of every log in the
directory to 0: the edit must drop exactly the incident topic's lines and keep the count true.
The real broker reading the edited file is tests/integration/test_kstack_incidents.py.
"""

from __future__ import annotations

from kafka_runbooks_dev.localstack.incidents import (
    RECOVERY_POINT_CHECKPOINT,
    _forget_recovery_points,
    recovery_topic,
)

TOPIC = recovery_topic(4)


def test_only_the_incident_topics_recovery_points_are_dropped_and_the_count_follows(tmp_path):
    # a topic whose name starts with the incident topic's (and its partition line) is kept
    lines = [
        "0",
        "4",
        f"{TOPIC} 0 3999",
        "demo-orders 2 17",
        f"{TOPIC}-x 0 5",
        "__consumer_offsets 7 0",
    ]
    (tmp_path / RECOVERY_POINT_CHECKPOINT).write_text("\n".join(lines) + "\n")
    _forget_recovery_points(tmp_path, TOPIC)
    assert (tmp_path / RECOVERY_POINT_CHECKPOINT).read_text().splitlines() == [
        "0",
        "3",
        "demo-orders 2 17",
        f"{TOPIC}-x 0 5",
        "__consumer_offsets 7 0",
    ]
    assert [p.name for p in tmp_path.iterdir()] == [RECOVERY_POINT_CHECKPOINT]  # nothing left aside


def test_a_dir_without_a_checkpoint_is_left_without_one(tmp_path):
    """A broker that never wrote one recovers every log from offset 0 anyway."""
    _forget_recovery_points(tmp_path, TOPIC)
    assert list(tmp_path.iterdir()) == []


def test_the_empty_checkpoint_a_broker_starts_with_is_left_empty(tmp_path):
    """Seen on Kafka 4.3.1: a broker creates the file empty at start-up and writes it only at
    its first checkpoint (60 s later by default)."""
    (tmp_path / RECOVERY_POINT_CHECKPOINT).write_text("")
    _forget_recovery_points(tmp_path, TOPIC)
    assert (tmp_path / RECOVERY_POINT_CHECKPOINT).read_text() == ""
