"""The steps of asking each broker for its replicas' log ends, without a broker.

The requests are kafka-python's real ListOffsets requests; the connection manager is a
stand-in that answers them (or fails) the way kafka-python hands answers back. On real
brokers: tests/integration/test_unclean_epoch.py.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from kafka_runbooks._kafka_python import (
    DEBUGGING_REPLICA_ID,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    _merge_log_ends,
    _plan_log_end_requests,
    _send_all,
    controller_choice,
)


def _asked(request) -> list[tuple[str, int, int]]:
    return [(t.name, p.partition_index, p.timestamp) for t in request.topics for p in t.partitions]


def test_each_broker_gets_a_latest_and_a_max_timestamp_request_naming_each_partition_once():
    planned = _plan_log_end_requests({1: [("a", 0), ("b", 2), ("a", 1)], 2: [("a", 0)]}, None)
    assert [(broker, ts) for broker, ts, _ in planned] == [
        (1, LATEST_TIMESTAMP),
        (1, MAX_TIMESTAMP),
        (2, LATEST_TIMESTAMP),
        (2, MAX_TIMESTAMP),
    ]
    first = planned[0][2]
    assert first.replica_id == DEBUGGING_REPLICA_ID  # answered from the broker's own log, leader or not
    assert _asked(first) == [
        ("a", 0, LATEST_TIMESTAMP),
        ("a", 1, LATEST_TIMESTAMP),
        ("b", 2, LATEST_TIMESTAMP),
    ]
    assert _asked(planned[1][2]) == [
        ("a", 0, MAX_TIMESTAMP),
        ("a", 1, MAX_TIMESTAMP),
        ("b", 2, MAX_TIMESTAMP),
    ]


def test_a_batch_splits_a_brokers_partitions_into_pairs_of_requests():
    planned = _plan_log_end_requests({1: [("a", p) for p in range(5)], 2: []}, 2)
    assert len(planned) == 6  # 3 chunks x (LATEST, MAX_TIMESTAMP); nothing for a broker without replicas
    assert [[p for _, p, _ in _asked(r)] for _, ts, r in planned if ts == LATEST_TIMESTAMP] == [
        [0, 1],
        [2, 3],
        [4],
    ]


def _answer(*partitions) -> SimpleNamespace:
    return SimpleNamespace(topics=[SimpleNamespace(name="t", partitions=list(partitions))])


def _p(index: int, code: int, offset: int | None, **epoch) -> SimpleNamespace:
    return SimpleNamespace(partition_index=index, error_code=code, offset=offset, **epoch)


def test_the_epoch_comes_only_from_a_record_found():
    answers = [
        (1, LATEST_TIMESTAMP, _answer(*(_p(i, 0, 100 + i, leader_epoch=99) for i in range(5)))),
        (
            1,
            MAX_TIMESTAMP,
            _answer(
                _p(0, 0, 50, leader_epoch=7),  # a record: its batch's epoch
                _p(1, 0, -1, leader_epoch=7),  # empty log: no record
                _p(2, 0, 50),  # no epoch field (an old answer version)
                _p(3, 0, 50, leader_epoch=-1),  # no epoch
                _p(4, 6, 50, leader_epoch=7),  # an error
            ),
        ),
    ]
    assert _merge_log_ends({1: []}, answers) == {
        1: [
            ("t", 0, 0, 100, 7),
            ("t", 1, 0, 101, None),
            ("t", 2, 0, 102, None),
            ("t", 3, 0, 103, None),
            ("t", 4, 0, 104, None),
        ]
    }


def test_a_broker_whose_request_failed_is_that_failure_the_others_keep_their_rows():
    boom = TimeoutError("broker 2 did not answer")
    answers = [
        (1, LATEST_TIMESTAMP, _answer(_p(0, 0, 10))),
        (1, MAX_TIMESTAMP, _answer(_p(0, 0, 9, leader_epoch=3))),
        (2, LATEST_TIMESTAMP, _answer(_p(0, 0, 12))),
        (2, MAX_TIMESTAMP, boom),
    ]
    merged = _merge_log_ends({1: [], 2: [], 3: []}, answers)
    assert merged == {1: [("t", 0, 0, 10, 3)], 2: boom, 3: []}


class Manager:
    """kafka-python's connection manager as ``_send_all`` uses it: cached brokers, send, run."""

    def __init__(self, known: set[int], unreachable: set[int] = frozenset()) -> None:
        self.known, self.unreachable = set(known), unreachable
        self.refreshed = 0
        self.cluster = self

    def broker_metadata(self, broker_id):
        return object() if broker_id in self.known else None

    async def refresh_metadata(self):
        self.refreshed += 1
        self.known |= {1, 2}

    def send(self, request, node_id, request_timeout_ms):
        if node_id in self.unreachable or node_id not in self.known:  # as kafka-python: unknown = no send
            raise ConnectionError(f"no connection to node {node_id}")

        async def answer():
            return (node_id, request_timeout_ms)

        return answer()

    def run(self, fn):
        return asyncio.run(fn())


