"""A replica is healthy on a broker only with its current log in an online dir and the controller not
naming the broker offline; where the two answers disagree it is offline, and both are kept (#37, 1).

The DescribeLogDirs answers go through kafka-python's real encode and decode (``answer``)."""

from __future__ import annotations

from kafka_runbooks.evidence import judge_replica_dirs
from kafka_runbooks.log_dirs import KAFKA_STORAGE_ERROR, parse_describe_log_dirs
from kafka_runbooks.model import Broker, ClusterState, PartitionState
from tests.unit.kafka_runbooks.test_log_dirs import answer


def cluster(dirs: dict | None, offline: dict[int, tuple[int, ...]], future=frozenset()) -> ClusterState:
    """Broker 1 holds t-0..t-3; ``offline``: partition -> the controller's offline replicas."""
    parts = [
        PartitionState("t", p, 2, 1, (1, 2), (2,), offline_replicas=offline.get(p, ())) for p in range(4)
    ] + [PartitionState("u", 0, 2, 1, (2, 3), (2, 3))]
    state = ClusterState("c", {b: Broker(b) for b in (1, 2, 3)}, None, parts)
    if dirs is not None:
        state.log_dir_states = {1: parse_describe_log_dirs(1, answer(dirs, future=future))}
    return state


def test_only_a_current_log_in_an_online_dir_that_the_controller_agrees_with_is_healthy():
    dirs = {"/a": (0, {"t": [0, 1, 2]}), "/b": (KAFKA_STORAGE_ERROR, {})}
    judged = judge_replica_dirs(cluster(dirs, {1: (1,), 2: (1,)}, future=frozenset({("/a", "t", 2)})), 1)
    assert judged.healthy == (("t", 0),)
    # t-1: listed but named offline; t-2: only its future log listed; t-3: in no online dir
    assert judged.offline == (("t", 1), ("t", 2), ("t", 3)) and judged.not_listed == ()
    assert judged.offline_dirs == ("/b",) and judged.named_by_controller == ("t-1", "t-2")
    assert judged.disagreements == {
        "t-1": {
            "describe_log_dirs": "its current log is in online dir /a",
            "offline_replicas": "names this broker offline",
        },
        "t-3": {
            "describe_log_dirs": "no online dir holds its log (the broker has an offline dir)",
            "offline_replicas": "does not name this broker offline",
        },
    }  # t-2: both say offline (the future log is named in the words only when it disagrees)


def test_without_an_offline_dir_an_unlisted_replica_is_not_blamed_on_a_failed_dir():
    judged = judge_replica_dirs(cluster({"/a": (0, {"t": [0, 1]})}, {}), 1)
    assert judged.healthy == (("t", 0), ("t", 1)) and judged.offline == ()
    assert judged.not_listed == (("t", 2), ("t", 3)) and judged.disagreements == {}


def test_the_controllers_word_alone_makes_a_replica_offline_and_its_dirs_unread_are_unknown():
    judged = judge_replica_dirs(cluster({"/a": (0, {"t": [0, 1, 2, 3]})}, {3: (1, 2)}), 1)
    assert judged.offline == (("t", 3),) and judged.offline_names == ["t-3"]
    assert judged.facts(limit=0) == {
        "offline_replicas_named_by_controller": [],
        "offline_replicas_named_by_controller_count": 1,
        "disagreements": {},
        "disagreements_count": 1,
    }
    assert judge_replica_dirs(cluster(None, {}), 1) is None  # not read: no judgement, never healthy
