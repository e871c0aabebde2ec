"""Task logs: client libraries at WARNING, refused connections not at ERROR, and a closing
summary of the task's decisions (the listener that the plugin registers)."""

from __future__ import annotations

import logging
import socket
import threading

from kafka_runbooks import decisions
from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.errors import ClusterUnreachable
from kafka_runbooks_airflow import console_listener  # imports Airflow (its logging set-up) before caplog


def _stopping_port() -> int:
    """A port that accepts one connection and then stops listening (a broker being restarted):
    the facade's bootstrap probe finds it listening, the client's connections are then reset or
    refused. A port that refuses from the start is never handed to the client at all."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def stop_after_one() -> None:
        conn, _ = server.accept()
        conn.close()
        server.close()

    threading.Thread(target=stop_after_one, daemon=True).start()
    return server.getsockname()[1]


def test_a_refused_broker_is_not_an_error_from_the_real_clients(caplog):
    """librdkafka and kafka-python against a port nobody listens on (a broker being restarted)."""
    with caplog.at_level(logging.DEBUG):
        admin = ClusterAdmin({"bootstrap.servers": f"127.0.0.1:{_stopping_port()}"}, timeout_s=2)
        for call in (admin.ping, admin.describe_brokers):
            try:
                call()
            except (ClusterUnreachable, Exception):  # the runbook's own error says what failed
                pass
        admin.close()
    client = [
        r for r in caplog.records if r.name.startswith(("kafka", "urllib3")) and "runbooks." not in r.name
    ]
    client += [r for r in caplog.records if r.name == "kafka_runbooks.librdkafka"]
    assert client, "the clients said nothing: the test would prove nothing"
    assert not [r for r in client if r.levelno >= logging.ERROR], [r.getMessage() for r in client]
    assert not [r for r in client if r.levelno < logging.WARNING], (
        "client chatter below WARNING reached the log"
    )


def test_the_task_log_ends_with_a_summary_of_its_decisions(caplog):
    class TaskRunnerMarker:  # the component Airflow's task runner passes to the lifecycle hooks
        pass

    console_listener.on_starting(TaskRunnerMarker())
    for i in range(12):
        decisions.record("chunk", f"submit chunk {i + 1} of 12", "previous chunk in sync", subject="t-0")
    with caplog.at_level(logging.INFO, logger="kafka_runbooks.decisions"):
        console_listener.before_stopping(TaskRunnerMarker())
    summary = caplog.records[-1].getMessage()
    assert summary.startswith("DECISIONS this task: 12 (last 10)")
    assert "chunk [t-0]: submit chunk 12 of 12" in summary and "submit chunk 2 of 12" not in summary
    console_listener.on_starting(TaskRunnerMarker())  # the next task starts with none
    assert decisions.made() == []


def test_a_reset_connection_carried_only_in_the_exception_is_a_warning():
    """kafka-python 3 logs a broker's reset connection as 'Error receiving network data closing
    socket' with the ConnectionResetError attached (seen in a clean-clone run, where the broker of
    the test above reset instead of refusing); an ERROR without a lost connection stays an ERROR."""
    from kafka_runbooks.quiet_logs import ExpectedDisconnectFilter

    def record(exc: BaseException | None) -> logging.LogRecord:
        info = (type(exc), exc, None) if exc else None
        msg = "<KafkaTCPTransport [none]>: Error receiving network data closing socket"
        return logging.LogRecord("kafka.net.transport", logging.ERROR, __file__, 1, msg, None, info)

    reset, other = (
        record(ConnectionResetError(104, "Connection reset by peer")),
        record(ValueError("bad frame")),
    )
    assert ExpectedDisconnectFilter().filter(reset) and ExpectedDisconnectFilter().filter(other)
    assert (reset.levelno, reset.levelname) == (logging.WARNING, "WARNING")
    assert other.levelno == logging.ERROR