def test_all_requests_go_out_a_broker_that_cannot_be_reached_is_only_its_own_failure():
    planned = [(1, LATEST_TIMESTAMP, "r1"), (2, LATEST_TIMESTAMP, "r2"), (1, MAX_TIMESTAMP, "r3")]
    manager = Manager({1, 2}, unreachable={2})
    answers = _send_all(manager, {1: [], 2: []}, planned, 500)
    assert [(b, ts) for b, ts, _ in answers] == [
        (1, LATEST_TIMESTAMP),
        (2, LATEST_TIMESTAMP),
        (1, MAX_TIMESTAMP),
    ]
    assert answers[0][2] == (1, 500) and answers[2][2] == (1, 500)
    assert isinstance(answers[1][2], ConnectionError)
    assert manager.refreshed == 0  # every broker known: no metadata refresh


def test_a_broker_back_since_the_last_metadata_refresh_is_refreshed_first():
    manager = Manager({1})
    answers = _send_all(manager, {1: [], 2: []}, [(2, LATEST_TIMESTAMP, "r")], 500)
    assert manager.refreshed == 1 and answers == [(2, LATEST_TIMESTAMP, (2, 500))]


def test_controller_requests_leave_a_broker_whose_connection_failed_or_that_is_suspect():
    """A broker killed a moment ago is still named by the metadata (unfenced for its session
    timeout): controller-bound retries go to another broker, the lowest live one, not back to it."""
    assert controller_choice(2, [1, 2, 3, 4], avoid=set()) == 2
    assert controller_choice(2, [1, 2, 3, 4], avoid={2}) == 1
    assert controller_choice(1, [1, 2, 3, 4], avoid={1, 3}) == 2
    assert controller_choice(2, [2], avoid={2}) == 2  # nothing else to go to: try it again
    assert controller_choice(3, [1, 2, 4], avoid=set()) == 1  # gone from the metadata: never again
    assert controller_choice(3, [], avoid=set()) == 3  # no metadata to judge by: kafka-python's own
    assert controller_choice(None, [1, 2], avoid={1}) is None  # none named: kafka-python decides


def test_kafka_pythons_own_debug_line_of_its_configuration_is_masked(caplog):
    """kafka-python logs its admin client's keywords at DEBUG, SASL password included (seen on the
    secured stack): the filter the library installs masks them before any handler sees the line."""
    import logging

    import kafka_runbooks.client_config  # noqa: F401  (installs the filter: every kafka-python config passes it)

    caplog.set_level(logging.DEBUG, logger="kafka.admin.client")
    configs = {"bootstrap_servers": ["b:9092"], "sasl_plain_password": "s3cret-pw", "ssl_password": "k3y-pw"}
    logging.getLogger("kafka.admin.client").debug("Starting KafkaAdminClient with configuration: %s", configs)
    assert "s3cret-pw" not in caplog.text and "k3y-pw" not in caplog.text
    assert "'sasl_plain_password': '***'" in caplog.text and "b:9092" in caplog.text


def test_a_refused_connection_is_remembered_until_the_broker_answers_again():
    """kafka-python forgets a refused connection within milliseconds (its back-off); a retry of a
    controller-bound request went back to a broker killed a moment ago. The refusal is kept for the
    controller choice until the broker answers again; a timeout still makes a suspect."""
    from types import SimpleNamespace

    from kafka.errors import KafkaConnectionError

    from kafka_runbooks._kafka_python import KafkaPythonClient, _on_send_failure

    kp = KafkaPythonClient.__new__(KafkaPythonClient)
    kp.suspects, kp.refused, kp.request_timeout_ms, kp.suspect_ms = {}, {}, 5000, 15000
    kp._client = SimpleNamespace(_controller_id=3)  # kafka-python cached the killed broker as controller
    _on_send_failure(kp, 3, KafkaConnectionError("111 ECONNREFUSED"), None)
    assert list(kp.refused) == [3] and kp.suspects == {}
    # and forgets it: kafka-python re-sends to a cached controller without asking again (make test,
    # Dec 2: every ElectLeaders retry after a kill -9 went to the dead broker)
    assert kp._client._controller_id is None
    kp.answered(3)
    assert kp.refused == {}
