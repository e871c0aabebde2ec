"""The restart roller on the real stack: log recovery, availability, a clean restart."""

from __future__ import annotations

import time

import pytest

from kafka_runbooks.probes import PrometheusProbe
from kafka_runbooks.restart.backends import LocalStackBackend
from kafka_runbooks.restart.roller import Roller, RollFailed, RollOptions
from tests.helpers import create_topic, unique_topic, wait_until


class RecordingBackend(LocalStackBackend):
    """The real local back end, remembering what it was asked to do and what the probe saw then."""

    def __init__(self, stack, probe):
        super().__init__(str(stack.home))
        self.probe = probe
        self.calls: list[tuple[str, int, str]] = []

    def restart(self, node_id):
        self.calls.append(("restart", node_id, self.probe.read(node_id).state_name))
        return super().restart(node_id)

    def force_restart(self, node_id):
        self.calls.append(("force_restart", node_id, self.probe.read(node_id).state_name))
        return super().force_restart(node_id)


def _probe(stack) -> PrometheusProbe:
    return PrometheusProbe(endpoints={n.node_id: n.metrics_url for n in stack.topology.broker_nodes})


def _roll(roller, state, timeout_s=300.0, interval_s=0.3):
    deadline = time.monotonic() + timeout_s
    while not roller.step(state):
        assert time.monotonic() < deadline, f"roll did not finish: {state.to_json()}"
        time.sleep(interval_s)


def _fill_and_crash(stack, broker: int, seconds: float = 15.0) -> str:
    """Unflushed data on many small segments, then kill -9 and start: real log recovery."""
    from confluent_kafka import Producer

    topic = unique_topic("recovery")
    create_topic(
        stack.bootstrap_servers,
        topic,
        assignment={p: [broker] for p in range(60)},
        config={"min.insync.replicas": "1", "segment.bytes": "1048576"},
    )
    producer = Producer(
        {
            "bootstrap.servers": stack.bootstrap_servers,
            "acks": "1",
            "linger.ms": 5,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_000_000,
        }
    )
    payload, n, started = b"r" * 200, 0, time.monotonic()
    while time.monotonic() - started < seconds:
        for _ in range(1000):
            try:
                producer.produce(topic, payload, partition=n % 60)
            except BufferError:
                producer.poll(0.1)
            n += 1
        producer.poll(0)
    producer.flush(120)
    stack.kill(broker)
    stack.start_node(broker)
    return topic


def _wait_recovering(probe, broker):
    return wait_until(
        lambda: (r := probe.read(broker)).recovering and r, 60, 0.1, f"broker {broker} in log recovery"
    )


def _delete_topic(stack, topic):
    from confluent_kafka.admin import AdminClient

    client = AdminClient({"bootstrap.servers": stack.bootstrap_servers})
    client.delete_topics([topic])[topic].result(60)


def test_a_broker_in_log_recovery_is_never_restarted_and_the_run_fails_with_the_counts(restore_stack, admin):
    stack = restore_stack
    probe = _probe(stack)
    backend = RecordingBackend(stack, probe)
    topic = _fill_and_crash(stack, 4)
    try:
        reading = _wait_recovering(probe, 4)
        assert reading.remaining_logs > 0
        roller = Roller(admin, backend, probe)
        state = roller.plan([4], "test: recovery", RollOptions(operation_timeout_s=0.3, max_attempts=2))
        with pytest.raises(
            RollFailed, match=r"broker 4 is in log recovery .* logs and .* segments still to recover"
        ):
            _roll(roller, state, timeout_s=120, interval_s=0.2)
        assert backend.calls == []
        assert state.nodes[4].last_reading["remaining_logs_to_recover"] is not None
    finally:
        stack.wait_ready([4], 180)
        _delete_topic(stack, topic)


def test_a_recovering_broker_is_waited_for_then_restarted_cleanly(restore_stack, admin, caplog):
    caplog.set_level("INFO", logger="kafka_runbooks.restart.roller")
    stack = restore_stack
    probe = _probe(stack)
    backend = RecordingBackend(stack, probe)
    topic = _fill_and_crash(stack, 3)
    try:
        _wait_recovering(probe, 3)
        pid_in_recovery = stack.pid(3)
        roller = Roller(admin, backend, probe)
        state = roller.plan(
            [3], "test: wait then restart", RollOptions(operation_timeout_s=60, max_attempts=3)
        )
        _roll(roller, state)
        waits = [
            r.decision_record["observed"]["broker_state"]
            for r in caplog.records
            if getattr(r, "decision_record", {}).get("step") == "readiness"
            and r.decision_record["decision"] == "wait"
        ]
        assert any((w or {}).get("remaining_logs_to_recover") for w in waits), "never saw it recovering"
        # restarted exactly once, and only once the probe saw it RUNNING
        assert backend.calls == [("restart", 3, "RUNNING")]
        assert stack.pid(3) != pid_in_recovery
        assert all(3 in p.isr for p in admin.read_state(include_log_dirs=False).hosted_by(3) if p.has_leader)
    finally:
        _delete_topic(stack, topic)


def test_a_restart_that_would_break_min_isr_is_refused_with_the_reason(restore_stack, admin):
    stack = restore_stack
    topic = unique_topic("at-min-isr")
    create_topic(stack.bootstrap_servers, topic, assignment={0: [1, 2, 3]})
    stack.kill(3)
    wait_until(lambda: 3 not in admin.describe_partitions([topic])[0].isr, 60, what="ISR without broker 3")
    probe = _probe(stack)
    backend = RecordingBackend(stack, probe)
    roller = Roller(admin, backend, probe)
    state = roller.plan([1], "test: availability", RollOptions(operation_timeout_s=3, max_attempts=1))
    with pytest.raises(
        RollFailed, match="broker 1 was not restarted: restarting it would hurt availability"
    ) as failed:
        _roll(roller, state, timeout_s=60)
    assert "is at min.insync.replicas=2 and includes broker 1" in str(failed.value)
    from kafka_runbooks.restart.safety import broker_blockers

    blockers = broker_blockers(admin.describe_partitions([topic]), 1)
    assert blockers and f"{topic}-0" in blockers[0]
    assert backend.calls == []
    assert stack.is_running(1)


def test_unknown_nodes_are_refused_before_anything_is_touched(local_stack, admin):
    from kafka_runbooks.restart.roller import RollInputError

    backend = RecordingBackend(local_stack, _probe(local_stack))
    with pytest.raises(RollInputError, match=r"unknown node id\(s\) \[42\]"):
        Roller(admin, backend, _probe(local_stack)).plan([1, 42], "test", RollOptions())
    assert backend.calls == []
