"""Task logs that a person can read: the Kafka and HTTP client libraries at WARNING,
and the disconnects a runbook expects (a broker it is restarting, a dead broker it is
moving replicas off) at WARNING instead of ERROR.

Without this, a rolling restart's log held 5 DECISION lines among 63: librdkafka and
kafka-python report every refused connection to the broker being restarted as an
error, and kafka-python narrates each bootstrap at INFO.
"""

from __future__ import annotations

import logging
import re

# Loggers of the client libraries the runbooks use (kafka-python, librdkafka through
# the admin facade, requests/urllib3 for Connect and the metrics probes).
CLIENT_LOGGERS = (
    "kafka",
    "kafka_runbooks.librdkafka",
    "confluent_kafka",
    "urllib3",
    "requests",
    "httpx",
    "httpcore",
)

# What a broker that is down or restarting looks like to a client: expected while a
# runbook works, so not an ERROR (the runbook itself decides and records what it means).
EXPECTED_DISCONNECT = re.compile(
    r"connection refused|connect to .* failed|connect attempt .* returned error|disconnect"
    r"|brokers? (are|is) down|receive failed|connection reset|broken pipe|transport failure"
    r"|connection setup timed out|timed out|timeouterror|unable to bootstrap|socket disconnected"
    r"|connection (failed|lost)|not available",
    re.IGNORECASE,
)


class ExpectedDisconnectFilter(logging.Filter):
    """Demote a client's ERROR about a lost or refused connection to WARNING (never drop it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Lower a client ERROR about an expected disconnect to WARNING; never drops a record.

        The disconnect is in the message, or only in the exception the record carries
        (kafka-python: "Error receiving network data closing socket" with a ConnectionResetError
        from a broker going away)."""
        if record.levelno >= logging.ERROR and (
            EXPECTED_DISCONNECT.search(record.getMessage()) or _lost_connection(record)
        ):
            record.levelno = logging.WARNING
            record.levelname = "WARNING"
        return True


def _lost_connection(record: logging.LogRecord) -> bool:
    """Whether the record's exception is a refused, reset or broken connection."""
    exc = record.exc_info[1] if record.exc_info else None
    return isinstance(
        exc, (ConnectionRefusedError, ConnectionResetError, ConnectionAbortedError, BrokenPipeError)
    )


_FILTER = ExpectedDisconnectFilter()


def quiet_client_logs(level: int = logging.WARNING) -> None:
    """Idempotent: client loggers at ``level``, expected disconnects demoted to WARNING.

    A logger's filters do not see its children's records (kafka-python logs from
    ``kafka.net.connection`` and friends), so the filter also goes on every client
    logger that exists and on the root handlers, which every record passes through.
    """
    names = set(CLIENT_LOGGERS)
    names.update(n for n in logging.Logger.manager.loggerDict if n.split(".")[0] in ("kafka", "urllib3"))
    for name in sorted(names):
        logger = logging.getLogger(name)
        if name in CLIENT_LOGGERS:
            logger.setLevel(level)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
    for handler in logging.getLogger().handlers:
        if _FILTER not in handler.filters:
            handler.addFilter(_FILTER)
